#!/usr/bin/env python3
"""bench/swap.py: time to first token of a request whose model is not loaded, sipp serve against
llama-server's router mode, on the same files.

    swap.py --sipp build/bin/sipp --llama-server PATH/llama-server --model FILE.gguf
            [--swaps N] [--threads T] [--ctx-size C] [--no-repack]

Two names for one GGUF file (hard links in a scratch directory beside it, so both servers see a
models directory of two models and the page cache holds the file once) and room for one loaded
model: `sipp serve --models-dir DIR --max-loaded-models 1` and `llama-server --models-dir DIR
--models-max 1`. Requests alternate between the two names, so each one unloads the other model and
loads its own: that is the warm swap (the weights are in the page cache, as they are for a model
unloaded recently). Each server first gets one request per name that is not counted. TTFT is from
sending a streaming POST /v1/completions (max_tokens 1, temperature 0) to its first text.

With --no-repack, sipp is measured a second time with `repack = false` on its targets (weights used
as the file has them, without llama.cpp's repacked CPU copies), in the same run.

A cold swap (page cache dropped) needs root and would drop the cache of everything else on the
machine; it is not measured here. Prints one JSON object: the TTFTs of each server and the ratio
of the medians (sipp / llama-server). Loopback only; the servers are stopped by their pids.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.support.ports import free_port  # noqa: E402

START_TIMEOUT_S = 120
REQUEST_TIMEOUT_S = 600
POLL_S = 0.1
NAMES = ("swap-a", "swap-b")
PROMPT = "The quick brown fox"


def wait_http(port, path, proc, log):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {open(log).read()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", path)
            r = conn.getresponse()
            r.read()
            conn.close()
            if r.status == 200:
                return
        except OSError:
            pass
        time.sleep(POLL_S)
    raise RuntimeError(f"server did not answer {path} within {START_TIMEOUT_S} s")


def ttft(port, model):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    body = {"model": model, "prompt": PROMPT, "max_tokens": 1, "temperature": 0, "stream": True}
    t0 = time.monotonic()
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"{model}: HTTP {resp.status}: {resp.read()[:300]!r}")
    first = None
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        obj = json.loads(data)
        if obj.get("error"):
            raise RuntimeError(f"{model}: {obj['error']}")
        if first is None and any("text" in c for c in obj.get("choices") or []):
            first = time.monotonic() - t0
    conn.close()
    if first is None:
        raise RuntimeError(f"{model}: no text in the stream")
    return first


def model_ids(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/v1/models")
    data = json.loads(conn.getresponse().read())
    conn.close()
    return [m["id"] for m in data["data"]]


def run_server(cmd, port, ready_path, swaps, log):
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_http(port, ready_path, proc, log)
        ids = model_ids(port)
        names = [next(i for i in ids if re.search(n, i)) for n in NAMES]
        for n in names:  # not counted: the first load reads the file, the second is a first swap
            ttft(port, n)
        return [ttft(port, names[k % 2]) for k in range(swaps)]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(60)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sipp", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--swaps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx-size", type=int, default=512)
    ap.add_argument("--no-repack", action="store_true", help="also measure sipp with repack = false")
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="sipp-swap-", dir=os.path.dirname(os.path.abspath(a.model)))
    try:
        for n in NAMES:
            os.link(a.model, os.path.join(scratch, f"{n}.gguf"))
        def config(name, extra):  # sipp's per-target flags live in a config
            path = os.path.join(scratch, name)
            with open(path, "w") as f:
                f.write("[server]\nmax_loaded_models = 1\n")
                for n in NAMES:
                    f.write(f'[[targets]]\nname = "{n}"\nmodel = "{scratch}/{n}.gguf"\nload = "on_demand"\n'
                            f"threads = {a.threads}\nctx_size = {a.ctx_size}\nparallel = 1\n{extra}")
            return path

        logs = os.path.join(scratch, "logs")
        os.makedirs(logs)
        sp = free_port()
        sipp = run_server([a.sipp, "serve", "--config", config("swap.toml", ""), "--port", str(sp)], sp, "/ready",
                          a.swaps, os.path.join(logs, "sipp.log"))
        no_repack = None
        if a.no_repack:
            sp = free_port()
            no_repack = run_server([a.sipp, "serve", "--config", config("swap-nr.toml", "repack = false\n"), "--port",
                                    str(sp)], sp, "/ready", a.swaps, os.path.join(logs, "sipp-nr.log"))
        lp = free_port()
        llama = run_server([a.llama_server, "--models-dir", scratch, "--models-max", "1", "--port", str(lp),
                            "--host", "127.0.0.1", "-t", str(a.threads), "-c", str(a.ctx_size), "-np", "1"], lp,
                           "/health", a.swaps, os.path.join(logs, "llama.log"))
    finally:
        shutil.rmtree(scratch, True)
    out = {
        "model": os.path.basename(a.model), "swaps": a.swaps, "threads": a.threads, "ctx_size": a.ctx_size,
        "sipp_ttft_s": [round(x, 3) for x in sipp], "llama_server_router_ttft_s": [round(x, 3) for x in llama],
        "sipp_median_s": round(statistics.median(sipp), 3),
        "llama_server_router_median_s": round(statistics.median(llama), 3),
        "ratio_sipp_over_router": round(statistics.median(sipp) / statistics.median(llama), 3),
    }
    if no_repack:
        out["sipp_no_repack_ttft_s"] = [round(x, 3) for x in no_repack]
        out["sipp_no_repack_median_s"] = round(statistics.median(no_repack), 3)
        out["ratio_sipp_no_repack_over_router"] = round(statistics.median(no_repack) / statistics.median(llama), 3)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
