"""The client model: register endpoints by name, then query, chat or embed through them."""

import os
import threading
from dataclasses import dataclass

from ._errors import ClosedError, InvalidArgumentError, NotFoundError
from ._types import TokenStream, run_to_end


@dataclass(frozen=True)
class LocalSpec:
    """A model file to load in this process; see sipp.local()."""

    path: str
    backend: str = None
    ctx_size: int = None
    parallel: int = None
    threads: int = None
    gpu_layers: int = None
    batch_size: int = None
    max_queued: int = None
    embeddings: bool = False
    flash_attn: str = None
    speculative: str = None
    draft_model: str = None
    draft_max: int = None
    draft_min: int = None
    draft_p_min: float = None
    draft_cutoff: str = None
    cache_type_k: str = None
    cache_type_v: str = None
    mmproj: str = None
    mmproj_offload: bool = True


@dataclass(frozen=True)
class GatewaySpec:
    """A sipp gateway to reach over HTTP; see sipp.gateway()."""

    url: str
    token: str = None
    model: str = None
    timeout: float = 600.0
    connect_timeout: float = 10.0


def local(path, backend=None, ctx_size=None, parallel=None, threads=None, gpu_layers=None, batch_size=None,
          max_queued=None, embeddings=False, flash_attn=None, speculative=None, draft_model=None, draft_max=None,
          draft_min=None, draft_p_min=None, draft_cutoff=None, cache_type_k=None, cache_type_v=None, mmproj=None,
          mmproj_offload=True):
    """Describes a local endpoint: a GGUF model file run by libsipp in this process.

    Args:
        path: the .gguf file.
        backend: "auto", "cpu", "vulkan", "cuda" or "metal"; None takes SIPP_PYTHON_BACKEND
            (default auto).
        ctx_size: tokens of context shared by the slots (None: min(model's, 4096)).
        parallel: slots, i.e. requests decoded together (None: 4).
        threads: CPU threads (None: all cores).
        gpu_layers: layers to offload to a GPU backend (None: all).
        batch_size: token budget of one decode step (None: 512).
        max_queued: requests waiting for a slot before a query raises BusyError (None: 64).
        embeddings: prepare the embedding context at load instead of on first embed().
        flash_attn: "auto", "on" or "off" (None: auto, llama.cpp's choice; off for backend "cpu").
        speculative: "none", "ngram" (prompt lookup) or "draft" (None: none, or draft with draft_model);
            greedy requests only.
        draft_model: the .gguf of a draft model of the same vocabulary (checked at load).
        draft_max, draft_min: tokens proposed per step (None: 8, at most 32); shorter proposals are not
            verified (None: 1).
        draft_p_min: the draft stops at a token it gives less than this probability, in [0, 1) (None: 0).
        draft_cutoff: "auto" (None: a cost model the engine measures picks each step's draft length, 0
            where speculation would be slower than plain decoding) or "off" (always up to draft_max).
        cache_type_k, cache_type_v: the KV cache's key and value types, "f16" (None), "q8_0" or "q4_0";
            a quantized V cache needs flash attention (refused where the load has it off).
        mmproj: the model's multimodal projector (an mmproj-*.gguf file): chats may then carry images
            and audio, as content parts or as sipp.image(path) / sipp.audio(path).
        mmproj_offload: run the projector on the GPU backend (default True; never under backend "cpu").
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError(f"sipp.local() needs the path of a .gguf file, not {path!r}")
    for name, value in (("ctx_size", ctx_size), ("parallel", parallel), ("threads", threads),
                        ("batch_size", batch_size), ("max_queued", max_queued), ("draft_max", draft_max),
                        ("draft_min", draft_min)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InvalidArgumentError(f"sipp.local({name}={value!r}): {name} must be an int >= 0")
    if gpu_layers is not None and (isinstance(gpu_layers, bool) or not isinstance(gpu_layers, int)):
        raise InvalidArgumentError(f"sipp.local(gpu_layers={gpu_layers!r}): gpu_layers must be an int (-1: all)")
    if flash_attn is not None and flash_attn not in ("auto", "on", "off"):
        raise InvalidArgumentError(f"sipp.local(flash_attn={flash_attn!r}): flash_attn must be 'auto', 'on' or 'off'")
    if speculative is not None and speculative not in ("none", "ngram", "draft"):
        raise InvalidArgumentError(f"sipp.local(speculative={speculative!r}): speculative must be 'none', 'ngram' "
                                   "or 'draft'")
    if draft_model is not None and not isinstance(draft_model, (str, os.PathLike)):
        raise InvalidArgumentError(f"sipp.local(draft_model={draft_model!r}): draft_model must be a .gguf path")
    if draft_p_min is not None and (isinstance(draft_p_min, bool) or not isinstance(draft_p_min, (int, float))
                                    or not 0 <= draft_p_min < 1):
        raise InvalidArgumentError(f"sipp.local(draft_p_min={draft_p_min!r}): draft_p_min must be a number in [0, 1)")
    if draft_cutoff is not None and draft_cutoff not in ("auto", "off"):
        raise InvalidArgumentError(f"sipp.local(draft_cutoff={draft_cutoff!r}): draft_cutoff must be 'auto' or 'off'")
    for name, value in (("cache_type_k", cache_type_k), ("cache_type_v", cache_type_v)):
        if value is not None and value not in ("f16", "q8_0", "q4_0"):
            raise InvalidArgumentError(f"sipp.local({name}={value!r}): {name} must be 'f16', 'q8_0' or 'q4_0'")
    if mmproj is not None and not isinstance(mmproj, (str, os.PathLike)):
        raise InvalidArgumentError(f"sipp.local(mmproj={mmproj!r}): mmproj must be a .gguf path")
    if backend is not None and not isinstance(backend, str):
        raise InvalidArgumentError(f"sipp.local(backend={backend!r}): backend must be a str such as 'cpu'")
    return LocalSpec(os.fspath(path), backend, ctx_size, parallel, threads, gpu_layers, batch_size, max_queued,
                     bool(embeddings), flash_attn, speculative,
                     os.fspath(draft_model) if draft_model is not None else None, draft_max, draft_min, draft_p_min,
                     draft_cutoff, cache_type_k, cache_type_v, os.fspath(mmproj) if mmproj is not None else None,
                     bool(mmproj_offload))


def gateway(url, token=None, model=None, timeout=600.0):
    """Describes a gateway endpoint: a model served by `sipp serve` (or another OpenAI-compatible server).

    Args:
        url: the gateway's base URL, e.g. "http://127.0.0.1:8080".
        token: sent as "Authorization: Bearer TOKEN" when given.
        model: the model id on the gateway; None takes the only one /v1/models lists.
        timeout: seconds a request may wait for the gateway's next bytes.
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InvalidArgumentError(f"sipp.gateway() needs an http:// or https:// URL, not {url!r}")
    return GatewaySpec(url, token, model, float(timeout))


class Client:
    """Endpoints by name, and the calls that use them. Safe to share between threads.

    Use it as a context manager, or call close(), to free the models it loaded::

        with sipp.Client() as client:
            client.add("local", sipp.local("model.gguf", backend="cpu"))
            print(client.query("Hello", max_tokens=32).text)
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._endpoints = {}
        self._closed = False

    # -- endpoints ---------------------------------------------------------------------------------

    def add(self, name, spec):
        """Loads a local model or connects to a gateway; returns the endpoint (pass it as endpoint=).

        A local model is loaded here, in the calling thread (the GIL is free meanwhile).
        """
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"an endpoint name must be a non-empty str, not {name!r}")
        with self._lock:
            self._check_open()
            if name in self._endpoints:
                raise InvalidArgumentError(f"endpoint {name!r} is already added; choose another name or remove it")
            self._endpoints[name] = None  # reserved while it loads
        try:
            if isinstance(spec, LocalSpec):
                from ._local import LocalEndpoint
                ep = LocalEndpoint(name, spec)
            elif isinstance(spec, GatewaySpec):
                from ._gateway import GatewayEndpoint
                ep = GatewayEndpoint(name, spec)
            else:
                raise InvalidArgumentError(f"client.add({name!r}, ...) needs sipp.local(...) or sipp.gateway(...), "
                                           f"not {spec!r}")
        except BaseException:
            with self._lock:
                self._endpoints.pop(name, None)
            raise
        with self._lock:
            if self._closed:  # closed while it loaded
                ep.close()
                self._check_open()
            self._endpoints[name] = ep
        return ep

    def remove(self, endpoint):
        """Closes an endpoint and forgets it; its running requests end as cancelled."""
        ep = self.endpoint(endpoint)
        with self._lock:
            self._endpoints.pop(ep.name, None)
        ep.close()

    def endpoint(self, endpoint=None):
        """The endpoint object for a name, an endpoint, or None (the first one added)."""
        with self._lock:
            self._check_open()
            ready = {k: v for k, v in self._endpoints.items() if v is not None}
            if endpoint is None:
                if not ready:
                    raise InvalidArgumentError("no endpoint: add one first with client.add(name, sipp.local(...))")
                return next(iter(ready.values()))
            name = endpoint if isinstance(endpoint, str) else getattr(endpoint, "name", None)
            ep = ready.get(name)
            if ep is None or (not isinstance(endpoint, str) and ep is not endpoint):
                known = ", ".join(ready) or "none"
                raise NotFoundError(f"no endpoint {name!r} in this client (endpoints: {known})")
            return ep

    @property
    def endpoints(self):
        """The endpoints by name."""
        with self._lock:
            return {k: v for k, v in self._endpoints.items() if v is not None}

    # -- generation --------------------------------------------------------------------------------

    def query(self, prompt, *, endpoint=None, stream=False, max_tokens=None, temperature=None, top_k=None,
              top_p=None, min_p=None, repeat_penalty=None, seed=None, stop=None, context_key=None, ignore_eos=False,
              timeout=None):
        """Completes a raw prompt.

        Returns a Response (.text, .finish_reason, .usage, .stats), or with stream=True a
        TokenStream: an iterator of text pieces whose close() cancels the request.

        Args:
            max_tokens: tokens to generate at most (default 256; -1: until the context is full).
            temperature: 0 is greedy (default 0.8). top_k, top_p, min_p, repeat_penalty likewise.
            seed: a fixed sampling seed for reproducible output (default: random).
            stop: a str or a list of str; generation stops before them and they are not returned.
            context_key: pins a conversation to a slot so that the next request with the same key
                reuses its KV cache.
            timeout: seconds after which the request ends as cancelled.
        """
        return self._generate(dict(prompt=prompt), endpoint, stream, max_tokens=max_tokens, temperature=temperature,
                              top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty, seed=seed,
                              stop=stop, context_key=context_key, ignore_eos=ignore_eos, timeout=timeout)

    def chat(self, messages, *, endpoint=None, stream=False, max_tokens=None, temperature=None, top_k=None,
             top_p=None, min_p=None, repeat_penalty=None, seed=None, stop=None, context_key=None, chat_template=None,
             ignore_eos=False, timeout=None, tools=None, tool_choice=None, parallel_tool_calls=None,
             response_format=None, grammar=None, json_schema=None, reasoning_format=None, chat_template_kwargs=None,
             thinking_budget_tokens=None):
        """Answers a conversation: messages is a list of {"role": ..., "content": ...} (assistant
        messages may carry "tool_calls", and "tool" messages a "tool_call_id").

        The model's Jinja template (or chat_template: "chatml" or a template file) renders it.
        tools, tool_choice ("auto", "none", "required" or {"type": "function", "function": {"name"}}),
        parallel_tool_calls, response_format ({"type": "json_object"} or {"type": "json_schema",
        "json_schema": {"schema": ...}}), grammar (GBNF), json_schema, reasoning_format,
        chat_template_kwargs and thinking_budget_tokens are OpenAI's and llama.cpp's fields.
        Returns a Response with .text, .tool_calls and .reasoning; with stream=True a TokenStream
        of Delta pieces (str subclasses with .kind "content", "reasoning" or "tool_call").
        """
        options = {k: v for k, v in (("tools", tools), ("tool_choice", tool_choice),
                                     ("parallel_tool_calls", parallel_tool_calls), ("response_format", response_format),
                                     ("grammar", grammar), ("json_schema", json_schema),
                                     ("reasoning_format", reasoning_format),
                                     ("chat_template_kwargs", chat_template_kwargs),
                                     ("thinking_budget_tokens", thinking_budget_tokens)) if v is not None}
        return self._generate(dict(messages=messages), endpoint, stream, max_tokens=max_tokens,
                              temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                              repeat_penalty=repeat_penalty, seed=seed, stop=stop, context_key=context_key,
                              chat_template=chat_template, ignore_eos=ignore_eos, timeout=timeout,
                              chat_options=options)

    def _generate(self, what, endpoint, stream, **opts):
        req = self.endpoint(endpoint).submit(**what, **opts)
        return TokenStream(req) if stream else run_to_end(req)

    def embed(self, input, *, endpoint=None, normalize=True):
        """Embeds a str (a list of floats) or a list of str (a list of lists of floats).

        With normalize (the default) every vector has unit length, so that a dot product is the
        cosine similarity.
        """
        single = isinstance(input, str)
        texts = [input] if single else list(input) if isinstance(input, (list, tuple)) else None
        if texts is None:
            raise InvalidArgumentError(f"embed takes a str or a list of str, not {type(input).__name__}")
        if not texts:
            return []
        vectors, _ = self.endpoint(endpoint).embed(texts, normalize=normalize)
        return vectors[0] if single else vectors

    def stats(self, endpoint=None):
        """The endpoint's engine counters (for a local endpoint: slots, running, queued, ...)."""
        return self.endpoint(endpoint).stats()

    # -- lifetime ----------------------------------------------------------------------------------

    def close(self):
        """Cancels running requests and frees every model. Idempotent; later calls raise ClosedError."""
        with self._lock:
            self._closed = True
            eps = [ep for ep in self._endpoints.values() if ep is not None]
            self._endpoints.clear()
        for ep in eps:
            ep.close()

    @property
    def closed(self):
        return self._closed

    def _check_open(self):
        if self._closed:
            raise ClosedError("this sipp.Client is closed; create a new sipp.Client() to continue")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self._closed else f"endpoints: {', '.join(self.endpoints) or 'none'}"
        return f"<sipp.Client {state}>"
