#!/usr/bin/env python3
"""bench/spec_profile.py: where the time of speculative decoding goes, sipp beside llama-server.

    bench/spec_profile.py [--perturb 0] [--tokens 64] [--streams 3] [--threads 2] [--freq 499]

The draft pair of bench/speculative.py (the 1B-shaped target whose layers past the first two add
--perturb noise, and the exact 2-layer draft) is served by `sipp serve` (a target with the draft,
draft_max 8, draft_cutoff off: it proposes every step, as llama-server does) and by llama-server
(`--model-draft --spec-type draft-simple --spec-draft-n-max 8`), same threads, one at a time. While
each streams --streams greedy completions of --tokens tokens one after another, `perf record` samples
the server process (software clock, --freq Hz, call graphs); the script then sorts the samples by
shared object and symbol and sums them into a few kinds of work:

  matmul     ggml's matrix kernels (vec_dot, gemv/gemm, mul_mat) of the target and the draft
  attention  flash attention and softmax over the KV cache
  sampling   samplers and the sorts and softmaxes they run over the vocabulary
  waiting    threads spinning or sleeping at ggml's barriers, futexes, sched_yield
  kernel     the rest of the kernel's time (page faults, copies)
  other      everything else (HTTP, JSON, tokenization, the server's own loop)

It prints each server's tokens/s, its acceptance, the shares of each kind and its top symbols, so a
difference in speed can be read as a difference in work. Needs perf (Debian's linux-perf), build/bin/sipp
and the peer build (deps/build-source.sh peer). Loopback only.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import speculative as spec  # noqa: E402  (the pair, the servers and the streams of bench/speculative.py)

sys.path.insert(0, spec.REPO)
from tests.support.ports import free_port  # noqa: E402
from tests.support.wait import stop_process  # noqa: E402

KINDS = (
    ("matmul", ("vec_dot", "gemv", "gemm", "mul_mat", "repack")),
    ("attention", ("flash_attn", "soft_max", "softmax_f32", "ggml_vec_soft_max")),
    ("sampling", ("sampler", "sample_", "argmax", "sort", "heap", "partial_sort", "top_k", "softmax")),
    ("waiting", ("barrier", "sched_yield", "futex", "pthread_cond", "ggml_graph_compute_thread",
                 "ggml_graph_compute_secondary_thread", "spin")),
)
TOP = 12


def kind_of(dso, sym):
    if dso.startswith("libgomp"):  # the peer's threads spin in OpenMP's barrier (its symbols are stripped)
        return "waiting"
    for kind, keys in KINDS:
        if any(k in sym for k in keys):
            return kind
    return "kernel" if dso.startswith("[kernel") else "other"


def profile(pid, seconds_fn, out, freq):
    """perf record on pid while seconds_fn runs; returns seconds_fn's result."""
    rec = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", str(freq), "-g", "-p", str(pid), "-o", out],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)  # perf attaches
    try:
        return seconds_fn()
    finally:
        rec.send_signal(2)
        rec.wait(60)


def shares(data):
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso,sym", "-g", "none",
                          "--percent-limit", "0.05"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in rep.splitlines():
        parts = line.split()
        if len(parts) < 4 or not parts[0].endswith("%") or line.lstrip().startswith("#"):
            continue
        pct = float(parts[0].rstrip("%"))
        dso = parts[1]
        sym = " ".join(parts[3:]) if parts[2] in ("[.]", "[k]") else " ".join(parts[2:])
        rows.append((pct, dso, sym))
    kinds = {}
    for pct, dso, sym in rows:
        k = kind_of(dso, sym)
        kinds[k] = kinds.get(k, 0.0) + pct
    return kinds, rows[:TOP]


def run_streams(port, model, prompt, tokens, n):
    rates = [spec.stream(port, model, prompt, tokens)[0] for _ in range(n)]
    return sum(rates) / len(rates)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--perturb", default="0")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--streams", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--freq", type=int, default=499)
    a = ap.parse_args()
    draft = spec.synth("bench-1b-layers2-q4_0.gguf", "--layers", spec.DRAFT_LAYERS)
    target = spec.synth(f"bench-1b-active2-perturb{a.perturb}-q4_0.gguf", "--active-layers", spec.DRAFT_LAYERS,
                        "--perturb", a.perturb)
    peer = spec.peer_bin()
    tmp = tempfile.mkdtemp(prefix="sipp-spec-profile-")
    cfg = os.path.join(tmp, "spec.toml")
    with open(cfg, "w") as f:
        f.write(f'[[targets]]\nname = "draft"\ntype = "local"\nmodel = "{target}"\nthreads = {a.threads}\n'
                f'parallel = 1\nctx_size = {spec.CTX}\ndraft_model = "{draft}"\ndraft_max = {spec.DRAFT_MAX}\n'
                f'draft_cutoff = "off"\n')
    results = {}
    for name in ("sipp", "llama-server"):
        port = free_port()
        if name == "sipp":
            proc = subprocess.Popen([spec.SIPP, "serve", "--config", cfg, "--port", str(port)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ready, model = "/ready", "draft"
        else:
            proc = spec.llama_server(peer, target, port, a.threads, "--model-draft", draft, "--spec-type",
                                     "draft-simple", "--spec-draft-n-max", str(spec.DRAFT_MAX))
            ready, model = "/health", "target"
        try:
            spec.wait_ready(port, ready, proc)
            prompt = spec.completing_prompts(port, model, a.tokens, 1)[0]
            spec.stream(port, model, prompt, 8)  # warm
            data = os.path.join(tmp, f"{name}.perf")
            rate = profile(proc.pid, lambda: run_streams(port, model, prompt, a.tokens, a.streams), data, a.freq)
            if name == "sipp":
                acc = spec.sipp_acceptance(port, model, prompt, a.tokens)
            else:
                acc = spec.peer_acceptance(port, prompt, a.tokens)
            acc = f"{acc:.0%}" if acc is not None else "?"
            results[name] = (rate, acc, *shares(data))
        finally:
            stop_process(proc)
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2; grep -q amx_tile "
                          "/proc/cpuinfo && echo AMX || echo 'no AMX'"], capture_output=True, text=True).stdout.split("\n")
    print(f"# bench/spec_profile.py, {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}, {cpu[0].strip()} "
          f"({cpu[1]}), {a.threads} threads, perturb {a.perturb}, {a.streams} x {a.tokens} tokens, load "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| server | tokens/s | acceptance | " + " | ".join(k for k, _ in KINDS) + " | kernel | other |")
    print("|---|---|---|" + "---|" * (len(KINDS) + 2))
    for name, (rate, acc, kinds, _) in results.items():
        cells = [f"{kinds.get(k, 0.0):.1f}%" for k, _ in KINDS] + [f"{kinds.get('kernel', 0.0):.1f}%",
                                                                   f"{kinds.get('other', 0.0):.1f}%"]
        print(f"| {name} | {rate:.2f} | {acc} | " + " | ".join(cells) + " |")
    for name, (_, _, _, top) in results.items():
        print(f"\n{name}, top symbols:\n")
        for pct, dso, sym in top:
            print(f"    {pct:5.1f}%  {os.path.basename(dso)}  {sym[:100]}")


if __name__ == "__main__":
    main()
