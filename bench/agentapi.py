#!/usr/bin/env python3
"""bench/agentapi.py: what the translation layers cost. Streams the same chat, 64 tokens at
temperature 0, through /v1/chat/completions, /v1/responses, /v1/messages and /api/chat of one
`sipp serve`, in paired rounds, and prints each route's throughput as a ratio to chat completions.

    bench/agentapi.py [--model PATH] [--rounds N] [--tokens T] [--threads N] [--sipp build/bin/sipp]

Without --model it writes (once) the 1B-shaped synthetic model that bench/run.sh uses. Each round
sends one request per route, in an order that rotates from round to round, so drift on a shared
machine hits every route alike; the result per route is the median over rounds of its throughput
divided by chat completions' in the same round. Throughput is generated tokens over the request's
wall time (send to the last byte), read as a client reads the stream (SSE or NDJSON). Beside it, the
server's CPU time per request (/proc/PID/stat): every route decodes the same tokens, so the CPU ratio
isolates what a route's translation costs, and it holds up on a loaded machine where wall time does
not. All four
requests render the same prompt (one user message, no system) with the same sampling (greedy, no
penalties), so they generate the same tokens; a request that generates fewer than --tokens counts as
failed. Loopback only, standard library only.
"""
import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT = "Write a long story about a lighthouse keeper and the sea."
TIMEOUT_S = 600
START_TIMEOUT_S = 120
MODEL_SHAPE = ["--n-embd", "2048", "--n-layer", "16", "--n-head", "32", "--n-head-kv", "8", "--n-ff", "8192",
               "--type", "q4_0", "--seed", "1"]


def bodies(model, n):
    user = [{"role": "user", "content": PROMPT}]
    return {
        "/v1/chat/completions": {"model": model, "messages": user, "max_tokens": n, "temperature": 0, "stream": True,
                                 "stream_options": {"include_usage": True}},
        "/v1/responses": {"model": model, "input": PROMPT, "max_output_tokens": n, "temperature": 0, "stream": True,
                          "store": False},
        "/v1/messages": {"model": model, "messages": user, "max_tokens": n, "temperature": 0, "stream": True},
        # Ollama's defaults (top_k 40, top_p 0.9, repeat_penalty 1.1) set to chat's, for the same tokens.
        "/api/chat": {"model": model, "messages": user, "stream": True,
                      "options": {"num_predict": n, "temperature": 0, "top_k": 0, "top_p": 1, "repeat_penalty": 1}},
    }


def generated(path, events):
    """Generated tokens as the route's last event reports them."""
    if path == "/v1/chat/completions":
        return next(e["usage"]["completion_tokens"] for e in reversed(events) if e.get("usage"))
    if path == "/v1/responses":
        return events[-1]["response"]["usage"]["output_tokens"]
    if path == "/v1/messages":
        return next(e["usage"]["output_tokens"] for e in reversed(events) if e.get("type") == "message_delta")
    return events[-1]["eval_count"]


def one(host, port, path, body):
    """(seconds, generated tokens) of one streamed request."""
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        t0 = time.monotonic()
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"{path}: HTTP {resp.status}: {resp.read()[:300]!r}")
        events = []
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith("data:"):
                line = line[5:].strip()
            elif path != "/api/chat" or not line:
                continue
            if line == "[DONE]":
                continue
            events.append(json.loads(line))
        seconds = time.monotonic() - t0
    finally:
        conn.close()
    return seconds, generated(path, events)


def cpu_seconds(pid):
    """The server's user + system CPU time so far (/proc/PID/stat, in clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(sipp, model, threads):
    proc = subprocess.Popen([sipp, "serve", model, "--port", "0", "--threads", str(threads), "--parallel", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"listening on http://([^\s:]+):(\d+)", line)
        if m:
            host, port = m.group(1), int(m.group(2))
            while time.monotonic() < deadline:
                c = http.client.HTTPConnection(host, port, timeout=5)
                try:
                    c.request("GET", "/ready")
                    if c.getresponse().status == 200:
                        # Drain the log from here on, so the server never blocks writing it.
                        threading.Thread(target=proc.stderr.read, daemon=True).start()
                        return proc, host, port
                except OSError:
                    pass
                finally:
                    c.close()
                time.sleep(0.2)
        if proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit("bench: sipp serve did not become ready")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sipp", default=os.path.join(ROOT, "build", "bin", "sipp"))
    a = ap.parse_args()
    model = a.model
    if not model:
        cache = os.environ.get("SIPP_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                                 os.path.expanduser("~/.cache"), "sipp")
        model = os.path.join(cache, "models", "bench-1b-q4_0.gguf")
        if not os.path.isfile(model):
            os.makedirs(os.path.dirname(model), exist_ok=True)
            subprocess.run([os.path.join(ROOT, "build", "bin", "sipp-synth"), "--out", model, "--vocab",
                            os.path.join(ROOT, "build", "llama", "vocab", "ggml-vocab-llama-bpe.gguf"), *MODEL_SHAPE],
                           check=True, stdout=subprocess.DEVNULL)
    name = os.path.basename(model)[:-len(".gguf")] if model.endswith(".gguf") else os.path.basename(model)
    proc, host, port = serve(a.sipp, model, a.threads)
    try:
        reqs = bodies(name, a.tokens)
        paths = list(reqs)
        for p in paths:  # warm-up: the prompt's KV and every code path once, uncounted
            one(host, port, p, reqs[p])
        rates = {p: [] for p in paths}
        cpu = {p: [] for p in paths}
        failed = {p: 0 for p in paths}
        for r in range(a.rounds):
            order = paths[r % len(paths):] + paths[:r % len(paths)]
            for p in order:
                c0 = cpu_seconds(proc.pid)
                secs, toks = one(host, port, p, reqs[p])
                cpu[p].append(cpu_seconds(proc.pid) - c0)
                if toks < a.tokens:
                    failed[p] += 1
                rates[p].append(toks / secs)
            print(f"bench: round {r + 1}/{a.rounds}: " + ", ".join(f"{p} {rates[p][-1]:.2f}" for p in paths),
                  file=sys.stderr, flush=True)
        base = rates["/v1/chat/completions"]
        result = {"model": model, "rounds": a.rounds, "tokens": a.tokens, "threads": a.threads, "routes": {}}
        for p in paths:
            ratios = [x / y for x, y in zip(rates[p], base)]
            result["routes"][p] = {"tokens_per_s_median": round(statistics.median(rates[p]), 2),
                                   "ratio_to_chat_median": round(statistics.median(ratios), 3),
                                   "ratios": [round(x, 3) for x in ratios], "failed": failed[p],
                                   # the server's CPU seconds per request: the same decode on every
                                   # route, so a difference is what the route itself costs, and CPU
                                   # time is far less at the mercy of other load than wall time
                                   # (summed over the rounds: /proc counts in 10 ms ticks)
                                   "cpu_s_total": round(sum(cpu[p]), 2),
                                   "cpu_ratio_to_chat": round(sum(cpu["/v1/chat/completions"]) / sum(cpu[p]), 3)}
        print(json.dumps(result, indent=1))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    sys.exit(main())
