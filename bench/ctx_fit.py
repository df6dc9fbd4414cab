#!/usr/bin/env python3
"""bench/ctx_fit.py: the longest context that fits a memory budget, for each KV cache type.

    bench/ctx_fit.py [--budget-mb 2048] [--types f16,q8_0,q4_0] [--parallel 1,2,4] [--threads 2]

For each KV type and number of slots, `sipp serve` gets one target with `ctx_size = "auto"` and
`[server] memory_budget_mb`: the gateway works out the largest context (all slots together, a
multiple of 256, at most the model's trained context) whose weights, KV cache and compute buffers fit
the budget by its estimate. The script reads what it chose from /v1/models, then loads the model with
one request and reads the process's peak resident memory (VmHWM), so the estimate is checked against
what the kernel counted.

The model is bench/run.sh's 1B-shaped synthetic one (n_embd 2048, 16 layers, 32 heads, 8 KV heads,
n_ff 8192, Q4_0, llama-bpe vocabulary), written with a 128k trained context so that the budget, not
the model, is the limit. Flash attention is on for every type (a quantized V cache needs it). Loopback
only. Prints a Markdown table.
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import tests.support.gateway as gw  # noqa: E402

TRAINED_CTX = 131072
REQUEST_TIMEOUT_S = 600


def model_path():
    cache = os.environ.get("SIPP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sipp")
    os.makedirs(os.path.join(cache, "models"), exist_ok=True)
    path = os.path.join(cache, "models", f"bench-1b-q4_0-ctx{TRAINED_CTX}.gguf")
    if not os.path.exists(path):
        print(f"ctx_fit: writing the 1B-shaped synthetic model to {path}", file=sys.stderr)
        vocab = os.path.join(os.path.dirname(gw.VOCAB), "ggml-vocab-llama-bpe.gguf")
        subprocess.run([gw.SYNTH, "--out", path, "--vocab", vocab, "--n-embd", "2048", "--n-layer", "16",
                        "--n-head", "32", "--n-head-kv", "8", "--n-ff", "8192", "--n-ctx", str(TRAINED_CTX),
                        "--type", "q4_0", "--seed", "1"], check=True, capture_output=True)
    return path


def peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


def one(model, budget_mb, kv, parallel, threads):
    cfg = (f"[server]\nmemory_budget_mb = {budget_mb}\n\n"
           f'[[targets]]\nname = "m"\ntype = "local"\nmodel = "{model}"\nctx_size = "auto"\n'
           f'parallel = {parallel}\nthreads = {threads}\nflash_attn = "on"\n'
           f'cache_type_k = "{kv}"\ncache_type_v = "{kv}"\n')
    g = gw.serve_config(cfg)
    try:
        status, _, listing = g.json("GET", "/v1/models")
        assert status == 200, listing
        s = listing["data"][0]["sipp"]
        status, _, r = g.json("POST", "/v1/chat/completions", gw.chat_body("m", max_tokens=1),
                              timeout=REQUEST_TIMEOUT_S)
        assert status == 200, r
        return {"ctx": s["ctx_size"], "estimate_mb": s["memory_estimate"]["total_bytes"] / 2**20,
                "rss_mb": peak_rss_mb(g.proc.pid)}
    finally:
        g.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget-mb", type=int, default=2048)
    ap.add_argument("--types", default="f16,q8_0,q4_0")
    ap.add_argument("--parallel", default="1,2,4")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    model = model_path()
    size_mb = os.path.getsize(model) / 2**20
    print(f"model: 1B-shaped synthetic Q4_0 ({size_mb:.0f} MiB, trained context {TRAINED_CTX}); "
          f"budget {a.budget_mb} MiB; flash attention on\n")
    print("| KV type | slots | ctx_size (all slots) | per slot | estimate MiB | peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    for kv in a.types.split(","):
        for parallel in (int(p) for p in a.parallel.split(",")):
            r = one(model, a.budget_mb, kv, parallel, a.threads)
            print(f"| {kv} | {parallel} | {r['ctx']} | {r['ctx'] // parallel} | {r['estimate_mb']:.0f} | "
                  f"{r['rss_mb']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
