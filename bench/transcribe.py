#!/usr/bin/env python3
"""bench/transcribe.py: sipp's gateway (a whisper.cpp target of `sipp serve`) beside whisper.cpp's own
whisper-server, in one run, over the same HTTP.

Both are built from the same whisper.cpp (deps/whisper.lock) against the same ggml (the artifact's),
load the same synthetic model (sipp-synth --whisper SHAPE), take the same multipart form and decode with
the same parameters (beam 5, best of 5, language "en", no temperature fallback: temperature_inc 0 in the
form, since whisper-server parses -nf but does not apply it, so that both decode each window once: the
"same number of tokens" cap), with the same threads:

  1. one 60 s clip, time to transcript: whisper-server's POST /inference against the gateway's
     POST /v1/audio/transcriptions (both with the model loaded); the ratio is sipp / whisper-server
     (below 1.0: sipp is faster). The two transcripts must be equal, or the timing compares different
     work.
  2. four clips (--clip-seconds each): one after another and four at once. The gateway serves them
     from two targets on the same file: "serial" (parallel = 1, all the threads) one after another,
     and "at-once" (parallel = 4, max(1, threads / 4) threads per state) four at once, so the four
     together use the cores one clip uses. whisper-server serialises requests behind one mutex, so its
     "at once" is four concurrent requests that queue. Throughput ratio: (4 one after another) /
     (4 at once), above 1.0: at once is faster.

Rounds are paired: each round runs every measurement of both servers in turn, so load from elsewhere
falls on both; the report gives each measurement's median over --rounds (3 by default) and the
ratios of the medians.

    python3 bench/transcribe.py [--shape tiny|base] [--threads N] [--seconds 60] [--rounds 3]

Prints one JSON object with the timings and ratios (and the CPU). Loopback only.
"""
import argparse
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
import wave

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, os.environ.get("SIPP_BUILD", "build"))
PEER = os.path.join(BUILD, "whisper-peer")
SYNTH = os.path.join(BUILD, "bin", "sipp-synth")
VOCAB = os.path.join(ROOT, "build", "llama", "vocab", "ggml-vocab-gpt-2.gguf")
RATE = 16000
TEXT = ("It was a bright cold day in April, and the clocks were striking thirteen. The hallway smelt of "
        "boiled cabbage and old rag mats. At one end of it a coloured poster, too large for indoor display, "
        "had been tacked to the wall. It depicted simply an enormous face, more than a metre wide. ")
SERVER_START_S = 120
REQUEST_TIMEOUT_S = 3600


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def speech(tmp, seconds, variant):
    """seconds of flite speech at 16 kHz (the text repeated; variant shifts it, so clips differ)."""
    raw = os.path.join(tmp, f"flite-{variant}.wav")
    words = TEXT.split()
    text = " ".join(words[variant * 7:] + words[:variant * 7]) * 4
    subprocess.run(["flite", "-t", text, "-o", raw], check=True, timeout=300)
    with wave.open(raw, "rb") as w:
        rate = w.getframerate()
        src = struct.unpack("<%dh" % w.getnframes(), w.readframes(w.getnframes()))
    n = int(seconds * RATE)
    out = [src[int(i * rate / RATE) % len(src)] for i in range(n)]
    path = os.path.join(tmp, f"clip-{variant}-{seconds}s.wav")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(struct.pack("<%dh" % n, *out))
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post_clip(port, path, route="/inference", model=None):
    """The transcript of a clip, as both servers take it (the gateway's form also names its target)."""
    boundary = uuid.uuid4().hex
    with open(path, "rb") as f:
        data = f.read()
    fields = [("response_format", "json"), ("language", "en"), ("temperature_inc", "0")]
    fields += [("model", model)] if model else []
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{n}"\r\n\r\n{v}\r\n'.encode() for n, v in fields]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="clip.wav"\r\n'
                 f"Content-Type: audio/wav\r\n\r\n".encode() + data + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{route}", data=body,
                                 headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as r:
        return json.loads(r.read().decode("utf-8", "replace"))["text"]


def wait_http(url, proc, what):
    deadline = time.time() + SERVER_START_S
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"{what} did not start; see its log")


def start_gateway(tmp, model, threads, port, log):
    """sipp serve with the model twice: "serial" (one state, all threads), "at-once" (four states)."""
    each = max(1, threads // 4)
    cfg = os.path.join(tmp, "gateway.toml")
    with open(cfg, "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:{port}"\nmax_request_bytes = 67108864\n\n')
        for name, parallel, t in (("serial", 1, threads), ("at-once", 4, each)):
            f.write(f'[[targets]]\nname = "{name}"\nmodel = "{model}"\nbackend = "cpu"\nparallel = {parallel}\n'
                    f"threads = {t}\n\n")
    proc = subprocess.Popen([os.path.join(BUILD, "bin", "sipp"), "serve", "--config", cfg], stdout=log,
                            stderr=subprocess.STDOUT)
    return wait_http(f"http://127.0.0.1:{port}/ready", proc, "sipp serve"), each


def start_server(model, threads, port, log):
    # whisper-server's own defaults differ from whisper-cli's (greedy, best of 2): beam 5 and best of 5
    # as whisper-cli and sipp decode
    proc = subprocess.Popen([os.path.join(PEER, "whisper-server"), "-m", model, "-t", str(threads), "-ng",
                             "-l", "en", "-nf", "-bs", "5", "-bo", "5", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    return wait_http(f"http://127.0.0.1:{port}/", proc, "whisper-server")


def comparable(text):
    return "".join(ch for ch in text if not ch.isspace() and ch != "\ufffd")


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def at_once(fn, clips):
    """fn(clip) for each clip on its own thread; the wall time of all of them."""
    results = [None] * len(clips)

    def work(i):
        results[i] = fn(clips[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(clips))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, results


def one_round(ws_port, gw_port, long_clip, clips):
    """Every measurement once, whisper-server's and the gateway's in turn."""
    ws = lambda clip: post_clip(ws_port, clip)  # noqa: E731
    gw = lambda target: lambda clip: post_clip(gw_port, clip, "/v1/audio/transcriptions", target)  # noqa: E731
    r = {}
    r["ws_long"] = timed(lambda: ws(long_clip))
    r["gw_long"] = timed(lambda: gw("serial")(long_clip))
    r["ws_serial"] = timed(lambda: [ws(c) for c in clips])
    r["gw_serial"] = timed(lambda: [gw("serial")(c) for c in clips])
    r["ws_at_once"] = at_once(ws, clips)
    r["gw_at_once"] = at_once(gw("at-once"), clips)
    return r


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def report(args, rounds, each):
    med = {k: median([r[k][0] for r in rounds]) for k in rounds[0]}
    first = rounds[0]
    return {
        "cpu": cpu_model(), "cores": os.cpu_count(), "load_average": os.getloadavg(), "shape": args.shape,
        "threads": args.threads, "rounds": len(rounds), "clip_seconds": args.seconds,
        "seconds_each_round": {k: [round(r[k][0], 3) for r in rounds] for k in first},
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "time_ratio_sipp_over_whisper_server": round(med["gw_long"] / med["ws_long"], 3),
        # whisper-server joins segments with newlines and sipp does not; bytes that are not UTF-8 each
        # side replaces its own way. whisper-server keeps one whisper state, whose sampler libwhisper
        # seeds once, at its creation, so its later answers to the same clip may differ from its
        # first; sipp makes its state anew for each clip. So the texts are compared in the first round,
        # and each server's repeats said apart.
        "same_text_first_round": comparable(first["gw_long"][1]) == comparable(first["ws_long"][1]),
        "sipp_repeats_itself": all(comparable(r["gw_long"][1]) == comparable(first["gw_long"][1]) for r in rounds),
        "whisper_server_repeats_itself": all(comparable(r["ws_long"][1]) == comparable(first["ws_long"][1])
                                             for r in rounds),
        "sipp_text_start": first["gw_long"][1][:60], "whisper_server_text_start": first["ws_long"][1][:60],
        "four_clips_seconds_each": args.clip_seconds, "sipp_threads_each_at_once": each,
        "sipp_throughput_ratio_at_once_over_serial": round(med["gw_serial"] / med["gw_at_once"], 3),
        "whisper_server_throughput_ratio_at_once_over_serial": round(med["ws_serial"] / med["ws_at_once"], 3),
        "sipp_4_at_once_over_whisper_server_4_at_once": round(med["ws_at_once"] / med["gw_at_once"], 3),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="tiny", choices=["tiny", "base", "test"])
    ap.add_argument("--threads", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--clip-seconds", type=float, default=15.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not os.path.exists(os.path.join(PEER, "whisper-server")):
        subprocess.run(["bash", os.path.join(ROOT, "deps", "build-whisper.sh"), "tools",
                        os.path.join(BUILD, "artifact"), PEER], check=True)
    tmp = tempfile.mkdtemp(prefix="sipp-bench-transcribe-")
    servers = []
    try:
        model = os.path.join(tmp, f"ggml-{args.shape}.bin")
        subprocess.run([SYNTH, "--whisper", args.shape, "--out", model, "--vocab", VOCAB], check=True,
                       stdout=subprocess.DEVNULL)
        long_clip = speech(tmp, args.seconds, 0)
        clips = [speech(tmp, args.clip_seconds, v) for v in range(1, 5)]
        ws_port, gw_port = free_port(), free_port()
        log = open(os.path.join(tmp, "servers.log"), "wb")
        servers.append(start_server(model, args.threads, ws_port, log))
        gateway, each = start_gateway(tmp, model, args.threads, gw_port, log)
        servers.append(gateway)
        rounds = []
        for i in range(args.rounds):
            rounds.append(one_round(ws_port, gw_port, long_clip, clips))
            print(f"round {i + 1}: " + ", ".join(f"{k} {v[0]:.2f} s" for k, v in rounds[-1].items()), file=sys.stderr)
        print(json.dumps(report(args, rounds, each), indent=2))
    finally:
        for p in servers:
            p.terminate()
            p.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
