"""A local endpoint: a model loaded by libsipp in this process, served by one engine.

Concurrency. The engine is libsipp's: any thread may submit, read, wait and cancel. This module
adds only what ctypes cannot express: the engine and model handles must not be freed while another
thread is inside a call that uses them (sipp_engine_submit, sipp_engine_embed). A small gate counts
the threads inside such calls; close() shuts the gate and waits for them before freeing. Requests
already submitted stay valid after the engine is freed (libsipp finishes them as cancelled), so
open streams end cleanly instead of crashing.

Waiting. Every wait is a foreign call with a short timeout in a loop, so the GIL is free while the
engine works and Ctrl-C still reaches the waiting thread, which then cancels its request.
"""

import ctypes
import json
import math
import threading

from . import _native as N
from ._errors import ClosedError, InvalidArgumentError, NotSupportedError, error_for_status
from ._types import Delta, Response, chat_messages, check_stop, deltas_of

POLL_MS = 100  # how long one foreign wait blocks before Python checks for signals
READ_CAP = 16384  # bytes one sipp_request_read_piece may return


class _Gate:
    """Counts threads inside calls that use the engine; close() waits for them to leave."""

    def __init__(self):
        self._cv = threading.Condition()
        self._inside = 0
        self.closed = False

    def enter(self, what):
        with self._cv:
            if self.closed:
                raise ClosedError(f"cannot {what}: the endpoint is closed; create a new sipp.Client and add it again")
            self._inside += 1

    def leave(self):
        with self._cv:
            self._inside -= 1
            self._cv.notify_all()

    def close(self):
        """Shuts the gate; True the first time. Waits until no thread is inside."""
        with self._cv:
            first = not self.closed
            self.closed = True
            while self._inside:
                self._cv.wait()
            return first


def _decision(model, lib):
    d = lib.model_backend(model).contents
    return {"backend": N.text(d.backend), "reason": N.text(d.reason), "devices": N.text(d.devices),
            "gpu_layers": d.gpu_layers}


def _info(model, lib):
    i = N.ModelInfo()
    lib.model_get_info(model, ctypes.byref(i))
    return {name: (N.text(getattr(i, name)) if isinstance(getattr(i, name), bytes) else getattr(i, name))
            for name, _ in N.ModelInfo._fields_}


class LocalEndpoint:
    """One model and its engine. Created by Client.add(name, sipp.local(...))."""

    kind = "local"

    def __init__(self, name, spec):
        self.name = name
        self.spec = spec
        self._lib = lib = N.library()
        backend = spec.backend or N.selection.backend
        err = ctypes.create_string_buffer(N.ERROR_SIZE)
        N.check(lib.backend_check_name(backend.encode(), err), err)

        mp = lib.model_default_params()
        mp.backend = backend.encode()
        if spec.gpu_layers is not None:
            mp.gpu_layers = spec.gpu_layers
        if spec.flash_attn is not None:
            mp.flash_attn = spec.flash_attn.encode()
        mmproj = str(spec.mmproj).encode() if spec.mmproj is not None else None
        mp.mmproj = mmproj
        mp.mmproj_offload = spec.mmproj_offload
        model = ctypes.c_void_p()
        N.check(lib.model_load(str(spec.path).encode(), ctypes.byref(mp), ctypes.byref(model), err), err)

        ep = lib.engine_default_params()
        for field in ("ctx_size", "parallel", "threads", "batch_size", "max_queued", "draft_max", "draft_min",
                      "draft_p_min"):
            value = getattr(spec, field)
            if value is not None:
                setattr(ep, field, value)
        ep.embeddings = bool(spec.embeddings)
        if spec.speculative is not None:
            ep.speculative = spec.speculative.encode()
        if spec.draft_model is not None:
            ep.draft_model = spec.draft_model.encode()
        if spec.draft_cutoff is not None:
            ep.draft_cutoff = spec.draft_cutoff.encode()
        if spec.cache_type_k is not None:
            ep.cache_type_k = spec.cache_type_k.encode()
        if spec.cache_type_v is not None:
            ep.cache_type_v = spec.cache_type_v.encode()
        engine = ctypes.c_void_p()
        status = lib.engine_new(model, ctypes.byref(ep), ctypes.byref(engine), err)
        if status != N.STATUS_OK:
            lib.model_free(model)
            N.check(status, err)
        self._model, self._engine = model, engine
        self._gate = _Gate()
        self.backend = _decision(model, lib)  # what the load decided, and why
        self.info = _info(model, lib)

    def __repr__(self):
        return f"<sipp local endpoint {self.name!r}: {self.spec.path} on {self.backend['backend']}>"

    # -- requests ----------------------------------------------------------------------------------

    def submit(self, prompt=None, messages=None, *, max_tokens=None, temperature=None, top_k=None, top_p=None,
               min_p=None, repeat_penalty=None, seed=None, stop=None, context_key=None, chat_template=None,
               ignore_eos=False, timeout=None, chat_options=None):
        """Queues a request and returns its _LocalRequest. A chat goes to libsipp as OpenAI JSON
        (chat_json), with chat_options (tools, response_format, ...) beside the messages."""
        lib = self._lib
        p = lib.request_default_params()
        keep = []  # Python objects whose memory the C struct points into, alive until submit returns

        def c_str(s, what):
            if not isinstance(s, str):
                raise InvalidArgumentError(f"{what} must be a str, not {type(s).__name__}")
            b = s.encode("utf-8")
            if b"\0" in b:
                raise InvalidArgumentError(f"{what} contains a NUL character")
            keep.append(b)
            return b

        if messages is not None:
            body = dict(chat_options or {}, messages=chat_messages(messages))
            try:
                p.chat_json = c_str(json.dumps(body), "the chat")
            except (TypeError, ValueError) as e:
                raise InvalidArgumentError(f"the chat must be JSON-serialisable: {e}") from None
        else:
            p.prompt = c_str(prompt, "the prompt")
        if chat_template is not None:
            p.chat_template = c_str(chat_template, "chat_template")
        if max_tokens is not None:
            p.max_tokens = _int(max_tokens, "max_tokens")
        s = p.sampling
        for field, value in (("temperature", temperature), ("top_p", top_p), ("min_p", min_p),
                             ("repeat_penalty", repeat_penalty)):
            if value is not None:
                setattr(s, field, _float(value, field))
        if top_k is not None:
            s.top_k = _int(top_k, "top_k")
        if seed is not None:
            seed = _int(seed, "seed")
            if not 0 <= seed < N.SEED_RANDOM:
                raise InvalidArgumentError(f"seed must be in [0, {N.SEED_RANDOM - 1}], not {seed}")
            s.seed = seed
        stops = check_stop(stop)
        if stops:
            arr = (N.c_char_p * len(stops))(*[c_str(x, "a stop string") for x in stops])
            keep.append(arr)
            p.stop, p.n_stop = arr, len(stops)
        p.ignore_eos = bool(ignore_eos)
        if context_key is not None:
            p.context_key = c_str(context_key, "context_key")
        if timeout is not None:
            t = _float(timeout, "timeout")
            if t <= 0:
                raise InvalidArgumentError(f"timeout must be a positive number of seconds, not {timeout}")
            p.timeout_ms = max(1, int(t * 1000))

        req = ctypes.c_void_p()
        self._gate.enter("submit a request")
        try:
            status = lib.engine_submit(self._engine, ctypes.byref(p), ctypes.byref(req))
            if status != N.STATUS_OK:
                raise error_for_status(status, N.text(lib.engine_last_error(self._engine)))
        finally:
            self._gate.leave()
        return _LocalRequest(lib, req, self, chat=messages is not None)

    def embed(self, texts, normalize=True):
        """Embeds a list of str; a list of lists of floats."""
        lib = self._lib
        if not lib.has("sipp_engine_embed"):
            raise NotSupportedError(
                f"embeddings need sipp_engine_embed, which {lib.path} does not have; rebuild libsipp with make")
        encoded = []
        for t in texts:
            if not isinstance(t, str):
                raise InvalidArgumentError(f"embed takes a str or a list of str, not a list holding {type(t).__name__}")
            encoded.append(t.encode("utf-8"))
        arr = (N.c_char_p * len(encoded))(*encoded)
        out = ctypes.POINTER(ctypes.c_float)()
        n_embd, n_tokens = ctypes.c_int(), ctypes.c_int()
        self._gate.enter("embed")
        try:
            status = lib.engine_embed(self._engine, arr, len(encoded), bool(normalize), ctypes.byref(out),
                                      ctypes.byref(n_embd), ctypes.byref(n_tokens))
            if status != N.STATUS_OK:
                raise error_for_status(status, N.text(lib.engine_last_error(self._engine)))
        finally:
            self._gate.leave()
        try:
            n = n_embd.value
            flat = out[: n * len(encoded)]
        finally:
            lib.free(out)
        return [flat[i * n:(i + 1) * n] for i in range(len(encoded))], n_tokens.value

    def stats(self):
        """The engine's counters (slots, running, queued, requests_done, tokens_in, ...)."""
        self._gate.enter("read stats")
        try:
            s = N.EngineStats()
            self._lib.engine_get_stats(self._engine, ctypes.byref(s))
        finally:
            self._gate.leave()
        return {name: getattr(s, name) for name, _ in N.EngineStats._fields_}

    def close(self):
        """Cancels running requests and frees the engine and the model. Idempotent."""
        if self._gate.close():
            self._lib.engine_free(self._engine)
            self._lib.model_free(self._model)
            self._engine = self._model = None

    @property
    def closed(self):
        return self._gate.closed


def _int(v, what):
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidArgumentError(f"{what} must be an int, not {v!r}")
    if not -2**31 <= v < 2**32:
        raise InvalidArgumentError(f"{what} is out of range: {v}")
    return v


def _float(v, what):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise InvalidArgumentError(f"{what} must be a number, not {v!r}")
    return float(v)


class _LocalRequest:
    """A submitted request: read its text, wait for its end, cancel it. Freed by free().

    Any thread may call cancel() and free() while another reads: the handle is lent out to each
    foreign call (_borrow), and free() takes it away first, then waits until no call has it, so
    libsipp never sees a freed request.
    """

    def __init__(self, lib, handle, endpoint, chat=False):
        self._lib = lib
        self._h = handle
        self._endpoint = endpoint
        self._parser = None
        self._pending = []  # parsed deltas not yet handed out
        if chat:
            parser, err = ctypes.c_void_p(), ctypes.create_string_buffer(N.ERROR_SIZE)
            if lib.chat_parser_new(handle, ctypes.byref(parser), err) == N.STATUS_OK:
                self._parser = parser
        self._cv = threading.Condition()
        self._lent = 0
        self._buf = ctypes.create_string_buffer(READ_CAP)

    def _borrow(self):
        with self._cv:
            if self._h:
                self._lent += 1
            return self._h

    def _give_back(self):
        with self._cv:
            self._lent -= 1
            self._cv.notify_all()

    def read(self):
        """The next piece of text (str; a chat's a Delta), or None at the end. Blocks, with the GIL
        released."""
        if self._pending:
            return self._pending.pop(0)
        h = self._borrow()
        if not h:
            return None  # freed by another thread: the stream is over
        try:
            finished = ctypes.c_bool(False)
            while True:
                # one piece as the engine made it, however far behind this reader is
                n = self._lib.request_read_piece(h, self._buf, READ_CAP, POLL_MS, ctypes.byref(finished))
                if self._parser and (n or finished.value):
                    self._pending += self._feed(self._buf.raw[:n], finished.value)
                    if self._pending:
                        return self._pending.pop(0)
                elif n:
                    return self._buf.raw[:n].decode("utf-8", "replace")
                if finished.value:
                    return None
        finally:
            self._give_back()

    def _feed(self, raw, final):
        """Parses more of a chat's answer; its Delta pieces."""
        out = ctypes.c_void_p()
        if self._lib.chat_parser_feed(self._parser, raw, len(raw), final, ctypes.byref(out)) != N.STATUS_OK:
            self._lib.chat_parser_free(self._parser)  # the answer does not follow its format: plain text
            self._parser = None
            return [Delta("content", raw.decode("utf-8", "replace"))] if raw else []
        if not out.value:
            return []
        try:
            return [d for delta in json.loads(ctypes.string_at(out.value).decode("utf-8")) for d in deltas_of(delta)]
        finally:
            self._lib.free(out)

    def wait(self):
        h = self._borrow()
        if not h:
            return
        try:
            while self._lib.request_wait(h, POLL_MS) != N.STATUS_OK:
                pass
        finally:
            self._give_back()

    def cancel(self):
        with self._cv:
            if self._h:
                self._lib.request_cancel(self._h)

    def result(self):
        """The Response of a finished request; raises the request's error if it failed."""
        h = self._borrow()
        if not h:
            raise ClosedError("this request was already freed")
        try:
            return self._result(h)
        finally:
            self._give_back()

    def _result(self, h):
        lib = self._lib
        reason = N.FINISH_NAMES[lib.request_finish_reason(h)]
        status = lib.request_status(h)
        if reason == "error":
            raise error_for_status(status, N.text(lib.request_error(h)) or "the request failed")
        st = N.RequestStats()
        lib.request_get_stats(h, ctypes.byref(st))
        stats = {name: getattr(st, name) for name, _ in N.RequestStats._fields_}
        stats["speculation"] = st.speculation.decode() or "none"
        stats["backend"] = self._endpoint.backend["backend"]
        usage = {"prompt_tokens": st.prompt_tokens, "completion_tokens": st.generated_tokens,
                 "total_tokens": st.prompt_tokens + st.generated_tokens, "cached_tokens": st.cached_tokens}
        raw = ctypes.string_at(lib.request_text(h))
        text = raw.decode("utf-8", "replace")
        error = N.text(lib.request_error(h)) if status not in (N.STATUS_OK, N.STATUS_CANCELLED) else ""
        tool_calls, reasoning = [], ""
        if self._parser:
            # a parser of its own over the whole text: the stream's may have read part of it only
            parser, err = ctypes.c_void_p(), ctypes.create_string_buffer(N.ERROR_SIZE)
            if lib.chat_parser_new(h, ctypes.byref(parser), err) == N.STATUS_OK:
                out = ctypes.c_void_p()
                if lib.chat_parser_feed(parser, raw, len(raw), True, ctypes.byref(out)) == N.STATUS_OK:
                    msg = json.loads(lib.chat_parser_message(parser).decode("utf-8"))
                    text, reasoning = msg.get("content") or "", msg.get("reasoning_content") or ""
                    tool_calls = msg.get("tool_calls") or []
                lib.free(out)
                lib.chat_parser_free(parser)
        if tool_calls and reason == "stop":
            reason = "tool_calls"
        return Response(text=text, finish_reason=reason, usage=usage, stats=stats, endpoint=self._endpoint.name,
                        error=error or None, tool_calls=tool_calls, reasoning=reasoning)

    def free(self):
        with self._cv:
            h, self._h = self._h, None
            if h:
                self._lib.request_cancel(h)  # wakes a reader blocked in another thread
            while self._lent:
                self._cv.wait()
        if h:
            self._lib.request_free(h)
        if self._parser:
            self._lib.chat_parser_free(self._parser)
            self._parser = None

    def __del__(self):
        try:
            self.free()
        except Exception:  # interpreter shutdown: the library may be gone
            pass
