"""Shared helpers for the integration tests: where the binaries are, making synthetic models, and
running the CLI with a bounded timeout. Every test runs the real binaries."""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("SIPP_BUILD", "build"))
SIPP = os.path.join(BUILD, "bin", "sipp")
SYNTH = os.path.join(BUILD, "bin", "sipp-synth")
VOCAB_DIR = os.path.join(ROOT, "build", "llama", "vocab")
RUN_TIMEOUT = 300  # seconds; Vulkan on lavapipe compiles its shaders on first use


def make_model(directory, name="model.gguf", vocab="llama-bpe", **shape):
    """Writes a tiny synthetic llama model (random weights, real tokenizer) and returns its path."""
    args = {"n-embd": 64, "n-layer": 2, "n-head": 4, "n-head-kv": 2, "n-ff": 128, "type": "q8_0", "seed": 1}
    args.update({k.replace("_", "-"): v for k, v in shape.items()})
    path = os.path.join(directory, name)
    cmd = [SYNTH, "--out", path, "--vocab", os.path.join(VOCAB_DIR, f"ggml-vocab-{vocab}.gguf")]
    for k, v in args.items():
        cmd += [f"--{k}", str(v)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=RUN_TIMEOUT)
    return path


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
