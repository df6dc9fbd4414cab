#!/usr/bin/env python3
"""bench/speculative.py: speculative decoding's throughput against its acceptance rate, sipp beside
llama-server on the same draft pair, in one run.

    bench/speculative.py [--perturb 0,0.5,2] [--rounds 2] [--tokens 64] [--threads 2]

The pair (sipp-synth, cached under ~/.cache/sipp/models): a 1B-shaped target (n_embd 2048, 16 layers,
32 heads, 8 KV heads, n_ff 8192, Q4_0) whose layers past the first two add only --perturb S times
noise, and the 2-layer draft that is exactly its first two layers. S = 0 gives the highest greedy
acceptance, a larger S less. For each S one `sipp serve` runs four targets (plain; draft: the
pair with the default draft_cutoff = "auto"; draft_off: the pair with draft_cutoff = "off", proposing
draft_max every step; ngram: prompt lookup), one llama-server runs the same target with --model-draft and the same
draft size (and --spec-type draft-simple: this llama.cpp loads a --model-draft without using it
unless a speculation type is named, which earlier runs of this script missed), and a second llama-server runs it plain; each round sends, one after another, the same
greedy streaming request of --tokens tokens to every configuration (sipp plain, sipp draft,
sipp draft_off, llama-server draft, llama-server plain, and sipp plain / ngram on a repetitive
prompt), then four concurrent streams to each of sipp plain, sipp draft, sipp draft_off,
llama-server draft and llama-server plain.

The prompts are the first "Hello (k)" that llama-server streams to the end (its output parser ends
some streams of a random-weight model with an error event). Tokens are counted by the server's
usage (a speculated run may arrive as one chunk), and an error event or a short stream fails the
run instead of counting as a fast stream. One stream's rate is its tokens over the time from the
request to its last token (the 4-token prompt's prefill included, the same for every server); four
streams', all their tokens over the wall time. The ratios are medians over rounds of per-round
ratios, so the drift of a shared machine cancels within a round.

Needs build/bin/sipp (or BENCH_SIPP=PATH, another build's) and the llama.cpp peer build (deps/build-source.sh peer, cached). Loopback only.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.support.cpu import amx_host  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# BENCH_SIPP: another build's sipp (an older commit's, for an old-against-new run of this script)
SIPP = os.environ.get("BENCH_SIPP") or os.path.join(REPO, "build", "bin", "sipp")
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
PROMPT_CANDIDATES = 64
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
    """One greedy streaming completion: (tokens/s from the request to its last token, t0, t_end).

    The token count is the server's own (stream_options.include_usage), so a chunk that carries
    several tokens (a speculated run) counts them all. An error event, an HTTP error or a stream
    shorter than `tokens` raises: a stream that stops early must not count as a fast one."""
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    t0 = time.monotonic()
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"{model}: HTTP {r.status} {r.read()[:200]!r}")
    t_last, usage = None, None
    for raw in r:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("error"):
            raise RuntimeError(f"{model}: error event: {json.dumps(ev['error'])[:200]}")
        if ev.get("usage"):
            usage = ev["usage"]
        if any(ch.get("text") for ch in ev.get("choices") or []):
            t_last = time.monotonic()
    t_end = time.monotonic()
    c.close()
    n = usage["completion_tokens"] if usage else 0
    if n < tokens or t_last is None:
        raise RuntimeError(f"{model}: short stream, {n} of {tokens} tokens")
    return n / (t_last - t0), t0, t_end


def completing_prompts(port, model, tokens, count):
    """The first `count` prompts "Hello (k)" that the server streams to the end. llama-server's output
    parser ends some streams of a random-weight model with an error event (HTTP 500 "does not match
    the expected Content-only format", even on /v1/completions); greedy text is the same on every
    server, so prompts llama-server completes serve both."""
    found = []
    for k in range(PROMPT_CANDIDATES):
        try:
            stream(port, model, f"{PROMPT} ({k})", tokens)
        except RuntimeError:
            continue
        found.append(f"{PROMPT} ({k})")
        if len(found) == count:
            return found
    raise RuntimeError(f"fewer than {count} of {PROMPT_CANDIDATES} prompts complete on llama-server")


def concurrent_rate(port, model, prompts, tokens):
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


def llama_server(peer, target, port, threads, *extra):
    no_repack = ["--no-repack"] if amx_host() else []
    return subprocess.Popen([os.path.join(peer, "llama-server"), "-m", target, "-t", str(threads), "-c", str(CTX), "-np",
                             str(STREAMS), "--port", str(port), "--host", "127.0.0.1", *no_repack, *extra],
                            env=dict(os.environ, LD_LIBRARY_PATH=peer), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def bench_pair(args, perturb, draft, peer, tmp):
    target = synth(f"bench-1b-active2-perturb{perturb}-q4_0.gguf", "--active-layers", DRAFT_LAYERS, "--perturb",
                   str(perturb))
    cfg = os.path.join(tmp, f"spec-{perturb}.toml")
    common = f'model = "{target}"\nthreads = {args.threads}\nparallel = {STREAMS}\nctx_size = {CTX}\n'
    with open(cfg, "w") as f:
        f.write(f'[[targets]]\nname = "plain"\ntype = "local"\n{common}\n'
                f'[[targets]]\nname = "draft"\ntype = "local"\n{common}draft_model = "{draft}"\n'
                f'draft_max = {DRAFT_MAX}\n\n'
                f'[[targets]]\nname = "draft_off"\ntype = "local"\n{common}draft_model = "{draft}"\n'
                f'draft_max = {DRAFT_MAX}\ndraft_cutoff = "off"\n\n'
                f'[[targets]]\nname = "ngram"\ntype = "local"\n{common}speculative = "ngram"\n')
    sp, pp, pq = free_port(), free_port(), free_port()
    sipp = subprocess.Popen([SIPP, "serve", "--config", cfg, "--port", str(sp)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    srv = llama_server(peer, target, pp, args.threads, "--model-draft", draft, "--spec-type", "draft-simple",
                       "--spec-draft-n-max", str(DRAFT_MAX))
    srv_plain = llama_server(peer, target, pq, args.threads)
    try:
        wait_ready(sp, "/ready", sipp)
        wait_ready(pp, "/health", srv)
        wait_ready(pq, "/health", srv_plain)
        prompts = completing_prompts(pq, "target", args.tokens, STREAMS)
        one = prompts[0]
        for port, model in ((sp, "plain"), (sp, "draft"), (sp, "draft_off"), (pp, "target"), (pq, "target")):
            stream(port, model, one, 8)
        r = {k: [] for k in ("plain", "draft", "draft_off", "peer", "peer_plain", "rep_plain", "ngram", "plain4",
                             "draft4", "draft_off4", "peer4", "peer_plain4")}
        for _ in range(args.rounds):
            r["plain"].append(stream(sp, "plain", one, args.tokens)[0])
            r["draft"].append(stream(sp, "draft", one, args.tokens)[0])
            r["draft_off"].append(stream(sp, "draft_off", one, args.tokens)[0])
            r["peer"].append(stream(pp, "target", one, args.tokens)[0])
            r["peer_plain"].append(stream(pq, "target", one, args.tokens)[0])
            r["rep_plain"].append(stream(sp, "plain", REPETITIVE, args.tokens)[0])
            r["ngram"].append(stream(sp, "ngram", REPETITIVE, args.tokens)[0])
            r["plain4"].append(concurrent_rate(sp, "plain", prompts, args.tokens))
            r["draft4"].append(concurrent_rate(sp, "draft", prompts, args.tokens))
            r["draft_off4"].append(concurrent_rate(sp, "draft_off", prompts, args.tokens))
            r["peer4"].append(concurrent_rate(pp, "target", prompts, args.tokens))
            r["peer_plain4"].append(concurrent_rate(pq, "target", prompts, args.tokens))
        acc = sipp_acceptance(sp, "draft_off", one, args.tokens)
        acc_ngram = sipp_acceptance(sp, "ngram", REPETITIVE, args.tokens)
        acc_peer = peer_acceptance(pp, one, args.tokens)
    finally:
        for p in (sipp, srv, srv_plain):
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
    print("| S | acceptance sipp / llama-server | sipp plain tok/s | sipp draft tok/s (cut-off auto / off) | "
          "llama-server plain / draft tok/s | sipp draft / plain (auto / off) | llama-server draft / its plain | "
          "sipp draft / llama-server draft (auto / off) | 4 streams: sipp draft / plain (auto / off) | "
          "4 streams: llama-server draft / its plain | 4 streams: sipp draft / llama-server draft (auto / off) | "
          "ngram acceptance | ngram / plain (repetitive prompt) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="sipp-bench-spec-") as tmp:
        for s in args.perturb.split(","):
            r, acc, acc_ngram, acc_peer = bench_pair(args, s, draft, peer, tmp)
            peer_acc = f"{acc_peer:.0%}" if acc_peer is not None else "?"
            mean = lambda k: statistics.mean(r[k])  # noqa: E731
            both = lambda x, a, b: f"{median_ratio(r[x], r[a]):.2f} / {median_ratio(r[x], r[b]):.2f}"  # noqa: E731
            print(f"| {s} | {acc:.0%} / {peer_acc} | {mean('plain'):.2f} | {mean('draft'):.2f} / "
                  f"{mean('draft_off'):.2f} | {mean('peer_plain'):.2f} / {mean('peer'):.2f} | "
                  f"{both('plain', 'draft', 'draft_off')} | {median_ratio(r['peer_plain'], r['peer']):.2f} | "
                  f"{both('peer', 'draft', 'draft_off')} | {both('plain4', 'draft4', 'draft_off4')} | "
                  f"{median_ratio(r['peer_plain4'], r['peer4']):.2f} | {both('peer4', 'draft4', 'draft_off4')} | "
                  f"{acc_ngram:.0%} | {median_ratio(r['rep_plain'], r['ngram']):.2f} |", flush=True)


if __name__ == "__main__":
    main()
