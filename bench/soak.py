#!/usr/bin/env python3
"""bench/soak.py: a soak of `sipp serve`: N streams for S seconds, RSS sampled, every failure counted.

    soak.py --seconds 300 --streams 4 [--max-tokens 32] [--model tiny.gguf] [--json]

Starts `sipp serve` on a tiny synthetic model (or --model) on loopback, runs --streams client
threads that each send streaming chat completions one after another (ignore_eos, so every request
runs to --max-tokens) and read them to [DONE], and samples the server's RSS (VmRSS) every second.
A request fails on an HTTP error, an error event, a missing [DONE] or a short stream.

RSS is judged after a warm-up (the first quarter: caches, the KV and the allocator's arenas settle):
the median of the last quarter's samples against the median of the second quarter's. Prints one JSON
object: requests, failures (with the first few reasons), RSS start / settled / end in MiB, the growth,
and "flat" (growth within --rss-growth-mib). Exit status 0 when there were no failures and RSS stayed
flat, 1 otherwise. `make test` runs the 60-second version (tests/integration/test_soak.py); the
5-minute one is for BENCHMARKS.md. Standard library only.

    soak.py --seconds 300 --streams 4 --media

With --media the target has an image projector (sipp-synth --projector llava) and every client mixes
media into its stream of requests (issue 44): one request in four carries a small PNG, and one in
four is a forged one, refused from its headers with a 400 (16 JPEGs claiming 8192 x 8192 each, or a
140-byte FLAC claiming 2^36 samples at 250 Hz, to a second target with an audio projector); anything else is a failure. RSS must stay flat as
before: the refusals decode nothing.

    soak.py --load-cycles 200 [--model tiny.gguf]

The load-cycle soak instead (issue 27 item 10): one on_demand target, loaded
(POST /v1/models/NAME/load), asked one chat completion and, once that request's use of it has
ended, unloaded (POST .../unload), again and again; after each unload the server's RSS is read once it has held still for a second (and the
anonymous part from smaps_rollup). Prints one JSON object: RSS idle, after the first cycle (and what
that first unload kept over idle), after the last and the largest after any, the growth over the second
half of the cycles (once the allocator has settled; the early steps as early_growth_mib), the peak (VmHWM), and "within" (growth at most 10%). Exit status 0 when within.
"""
import argparse
import base64
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, os.environ.get("SIPP_BUILD", "build"))
SIPP = os.path.join(BUILD, "bin", "sipp")
SYNTH = os.path.join(BUILD, "bin", "sipp-synth")
VOCAB = os.path.join(ROOT, "build", "llama", "vocab", "ggml-vocab-llama-bpe.gguf")
TINY = ["--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128", "--type", "q8_0",
        "--chat-template", "chatml", "--seed", "1"]
START_TIMEOUT_S = 120
REQUEST_TIMEOUT_S = 120
SAMPLE_EVERY_S = 1.0
DEFAULT_RSS_GROWTH_MIB = 16
MIB = 1024 * 1024
MAX_REASONS = 5
SETTLE_EVERY_S = 0.05  # load cycles: RSS is judged after an unload once it held still for 1 s
SETTLE_SAMPLES = 20
SETTLE_KIB = 256
SETTLE_MAX_S = 5
LEAK_STEP_KIB = 512  # load cycles: a leak of half a MiB per load and unload fails them
ONE_TIME_STEPS = 0.15  # load cycles: what arena steps may add over the first unload's level


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def start_server(model, streams, log, mmproj=None):
    """`sipp serve` with one slot per stream (and the projector, if given), once /ready says so;
    returns (process, port)."""
    args = [model, "--threads", "1", "--parallel", str(streams)]
    if mmproj:
        cfg = os.path.join(os.path.dirname(log.name), "soak.toml")
        with open(cfg, "w") as f:
            for name, proj, slots in ((model_name(model), mmproj[0], streams), (model_name(model) + EARS, mmproj[1], 1)):
                f.write(f'[[targets]]\nname = "{name}"\nmodel = "{model}"\nmmproj = "{proj}"\n'
                        f"threads = 1\nparallel = {slots}\nctx_size = 2048\n\n")
        args = ["--config", cfg]
    proc = subprocess.Popen([SIPP, "serve", *args, "--port", "0"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        port = wait_listening(proc, log)
    except RuntimeError:
        proc.kill()
        raise
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/ready")
            if c.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"sipp serve did not get ready; see {log.name}")


def one_stream(port, body):
    """One streaming request read to [DONE]; returns None or the reason it failed."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return f"HTTP {resp.status}: {resp.read()[:200]!r}"
        done, usage = False, None
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            obj = json.loads(data)
            if obj.get("error"):
                return f"error event: {json.dumps(obj['error'])[:200]}"
            usage = obj.get("usage") or usage
        if not done:
            return "the stream ended without [DONE]"
        if usage and usage.get("completion_tokens") != body["max_tokens"]:
            return f"short stream: {usage.get('completion_tokens')} of {body['max_tokens']} tokens"
        return None
    except (OSError, ValueError, http.client.HTTPException) as e:
        return f"{type(e).__name__}: {e}"
    finally:
        conn.close()


def model_name(model):
    return os.path.basename(model)[:-len(".gguf")]


def png_bytes(width, height, shade):
    rows = b"".join(b"\0" + bytes((x * 40 + y * 7 + shade) % 256 for x in range(width * 3)) for y in range(height))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


JPEG_8192 = (b"\xff\xd8\xff\xc0" + struct.pack(">HBHHB", 17, 8, 8192, 8192, 3) +
             b"\x01\x11\x00\x02\x11\x00\x03\x11\x00\xff\xd9")
EARS = "-ears"  # --media: the target with an audio projector, which the forged clip is sent to
FLAC_2P36 = (b"fLaC\x80\x00\x00\x22" + struct.pack(">HH", 4096, 4096) + b"\0" * 6 +
             ((250 << 44) | (15 << 36) | ((1 << 36) - 1)).to_bytes(8, "big") + b"\0" * 16 + b"\0" * 98)


def media_request(k, i, model, max_tokens):
    """The request of stream k's i-th turn with --media: (body, None) for one that must stream to the
    end, (body, words) for a forged one that must be a 400 naming words."""
    body = {"model": model_name(model), "stream": True, "max_tokens": max_tokens, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    if i % 4 == 1:
        url = "data:image/png;base64," + base64.b64encode(png_bytes(24, 24, k * 31 + i)).decode()
        parts = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "what is this?"}]
        return {**body, "messages": [{"role": "user", "content": parts}]}, None
    if i % 8 == 3:
        url = "data:image/jpeg;base64," + base64.b64encode(JPEG_8192).decode()
        parts = [{"type": "image_url", "image_url": {"url": url}}] * 16
        return {**body, "messages": [{"role": "user", "content": parts}]}, "media_max_decoded_mb"
    if i % 8 == 7:
        clip = {"data": base64.b64encode(FLAC_2P36).decode(), "format": "flac"}
        parts = [{"type": "input_audio", "input_audio": clip}]
        return {**body, "model": model_name(model) + EARS, "messages": [{"role": "user", "content": parts}]}, "250 Hz"
    return None, None


def one_refusal(port, body, words):
    """A forged request: None when it is a 400 naming words, else the reason it is not."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 400 or words.encode() not in data:
            return f"forged media: HTTP {resp.status}: {data[:200]!r}"
        return None
    except (OSError, http.client.HTTPException) as e:
        return f"forged media: {type(e).__name__}: {e}"
    finally:
        conn.close()


def soak(seconds, streams, max_tokens, model=None, rss_growth_mib=DEFAULT_RSS_GROWTH_MIB, media=False):
    """Runs the soak; returns the result dict."""
    tmp = tempfile.mkdtemp(prefix="sipp-soak-")
    if not model:
        model = os.path.join(tmp, "tiny.gguf")
        subprocess.run([SYNTH, "--out", model, "--vocab", VOCAB, *TINY], check=True, capture_output=True)
    mmproj = None
    if media:
        mmproj = [os.path.join(tmp, f"mmproj-{kind}.gguf") for kind in ("llava", "qwen2a")]
        for path, kind in zip(mmproj, ("llava", "qwen2a")):
            subprocess.run([SYNTH, "--out", path, "--projector", kind, "--n-embd", "64", "--seed", "1"], check=True,
                           capture_output=True)
    log = open(os.path.join(tmp, "serve.log"), "w+")
    proc, port = start_server(model, streams, log, mmproj)
    stop = threading.Event()
    lock = threading.Lock()
    counts = {"requests": 0, "failures": 0}
    reasons = []

    def client(k):
        i = 0
        while not stop.is_set():
            body, words = media_request(k, i, model, max_tokens) if media else (None, None)
            if body is None:
                body = {"model": model_name(model), "stream": True, "max_tokens": max_tokens,
                        "ignore_eos": True, "stream_options": {"include_usage": True},
                        "messages": [{"role": "user", "content": f"stream {k}, request {i}: tell me a story"}]}
            why = one_refusal(port, body, words) if words else one_stream(port, body)
            with lock:
                counts["requests"] += 1
                if why:
                    counts["failures"] += 1
                    if len(reasons) < MAX_REASONS:
                        reasons.append(why)
            i += 1

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(streams)]
    samples = []
    t0 = time.monotonic()
    for t in threads:
        t.start()
    try:
        while time.monotonic() - t0 < seconds and proc.poll() is None:
            samples.append(rss_bytes(proc.pid))
            time.sleep(SAMPLE_EVERY_S)
    finally:
        stop.set()
        for t in threads:
            t.join(REQUEST_TIMEOUT_S)
        alive = proc.poll() is None
        if alive:
            proc.send_signal(signal.SIGTERM)
            proc.wait(REQUEST_TIMEOUT_S)
        log.close()
    q = max(1, len(samples) // 4)
    settled = statistics.median(samples[q:2 * q]) if len(samples) >= 4 else samples[0]
    end = statistics.median(samples[-q:])
    growth = (end - settled) / MIB
    ok = counts["failures"] == 0 and alive and growth <= rss_growth_mib
    if ok:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed soak keeps its server log
    return {"seconds": seconds, "streams": streams, "max_tokens": max_tokens, "media": media,
            "requests": counts["requests"],
            "failures": counts["failures"], "reasons": reasons, "server_alive": alive,
            "server_exit": proc.returncode, "rss_start_mib": round(samples[0] / MIB, 1),
            "rss_settled_mib": round(settled / MIB, 1), "rss_end_mib": round(end / MIB, 1),
            "rss_max_mib": round(max(samples) / MIB, 1), "rss_growth_mib": round(growth, 1),
            "flat": growth <= rss_growth_mib, "log": None if ok else log.name}


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key}")


def anon_kib(pid):
    """Anonymous resident memory (smaps_rollup): what the allocator holds, not mapped model files."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1])
    return 0


def post(port, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("POST", path, body=json.dumps(body) if body is not None else "",
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"POST {path}: HTTP {resp.status}: {data[:200]!r}")
        return data
    finally:
        conn.close()


def load_cycles(cycles, model=None, shape=None, max_tokens=4, budget_mb=None, tolerance=0.10):
    """Loads a model, runs one request on it and unloads it, `cycles` times, and samples the server's
    RSS after each unload. Returns the result dict: RSS after the first cycle and after the last,
    the largest growth over the first cycle's level (a fraction), and the peak RSS (VmHWM)."""
    tmp = tempfile.mkdtemp(prefix="sipp-cycles-")
    if not model:
        model = os.path.join(tmp, "cycle.gguf")
        subprocess.run([SYNTH, "--out", model, "--vocab", VOCAB, *(shape or TINY)], check=True, capture_output=True)
    name = "cycle"
    cfg = os.path.join(tmp, "cycles.toml")
    with open(cfg, "w") as f:
        f.write((f"[server]\nmemory_budget_mb = {budget_mb}\n\n" if budget_mb else "")
                + f'[[targets]]\nname = "{name}"\nmodel = "{model}"\nload = "on_demand"\nthreads = 1\n'
                + 'ctx_size = 512\nparallel = 1\n')
    log = open(os.path.join(tmp, "serve.log"), "w+")
    proc = subprocess.Popen([SIPP, "serve", "--config", cfg, "--port", "0"], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    body = {"model": name, "max_tokens": max_tokens, "ignore_eos": True,
            "messages": [{"role": "user", "content": "tell me a story"}]}
    after, anon = [], []
    try:
        port = wait_listening(proc, log)
        rss_idle = status_kib(proc.pid, "VmRSS")
        for _ in range(cycles):
            post(port, f"/v1/models/{name}/load")
            post(port, "/v1/chat/completions", body)
            wait_idle(port, name)
            if json.loads(post(port, f"/v1/models/{name}/unload")).get("deferred"):
                wait_unloaded(port, name)
            after.append(settled_rss_kib(proc.pid))
            anon.append(anon_kib(proc.pid))
        peak = status_kib(proc.pid, "VmHWM")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(REQUEST_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    model_mib = round(os.path.getsize(model) / MIB, 1)
    first = after[0]
    # A leak rises at every cycle; the allocator's one-time steps do not (a thread taking a malloc arena
    # of its own: steps of 4-14 MiB seen once, at cycle 2 to 11, on an Intel Xeon, flat after). So the
    # typical step between two unloads (the median) stays under LEAK_STEP_KIB, and the highest level
    # within `tolerance` of the first unload's plus what such one-time steps add (ONE_TIME_STEPS).
    # What the first unload kept is bounded apart (kept_after_first_mib).
    steps = [b - a for a, b in zip(after, after[1:])]
    per_cycle = statistics.median(steps) if steps else 0
    level = after[len(after) // 2]
    growth = max(after) / first - 1
    ok = per_cycle <= LEAK_STEP_KIB and growth <= tolerance + ONE_TIME_STEPS
    if ok:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed run keeps its server log
    return {"cycles": cycles, "model_mib": model_mib,
            "rss_idle_mib": round(rss_idle / 1024, 1), "rss_after_first_mib": round(first / 1024, 1),
            "rss_after_last_mib": round(after[-1] / 1024, 1), "rss_after_max_mib": round(max(after) / 1024, 1),
            "anon_after_first_mib": round(anon[0] / 1024, 1), "anon_after_last_mib": round(anon[-1] / 1024, 1),
            "rss_after_each_mib": [round(a / 1024, 1) for a in after],
            "anon_after_each_mib": [round(a / 1024, 1) for a in anon],
            "kept_after_first_mib": round((first - rss_idle) / 1024, 1),
            "rss_reference_mib": round(level / 1024, 1), "early_growth_mib": round((level - first) / 1024, 1),
            "growth": round(growth, 4), "median_step_kib": per_cycle, "peak_rss_mib": round(peak / 1024, 1),
            "within": ok,
            "log": None if ok else log.name}


def settled_rss_kib(pid):
    """VmRSS once it stops moving: a target reads as unloaded a moment before its engine thread is
    joined and its memory given back."""
    last, still = status_kib(pid, "VmRSS"), 0
    deadline = time.monotonic() + SETTLE_MAX_S
    while still < SETTLE_SAMPLES and time.monotonic() < deadline:
        time.sleep(SETTLE_EVERY_S)
        now = status_kib(pid, "VmRSS")
        still = still + 1 if abs(now - last) <= SETTLE_KIB else 0
        last = now
    return last


def target_info(port, name):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("GET", "/v1/models")
        return {m["id"]: m for m in json.loads(conn.getresponse().read())["data"]}[name]["sipp"]
    finally:
        conn.close()


def wait_for(port, name, ok, what):
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while time.monotonic() < deadline:
        if ok(target_info(port, name)):
            return
        time.sleep(SETTLE_EVERY_S)
    raise RuntimeError(f"{name} was not {what} within {REQUEST_TIMEOUT_S} s")


def wait_idle(port, name):
    """The request's use ends a moment after its answer: waiting for it makes the unload immediate
    (freed in the unload request itself) rather than deferred to the keeper thread."""
    wait_for(port, name, lambda t: t["uses"] == 0, "idle")


def wait_unloaded(port, name):
    """An unload asked for while a request was still finishing happens when it ends."""
    wait_for(port, name, lambda t: t["state"] == "unloaded", "unloaded")


def wait_listening(proc, log):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        log.flush()
        with open(log.name) as f:
            m = re.search(r"listening on http://\[?([^\]\s]+?)\]?:(\d+)", f.read())
        if m:
            return int(m.group(2))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"sipp serve did not start; see {log.name}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--model")
    ap.add_argument("--rss-growth-mib", type=float, default=DEFAULT_RSS_GROWTH_MIB)
    ap.add_argument("--media", action="store_true", help="mix images and forged media into the streams")
    ap.add_argument("--load-cycles", type=int, default=0,
                    help="instead of streams: load, use and unload the model this many times")
    a = ap.parse_args(argv)
    if a.load_cycles:
        r = load_cycles(a.load_cycles, a.model)
        print(json.dumps(r))
        return 0 if r["within"] else 1
    r = soak(a.seconds, a.streams, a.max_tokens, a.model, a.rss_growth_mib, a.media)
    print(json.dumps(r))
    return 0 if r["failures"] == 0 and r["flat"] and r["server_alive"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
