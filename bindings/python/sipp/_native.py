"""libsipp through ctypes: finding the library, choosing the artifact, and the C declarations.

Two decisions happen here, in this order.

1. Which artifact (at import). SIPP_PYTHON_BACKEND = auto | cpu | vulkan | cuda | metal names the
   backend the process wants. An artifact is a directory of llama.cpp libraries whose
   manifest.json lists the backends compiled into it (build/artifacts/<name>/). ``auto`` takes the
   default artifact (build/artifact, the one libsipp was linked against); an explicit backend takes
   the default artifact when it has that backend, else another artifact that has it. SIPP_ARTIFACT
   names the artifact directly and wins, but an explicit backend must still be in it. Before the
   default, the artifact that ``sipp build python --backend ...`` recorded (build/targets/python.json)
   is taken, for auto and for any backend it has. A name sipp
   does not know, or a backend no artifact has, raises BackendError at import, listing the usable
   names: failing at import is cheaper than failing after a model has been read.

2. Loading libsipp (on first use, i.e. the first local endpoint). The library is found through
   SIPP_LIB, else relative to this package in the repository's build directory ($SIPP_BUILD or
   build/), else on the system's library path. sipp_runtime_init then loads the chosen artifact's
   backend modules once for the process. A process that only talks to gateways never loads it.

The ctypes structures mirror include/sipp.h field by field; tests/test_abi.py compiles a C program
against the header and compares sizes and offsets, so that a change to the header cannot silently
shift a field. ctypes.CDLL (not PyDLL) releases the GIL around every foreign call, so a thread
blocked in sipp_request_read or sipp_engine_embed lets the other Python threads run.
"""

import ctypes
import ctypes.util
import glob
import json
import os
import threading

from ._errors import BackendError, NotFoundError, NotSupportedError, error_for_status

ENV_BACKEND = "SIPP_PYTHON_BACKEND"
# The names SIPP_PYTHON_BACKEND accepts: auto and the backends sipp can run models on.
BACKEND_NAMES = ("auto", "cpu", "vulkan", "cuda", "metal")
ERROR_SIZE = 512  # SIPP_ERROR_SIZE

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# bindings/python/sipp -> the repository root
REPO_ROOT = os.path.normpath(os.path.join(PACKAGE_DIR, "..", "..", ".."))


# ---- finding libsipp and the artifacts ----------------------------------------------------------


def _build_dir():
    build = os.environ.get("SIPP_BUILD") or "build"
    return build if os.path.isabs(build) else os.path.join(REPO_ROOT, build)


def find_library():
    """The path of libsipp.so, or None when it cannot be found."""
    explicit = os.environ.get("SIPP_LIB")
    if explicit:
        return explicit  # checked when loaded, so that the error names it
    for build in (_build_dir(), os.path.join(REPO_ROOT, "build")):
        path = os.path.join(build, "lib", "libsipp.so")
        if os.path.isfile(path):
            return path
    return ctypes.util.find_library("sipp")


def _read_manifest(artifact_dir):
    """The backends listed in an artifact's manifest.json, or None when it has none."""
    try:
        with open(os.path.join(artifact_dir, "manifest.json"), encoding="utf-8") as f:
            backends = json.load(f).get("backends")
    except (OSError, ValueError):
        return None
    return [str(b) for b in backends] if isinstance(backends, list) else None


def _lib_build_dir(lib_path):
    """The build directory libsipp lives in (BUILD/lib/libsipp.so), or None."""
    if not lib_path or not os.path.isfile(lib_path):
        return None
    return os.path.dirname(os.path.dirname(os.path.realpath(lib_path)))


def target_record(lib_path):
    """The artifact `sipp build python` recorded, as (dir, [backends]), or None."""
    build = _lib_build_dir(lib_path)
    if not build:
        return None
    try:
        with open(os.path.join(build, "targets", "python.json"), encoding="utf-8") as f:
            d = json.load(f).get("artifact")
    except (OSError, ValueError, AttributeError):
        return None
    backends = _read_manifest(d) if isinstance(d, str) and os.path.isdir(d) else None
    return (os.path.realpath(d), backends) if backends is not None else None


def list_artifacts(lib_path):
    """The artifacts next to libsipp: [(dir, [backends])], the default artifact first."""
    build = _lib_build_dir(lib_path)
    if not build:
        return []
    default = os.path.realpath(os.path.join(build, "artifact"))
    found = []
    for manifest in sorted(glob.glob(os.path.join(build, "artifacts", "*", "manifest.json"))):
        d = os.path.realpath(os.path.dirname(manifest))
        backends = _read_manifest(d)
        if backends is not None:
            found.append((d, backends))
    # the default artifact first, then the smallest: the fewest modules to load
    found.sort(key=lambda a: (a[0] != default, len(a[1]), a[0]))
    return found


class Selection:
    """What the process chose at import: the backend asked for and the artifact that has it."""

    def __init__(self, backend, artifact_dir, backends, source):
        self.backend = backend  # "auto", "cpu", "vulkan", ...
        self.artifact_dir = artifact_dir  # None: libsipp's own choice ($SIPP_ARTIFACT or build/artifact)
        self.backends = backends  # the artifact's compiled backends, or None when unknown
        self.source = source  # why this artifact, in words
        self.decision = None  # for an explicit backend: what libsipp decided at import

    def as_dict(self):
        return {"backend": self.backend, "artifact": self.artifact_dir, "backends": self.backends,
                "source": self.source, "decision": self.decision}

    def __repr__(self):
        return f"Selection({self.as_dict()!r})"


def _usable(artifacts):
    names = ["auto"]
    for _, backends in artifacts:
        names += [b for b in backends if b in BACKEND_NAMES and b not in names]
    return names


def select_backend(env=None):
    """Decides the artifact for the value of SIPP_PYTHON_BACKEND; raises BackendError if unusable."""
    env = os.environ if env is None else env
    raw = env.get(ENV_BACKEND, "")
    name = raw.strip().lower() or "auto"
    lib = find_library()
    artifacts = list_artifacts(lib)
    names = ", ".join(f"{os.path.basename(d)} ({'+'.join(b)})" for d, b in artifacts)
    where = f"artifacts found: {names}" if artifacts else f"no artifact found next to {lib or 'libsipp (not found)'}"
    if name not in BACKEND_NAMES:
        raise BackendError(
            f"{ENV_BACKEND}={raw!r} is not a backend sipp knows; usable here: {', '.join(_usable(artifacts))} "
            f"({where}). Set {ENV_BACKEND} to one of them, or unset it for auto.")

    forced = env.get("SIPP_ARTIFACT")
    if forced:
        backends = _read_manifest(forced)
        if name != "auto" and backends is not None and name not in backends:
            raise BackendError(
                f"{ENV_BACKEND}={name} but SIPP_ARTIFACT={forced} has only {', '.join(backends)}; usable here: "
                f"{', '.join(_usable([(forced, backends)]))}. Unset SIPP_ARTIFACT, or build an artifact with "
                f"make BACKENDS=\"cpu {name}\".")
        return Selection(name, forced, backends, "SIPP_ARTIFACT")

    record = target_record(lib)
    if record and (name == "auto" or name in record[1]):
        return Selection(name, record[0], record[1], "sipp build python")

    if name == "auto":
        if artifacts:
            d, backends = artifacts[0]
            return Selection(name, d, backends, "the default artifact")
        return Selection(name, None, None, "libsipp's default")

    for d, backends in artifacts:
        if name in backends:
            return Selection(name, d, backends, f"the first artifact with {name}")
    raise BackendError(
        f"{ENV_BACKEND}={name} but no artifact has the {name} backend; usable here: {', '.join(_usable(artifacts))} "
        f"({where}). Build one with make BACKENDS=\"cpu {name}\", or choose another backend.")


# ---- the C declarations ------------------------------------------------------------------------

c_char_p, c_int, c_bool, c_size_t, c_float, c_double = (
    ctypes.c_char_p, ctypes.c_int, ctypes.c_bool, ctypes.c_size_t, ctypes.c_float, ctypes.c_double)
c_void_p, c_uint32, c_uint64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64

PROGRESS_FN = ctypes.CFUNCTYPE(c_bool, c_float, c_void_p)
PIECE_FN = ctypes.CFUNCTYPE(c_bool, ctypes.POINTER(ctypes.c_char), c_size_t, c_void_p)
FINISH_FN = ctypes.CFUNCTYPE(None, c_int, c_void_p)


class RuntimeParams(ctypes.Structure):
    _fields_ = [("artifact_dir", c_char_p), ("log_level", c_int)]


class BackendDecision(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char * 16), ("reason", ctypes.c_char * 256),
                ("devices", ctypes.c_char * 256), ("gpu_layers", c_int)]


class BackendInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 16), ("compiled", c_bool), ("available", c_bool), ("n_devices", c_int)]


PATH_MAX = 4096  # SIPP_PATH_MAX


class ModelParams(ctypes.Structure):
    _fields_ = [("backend", c_char_p), ("backend_order", c_char_p), ("gpu_layers", c_int), ("progress", PROGRESS_FN),
                ("progress_user", c_void_p), ("vocab_only", c_bool), ("rpc_servers", c_char_p), ("tensor_split", c_char_p),
                ("flash_attn", c_char_p), ("no_repack", c_bool), ("mmproj", c_char_p), ("mmproj_offload", c_bool),
                ("lora", c_void_p), ("n_lora", c_size_t)]


class ModelInfo(ctypes.Structure):
    _fields_ = [("architecture", ctypes.c_char * 64), ("description", ctypes.c_char * 128),
                ("n_params", c_uint64), ("size_bytes", c_uint64), ("n_ctx_train", c_int), ("n_embd", c_int),
                ("n_layer", c_int), ("n_head", c_int), ("n_head_kv", c_int), ("n_vocab", c_int),
                ("has_chat_template", c_bool), ("load_ms", c_double), ("chat_template", ctypes.c_char * 32),
                ("vision", c_bool), ("audio", c_bool), ("mmproj", ctypes.c_char * PATH_MAX)]


class Message(ctypes.Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class EngineParams(ctypes.Structure):
    _fields_ = [("ctx_size", c_int), ("parallel", c_int), ("threads", c_int), ("batch_size", c_int),
                ("max_queued", c_int), ("policy", c_int), ("embeddings", c_bool), ("speculative", c_char_p),
                ("draft_max", c_int), ("draft_min", c_int), ("draft_model", c_char_p), ("draft_p_min", c_float),
                ("draft_cutoff", c_char_p), ("cache_type_k", c_char_p), ("cache_type_v", c_char_p),
                ("pooling", c_char_p)]


class Sampling(ctypes.Structure):
    _fields_ = [("temperature", c_float), ("top_k", c_int), ("top_p", c_float), ("min_p", c_float),
                ("repeat_penalty", c_float), ("repeat_last_n", c_int), ("seed", c_uint32),
                ("frequency_penalty", c_float), ("presence_penalty", c_float)]


class RequestParams(ctypes.Structure):
    _fields_ = [("prompt", c_char_p), ("messages", ctypes.POINTER(Message)), ("n_messages", c_size_t),
                ("tokens", ctypes.POINTER(ctypes.c_int32)), ("n_tokens", c_size_t), ("chat_template", c_char_p), ("max_tokens", c_int), ("sampling", Sampling),
                ("stop", ctypes.POINTER(c_char_p)), ("n_stop", c_size_t), ("ignore_eos", c_bool),
                ("context_key", c_char_p), ("timeout_ms", c_int), ("on_piece", PIECE_FN), ("user", c_void_p),
                ("on_finish", FINISH_FN), ("chat_json", c_char_p), ("grammar", c_char_p), ("json_schema", c_char_p),
                ("logprobs", c_int), ("lora", c_void_p), ("n_lora", c_size_t)]


class RequestStats(ctypes.Structure):
    _fields_ = [("prompt_tokens", c_int), ("cached_tokens", c_int), ("generated_tokens", c_int),
                ("queue_ms", c_double), ("ttft_ms", c_double), ("prefill_ms", c_double), ("decode_ms", c_double),
                ("prefill_tokens_per_s", c_double), ("decode_tokens_per_s", c_double), ("total_ms", c_double),
                ("draft_tokens", c_int), ("accepted_tokens", c_int), ("draft_steps", c_int), ("cutoff_steps", c_int),
                ("speculation", ctypes.c_char * 48), ("media_tokens", c_int), ("media_encoded", c_int),
                ("encode_ms", c_double)]


class EngineStats(ctypes.Structure):
    _fields_ = [("slots", c_int), ("running", c_int), ("queued", c_int), ("requests_done", c_uint64),
                ("tokens_in", c_uint64), ("tokens_out", c_uint64), ("decode_steps", c_uint64),
                ("mean_busy_slots", c_double), ("draft_tokens", c_uint64), ("accepted_tokens", c_uint64),
                ("draft_steps", c_uint64), ("cutoff_steps", c_uint64), ("kv_cells", c_int), ("kv_cells_used", c_int)]


# ---- the model store (sipp.h "model store") ----
NAME_MAX = 128  # SIPP_NAME_MAX
URL_MAX = 4096  # SIPP_URL_MAX
SHA256_HEX = 65  # SIPP_SHA256_HEX
STORE_TIME_MAX = 32  # SIPP_STORE_TIME_MAX
RECIPE_NAME_MAX = 16  # SIPP_RECIPE_NAME_MAX
GGUF_MAX_TYPES = 48  # SIPP_GGUF_MAX_TYPES


class StoreFile(ctypes.Structure):
    _fields_ = [("file", ctypes.c_char * (NAME_MAX + 32)), ("url", c_char_p), ("size", c_uint64), ("mtime_ns", ctypes.c_int64),
                ("sha256", ctypes.c_char * SHA256_HEX)]


class StoreModel(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * (NAME_MAX + 1)), ("source", c_char_p), ("pulled_at", ctypes.c_char * STORE_TIME_MAX),
                ("verified", c_bool), ("managed", c_bool), ("n_files", c_int), ("files", ctypes.POINTER(StoreFile)),
                ("size", c_uint64), ("path", ctypes.c_char * PATH_MAX), ("mmproj", ctypes.POINTER(StoreFile)),
                ("recipe", ctypes.c_char * RECIPE_NAME_MAX)]


class PullProgress(ctypes.Structure):
    _fields_ = [("file_index", c_int), ("n_files", c_int), ("file", c_char_p), ("done", c_uint64), ("total", c_uint64),
                ("received", c_uint64), ("bytes_per_s", c_double), ("eta_s", c_double), ("file_done", c_bool),
                ("note", c_char_p)]


PULL_PROGRESS_FN = ctypes.CFUNCTYPE(c_bool, ctypes.POINTER(PullProgress), c_void_p)


class PullParams(ctypes.Structure):
    _fields_ = [("source", c_char_p), ("name", c_char_p), ("sha256", c_char_p), ("force", c_bool), ("retries", c_int),
                ("progress", PULL_PROGRESS_FN), ("user", c_void_p), ("public_only", c_bool), ("keep_existing", c_bool)]


class PullResult(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * (NAME_MAX + 1)), ("path", ctypes.c_char * PATH_MAX), ("url", ctypes.c_char * URL_MAX),
                ("n_files", c_int), ("size", c_uint64), ("received", c_uint64), ("verified", c_bool),
                ("already", c_bool), ("resumed", c_bool), ("replaced", c_bool), ("sha256", ctypes.c_char * SHA256_HEX),
                ("seconds", c_double), ("fault", c_int)]


class GgufTypeCount(ctypes.Structure):
    _fields_ = [("type", ctypes.c_char * 16), ("n_tensors", ctypes.c_int64), ("n_params", c_uint64), ("bytes", c_uint64)]


class GgufInfo(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char * PATH_MAX), ("architecture", ctypes.c_char * 64), ("name", ctypes.c_char * 128),
                ("file_type", ctypes.c_char * 32), ("gguf_version", c_uint32), ("n_files", c_int), ("file_size", c_uint64),
                ("n_params", c_uint64), ("n_tensors", ctypes.c_int64), ("n_ctx_train", ctypes.c_int64),
                ("n_embd", ctypes.c_int64), ("n_layer", ctypes.c_int64), ("n_head", ctypes.c_int64),
                ("n_head_kv", ctypes.c_int64), ("n_ff", ctypes.c_int64), ("n_vocab", ctypes.c_int64),
                ("pooling", ctypes.c_char * 8), ("tokenizer", ctypes.c_char * 32), ("has_chat_template", c_bool),
                ("n_types", c_int), ("types", GgufTypeCount * GGUF_MAX_TYPES), ("projector", c_bool),
                ("projector_vision", c_bool), ("projector_audio", c_bool), ("projector_type", ctypes.c_char * 32),
                ("projector_image_size", ctypes.c_int64), ("projector_n_embd", ctypes.c_int64),
                ("projector_patch_size", ctypes.c_int64)]


class TtsParams(ctypes.Structure):  # sipp_tts_params
    _fields_ = [("model", c_char_p), ("mmproj", c_char_p), ("speaker", c_char_p), ("voice", c_char_p),
                ("backend", c_char_p), ("n_threads", c_int), ("n_parallel", c_int), ("batch_frames", c_bool),
                ("speaker_names", ctypes.POINTER(c_char_p)), ("speaker_paths", ctypes.POINTER(c_char_p)),
                ("n_speakers", c_int)]


P_INT16 = ctypes.POINTER(ctypes.c_int16)
AUDIO_FN = ctypes.CFUNCTYPE(c_bool, P_INT16, c_size_t, c_int, c_void_p)
BYTES_FN = ctypes.CFUNCTYPE(c_bool, c_void_p, c_size_t, c_void_p)


class SpeakOptions(ctypes.Structure):  # sipp_speak_options
    _fields_ = [("voice", c_char_p), ("language", c_char_p), ("speed", c_float), ("sample_rate", c_int),
                ("seed", c_uint32), ("top_k", c_int), ("top_p", c_float), ("max_frames", c_int),
                ("cancel", ctypes.POINTER(c_bool)), ("on_audio", AUDIO_FN), ("user", c_void_p),
                ("usage", c_void_p)]


AUDIO_FORMATS = ("wav", "pcm", "flac", "mp3", "opus")  # sipp_audio_format, in order


# The C name of every structure above, for the layout check (tests/test_abi.py).
C_STRUCTS = {
    StoreFile: "sipp_store_file", StoreModel: "sipp_store_model", PullProgress: "sipp_pull_progress",
    PullParams: "sipp_pull_params", PullResult: "sipp_pull_result", GgufTypeCount: "sipp_gguf_type_count",
    GgufInfo: "sipp_gguf_info",
    RuntimeParams: "sipp_runtime_params", BackendDecision: "sipp_backend_decision", BackendInfo: "sipp_backend_info",
    ModelParams: "sipp_model_params", ModelInfo: "sipp_model_info", Message: "sipp_message",
    EngineParams: "sipp_engine_params", Sampling: "sipp_sampling", RequestParams: "sipp_request_params",
    RequestStats: "sipp_request_stats", EngineStats: "sipp_engine_stats",
    TtsParams: "sipp_tts_params", SpeakOptions: "sipp_speak_options",
}

SEED_RANDOM = 0xFFFFFFFF
FINISH_NAMES = ["", "stop", "length", "cancelled", "error"]  # sipp_finish_reason
FINISH_ERROR = 4
STATUS_OK, STATUS_CANCELLED = 0, 8

P = ctypes.POINTER
# name: (restype, argtypes); optional functions (newer than the oldest libsipp this supports) are
# looked up with getattr and may be missing.
_PROTOTYPES = {
    "sipp_status_name": (c_char_p, [c_int]),
    "sipp_version": (c_char_p, []),
    "sipp_llama_release": (c_char_p, []),
    "sipp_runtime_default_params": (RuntimeParams, []),
    "sipp_runtime_init": (c_int, [P(RuntimeParams), c_char_p]),
    "sipp_runtime_artifact_dir": (c_char_p, []),
    "sipp_backend_check_name": (c_int, [c_char_p, c_char_p]),
    "sipp_backends_list": (c_int, [P(BackendInfo), c_int]),
    "sipp_backend_decide": (c_int, [c_char_p, c_char_p, P(BackendDecision), c_char_p]),
    "sipp_model_default_params": (ModelParams, []),
    "sipp_model_load": (c_int, [c_char_p, P(ModelParams), P(c_void_p), c_char_p]),
    "sipp_model_free": (None, [c_void_p]),
    "sipp_model_backend": (P(BackendDecision), [c_void_p]),
    "sipp_model_get_info": (None, [c_void_p, P(ModelInfo)]),
    "sipp_engine_default_params": (EngineParams, []),
    "sipp_engine_new": (c_int, [c_void_p, P(EngineParams), P(c_void_p), c_char_p]),
    "sipp_engine_free": (None, [c_void_p]),
    "sipp_engine_last_error": (c_char_p, [c_void_p]),
    "sipp_request_default_params": (RequestParams, []),
    "sipp_engine_submit": (c_int, [c_void_p, P(RequestParams), P(c_void_p)]),
    "sipp_request_cancel": (None, [c_void_p]),
    "sipp_request_wait": (c_int, [c_void_p, c_int]),
    "sipp_request_read": (c_size_t, [c_void_p, c_char_p, c_size_t, c_int, P(c_bool)]),
    "sipp_request_read_piece": (c_size_t, [c_void_p, c_char_p, c_size_t, c_int, P(c_bool)]),
    "sipp_request_finish_reason": (c_int, [c_void_p]),
    "sipp_request_status": (c_int, [c_void_p]),
    "sipp_request_error": (c_char_p, [c_void_p]),
    "sipp_request_text": (ctypes.c_void_p, [c_void_p]),  # bytes read with ctypes.string_at
    "sipp_request_get_stats": (None, [c_void_p, P(RequestStats)]),
    "sipp_request_free": (None, [c_void_p]),
    "sipp_engine_get_stats": (None, [c_void_p, P(EngineStats)]),
    "sipp_engine_embed": (c_int, [c_void_p, P(c_char_p), c_size_t, c_bool, P(P(c_float)), P(c_int), P(c_int)]),
    "sipp_free": (None, [c_void_p]),
    "sipp_chat_parser_new": (c_int, [c_void_p, P(c_void_p), c_char_p]),
    "sipp_chat_parser_free": (None, [c_void_p]),
    "sipp_chat_parser_feed": (c_int, [c_void_p, c_char_p, c_size_t, c_bool, P(c_void_p)]),
    "sipp_chat_parser_message": (c_char_p, [c_void_p]),
    "sipp_chat_parser_error": (c_char_p, [c_void_p]),
    "sipp_request_logprobs_json": (c_size_t, [c_void_p, c_size_t, P(c_void_p)]),
    "sipp_request_warning": (c_char_p, [c_void_p]),
    "sipp_store_dir": (c_int, [c_char_p, c_size_t, c_char_p]),
    "sipp_store_list": (c_int, [c_char_p, P(P(StoreModel)), P(c_size_t), c_char_p]),
    "sipp_store_list_free": (None, [P(StoreModel), c_size_t]),
    "sipp_store_remove": (c_int, [c_char_p, c_char_p, c_char_p]),
    "sipp_store_resolve": (c_int, [c_char_p, c_char_p, c_size_t, c_char_p]),
    "sipp_store_file_sha256": (c_int, [c_char_p, c_char_p, P(c_bool), c_char_p]),
    "sipp_pull_default_params": (PullParams, []),
    "sipp_store_pull": (c_int, [P(PullParams), P(PullResult), c_char_p]),
    "sipp_gguf_inspect": (c_int, [c_char_p, P(GgufInfo), c_char_p]),
    "sipp_tts_default_params": (TtsParams, []),
    "sipp_tts_new": (c_int, [P(TtsParams), P(c_void_p), c_char_p]),
    "sipp_tts_free": (None, [c_void_p]),
    "sipp_tts_last_error": (c_char_p, [c_void_p]),
    "sipp_tts_pipeline": (c_char_p, [c_void_p]),
    "sipp_tts_sample_rate": (c_int, [c_void_p]),
    "sipp_tts_voice_borrow": (c_char_p, [c_void_p, c_size_t]),
    "sipp_tts_frames": (None, [c_void_p, P(c_uint64), P(c_uint64)]),
    "sipp_speak_default_options": (SpeakOptions, []),
    "sipp_tts_speak": (c_int, [c_void_p, c_char_p, P(SpeakOptions), c_void_p, c_void_p, c_void_p]),
    "sipp_audio_format_parse": (c_int, [c_char_p, P(c_int)]),
    "sipp_audio_encoder_new": (c_int, [c_int, c_int, c_bool, BYTES_FN, c_void_p, P(c_void_p), c_char_p]),
    "sipp_audio_encoder_output_rate": (c_int, [c_void_p]),
    "sipp_audio_encoder_write": (c_int, [c_void_p, P_INT16, c_size_t]),
    "sipp_audio_encoder_finish": (c_int, [c_void_p]),
    "sipp_audio_encoder_last_error": (c_char_p, [c_void_p]),
    "sipp_audio_encoder_free": (None, [c_void_p]),
}
SPEECH_FUNCTIONS = {"sipp_tts_default_params", "sipp_tts_new", "sipp_tts_free", "sipp_tts_last_error",
                    "sipp_tts_pipeline", "sipp_tts_sample_rate", "sipp_tts_voice_borrow", "sipp_tts_frames",
                    "sipp_speak_default_options", "sipp_tts_speak", "sipp_audio_format_parse",
                    "sipp_audio_encoder_new", "sipp_audio_encoder_output_rate", "sipp_audio_encoder_write",
                    "sipp_audio_encoder_finish", "sipp_audio_encoder_last_error", "sipp_audio_encoder_free"}
# Speech to text (sipp.h's speech section; sipp/_transcribe.py).
class TranscriberParams(ctypes.Structure):
    _fields_ = [("backend", c_char_p), ("backend_order", c_char_p), ("parallel", c_int), ("threads", c_int),
                ("flash_attn", c_bool)]


SEGMENT_FN = ctypes.CFUNCTYPE(None, c_void_p, c_void_p)


class TranscribeParams(ctypes.Structure):
    _fields_ = [("language", c_char_p), ("translate", c_bool), ("prompt", c_char_p), ("temperature", c_float),
                ("temperature_inc", c_float), ("entropy_thold", c_float), ("logprob_thold", c_float),
                ("no_speech_thold", c_float), ("beam_size", c_int), ("best_of", c_int),
                ("word_timestamps", c_bool), ("threads", c_int), ("max_seconds", c_double),
                ("cancel", P(c_int)), ("on_segment", SEGMENT_FN), ("user", c_void_p), ("media_budget", c_void_p)]


SPEECH_PROTOTYPES = {
    "sipp_transcriber_default_params": (TranscriberParams, []),
    "sipp_transcriber_new": (c_int, [c_char_p, P(TranscriberParams), P(c_void_p), c_char_p]),
    "sipp_transcriber_free": (None, [c_void_p]),
    "sipp_transcriber_backend": (c_char_p, [c_void_p]),
    "sipp_transcribe_default_params": (TranscribeParams, []),
    "sipp_transcribe_bytes": (c_int, [c_void_p, c_char_p, c_size_t, c_char_p, P(TranscribeParams), P(c_void_p),
                                      c_char_p]),
    "sipp_transcript_free": (None, [c_void_p]),
    "sipp_transcript_format_parse": (c_int, [c_char_p, P(c_int)]),
    "sipp_transcript_render": (c_void_p, [c_void_p, c_int, c_char_p]),  # malloc'ed: read, then sipp_free
}
_PROTOTYPES.update(SPEECH_PROTOTYPES)
SPEECH_FUNCTIONS = set(SPEECH_PROTOTYPES)
C_STRUCTS.update({TranscriberParams: "sipp_transcriber_params", TranscribeParams: "sipp_transcribe_params"})

# Functions newer than the oldest libsipp these bindings load: a binding call that needs one that is
# missing raises NotSupportedError naming it.
STORE_FUNCTIONS = {"sipp_store_dir", "sipp_store_list", "sipp_store_list_free", "sipp_store_remove",
                   "sipp_store_resolve", "sipp_store_file_sha256", "sipp_pull_default_params", "sipp_store_pull",
                   "sipp_gguf_inspect"}
OPTIONAL = {"sipp_engine_embed", "sipp_backends_list", "sipp_backend_decide"} | STORE_FUNCTIONS | SPEECH_FUNCTIONS


class Library:
    """libsipp loaded, with its prototypes declared and the runtime initialised."""

    def __init__(self, path, selection):
        try:
            self.dll = ctypes.CDLL(path)
        except OSError as e:
            raise NotFoundError(f"cannot load libsipp from {path}: {e}; build it with make, or set SIPP_LIB "
                                f"to the path of libsipp.so") from None
        self.path = path
        self.missing = set()
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(self.dll, name, None)
            if fn is None:
                if name in OPTIONAL:
                    self.missing.add(name)
                    continue
                raise NotFoundError(f"{path} has no function {name}; it is older than these bindings: rebuild "
                                    f"it with make")
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name[len("sipp_"):], fn)
        self._init_runtime(selection)

    def _init_runtime(self, selection):
        params = self.runtime_default_params()
        if selection.artifact_dir:
            params.artifact_dir = selection.artifact_dir.encode()
        err = ctypes.create_string_buffer(ERROR_SIZE)
        status = self.runtime_init(ctypes.byref(params), err)
        check(status, err)
        self.artifact_dir = (self.runtime_artifact_dir() or b"").decode()

    def has(self, name):
        return name not in self.missing


def check(status, err):
    """Raises the exception for a failed status; err is an error buffer or a message."""
    if status != STATUS_OK:
        msg = err.value.decode("utf-8", "replace") if hasattr(err, "value") else (err or "")
        raise error_for_status(status, msg or f"libsipp failed with status {status}")


_lock = threading.Lock()
_library = None
selection = None  # set by the package at import


def library():
    """libsipp, loaded and initialised on first call (thread-safe)."""
    global _library
    with _lock:
        if _library is None:
            path = find_library()
            if not path:
                raise NotFoundError(
                    f"cannot find libsipp.so (looked in {os.path.join(_build_dir(), 'lib')} and on the library "
                    f"path); build it with make in {REPO_ROOT}, or set SIPP_LIB to its path")
            _library = Library(path, selection)
        return _library


def verify_selection():
    """For an explicit backend: loads libsipp now and checks that the backend can run here.

    sipp_backend_decide answers both halves (compiled into the artifact, a device visible) without
    loading a model, in well under a second, so an unusable SIPP_PYTHON_BACKEND fails at import with
    libsipp's reason (e.g. that lavapipe needs GGML_VK_VISIBLE_DEVICES=0) and the usable names.
    """
    sel = selection
    if sel.backend == "auto":
        return
    try:
        lib = library()
    except NotFoundError as e:
        raise BackendError(f"{ENV_BACKEND}={sel.backend} needs libsipp, which cannot be loaded: {e}") from None
    if not lib.has("sipp_backend_decide"):
        return
    decision = BackendDecision()
    err = ctypes.create_string_buffer(ERROR_SIZE)
    if lib.backend_decide(sel.backend.encode(), None, ctypes.byref(decision), err) != STATUS_OK:
        raise BackendError(f"{ENV_BACKEND}={sel.backend}: {text(err.value)}; usable here: "
                           f"{', '.join(usable_backends(lib))}")
    sel.decision = {"backend": text(decision.backend), "reason": text(decision.reason),
                    "devices": text(decision.devices)}


def usable_backends(lib):
    """auto and the backends that are compiled and have a device, from sipp_backends_list."""
    if not lib.has("sipp_backends_list"):
        return ["auto"]
    infos = (BackendInfo * 16)()
    n = min(lib.backends_list(infos, len(infos)), len(infos))
    return ["auto"] + [text(infos[i].name) for i in range(n) if infos[i].available]


def library_with(functions):
    """library(), after checking that it has every one of functions (a newer part of the API)."""
    lib = library()
    missing = sorted(n for n in functions if not lib.has(n))
    if missing:
        raise NotSupportedError(f"{lib.path} has no {', '.join(missing)}; it is older than these bindings: "
                                f"rebuild it with make")
    return lib


def text(b):
    """A C string from libsipp as str (UTF-8; never raises)."""
    return b.decode("utf-8", "replace") if b else ""
