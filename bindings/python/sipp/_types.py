"""What every endpoint kind shares: the Response, the TokenStream and input checks.

A request of any endpoint kind (local or gateway) offers the same five operations, so that the
stream and the blocking query are written once:

    read()    the next piece of text (str), or None once the request has ended
    wait()    blocks until the request has ended
    cancel()  asks it to stop; safe from any thread, also after it ended
    result()  the Response of an ended request, or raises its error
    free()    releases it (cancelling it first if it still runs); idempotent
"""

import threading
from dataclasses import dataclass, field

from ._errors import InvalidArgumentError, SippError


@dataclass
class Response:
    """The outcome of a query or chat.

    Attributes:
        text: the generated text (stop strings removed).
        finish_reason: "stop" (end of generation or a stop string), "length" (max_tokens), or
            "cancelled" (cancelled, closed early, or timed out).
        usage: prompt_tokens, completion_tokens, total_tokens, cached_tokens.
        stats: timings and speeds (ttft_ms, prefill_tokens_per_s, decode_tokens_per_s, total_ms,
            ...) and the backend that ran it; what a gateway reports for gateway endpoints.
        endpoint: the name of the endpoint that answered.
        error: why a cancelled request ended, when it was not the caller (e.g. a timeout).
        tool_calls: a chat's tool calls, OpenAI's [{"id", "type", "function": {"name", "arguments"}}]
            (finish_reason is then "tool_calls"); [] when it called none.
        reasoning: a thinking model's reasoning, separated from text; "" when there is none.
    """

    text: str
    finish_reason: str
    usage: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    endpoint: str = ""
    error: str = None
    tool_calls: list = field(default_factory=list)
    reasoning: str = ""

    def __str__(self):
        return self.text


class Delta(str):
    """A piece of a chat's streamed answer. It is the text it adds to the content (so that
    "".join(stream) is the content), with kind saying what it is: "content", "reasoning" (text is
    "", the reasoning is in .reasoning) or "tool_call" (.tool_call: {"index", "id"?, "name"?,
    "arguments"} where arguments is a fragment to append)."""

    def __new__(cls, kind, text="", reasoning="", tool_call=None):
        d = super().__new__(cls, text)
        d.kind, d.reasoning, d.tool_call = kind, reasoning, tool_call
        return d


def deltas_of(delta):
    """The Delta objects of one OpenAI chat delta {"content"|"reasoning_content"|"tool_calls"}."""
    out = []
    if delta.get("reasoning_content"):
        out.append(Delta("reasoning", reasoning=delta["reasoning_content"]))
    if delta.get("content"):
        out.append(Delta("content", delta["content"]))
    for tc in delta.get("tool_calls") or []:
        fn = tc.get("function") or {}
        call = {"index": tc.get("index", 0), "arguments": fn.get("arguments", "")}
        if tc.get("id"):
            call["id"] = tc["id"]
        if fn.get("name"):
            call["name"] = fn["name"]
        out.append(Delta("tool_call", tool_call=call))
    return out


# The chat options every endpoint takes, as the OpenAI request fields they are.
CHAT_OPTIONS = ("tools", "tool_choice", "parallel_tool_calls", "response_format", "grammar", "json_schema",
                "reasoning_format", "chat_template_kwargs", "thinking_budget_tokens")


class TokenStream:
    """An iterator of text pieces as the model produces them (query(..., stream=True)).

    Each piece is a str of whole characters. When the iteration ends, ``response`` holds the
    Response (finish reason, usage, stats). ``close()``, leaving a ``with`` block or
    ``break``-ing out of a ``for`` loop inside a ``with`` block cancels the request if it still
    runs; ``cancel()`` may be called from any thread and makes the iteration end soon after with
    finish_reason "cancelled". One thread iterates a stream.
    """

    def __init__(self, request):
        self._req = request
        self._lock = threading.Lock()  # one _end, also when close() races the iterating thread
        self._done = False
        self._response = None
        self._error = None

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        try:
            piece = self._req.read()
        except BaseException:
            self._req.cancel()
            self._end(raise_error=False)
            raise
        if piece is None:
            self._end(raise_error=True)
            raise StopIteration
        return piece

    def _end(self, raise_error):
        # Held throughout, so that a thread arriving second finds the response already set.
        with self._lock:
            if self._done:
                return
            self._done = True
            try:
                self._req.wait()
                self._response = self._req.result()
            except SippError as e:
                self._error = e
            finally:
                self._req.free()
        if raise_error and self._error is not None:
            raise self._error

    def cancel(self):
        """Asks the request to stop. Safe from any thread; the iteration then ends."""
        self._req.cancel()

    def close(self):
        """Cancels the request if it still runs and releases it. Idempotent."""
        if not self._done:
            self._req.cancel()
            self._end(raise_error=False)

    @property
    def response(self):
        """The Response; reads the rest of the stream first if it has not ended."""
        for _ in self:
            pass
        if self._error is not None:
            raise self._error
        return self._response

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def run_to_end(req):
    """Waits for a request (Ctrl-C cancels it), frees it, and returns its Response."""
    try:
        req.wait()
        return req.result()
    except BaseException:
        req.cancel()
        raise
    finally:
        req.free()


ROLES = ("system", "user", "assistant", "tool")


def chat_messages(messages):
    """The messages as OpenAI dicts: (role, content) pairs become {"role", "content"}; dicts go as
    they are (assistant tool_calls, tool messages with tool_call_id), checked by libsipp."""
    if isinstance(messages, (str, bytes)) or not hasattr(messages, "__iter__"):
        check_messages(messages)
    out = []
    for i, m in enumerate(messages):
        if isinstance(m, dict) and isinstance(m.get("role"), str):
            m = dict(m)
            if isinstance(m.get("content"), (list, tuple)):  # parts: a str is a text part (sipp.image())
                m["content"] = [{"type": "text", "text": p} if isinstance(p, str) else p for p in m["content"]]
            out.append(m)
        else:  # a (role, content) pair, checked as check_messages does
            role, content = check_messages([m])[0] if not isinstance(m, dict) else (None, None)
            if role is None:
                raise InvalidArgumentError(f"messages[{i}] needs a str role, got {m!r}")
            out.append({"role": role, "content": content})
    if not out:
        raise InvalidArgumentError("messages is empty; give at least one message")
    return out


def check_messages(messages):
    """[(role, content)] from a list of {"role", "content"} dicts or (role, content) pairs."""
    if isinstance(messages, (str, bytes)) or not hasattr(messages, "__iter__"):
        raise InvalidArgumentError(
            'messages must be a list of {"role": ..., "content": ...} dicts, e.g. '
            '[{"role": "user", "content": "Hello"}]')
    out = []
    for i, m in enumerate(messages):
        if isinstance(m, dict):
            role, content = m.get("role"), m.get("content")
        elif isinstance(m, (tuple, list)) and len(m) == 2:
            role, content = m
        else:
            raise InvalidArgumentError(f"messages[{i}] must be a dict with role and content, not {m!r}")
        if not isinstance(role, str) or not isinstance(content, str):
            raise InvalidArgumentError(f"messages[{i}] needs a str role and a str content, got {m!r}")
        out.append((role, content))
    if not out:
        raise InvalidArgumentError("messages is empty; give at least one message")
    return out


def check_stop(stop):
    """A list of stop strings from None, a str or a list of str."""
    if stop is None:
        return []
    if isinstance(stop, str):
        stop = [stop]
    stops = list(stop)
    for s in stops:
        if not isinstance(s, str) or not s:
            raise InvalidArgumentError(f"stop must be a str or a list of non-empty str, got {stop!r}")
    return stops
