"""Shared helpers for the integration tests: where the binaries are, making synthetic models (both in
tests/support), and running the CLI with a bounded timeout. Every test runs the real binaries."""

import os
import subprocess
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:  # run as a script, or imported from bench/
    sys.path.insert(0, _ROOT)

# the paths and the models live in tests/support (shared with bench/); the names stay importable here
from tests.support.models import make_model  # noqa: E402,F401
from tests.support.paths import BUILD, ROOT, SIPP, SYNTH, VOCAB_DIR  # noqa: E402,F401

RUN_TIMEOUT = 300  # seconds; Vulkan on lavapipe compiles its shaders on first use


def run_sipp(args, env=None, check=False, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL, threads=True):
    """Runs build/bin/sipp. One thread for generation: the machine is small and shared, and ggml's
    spinning threads crawl when oversubscribed."""
    full_env = dict(os.environ)
    full_env.pop("GGML_VK_VISIBLE_DEVICES", None)
    full_env.update(env or {})
    cmd = [SIPP, *args]
    if threads and args and not args[0] in ("backends", "doctor", "build", "version", "--version", "--help"):
        if "--threads" not in args:
            cmd += ["--threads", "1"]
    p = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout, stdin=stdin)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}: {p.stderr}")
    return p
