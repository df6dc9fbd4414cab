"""A gateway endpoint: a sipp gateway (``sipp serve``) reached over HTTP, standard library only.

It speaks the gateway's OpenAI-compatible routes: /v1/models (to find and check the model when the
endpoint is added), /v1/completions for query, /v1/chat/completions for chat, /v1/embeddings for
embed. Every generation is streamed, a blocking query reading its stream to the end: server-sent
events ("data: {chunk}" lines, ending with "data: [DONE]"), with the usage in the last chunk
(stream_options.include_usage). Extensions sipp's gateway
understands ride along as extra JSON fields: context_key, top_k, min_p, repeat_penalty,
ignore_eos; an OpenAI server ignores them.

Cancelling a stream closes its connection; the gateway cancels the request when its client goes
away. cancel() may come from another thread while the reader is blocked in recv(), so it shuts the
socket down, which wakes that reader at once, rather than only closing the file object.
"""

import json
import math
import socket
import threading
import urllib.error
import urllib.request

from ._errors import BusyError, ClosedError, GatewayError, InvalidArgumentError, NAME_CLASSES, NotFoundError
from ._types import Response, chat_messages, check_stop, deltas_of

USER_AGENT = "sipp-python"


def _error_from_http(err, url):
    """The exception for an HTTP error response (OpenAI shape {"error": {message, type, code}})."""
    body = b""
    try:
        body = err.read()
    except OSError:
        pass
    message, code = None, None
    try:
        e = json.loads(body.decode("utf-8", "replace")).get("error")
        if isinstance(e, dict):
            message, code = e.get("message"), e.get("code") or e.get("type")
        elif isinstance(e, str):
            message = e
    except (ValueError, AttributeError):
        pass
    message = f"gateway {url} answered {err.code}: {message or body[:200].decode('utf-8', 'replace') or err.reason}"
    if err.code in (401, 403):
        message += "; check the token given to sipp.gateway(url, token=...)"
    cls = NAME_CLASSES.get(code) if isinstance(code, str) else None
    if cls is None:
        cls = {400: InvalidArgumentError, 404: NotFoundError, 429: BusyError, 503: BusyError}.get(err.code, GatewayError)
    exc = cls(message) if cls is not GatewayError else GatewayError(message, err.code, code)
    exc.http_status, exc.code = err.code, code
    return exc


class GatewayEndpoint:
    """A model served by a sipp gateway. Created by Client.add(name, sipp.gateway(...))."""

    kind = "gateway"

    def __init__(self, name, spec):
        self.name = name
        self.spec = spec
        self.base_url = spec.url.rstrip("/")
        self._closed = False
        models = self._json("GET", "/v1/models", timeout=spec.connect_timeout)
        ids = [m.get("id") for m in (models.get("data") or []) if isinstance(m, dict)]
        if spec.model:
            if ids and spec.model not in ids:
                raise NotFoundError(f"gateway {self.base_url} does not serve model {spec.model!r}; it serves: "
                                    f"{', '.join(ids)}")
            self.model = spec.model
        elif len(ids) == 1:
            self.model = ids[0]
        elif not ids:
            raise NotFoundError(f"gateway {self.base_url} serves no model (/v1/models is empty)")
        else:
            raise InvalidArgumentError(f"gateway {self.base_url} serves several models ({', '.join(ids)}); choose "
                                       f"one with sipp.gateway(url, model=...)")
        self.backend = {"backend": "gateway", "reason": f"{self.base_url} model {self.model}", "devices": "",
                        "gpu_layers": 0}
        self.info = {"model": self.model, "url": self.base_url}

    def __repr__(self):
        return f"<sipp gateway endpoint {self.name!r}: {self.base_url} model {self.model}>"

    # -- HTTP ----------------------------------------------------------------------------------------

    def _open(self, method, path, body=None, timeout=None, stream=False):
        if self._closed:
            raise ClosedError(f"endpoint {self.name!r} is closed; create a new sipp.Client and add it again")
        url = self.base_url + path
        headers = {"User-Agent": USER_AGENT, "Accept": "text/event-stream" if stream else "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.spec.token:
            headers["Authorization"] = f"Bearer {self.spec.token}"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            return urllib.request.urlopen(req, timeout=timeout or self.spec.timeout)
        except urllib.error.HTTPError as e:
            raise _error_from_http(e, url) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise GatewayError(f"cannot reach gateway {url}: {reason}; is `sipp serve` running there?") from None

    def _json(self, method, path, body=None, timeout=None):
        with self._open(method, path, body, timeout) as resp:
            raw = resp.read()
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError:
            raise GatewayError(f"gateway {self.base_url}{path} answered with something that is not JSON: "
                               f"{raw[:200]!r}") from None

    # -- requests ----------------------------------------------------------------------------------

    def submit(self, prompt=None, messages=None, *, max_tokens=None, temperature=None, top_k=None,
               top_p=None, min_p=None, repeat_penalty=None, seed=None, stop=None, context_key=None,
               chat_template=None, ignore_eos=False, timeout=None, chat_options=None):
        body = {"model": self.model}
        if messages is not None:
            body["messages"] = chat_messages(messages)
            body.update(chat_options or {})
            path, chat = "/v1/chat/completions", True
        else:
            if not isinstance(prompt, str):
                raise InvalidArgumentError(f"the prompt must be a str, not {type(prompt).__name__}")
            body["prompt"] = prompt
            path, chat = "/v1/completions", False
        if max_tokens == -1:
            max_tokens = None  # the OpenAI routes say "until the context is full" by leaving it out
        for key, value in (("max_tokens", max_tokens), ("temperature", temperature), ("top_k", top_k),
                           ("top_p", top_p), ("min_p", min_p), ("repeat_penalty", repeat_penalty), ("seed", seed),
                           ("context_key", context_key), ("chat_template", chat_template)):
            if value is not None:
                body[key] = value
        stops = check_stop(stop)
        if stops:
            body["stop"] = stops
        if ignore_eos:
            body["ignore_eos"] = True
        # Always streamed, also for a blocking query: one code path, and a timeout or a cancel from
        # another thread ends it the same way as on a local endpoint (finish_reason "cancelled").
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        resp = self._open("POST", path, body, stream=True)
        req = _GatewayRequest(self, resp, chat)
        if timeout is not None:
            req.set_deadline(float(timeout))
        return req

    def embed(self, texts, normalize=True):
        for t in texts:
            if not isinstance(t, str):
                raise InvalidArgumentError(f"embed takes a str or a list of str, not a list holding {type(t).__name__}")
        out = self._json("POST", "/v1/embeddings", {"model": self.model, "input": list(texts)})
        rows = sorted(out.get("data") or [], key=lambda d: d.get("index", 0))
        vectors = [[float(x) for x in row.get("embedding") or []] for row in rows]
        if len(vectors) != len(texts):
            raise GatewayError(f"gateway {self.base_url} returned {len(vectors)} embeddings for {len(texts)} inputs")
        if normalize:
            vectors = [_l2_normalize(v) for v in vectors]
        usage = out.get("usage") or {}
        return vectors, usage.get("prompt_tokens", 0)

    def stats(self):
        return {"url": self.base_url, "model": self.model}

    def close(self):
        self._closed = True

    @property
    def closed(self):
        return self._closed


def _l2_normalize(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v] if n > 0 else v


def _socket_of(resp):
    """The socket under an http.client response, to shut it down from another thread."""
    raw = getattr(getattr(resp, "fp", None), "raw", None)
    sock = getattr(raw, "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


class _GatewayRequest:
    """A request in flight on a gateway; the same five operations as a local request."""

    def __init__(self, endpoint, resp, chat):
        self._ep = endpoint
        self._resp = resp
        self._chat = chat
        self._timer = None
        self._lock = threading.Lock()
        self._cancelled = False
        self._ended = False
        self._parts = []
        self._deltas = []  # a chat's parsed Delta pieces not yet handed out
        self._tool_calls = []
        self._reasoning = ""
        self._finish = None
        self._usage = {}
        self._stats = {}
        self._pending = None  # the whole text of a non-streamed answer, handed out by the first read
        if "json" in (resp.headers.get("Content-Type") or ""):  # a server that ignored "stream"
            try:
                payload = json.loads(resp.read().decode("utf-8"))
            except (ValueError, OSError) as e:
                raise GatewayError(f"gateway {endpoint.base_url} sent an unreadable answer: {e}") from None
            finally:
                resp.close()
            self._take_chunk(payload, whole=True)
            self._pending = "".join(self._parts)
            self._ended = True

    def set_deadline(self, seconds):
        """Cancels the request after seconds, as libsipp's timeout_ms does for local requests."""
        self._timer = threading.Timer(seconds, self.cancel)
        self._timer.daemon = True
        self._timer.start()

    def _take_chunk(self, chunk, whole=False):
        """Records one JSON chunk (or a whole answer); returns its text piece."""
        if isinstance(chunk.get("error"), (dict, str)):
            e = chunk["error"]
            msg = e.get("message") if isinstance(e, dict) else e
            code = e.get("code") if isinstance(e, dict) else None
            cls = NAME_CLASSES.get(code, GatewayError) if isinstance(code, str) else GatewayError
            raise cls(f"gateway {self._ep.base_url}: {msg}")
        piece = ""
        for choice in chunk.get("choices") or []:
            if self._chat:
                part = (choice.get("message") if whole else choice.get("delta")) or {}
                for d in deltas_of(part):
                    self._deltas.append(d)
                    if d.kind == "reasoning":
                        self._reasoning += d.reasoning
                    elif d.kind == "tool_call":
                        tc = d.tool_call
                        while len(self._tool_calls) <= tc["index"]:
                            self._tool_calls.append({"id": "", "type": "function",
                                                     "function": {"name": "", "arguments": ""}})
                        call = self._tool_calls[tc["index"]]
                        call["id"] = tc.get("id", call["id"])
                        call["function"]["name"] = tc.get("name", call["function"]["name"])
                        call["function"]["arguments"] += tc.get("arguments", "")
                piece += part.get("content") or ""
            else:
                piece += choice.get("text") or ""
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        if isinstance(chunk.get("usage"), dict):
            self._usage = dict(chunk["usage"])
            details = self._usage.pop("prompt_tokens_details", None)
            if isinstance(details, dict) and "cached_tokens" in details:
                self._usage["cached_tokens"] = details["cached_tokens"]
        for key in ("stats", "timings"):
            if isinstance(chunk.get(key), dict):
                self._stats = chunk[key]
        if piece:
            self._parts.append(piece)
        return piece

    def _events(self):
        """The data of each server-sent event, as str."""
        data = []
        for raw in self._resp:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
            # comments (":...") and other fields (event:, id:, retry:) carry nothing for us
        if data:
            yield "\n".join(data)

    def read(self):
        if self._deltas:
            return self._deltas.pop(0)
        if self._pending is not None:
            piece, self._pending = self._pending, None
            return piece or self.read()
        if self._ended:
            return None
        if not hasattr(self, "_iter"):
            self._iter = self._events()
        while True:
            try:
                data = next(self._iter)
            except StopIteration:
                return self._end()
            except (OSError, ValueError) as e:  # the socket was shut down by cancel(), or broke
                if self._cancelled:
                    return self._end()
                self._end()
                raise GatewayError(f"gateway {self._ep.base_url}: the stream broke: {e}") from None
            if data.strip() == "[DONE]":
                return self._end()
            try:
                chunk = json.loads(data)
            except ValueError:
                continue  # not JSON: nothing the OpenAI protocol defines; skip it
            piece = self._take_chunk(chunk)
            if self._chat and self._deltas:
                return self._deltas.pop(0)
            if piece and not self._chat:
                return piece

    def _end(self):
        self._ended = True
        if self._timer is not None:
            self._timer.cancel()
        self._close_resp()
        return None

    def _close_resp(self):
        with self._lock:
            resp, self._resp = self._resp, None
        if resp is not None:
            try:
                resp.close()
            except OSError:
                pass

    def wait(self):
        while self.read() is not None:
            pass

    def cancel(self):
        with self._lock:
            if self._ended or self._resp is None:
                return
            self._cancelled = True
            sock = _socket_of(self._resp)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def result(self):
        finish = "cancelled" if self._cancelled else (self._finish or "stop")
        return Response(text="".join(self._parts), finish_reason=finish, usage=dict(self._usage),
                        stats=dict(self._stats, backend="gateway"), endpoint=self._ep.name,
                        tool_calls=list(self._tool_calls), reasoning=self._reasoning)

    def free(self):
        self._end()

