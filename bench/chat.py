#!/usr/bin/env python3
"""bench/chat.py: grammar-constrained decoding, sipp serve beside llama-server --jinja, and the cost
of a chat template's apply + parse at 1 and 32 tools.

    python3 bench/chat.py [--rounds N] [--threads T] [--max-tokens N]

Both servers load the 1B-shaped synthetic model of bench/run.sh (it carries a ChatML template) with
the same threads, one slot, flash attention off, and answer the same chat request with a
response_format json_schema (an object with a free string, so the grammar works on every token),
greedy. Decode speed is each server's own figure (sipp: usage.sipp.decode_tokens_per_s;
llama-server: timings.predicted_per_second). Rounds alternate the two servers; the ratio reported
is the median of the per-round ratios. Prints a Markdown report on stdout.

The servers are started here and stopped by their pid; nothing else is touched.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.support.ports import free_port  # noqa: E402
from tests.support.wait import stop_process  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CACHE = os.environ.get("SIPP_CACHE_DIR", os.path.expanduser("~/.cache/sipp"))
MODEL = os.path.join(CACHE, "models", "bench-1b-q4_0.gguf")
SIPP = os.path.join(ROOT, "build", "bin", "sipp")
CHAT_COST = os.path.join(ROOT, "build", "tests", "chat_cost")
TEMPLATES = os.path.join(ROOT, "build", "llama", "source", "models", "templates")
READY_TIMEOUT_S = 300
REQUEST_TIMEOUT_S = 600
WARMUP_TOKENS = 4
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def post(port, path, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path} answered {resp.status}: {data[:300]!r}")
        return json.loads(data)
    finally:
        conn.close()


def wait_ready(port, path, proc):
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited before it was ready")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the server did not become ready")


def request(max_tokens):
    return {"model": "bench", "messages": [{"role": "user", "content": "Answer in JSON."}], "temperature": 0,
            "max_tokens": max_tokens, "response_format": {"type": "json_schema", "json_schema": {
                "name": "answer", "schema": SCHEMA}}}


def run_server(name, cmd, ready, env, max_tokens):
    log = open(os.path.join(ROOT, "build", "bench", f"chat-{name}.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_ready(cmd_port(cmd), ready, proc)
        post(cmd_port(cmd), "/v1/chat/completions", request(WARMUP_TOKENS))
        out = post(cmd_port(cmd), "/v1/chat/completions", request(max_tokens))
        content = out["choices"][0]["message"]["content"]
        if out["choices"][0]["finish_reason"] != "length":
            json.loads(content)  # a finished answer is schema-shaped JSON (or the grammar did not hold)
        elif not content.lstrip().startswith("{"):
            raise RuntimeError(f"{name}: the answer does not follow the schema: {content[:80]!r}")
        if name == "sipp":
            return out["usage"]["sipp"]["decode_tokens_per_s"], out["usage"]["completion_tokens"]
        return out["timings"]["predicted_per_second"], out["usage"]["completion_tokens"]
    finally:
        stop_process(proc)
        log.close()


def cmd_port(cmd):
    return int(cmd[cmd.index("--port") + 1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    a = ap.parse_args()
    peer = os.path.join(CACHE, "build-80fb11ac73e66d89eae2c6a91d8a77428fa733ed-peer", "bin")
    server = os.path.join(peer, "llama-server")
    for path, how in ((MODEL, "bench/run.sh writes it"), (server, "deps/build-source.sh peer builds it"),
                      (SIPP, "make all"), (CHAT_COST, "make test-bins")):
        if not os.path.exists(path):
            sys.exit(f"bench/chat.py: {path} is missing ({how})")
    os.makedirs(os.path.join(ROOT, "build", "bench"), exist_ok=True)
    sipp_tps, peer_tps, ratios = [], [], []
    for r in range(a.rounds):
        p = free_port()
        cfg = os.path.join(ROOT, "build", "bench", "chat.toml")
        with open(cfg, "w") as f:
            f.write(f'[server]\nlisten = "127.0.0.1:{p}"\n[[targets]]\nname = "bench"\nmodel = "{MODEL}"\n'
                    f"parallel = 1\nctx_size = 2048\nthreads = {a.threads}\n")
        s, s_n = run_server("sipp", [SIPP, "serve", "--config", cfg, "--port", str(p)], "/ready", None, a.max_tokens)
        p = free_port()
        env = dict(os.environ, LD_LIBRARY_PATH=peer)
        q, q_n = run_server("llama-server", [server, "-m", MODEL, "--host", "127.0.0.1", "--port", str(p), "-t",
                                             str(a.threads), "-np", "1", "-c", "2048", "-fa", "off", "--jinja",
                                             "--no-webui", "-a", "bench"], "/health", env, a.max_tokens)
        sipp_tps.append(s)
        peer_tps.append(q)
        ratios.append(s / q)
        print(f"round {r + 1}: sipp {s:.2f} tok/s ({s_n} tokens), llama-server {q:.2f} tok/s ({q_n} tokens)",
              file=sys.stderr)
    cost = subprocess.run([CHAT_COST, os.path.join(TEMPLATES, "Qwen-Qwen2.5-7B-Instruct.jinja"), "100"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    cost = [json.loads(line) for line in cost]
    print(f"| | json_schema decode tokens/s (mean of {a.rounds}) | sipp / llama-server (median of rounds) |")
    print("|---|---|---|")
    print(f"| llama-server --jinja | {statistics.mean(peer_tps):.2f} | |")
    print(f"| sipp serve | {statistics.mean(sipp_tps):.2f} | **{statistics.median(ratios):.3f}** |")
    print()
    print("| tools | template apply µs | answer parse µs | total µs |")
    print("|---|---|---|---|")
    for c in cost:
        print(f"| {c['tools']} | {c['apply_us']:.0f} | {c['parse_us']:.0f} | {c['total_us']:.0f} |")


if __name__ == "__main__":
    main()
