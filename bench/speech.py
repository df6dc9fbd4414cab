#!/usr/bin/env python3
"""bench/speech.py: text to speech on sipp beside llama.cpp's llama-tts, and flite beside flite's CLI.

    bench/speech.py [--rounds 3] [--threads 2] [--pair pocket|qwen3tts] [--frames N [--ref-frames M]]
                    [--backbone "SHAPE FLAGS"]

The pair: `sipp-synth --tts-pair pocket` (a Pocket TTS backbone and projector, random weights, tiny; its
end-of-speech head fires at once, so each piece of text is the pipeline's few tail frames), or with
--pair qwen3tts a Qwen3-TTS talker and projector (random weights, tiny; its end token wins from the second
frame on, so each piece of text is one frame, 80 ms). With --frames N (qwen3tts only) the pair is made
with --tts-endless, whose end token never wins, and every piece runs to N frames (llama-tts -n N, sipp's
max_frames; --ref-frames M gives llama-tts and the first-audio and RTF rows M instead, the 2-at-once rows
keeping N); the gateway rows are left out then (the API has no frame cap: 512 frames a sentence). llama-tts
is built from the pinned source (deps/build-llama-tts.sh) against the same artifact. TEXT has three
sentences; llama-tts speaks it as one piece, sipp a sentence at a time (streamed).

  first audio   from the call to the first audio: llama-tts writes its file at the end, so its whole
                generation (its own "timings ... total", model load excluded); sipp: the first chunk of
                sipp.Voice.speech(stream=True) (the model loaded before)
  RTF           generation time / seconds of audio (lower is faster)
  2 at once     the throughput of two requests at once on one voice (parallel=2: two generation
                states on the one loaded pair, one thread each) over the same two one after another
                on it; for qwen3tts also with batch_frames (the states share one backbone context and
                decode their frames in one batch)
  gateway       the same 2 at once through `sipp serve` (a recipe "tts" target, parallel = 2, threads = 1):
                two POST /v1/audio/speech one after another, then two at once, on loopback
  flite         sipp's flite voice (sipp.speech) beside `flite -t TEXT -o FILE`, the wall time of each

Prints a Markdown table of medians. Loopback only: nothing here uses the network.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
from tests.support.paths import BUILD, SYNTH, VOCAB_DIR  # noqa: E402

import sipp  # noqa: E402

TEXT = "Hello world. This is a test of speech. Goodbye for now!"
RATE = 24000


PAIRS = {  # --pair: the label, the vocabulary and the backbone's shape (the tests' pairs)
    "pocket": ("Pocket pair", "ggml-vocab-llama-spm.gguf", ["--n-head-kv", "4", "--n-ctx", "512"]),
    "qwen3tts": ("Qwen3-TTS pair", "ggml-vocab-qwen2.gguf", ["--n-head-kv", "2", "--n-ctx", "1024"]),
}


def make_pair(directory, pair, endless=False, backbone=None):
    prefix = os.path.join(directory, pair)
    _, vocab, shape = PAIRS[pair]
    width = backbone.split() if backbone else ["--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-ff", "128",
                                               *shape]
    subprocess.run([SYNTH, "--out", prefix, "--tts-pair", pair, "--vocab", os.path.join(VOCAB_DIR, vocab), *width,
                    *(["--tts-endless"] if endless else [])], check=True, capture_output=True)
    return prefix + ".gguf", prefix + "-mmproj.gguf"


def llama_tts(binary, model, mmproj, threads, out, frames=0):
    cap = ["-n", str(frames)] if frames else []
    p = subprocess.run([binary, "-m", model, "-mm", mmproj, "-p", TEXT, "--seed", "1", "-t", str(threads), *cap,
                        "-o", out], cwd=os.path.join(BUILD, "artifact"), capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"llama-tts failed: {p.stderr[-2000:]}")
    total = float(re.search(r"= total ([0-9.]+)s", p.stderr).group(1))
    audio = float(re.search(r"output audio = ([0-9.]+)s", p.stderr).group(1))
    return total, audio


def sipp_stream(voice, text=TEXT, frames=0):
    """(seconds to the first chunk, total seconds, seconds of audio) of one streamed pcm request."""
    t0 = time.perf_counter()
    first, n = None, 0
    for chunk in voice.speech(text, format="pcm", sample_rate=RATE, seed=1, stream=True, max_frames=frames):
        if first is None:
            first = time.perf_counter() - t0
        n += len(chunk)
    return first, time.perf_counter() - t0, n / 2 / RATE


def two_at_once(make_voice, text=TEXT, frames=0):
    """Two requests on one voice: one after the other, then at once; the throughput ratio."""
    kw = {"format": "pcm", "seed": 1, "max_frames": frames}
    with make_voice() as v:
        v.speech(text, **kw)  # warm
        t0 = time.perf_counter()
        for _ in range(2):
            v.speech(text, **kw)
        serial = time.perf_counter() - t0
        threads = [threading.Thread(target=v.speech, args=(text,), kwargs=kw) for _ in range(2)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        parallel = time.perf_counter() - t0
    return serial / parallel


def post_speech(base, text):
    body = json.dumps({"model": "pair", "input": text, "response_format": "pcm", "seed": 1}).encode()
    req = urllib.request.Request(base + "/v1/audio/speech", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return r.read()


def gateway_two_at_once(model, mmproj, tmp, text=TEXT, parallel=2):
    """The throughput of two speech requests at once over two one after another, through sipp serve."""
    cfg = os.path.join(tmp, "speech.toml")
    with open(cfg, "w") as f:
        f.write(f'[[targets]]\nname = "pair"\nrecipe = "tts"\nmodel = "{model}"\nmmproj = "{mmproj}"\n'
                f"parallel = {parallel}\nthreads = 1\n")
    log = open(os.path.join(tmp, "serve.log"), "w+")
    proc = subprocess.Popen([os.path.join(BUILD, "bin", "sipp"), "serve", "--config", cfg, "--port", "0"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        base = None
        for _ in range(600):
            log.seek(0)
            m = re.search(r"listening on (http://\S+)", log.read())
            if m:
                base = m.group(1)
                break
            time.sleep(0.1)
        post_speech(base, text)  # loaded and warm
        t0 = time.perf_counter()
        for _ in range(2):
            post_speech(base, text)
        serial = time.perf_counter() - t0
        threads = [threading.Thread(target=post_speech, args=(base, text)) for _ in range(2)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return serial / (time.perf_counter() - t0)
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def flite_cli(out):
    t0 = time.perf_counter()
    subprocess.run(["flite", "-voice", "slt", "-t", TEXT, "-o", out], check=True, capture_output=True)
    return time.perf_counter() - t0


def sipp_flite():
    t0 = time.perf_counter()
    sipp.speech(TEXT, voice="slt")
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pair", choices=sorted(PAIRS), default="pocket")
    ap.add_argument("--frames", type=int, default=0, help="qwen3tts: an endless pair, N frames a piece")
    ap.add_argument("--ref-frames", type=int, default=0,
                    help="llama-tts's and the first-audio/RTF rows' frames (default: --frames); llama-tts takes "
                         "seconds a frame on 2 cores")
    ap.add_argument("--backbone", help="the backbone's sipp-synth shape flags instead of the tests' (e.g. "
                                       "\"--n-embd 512 --n-layer 8 --n-head 8 --n-head-kv 4 --n-ff 1536 --n-ctx 1024\")")
    args = ap.parse_args()
    if args.frames and args.pair != "qwen3tts":
        sys.exit("--frames goes with --pair qwen3tts")
    frames, ref_frames = args.frames, args.ref_frames or args.frames
    label = PAIRS[args.pair][0] + (f", {frames} frames a piece" if frames else "")
    ref_label = PAIRS[args.pair][0] + (f", {ref_frames} frames" if ref_frames else "")
    binary = subprocess.run(["bash", os.path.join(ROOT, "deps", "build-llama-tts.sh"), BUILD], check=True,
                            capture_output=True, text=True).stdout.strip()
    tmp = tempfile.mkdtemp(prefix="sipp-bench-speech-")
    try:
        model, mmproj = make_pair(tmp, args.pair, endless=bool(frames), backbone=args.backbone)
        rows = {k: [] for k in ("ref_first", "ref_rtf", "sipp_first", "sipp_rtf", "pair2", "batch2", "gw2",
                                "flite_cli", "flite_sipp", "flite2")}
        for r in range(args.rounds):
            total, audio = llama_tts(binary, model, mmproj, args.threads, os.path.join(tmp, "ref.wav"), ref_frames)
            rows["ref_first"].append(total)
            rows["ref_rtf"].append(total / audio)
            with sipp.Voice(model, mmproj=mmproj, threads=args.threads) as v:
                first, total, audio = sipp_stream(v, frames=ref_frames)
            rows["sipp_first"].append(first)
            rows["sipp_rtf"].append(total / audio)
            rows["pair2"].append(two_at_once(lambda: sipp.Voice(model, mmproj=mmproj, threads=1, parallel=2),
                                             frames=frames))
            if args.pair == "qwen3tts":
                rows["batch2"].append(two_at_once(
                    lambda: sipp.Voice(model, mmproj=mmproj, threads=1, parallel=2, batch_frames=True), frames=frames))
            if not frames:
                rows["gw2"].append(gateway_two_at_once(model, mmproj, tmp))
            if shutil.which("flite"):
                rows["flite_cli"].append(flite_cli(os.path.join(tmp, "f.wav")))
            rows["flite_sipp"].append(sipp_flite())
            rows["flite2"].append(two_at_once(lambda: sipp.Voice("flite")))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in rows.items() if v), file=sys.stderr)
        med = {k: statistics.median(v) for k, v in rows.items() if v}
        print("| measure | llama-tts / flite CLI | sipp | sipp / reference |")
        print("|---|---|---|---|")
        print(f"| {ref_label}: first audio (s) | {med['ref_first']:.2f} | {med['sipp_first']:.2f} | "
              f"{med['sipp_first'] / med['ref_first']:.2f}x |")
        print(f"| {ref_label}: RTF | {med['ref_rtf']:.2f} | {med['sipp_rtf']:.2f} | "
              f"{med['sipp_rtf'] / med['ref_rtf']:.2f}x |")
        print(f"| {label}: 2 at once / one after another (throughput) | | {med['pair2']:.2f}x | |")
        if "batch2" in med:
            print(f"| {label}: the same with batch_frames | | {med['batch2']:.2f}x | |")
        if "gw2" in med:
            print(f"| {label} through sipp serve: 2 at once / one after another | | {med['gw2']:.2f}x | |")
        if "flite_cli" in med:
            print(f"| flite: whole text (s) | {med['flite_cli']:.3f} | {med['flite_sipp']:.3f} | "
                  f"{med['flite_sipp'] / med['flite_cli']:.2f}x |")
        print(f"| flite: 2 at once / one after another (throughput) | | {med['flite2']:.2f}x | |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
