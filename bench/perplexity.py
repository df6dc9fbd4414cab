#!/usr/bin/env python3
"""bench/perplexity.py: sipp perplexity beside llama.cpp's own llama-perplexity, built from the same
pinned source, on one model, text file, context, batch and thread count.

    python3 bench/perplexity.py [--model M] [--file F] [--ctx-size 512] [--batch-size 2048]
                                [--threads 2] [--chunks N] [--rounds 2] [--flash-attn off]
                                [--peer-bin FILE]

Reports both final estimates and their ratio (the target: within 0.1%, issue 31), and the ratio of
the speeds: each side's tokens evaluated per second, chunks x ctx over the time from the first
decode to the final estimate, scoring included and loading and tokenizing not (sipp: its --json
tokens_per_second; llama-perplexity: the same span between the timestamps of its log lines
"calculating perplexity over" and "Final estimate", with --log-timestamps). Rounds alternate sipp and the
peer so that drift on a shared machine hits both alike; speeds are the median over rounds.

The peer binary is looked for in the peer build of deps/build-source.sh
(~/.cache/sipp/build-COMMIT-peer/bin/llama-perplexity). This script never builds it (an hour of
both cores on the small machine); without it only sipp is measured, and the report says how to build
it: SIPP_PEER_TARGETS=llama-perplexity bash deps/build-source.sh peer. --peer-bin names another
llama-perplexity built from the pinned source, run with its own directory first on LD_LIBRARY_PATH
(ggml loads the CPU modules it finds beside the binary): e.g. tools/perplexity compiled against the artifact's own libllama-common,
libllama and CPU modules, which makes the comparison one of the two programs alone (docs/verify.md
records such a run).

Defaults: the 1B-shaped synthetic model of bench/run.sh and llama.cpp's README.md from the pinned
source as the text (any text of at least 2 x ctx-size tokens will do; wikitext-2's wiki.test.raw is
llama.cpp's usual one). Prints a Markdown report on stdout and the raw figures as JSON on stderr.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CACHE = os.environ.get("SIPP_CACHE_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sipp")
SIPP = os.path.join(ROOT, "build", "bin", "sipp")
MODEL = os.path.join(CACHE, "models", "bench-1b-q4_0.gguf")
TEXT = os.path.join(ROOT, "build", "llama", "source", "README.md")
RUN_TIMEOUT_S = 3600
TARGET_RATIO = 0.001  # issue 31: equal within 0.1%
FINAL = re.compile(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)")
CHUNKS = re.compile(r"calculating perplexity over (\d+) chunks")
STAMP = r"(\d+)\.(\d+)\.(\d+)\.(\d+) I "  # common/log.cpp's minutes.seconds.ms.us
PASS_START = re.compile(STAMP + r"perplexity: calculating perplexity over")
PASS_END = re.compile(STAMP + r"Final estimate")


def llama_commit():
    with open(os.path.join(ROOT, "deps", "llama.lock")) as f:
        for line in f:
            if line.startswith("LLAMA_COMMIT="):
                return line.split("=", 1)[1].strip()
    raise SystemExit("bench: deps/llama.lock names no LLAMA_COMMIT")


def peer_dir():
    return os.path.join(CACHE, f"build-{llama_commit()}-peer", "bin")


def run_sipp(a):
    cmd = [SIPP, "perplexity", a.model, a.file, "--ctx-size", str(a.ctx_size), "--batch-size", str(a.batch_size),
           "--threads", str(a.threads), "--backend", "cpu", "--flash-attn", a.flash_attn, "--json"]
    if a.chunks:
        cmd += ["--chunks", str(a.chunks)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if p.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    r = json.loads(p.stdout)
    return {"ppl": r["ppl"], "error": r["ppl_error"], "chunks": r["n_chunks"], "tps": r["tokens_per_second"]}


def run_peer(a, peer_bin):
    peer = os.path.dirname(os.path.abspath(peer_bin))
    cmd = [peer_bin, "-m", a.model, "-f", a.file, "-c", str(a.ctx_size), "-b",
           str(a.batch_size), "-t", str(a.threads), "-fa", a.flash_attn, "--log-timestamps"]
    if a.chunks:
        cmd += ["--chunks", str(a.chunks)]
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                       env=dict(os.environ, LD_LIBRARY_PATH=":".join(filter(None, [peer, os.environ.get("LD_LIBRARY_PATH")]))))
    wall = time.monotonic() - start
    out = p.stdout + p.stderr
    final, chunks = FINAL.search(out), CHUNKS.search(out)
    if p.returncode != 0 or not final or not chunks:
        raise SystemExit(f"bench: {' '.join(cmd)} exited {p.returncode} without a final estimate:\n{out[-2000:]}")
    n_chunks = int(chunks.group(1))
    begin, end = PASS_START.search(out), PASS_END.search(out)
    seconds = stamp_s(end) - stamp_s(begin) if begin and end else None
    return {"ppl": float(final.group(1)), "error": float(final.group(2)), "chunks": n_chunks,
            "tps": n_chunks * a.ctx_size / seconds if seconds else None, "wall_s": wall}


def stamp_s(m):
    minutes, seconds, ms, us = (int(g) for g in m.groups())
    return minutes * 60 + seconds + ms / 1e3 + us / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--file", default=TEXT)
    ap.add_argument("--ctx-size", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--flash-attn", default="off", choices=["on", "off", "auto"])
    ap.add_argument("--peer-bin", default=os.path.join(peer_dir(), "llama-perplexity"))
    a = ap.parse_args()
    for path, how in ((a.model, "bench/run.sh writes it, or give --model"), (a.file, "give --file"),
                      (SIPP, "make builds it")):
        if not os.path.exists(path):
            raise SystemExit(f"bench: {path} is missing ({how})")
    peer = a.peer_bin
    has_peer = os.path.exists(peer)
    sipp_runs, peer_runs = [], []
    for _ in range(a.rounds):
        sipp_runs.append(run_sipp(a))
        if has_peer:
            peer_runs.append(run_peer(a, peer))

    s = sipp_runs[-1]
    print(f"# bench/perplexity.py: {os.path.basename(a.model)} on {os.path.basename(a.file)}, ctx {a.ctx_size}, "
          f"batch {a.batch_size}, threads {a.threads}, flash attention {a.flash_attn}, {a.rounds} rounds\n")
    print("| tool | PPL | +/- | chunks | tokens/s |")
    print("|---|---|---|---|---|")
    s_tps = statistics.median(r["tps"] for r in sipp_runs)
    print(f"| sipp perplexity | {s['ppl']:.4f} | {s['error']:.5f} | {s['chunks']} | {s_tps:.1f} |")
    report = {"sipp": sipp_runs, "peer": peer_runs, "peer_bin": peer}
    if has_peer:
        p = peer_runs[-1]
        p_tps = [r["tps"] for r in peer_runs if r["tps"]]
        p_med = statistics.median(p_tps) if p_tps else None
        print(f"| llama-perplexity | {p['ppl']:.4f} | {p['error']:.5f} | {p['chunks']} | "
              f"{f'{p_med:.1f}' if p_med else 'n/a'} |")
        ratio = s["ppl"] / p["ppl"]
        report.update(ppl_ratio=ratio, speed_ratio=s_tps / p_med if p_med else None)
        verdict = "within" if abs(ratio - 1) <= TARGET_RATIO else "OUTSIDE"
        print(f"\nPPL ratio sipp / llama-perplexity: {ratio:.6f} ({verdict} the 0.1% target)")
        if p_med:
            print(f"speed ratio sipp / llama-perplexity: {s_tps / p_med:.3f}")
    else:
        print(f"\nllama-perplexity is not built ({peer} is missing): only sipp was measured. Build it with\n"
              f"    SIPP_PEER_TARGETS=llama-perplexity bash deps/build-source.sh peer")
    print(json.dumps(report), file=sys.stderr)


if __name__ == "__main__":
    main()
