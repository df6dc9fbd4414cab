"""Synthetic models: tiny llama-architecture GGUF files with random weights and a real tokenizer,
written by sipp-synth (tools/synth). No test downloads a model."""

import os
import subprocess

from tests.support.paths import SYNTH, VOCAB_DIR

SYNTH_TIMEOUT_S = 300  # a bound, far above what a tiny model takes


def make_model(directory, name="model.gguf", vocab="llama-bpe", **shape):
    """Writes a tiny synthetic llama model (random weights, real tokenizer) and returns its path.
    shape overrides sipp-synth's options (n_embd=128 is --n-embd 128)."""
    args = {"n-embd": 64, "n-layer": 2, "n-head": 4, "n-head-kv": 2, "n-ff": 128, "type": "q8_0", "seed": 1}
    args.update({k.replace("_", "-"): v for k, v in shape.items()})
    path = os.path.join(directory, name)
    cmd = [SYNTH, "--out", path, "--vocab", os.path.join(VOCAB_DIR, f"ggml-vocab-{vocab}.gguf")]
    for k, v in args.items():
        cmd += [f"--{k}", str(v)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=SYNTH_TIMEOUT_S)
    return path


def make_projector(directory, kind, name=None, **opts):
    """Writes a multimodal projector (sipp-synth --projector KIND: "llava" for images, "qwen2a" for
    audio) whose embeddings are n_embd wide (default 64, make_model's width) and returns its path.
    opts override sipp-synth's options (image_size=32 is --image-size 32)."""
    args = {"n-embd": 64, "seed": 1}
    args.update({k.replace("_", "-"): v for k, v in opts.items()})
    path = os.path.join(directory, name or f"mmproj-{kind}.gguf")
    cmd = [SYNTH, "--out", path, "--projector", kind]
    for k, v in args.items():
        cmd += [f"--{k}", str(v)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=SYNTH_TIMEOUT_S)
    return path
