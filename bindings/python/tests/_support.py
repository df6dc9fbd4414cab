"""Shared by the binding tests: the import path, the build directory and tiny synthetic models.

Models are made once per test process by build/bin/sipp-synth in a temporary directory: llama
architecture, random weights, the llama-spm tokenizer (32k tokens), two blocks of width 64. Their
text is meaningless; loading, tokenizing, scheduling and streaming are real.
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)  # bindings/python
REPO = os.path.normpath(os.path.join(PACKAGE_ROOT, "..", ".."))
if PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, PACKAGE_ROOT)

BUILD = os.environ.get("SIPP_BUILD") or "build"
BUILD = BUILD if os.path.isabs(BUILD) else os.path.join(REPO, BUILD)
SYNTH = os.path.join(BUILD, "bin", "sipp-synth")
SIPP = os.path.join(BUILD, "bin", "sipp")
VOCAB = os.path.join(REPO, "build", "llama", "vocab", "ggml-vocab-llama-spm.gguf")
TINY = ["--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128", "--type", "q8_0"]

# the machine is shared: one thread per engine, few slots
THREADS = 1
PARALLEL = 4

_lock = threading.Lock()
_tmp = None
_models = {}


def require_build():
    """Fails (not skips) when the build is missing: a broken build is a failure."""
    for path in (SYNTH, os.path.join(BUILD, "lib", "libsipp.so"), VOCAB):
        if not os.path.exists(path):
            raise AssertionError(f"{path} is missing; build with make -j2 all")


def model(name="tiny", *extra):
    """The path of a tiny synthetic model, made on first use."""
    global _tmp
    with _lock:
        if name in _models:
            return _models[name]
        require_build()
        if _tmp is None:
            _tmp = tempfile.mkdtemp(prefix="sipp-pytest-")
            atexit.register(shutil.rmtree, _tmp, True)
        out = os.path.join(_tmp, f"{name}.gguf")
        r = subprocess.run([SYNTH, "--out", out, "--vocab", VOCAB, *TINY, *extra], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"sipp-synth failed: {r.stderr}")
        _models[name] = out
        return out


def projector(kind="llava", n_embd=64):
    """The path of a synthetic multimodal projector (sipp-synth --projector KIND) for models n_embd wide."""
    name = f"mmproj-{kind}-{n_embd}"
    model()  # creates the directory
    with _lock:
        if name not in _models:
            out = os.path.join(_tmp, f"{name}.gguf")
            r = subprocess.run([SYNTH, "--out", out, "--projector", kind, "--n-embd", str(n_embd)], capture_output=True,
                               text=True, timeout=120)
            if r.returncode != 0:
                raise AssertionError(f"sipp-synth --projector failed: {r.stderr}")
            _models[name] = out
        return _models[name]


def tmpdir():
    model()  # creates the directory
    return _tmp


def run_python(code, env=None, timeout=120):
    """Runs code in a fresh interpreter with the package importable; returns the CompletedProcess."""
    full = dict(os.environ)
    full["PYTHONPATH"] = PACKAGE_ROOT + os.pathsep + full.get("PYTHONPATH", "")
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=timeout)
