#!/usr/bin/env python3
"""bench/transcribe.py: sipp's speech to text beside whisper.cpp's own whisper-server, one run.

Both are built from the same whisper.cpp (deps/whisper.lock) against the same ggml (the artifact's),
load the same synthetic model (sipp-synth --whisper SHAPE), decode with the same parameters (whisper's
defaults: beam 5, best of 5, the language given as "en", no temperature fallback (temperature_inc 0 in
the request: whisper-server parses -nf but does not apply it) so that both decode each window once: the
"same number of tokens" cap), and use the same threads:

  1. one 60 s clip, time to transcript: whisper-server's POST /inference (multipart upload, the model
     loaded) against sipp's transcriber (libsipp through the Python binding, the model loaded), best
     of --rounds; the ratio is sipp / whisper-server (below 1.0: sipp is faster). The two transcripts
     must be equal, or the timing compares different work.
  2. four clips (--clip-seconds each): one after another, and four at once. sipp at once is a
     transcriber with 4 whisper states, each clip on its own state with max(1, threads / 4) threads,
     so the four together use the same cores as one clip does; one after another is one state with
     all the threads. whisper-server serialises requests behind one mutex, so its "at once" is four
     concurrent requests that queue. Throughput ratio: (4 one after another) / (4 at once).

    python3 bench/transcribe.py [--shape tiny|base] [--threads N] [--seconds 60] [--rounds 1]

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


def post_clip(port, path):
    boundary = uuid.uuid4().hex
    with open(path, "rb") as f:
        data = f.read()
    parts = []
    for name, value in (("response_format", b"json"), ("language", b"en"), ("temperature_inc", b"0")):
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + value + b"\r\n")
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="clip.wav"\r\n'
                 f"Content-Type: audio/wav\r\n\r\n".encode() + data + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/inference", data=body,
                                 headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as r:
        return json.loads(r.read().decode("utf-8", "replace"))["text"]


def start_server(model, threads, port, log):
    # whisper-server's own defaults differ from whisper-cli's (greedy, best of 2): beam 5 and best of 5
    # as whisper-cli and sipp decode
    proc = subprocess.Popen([os.path.join(PEER, "whisper-server"), "-m", model, "-t", str(threads), "-ng",
                             "-l", "en", "-nf", "-bs", "5", "-bo", "5", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + SERVER_START_S
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read()
            return proc
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit("whisper-server did not start; see its log")


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


def sipp_runs(model, args, long_clip, clips):
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    os.environ.setdefault("SIPP_PYTHON_BACKEND", "cpu")
    import sipp.speech

    # whisper-server's request: language en, no temperature fallback (-nf), json
    opts = dict(language="en", temperature_inc=0.0, format="json")
    out = {}
    with sipp.speech.Transcriber(model, backend="cpu", threads=args.threads) as t:
        def run(clip):
            return t.transcribe(clip, **opts)["text"]
        out["long"] = min((timed(lambda: run(long_clip)) for _ in range(args.rounds)), key=lambda r: r[0])
        out["serial"] = timed(lambda: [run(c) for c in clips])
    each = max(1, args.threads // len(clips))
    with sipp.speech.Transcriber(model, backend="cpu", threads=each, parallel=len(clips)) as t:
        out["parallel"] = at_once(lambda clip: t.transcribe(clip, **opts)["text"], clips)
    out["threads_each_at_once"] = each
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="tiny", choices=["tiny", "base", "test"])
    ap.add_argument("--threads", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--clip-seconds", type=float, default=15.0)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    if not os.path.exists(os.path.join(PEER, "whisper-server")):
        subprocess.run(["bash", os.path.join(ROOT, "deps", "build-whisper.sh"), "tools",
                        os.path.join(BUILD, "artifact"), PEER], check=True)
    tmp = tempfile.mkdtemp(prefix="sipp-bench-transcribe-")
    try:
        model = os.path.join(tmp, f"ggml-{args.shape}.bin")
        subprocess.run([SYNTH, "--whisper", args.shape, "--out", model, "--vocab", VOCAB], check=True)
        long_clip = speech(tmp, args.seconds, 0)
        clips = [speech(tmp, args.clip_seconds, v) for v in range(1, 5)]
        port = free_port()
        with open(os.path.join(tmp, "server.log"), "wb") as log:
            server = start_server(model, args.threads, port, log)
            try:
                ws_long = min((timed(lambda: post_clip(port, long_clip)) for _ in range(args.rounds)),
                              key=lambda r: r[0])
                ws_serial = timed(lambda: [post_clip(port, c) for c in clips])
                ws_parallel = at_once(lambda c: post_clip(port, c), clips)
            finally:
                server.terminate()
                server.wait(timeout=30)
        s = sipp_runs(model, args, long_clip, clips)
        report = {
            "cpu": cpu_model(), "cores": os.cpu_count(), "shape": args.shape, "threads": args.threads,
            "clip_seconds": args.seconds,
            "whisper_server_s": round(ws_long[0], 3), "sipp_s": round(s["long"][0], 3),
            "time_ratio_sipp_over_whisper_server": round(s["long"][0] / ws_long[0], 3),
            # whisper-server joins segments with newlines and sipp does not; bytes that are not UTF-8 each
            # side replaces its own way
            "same_text": comparable(s["long"][1]) == comparable(ws_long[1]),
            "sipp_text_start": s["long"][1][:60], "whisper_server_text_start": ws_long[1][:60],
            "four_clips_seconds_each": args.clip_seconds,
            "sipp_4_serial_s": round(s["serial"][0], 3), "sipp_4_at_once_s": round(s["parallel"][0], 3),
            "sipp_threads_each_at_once": s["threads_each_at_once"],
            "sipp_throughput_ratio_at_once_over_serial": round(s["serial"][0] / s["parallel"][0], 3),
            "whisper_server_4_serial_s": round(ws_serial[0], 3), "whisper_server_4_at_once_s": round(ws_parallel[0], 3),
            "sipp_4_at_once_over_whisper_server_4_at_once": round(ws_parallel[0] / s["parallel"][0], 3),
        }
        print(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
