#!/usr/bin/env python3
"""bench/load.py: a streaming load generator for OpenAI-compatible servers (sipp serve, llama-server).

    load.py URL MODEL --clients N --requests R --max-tokens T [--prompt TEXT] [--suffixes 0,3,7]
            [--warmup-tokens W]

Each of N client threads sends R streaming POST /v1/completions requests one after another
(temperature 0, ignore_eos, stream_options.include_usage) and reads the SSE stream as a client
would. Every request has its own prompt, "TEXT (S)" with the next suffix S of --suffixes (the
first one goes to an uncounted warm-up request, of --warmup-tokens tokens when given), so each
request shares the common prefix with the others but has a few new tokens to evaluate, as a chat
turn does.

A request counts as an error, not as tokens, when the server answers with an HTTP error, sends an
error event in the stream, or ends the stream with fewer than --max-tokens tokens (ignore_eos means
every request must run to its limit). Prints one JSON object: aggregate generated tokens/s (all
tokens over the wall time from the first request to the last end), TTFT p50/p99 (request sent to
first text), and counts. Standard library only; loopback only.
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse

TIMEOUT_S = 600


def one_request(host, port, body):
    """Returns (ttft seconds, generated tokens); raises on any failure, a short stream included."""
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        t0 = time.monotonic()
        conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
        ttft, chunks, usage = None, 0, None
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            obj = json.loads(data)
            if obj.get("error"):
                raise RuntimeError(f"error event after {chunks} chunks: {json.dumps(obj['error'])[:300]}")
            if obj.get("usage"):
                usage = obj["usage"]
            for c in obj.get("choices") or []:
                if c.get("text"):
                    chunks += 1
                    if ttft is None:
                        ttft = time.monotonic() - t0
    finally:
        conn.close()
    tokens = usage["completion_tokens"] if usage else chunks
    if tokens < body["max_tokens"]:
        raise RuntimeError(f"short stream: {tokens} of {body['max_tokens']} tokens")
    return ttft if ttft is not None else time.monotonic() - t0, tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("model")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt", default="The history of the lighthouse on the northern cape began when")
    ap.add_argument("--warmup-tokens", type=int, help="max_tokens of the warm-up request (default: --max-tokens)")
    ap.add_argument("--suffixes", default=",".join(str(i) for i in range(64)),
                    help="comma-separated; request k's prompt is 'PROMPT (suffix k)', k = 0 is the warm-up")
    a = ap.parse_args()
    suffixes = a.suffixes.split(",")

    def prompt(k):
        return f"{a.prompt} ({suffixes[k % len(suffixes)]})"

    u = urllib.parse.urlparse(a.url)
    body = {"model": a.model, "prompt": a.prompt, "max_tokens": a.max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    ttfts, tokens, errors = [], [], []
    lock = threading.Lock()

    def client(i):
        for j in range(a.requests):
            try:
                t, n = one_request(u.hostname, u.port, dict(body, prompt=prompt(1 + i * a.requests + j)))
                with lock:
                    ttfts.append(t)
                    tokens.append(n)
            except Exception as e:  # noqa: BLE001 - reported in the result
                with lock:
                    errors.append(str(e))

    # One warm-up request, not counted.
    one_request(u.hostname, u.port, dict(body, prompt=prompt(0), max_tokens=a.warmup_tokens or a.max_tokens))
    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    ttfts.sort()
    print(json.dumps({
        "clients": a.clients, "requests": len(tokens), "n_errors": len(errors), "errors": errors[:3], "generated_tokens": sum(tokens),
        "aggregate_tokens_per_s": sum(tokens) / wall if wall > 0 else 0,
        "ttft_ms_p50": statistics.median(ttfts) * 1e3 if ttfts else None,
        "ttft_ms_p99": ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))] * 1e3 if ttfts else None,
    }))


if __name__ == "__main__":
    main()
