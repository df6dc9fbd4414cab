"""The local model store through libsipp (sipp.h's "model store" section), as `sipp models` and
`sipp pull` use it:

    import sipp.store

    sipp.store.list()                      # [{name, path, size, source, pulled_at, verified, files}, ...]
    sipp.store.pull("hf://ORG/REPO/model.gguf", progress=lambda p: print(p["done"], p["total"]))
    sipp.store.info("model-name")          # the GGUF header, read without loading weights
    sipp.store.path("model-name")          # the file a model name resolves to
    sipp.store.remove("model-name")

The store is $SIPP_MODELS_DIR (default ${XDG_DATA_HOME:-~/.local/share}/sipp/models); `directory`
arguments name another one. Errors are the package's exceptions (NotFoundError for a model that is
not there, with libsipp's one-line message saying how to pull it). Everything here runs on the
calling thread with the GIL released while libsipp works; a pull's progress callback runs on that
same thread, and returning False from it stops the pull (CancelledError; the partial file is kept,
and the same pull resumes it).
"""

import ctypes

from . import _native
from ._native import ERROR_SIZE, check, text


def _lib():
    return _native.library_with(_native.STORE_FUNCTIONS)


def _arg(s):
    return s.encode() if isinstance(s, str) else s


def _err():
    return ctypes.create_string_buffer(ERROR_SIZE)


def directory():
    """The store directory (it may not exist yet)."""
    lib, err = _lib(), _err()
    out = ctypes.create_string_buffer(_native.PATH_MAX)
    check(lib.store_dir(out, len(out), err), err)
    return text(out.value)


def _model_dict(m):
    files = [{"file": text(f.file), "url": text(f.url), "size": f.size, "sha256": text(f.sha256) or None}
             for f in (m.files[i] for i in range(m.n_files))]
    return {"name": text(m.name), "path": text(m.path), "size": m.size, "n_files": m.n_files,
            "source": text(m.source) or None, "pulled_at": text(m.pulled_at) or None, "verified": m.verified,
            "managed": m.managed, "recipe": text(m.recipe), "files": files}


def list(directory=None):  # noqa: A001  (sipp.store.list reads as it should)
    """Every model in the store, sorted by name: dicts of name, path, size, n_files, source,
    pulled_at, verified (every file matched a known sha256), managed (False for a file copied in by
    hand), recipe ("llamacpp" for GGUF, "whispercpp" for a whisper.cpp .bin) and files (file, url,
    size, sha256)."""
    lib, err = _lib(), _err()
    models, n = ctypes.POINTER(_native.StoreModel)(), ctypes.c_size_t(0)
    check(lib.store_list(_arg(directory), ctypes.byref(models), ctypes.byref(n), err), err)
    try:
        return [_model_dict(models[i]) for i in range(n.value)]
    finally:
        lib.store_list_free(models, n)


def path(name_or_path):
    """The GGUF file a model name (or an existing path) resolves to."""
    lib, err = _lib(), _err()
    out = ctypes.create_string_buffer(_native.PATH_MAX)
    check(lib.store_resolve(_arg(name_or_path), out, len(out), err), err)
    return text(out.value)


def remove(name, directory=None):
    """Removes a model, its metadata and any partial downloads of it."""
    lib, err = _lib(), _err()
    check(lib.store_remove(_arg(directory), _arg(name), err), err)


def _progress_dict(p):
    return {"file_index": p.file_index, "n_files": p.n_files, "file": text(p.file), "done": p.done,
            "total": p.total or None, "received": p.received, "bytes_per_s": p.bytes_per_s,
            "eta_s": p.eta_s if p.eta_s >= 0 else None, "file_done": p.file_done, "note": text(p.note) or None}


def pull(source, name=None, sha256=None, force=False, retries=None, progress=None):
    """Downloads a model into the store: source is an http(s) URL, hf://ORG/REPO/FILE.gguf or a
    catalog name; sha256 the expected digest (comma-separated for a split set). progress(dict) is
    called several times a second with file_index, n_files, file, done, total, received,
    bytes_per_s, eta_s, file_done and note; returning False stops the pull. Returns a dict: name,
    path, url, n_files, size, received, verified, already (nothing was downloaded), resumed,
    replaced, sha256, seconds."""
    lib, err = _lib(), _err()
    params = lib.pull_default_params()
    params.source, params.name, params.sha256 = _arg(source), _arg(name), _arg(sha256)
    params.force = bool(force)
    if retries is not None:
        params.retries = int(retries)
    failure = []

    def on_progress(p, user):
        try:
            return progress(_progress_dict(p.contents)) is not False
        except BaseException as e:  # an exception cannot cross C: stop the pull, re-raise after it
            failure.append(e)
            return False

    callback = _native.PULL_PROGRESS_FN(on_progress) if progress else _native.PULL_PROGRESS_FN()
    params.progress = callback
    result = _native.PullResult()
    status = lib.store_pull(ctypes.byref(params), ctypes.byref(result), err)
    if failure:
        raise failure[0]
    check(status, err)
    return {"name": text(result.name), "path": text(result.path), "url": text(result.url), "n_files": result.n_files,
            "size": result.size, "received": result.received, "verified": result.verified, "already": result.already,
            "resumed": result.resumed, "replaced": result.replaced, "sha256": text(result.sha256),
            "seconds": result.seconds}


def _int_or_none(v):
    return v if v >= 0 else None


def _projector(g):
    """A multimodal projector's side of info (the same object as `sipp models info --json`): what it
    takes in and the width of the embeddings it gives the text model; None for any other file."""
    if not g.projector:
        return None
    return {"vision": g.projector_vision, "audio": g.projector_audio, "type": text(g.projector_type),
            "image_size": _int_or_none(g.projector_image_size), "patch_size": _int_or_none(g.projector_patch_size),
            "n_embd": _int_or_none(g.projector_n_embd)}


def info(name_or_path, hash=True):  # noqa: A002  (the same word as `sipp models info --no-hash`)
    """What a model is, from its GGUF header, without loading weights: architecture, parameters,
    context length, sizes, tensor types, tokenizer, chat template, and for a projector (an mmproj file)
    "projector"; with hash, also the sha256 of its first file (cached by the store: computed once while the file is unchanged). A store name or a
    path."""
    lib, err = _lib(), _err()
    resolved = path(name_or_path)
    g = _native.GgufInfo()
    check(lib.gguf_inspect(resolved.encode(), ctypes.byref(g), err), err)
    out = {"path": text(g.path), "architecture": text(g.architecture), "general_name": text(g.name) or None,
           "file_type": text(g.file_type) or None, "gguf_version": g.gguf_version, "n_files": g.n_files,
           "file_size": g.file_size, "n_params": g.n_params, "n_tensors": g.n_tensors,
           "n_ctx_train": _int_or_none(g.n_ctx_train), "n_embd": _int_or_none(g.n_embd),
           "n_layer": _int_or_none(g.n_layer), "n_head": _int_or_none(g.n_head),
           "n_head_kv": _int_or_none(g.n_head_kv), "n_ff": _int_or_none(g.n_ff), "n_vocab": _int_or_none(g.n_vocab),
           "pooling": text(g.pooling) or None, "tokenizer": text(g.tokenizer) or None,
           "has_chat_template": g.has_chat_template,
           "tensor_types": [{"type": text(t.type), "n_tensors": t.n_tensors, "n_params": t.n_params, "bytes": t.bytes}
                            for t in (g.types[i] for i in range(g.n_types))],
           "projector": _projector(g), "sha256": None}
    if hash:
        hex_out, cached = ctypes.create_string_buffer(_native.SHA256_HEX), ctypes.c_bool(False)
        check(lib.store_file_sha256(resolved.encode(), hex_out, ctypes.byref(cached), err), err)
        out["sha256"] = text(hex_out.value)
    return out
