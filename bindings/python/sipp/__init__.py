"""sipp for Python: a local LLM runtime (libsipp, over llama.cpp) and sipp gateways, one client model.

    import sipp

    with sipp.Client() as client:
        ep = client.add("local-cpu", sipp.local("model.gguf", backend="cpu", ctx_size=2048, parallel=4))
        r = client.query("Once upon a time", endpoint=ep, max_tokens=64, temperature=0)
        print(r.text, r.finish_reason, r.usage, r.stats)

        for piece in client.query("Tell me more", endpoint=ep, stream=True):
            print(piece, end="", flush=True)

        client.chat([{"role": "user", "content": "Hello"}], endpoint=ep)
        client.embed(["one", "two"], endpoint=ep)            # unit-length vectors

        client.add("gw", sipp.gateway("http://127.0.0.1:8080", token="..."))

    sipp.speech("Hello there.", format="mp3")                # text to speech (flite: no model file)

    import sipp.store
    sipp.store.pull("hf://ORG/REPO/model.gguf")              # into the local model store
    sipp.store.list(); sipp.store.info("model")              # what it holds; a GGUF header

    sipp.transcribe("ggml-tiny.bin", "clip.mp3")             # whisper.cpp: text, language, segments

The native library is libsipp (ctypes; nothing outside the standard library). Which llama.cpp
artifact it uses is chosen at import from SIPP_PYTHON_BACKEND = auto | cpu | vulkan | cuda | metal
(SIPP_ARTIFACT names an artifact directory directly); a value that no built artifact can serve
raises BackendError at import, listing the usable values. For an explicit backend libsipp is loaded
at import to check that the backend can run here; with auto it is loaded when the first local
endpoint is added, so gateway-only programs never need it. Calls release the GIL while the
engine works, so several threads can query at once.
"""

from . import _native, store
from ._transcribe import transcribe
from ._client import Client, GatewaySpec, LocalSpec, gateway, local
from ._media import audio, image
from ._speech import Voice, speech
from ._errors import (BackendError, BusyError, CancelledError, ClosedError, ContextFullError, GatewayError,
                      InternalError, InvalidArgumentError, ModelError, NoMemoryError, NotFoundError,
                      NotSupportedError, SippError, SippIOError, SippTimeoutError)
from ._types import Delta, Response, TokenStream

__version__ = "0.1.0"

for _cls in (SippError, InvalidArgumentError, NotFoundError, SippIOError, ModelError, BackendError, ContextFullError,
             BusyError, CancelledError, SippTimeoutError, NoMemoryError, ClosedError, InternalError,
             NotSupportedError, GatewayError):
    _cls.__module__ = __name__  # tracebacks say sipp.NotFoundError, the name users import

# The artifact decision, made once at import (see _native.select_backend).
_native.selection = _native.select_backend()
_native.verify_selection()


def backend_selection():
    """What SIPP_PYTHON_BACKEND chose at import: {backend, artifact, backends, source, decision}."""
    return _native.selection.as_dict()


def runtime_info():
    """Loads libsipp if needed and describes it: version, llama.cpp release, library, artifact."""
    lib = _native.library()
    return {"version": _native.text(lib.version()), "llama_release": _native.text(lib.llama_release()),
            "library": lib.path, "artifact": lib.artifact_dir, **{"selection": backend_selection()}}


__all__ = [
    "Client", "local", "gateway", "store", "speech", "transcribe", "image", "audio", "LocalSpec", "GatewaySpec", "Response", "TokenStream", "Delta",
    "backend_selection",
    "runtime_info", "SippError", "InvalidArgumentError", "NotFoundError", "SippIOError", "ModelError",
    "BackendError", "ContextFullError", "BusyError", "CancelledError", "SippTimeoutError", "NoMemoryError",
    "ClosedError", "InternalError", "NotSupportedError", "GatewayError",
]
