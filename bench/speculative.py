#!/usr/bin/env python3
"""bench/speculative.py: speculative decoding's throughput against its acceptance rate, sipp beside
llama-server on the same draft pair, in one run.

    bench/speculative.py [--perturb 0,0.5,2] [--rounds 2] [--tokens 64] [--threads 2]

The pair (sipp-synth, cached under ~/.cache/sipp/models): a 1B-shaped target (n_embd 2048, 16 layers,
32 heads, 8 KV heads, n_ff 8192, Q4_0) whose layers past the first two add only --perturb S times
noise, and the 2-layer draft that is exactly its first two layers. S = 0 gives ~100% greedy
acceptance, a larger S less. For each S one `sipp serve` runs three targets (plain, draft: the
pair, ngram: prompt lookup) and one llama-server runs the same target with --model-draft and the
same draft sizes; each round sends, one after another, the same greedy streaming request of
--tokens tokens to every configuration (sipp plain, sipp draft, llama-server draft, and sipp
plain / ngram on a repetitive prompt), then four concurrent streams to sipp plain and sipp draft.
Decode tokens/s of one stream is (tokens - 1) / (last token time - first token time) as the client
sees it; of four streams, all their tokens over the wall time. The ratios are medians over rounds
of per-round ratios, so the drift of a shared machine cancels within a round.

Needs build/bin/sipp and the llama.cpp peer build (deps/build-source.sh peer, cached). Loopback only.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SIPP = os.path.join(REPO, "build", "bin", "sipp")
SYNTH = os.path.join(REPO, "build", "bin", "sipp-synth")
VOCAB = os.path.join(REPO, "build", "llama", "vocab", "ggml-vocab-llama-bpe.gguf")
CACHE = os.environ.get("SIPP_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                         os.path.expanduser("~/.cache"), "sipp")
SHAPE = ["--n-embd", "2048", "--n-layer", "16", "--n-head", "32", "--n-head-kv", "8", "--n-ff", "8192", "--type",
         "q4_0", "--seed", "1"]
DRAFT_LAYERS = "2"
DRAFT_MAX = 8
STREAMS = 4
CTX = 4096
PROMPT = "Hello"
REPETITIVE = "one two three four five one two three four five one two three four five one two"
READY_TIMEOUT_S = 300
REQUEST_TIMEOUT_S = 600


def synth(name, *flags):
    path = os.path.join(CACHE, "models", name)
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        print(f"bench: writing {path}", file=sys.stderr)
        subprocess.run([SYNTH, "--out", path, "--vocab", VOCAB, *SHAPE, *flags], check=True, stdout=subprocess.DEVNULL)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, path, proc):
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode} before it was ready")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("server not ready in time")


def stream(port, model, prompt, tokens):
    """One greedy streaming completion: (decode tokens/s of first to last token, tokens, t0, t_end)."""
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
            "stream": True}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    t0 = time.monotonic()
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"{model}: HTTP {r.status} {r.read()[:200]!r}")
    times = []
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        for ch in ev.get("choices", []):
            if ch.get("text"):
                times.append(time.monotonic())
    t_end = time.monotonic()
    c.close()
    # Text chunks, not tokens: a chunk may carry several tokens (a speculated run), so the rate is
    # the requested tokens over the span from the first chunk to the last.
    if len(times) < 2:
        raise RuntimeError(f"{model}: {len(times)} text chunks")
    return (tokens - 1) / (times[-1] - times[0]), t0, t_end


def concurrent_rate(port, model, tokens):
    prompts = [f"{PROMPT} ({i})" for i in range(STREAMS)]
    with concurrent.futures.ThreadPoolExecutor(STREAMS) as pool:
        res = list(pool.map(lambda p: stream(port, model, p, tokens), prompts))
    return STREAMS * tokens / (max(r[2] for r in res) - min(r[1] for r in res))


def sipp_acceptance(port, model, prompt, tokens):
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    u = json.loads(c.getresponse().read())["usage"]["sipp"]
    return u["accepted_tokens"] / u["draft_tokens"] if u["draft_tokens"] else 0.0


def peer_acceptance(port, prompt, tokens):
    body = {"prompt": prompt, "n_predict": tokens, "temperature": 0, "ignore_eos": True}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    c.request("POST", "/completion", body=json.dumps(body), headers={"Content-Type": "application/json"})
    t = json.loads(c.getresponse().read()).get("timings", {})
    return t["draft_n_accepted"] / t["draft_n"] if t.get("draft_n") else None


def peer_bin():
    out = subprocess.run(["bash", "deps/build-source.sh", "peer"], cwd=REPO, capture_output=True, text=True, check=True,
                         env=dict(os.environ, SIPP_PEER_TARGETS="llama-server"))
    return os.path.join(out.stdout.strip().splitlines()[-1], "bin")


def median_ratio(xs, ys):
    return statistics.median(y / x for x, y in zip(xs, ys))


def bench_pair(args, perturb, draft, peer, tmp):
    target = synth(f"bench-1b-active2-perturb{perturb}-q4_0.gguf", "--active-layers", DRAFT_LAYERS, "--perturb",
                   str(perturb))
    cfg = os.path.join(tmp, f"spec-{perturb}.toml")
    common = f'model = "{target}"\nthreads = {args.threads}\nparallel = {STREAMS}\nctx_size = {CTX}\n'
    with open(cfg, "w") as f:
        f.write(f'[[targets]]\nname = "plain"\ntype = "local"\n{common}\n'
                f'[[targets]]\nname = "draft"\ntype = "local"\n{common}draft_model = "{draft}"\n'
                f'draft_max = {DRAFT_MAX}\n\n'
                f'[[targets]]\nname = "ngram"\ntype = "local"\n{common}speculative = "ngram"\n')
    sp, pp = free_port(), free_port()
    sipp = subprocess.Popen([SIPP, "serve", "--config", cfg, "--port", str(sp)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    env = dict(os.environ, LD_LIBRARY_PATH=peer)
    srv = subprocess.Popen([os.path.join(peer, "llama-server"), "-m", target, "--model-draft", draft, "-t",
                            str(args.threads), "-c", str(CTX), "-np", str(STREAMS), "--spec-draft-n-max",
                            str(DRAFT_MAX), "--port", str(pp), "--host", "127.0.0.1"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(sp, "/ready", sipp)
        wait_ready(pp, "/health", srv)
        stream(sp, "plain", PROMPT, 8)  # warm-up
        stream(sp, "draft", PROMPT, 8)
        stream(pp, "target", PROMPT, 8)
        r = {k: [] for k in ("plain", "draft", "peer", "rep_plain", "ngram", "plain4", "draft4")}
        for _ in range(args.rounds):
            r["plain"].append(stream(sp, "plain", PROMPT, args.tokens)[0])
            r["draft"].append(stream(sp, "draft", PROMPT, args.tokens)[0])
            r["peer"].append(stream(pp, "target", PROMPT, args.tokens)[0])
            r["rep_plain"].append(stream(sp, "plain", REPETITIVE, args.tokens)[0])
            r["ngram"].append(stream(sp, "ngram", REPETITIVE, args.tokens)[0])
            r["plain4"].append(concurrent_rate(sp, "plain", args.tokens))
            r["draft4"].append(concurrent_rate(sp, "draft", args.tokens))
        acc = sipp_acceptance(sp, "draft", PROMPT, args.tokens)
        acc_ngram = sipp_acceptance(sp, "ngram", REPETITIVE, args.tokens)
        acc_peer = peer_acceptance(pp, PROMPT, args.tokens)
    finally:
        for p in (sipp, srv):
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    return r, acc, acc_ngram, acc_peer


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--perturb", default="0,0.5,2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    draft = synth("bench-1b-layers2-q4_0.gguf", "--layers", DRAFT_LAYERS)
    peer = peer_bin()
    print(f"# bench/speculative.py, {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}, 1B-shaped target "
          f"(16 layers, 2 active) + 2-layer draft, Q4_0, threads {args.threads}, {args.rounds} rounds, "
          f"{args.tokens} tokens, greedy, draft_max {DRAFT_MAX}, load average {os.getloadavg()[0]:.1f}")
    print("| S | acceptance sipp / llama-server | sipp plain tok/s | sipp draft tok/s | llama-server draft tok/s | "
          "draft / plain | sipp draft / llama-server draft | 4 streams: draft / plain | ngram acceptance | "
          "ngram / plain (repetitive prompt) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="sipp-bench-spec-") as tmp:
        for s in args.perturb.split(","):
            r, acc, acc_ngram, acc_peer = bench_pair(args, s, draft, peer, tmp)
            peer_acc = f"{acc_peer:.0%}" if acc_peer is not None else "?"
            print(f"| {s} | {acc:.0%} / {peer_acc} | {statistics.mean(r['plain']):.2f} | "
                  f"{statistics.mean(r['draft']):.2f} | {statistics.mean(r['peer']):.2f} | "
                  f"{median_ratio(r['plain'], r['draft']):.2f} | {median_ratio(r['peer'], r['draft']):.2f} | "
                  f"{median_ratio(r['plain4'], r['draft4']):.2f} | {acc_ngram:.0%} | "
                  f"{median_ratio(r['rep_plain'], r['ngram']):.2f} |", flush=True)


if __name__ == "__main__":
    main()
