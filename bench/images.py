#!/usr/bin/env python3
"""bench/images.py: images in chats on sipp and on llama-server `--mmproj` at the same commit.

    bench/images.py [--rounds 3] [--n-embd 256] [--n-layer 4] [--image-size 448] [--patch-size 14]
                    [--threads 2] [--max-tokens 24] [--peer-libs]

The same synthetic model (Qwen2.5's vocabulary, a plain ChatML template: with Qwen2.5's own,
llama-server's tool-call parser fails on a random model's text with a 500, Q8_0) and projector (`sipp-synth
--projector llava`, --image-size / --patch-size: 448 / 14 is 1024 tokens an image; at 224 / 14, 256
tokens, this tiny vision tower encodes in about 10 ms and the image is not what a turn waits for) are served by `sipp serve` and by llama-server (`--jinja --mmproj`, built by
deps/build-source.sh peer from the pinned source), one slot each, the same threads. Two images: a PNG
the script writes (tests/support/images.py) and the JPEG that ships in the pinned source bundle
(tools/mtmd/test-1.jpeg), so both of libmtmd's decoders run.

  same answer  the greedy answer (temperature 0, --max-tokens) to a PNG, a JPEG, and both in one
               message, streamed over /v1/chat/completions, each on fresh servers; must be equal
  encode       sipp's encode time of one image, from libmtmd's own log line ("image slice encoded in
               N ms"); llama-server encodes through mtmd_batch_encode, which logs no time, so its
               encode is inside its first-turn figure only
  first turn   time to first token of a message with one image, streamed (fresh server, a text
               request first so that both have the model loaded, no image cached): the encode, the
               image's decode into the KV cache and the text; target sipp <= 1.0x llama-server
  second turn  time to first token of the next turn of that conversation, which resends the image
               (the median of three such turns, each another question after the first answer);
               target <= 0.3x sipp's first turn (sipp reuses the image's KV cells, no re-encode)

Each round starts both servers fresh. Loopback only. Prints the answers' comparison and a Markdown
table of medians with their ratios; exits 1 when an answer differs.
"""
import argparse
import base64
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import agents as server  # noqa: E402  (start, peer_bin: the servers as bench/agents.py runs them)
import test_api_fields as fields  # noqa: E402
import test_gateway_support as gw  # noqa: E402
from tests.support.images import png  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
from tests.support.wait import stop_process  # noqa: E402

ENCODED_RE = re.compile(r"image slice encoded in (\d+) ms")
TIMEOUT_S = 600
QUESTION = "What is in this picture?"
SECOND_QUESTIONS = ("And what colour is it?", "Is it big?", "Where was it taken?")


def bundle_jpeg():
    lock = {}
    with open(os.path.join(ROOT, "deps", "llama.lock")) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            lock[k] = v.strip('"')
    cache = os.environ.get("SIPP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sipp")
    with open(os.path.join(cache, f"llama.cpp-{lock['LLAMA_COMMIT']}", "tools", "mtmd", "test-1.jpeg"), "rb") as f:
        return f.read()


def data_url(mime, data):
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode()}"}}


def make_pair(a):
    d = gw.tmpdir()
    model = os.path.join(d, f"images-bench-{a.n_embd}x{a.n_layer}.gguf")
    proj = os.path.join(d, f"images-bench-mmproj-{a.n_embd}-{a.image_size}-{a.patch_size}.gguf")
    subprocess.run([gw.SYNTH, "--out", model, "--vocab", fields.QWEN_VOCAB, "--chat-template", "chatml",
                    "--n-embd", str(a.n_embd),
                    "--n-layer", str(a.n_layer), "--n-head", "8", "--n-head-kv", "4", "--n-ff", str(3 * a.n_embd),
                    "--type", "q8_0"], check=True, capture_output=True)
    subprocess.run([gw.SYNTH, "--out", proj, "--projector", "llava", "--n-embd", str(a.n_embd), "--image-size",
                    str(a.image_size), "--patch-size", str(a.patch_size)], check=True, capture_output=True)
    return model, proj


SIPP_ENV = {}


def sipp_server(a, model, proj, port, log):
    cfg = (f'[[targets]]\nname = "vision"\ntype = "local"\nmodel = "{model}"\nmmproj = "{proj}"\n'
           f'ctx_size = {a.ctx}\nparallel = 1\nthreads = {a.threads}\n')
    path = os.path.join(gw.tmpdir(), f"images-bench-{port}.toml")
    with open(path, "w") as f:
        f.write(cfg)
    return server.start([gw.SIPP, "serve", "--config", path, "--port", str(port)],
                        dict(os.environ, SIPP_LOG="debug", **SIPP_ENV), port, log)


def peer_server(a, peer, model, proj, port, log):
    cmd = [os.path.join(peer, "llama-server"), "-m", model, "--mmproj", proj, "--no-jinja", "-c", str(a.ctx), "-np",
           "1", "-t", str(a.threads), "--host", "127.0.0.1", "--port", str(port), "-a", "vision"]
    return server.start(cmd, dict(os.environ, LD_LIBRARY_PATH=peer), port, log)


def chat(port, messages, max_tokens, stream, cut_ok=False):
    """The answer's text and the time to its first streamed piece (ms; None unless streamed). A stream
    that ends in an error event raises CutShort, unless cut_ok (only its timing is wanted)."""
    body = {"model": "vision", "messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    t0 = time.monotonic()
    c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:400]!r}")
    if not stream:
        return json.loads(r.read())["choices"][0]["message"]["content"], None
    text, first = "", None
    for raw in r:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: {"):
            continue
        ev = json.loads(line[6:])
        if not ev.get("choices"):
            if "error" in ev and not cut_ok:
                raise CutShort(text, ev["error"].get("message", ""))
            if "error" in ev:
                break
            continue  # the usage chunk
        delta = ev["choices"][0].get("delta", {}).get("content")
        if delta:
            first = first if first is not None else (time.monotonic() - t0) * 1000
            text += delta
    c.close()
    return text, first


class CutShort(Exception):
    """A stream that ended in an error event, with the text it had sent before."""

    def __init__(self, text, message):
        super().__init__(message)
        self.text = text


def user(*parts):
    return {"role": "user", "content": [*parts, {"type": "text", "text": QUESTION}]}


def encode_ms(log):
    with open(log, encoding="utf-8", errors="replace") as f:
        found = ENCODED_RE.findall(f.read())
    return float(found[0]) if found else None


def one_round(a, port, log, image):
    chat(port, [{"role": "user", "content": "Hi"}], 1, True, cut_ok=True)  # sipp loads a model on first use
    first_text, first = chat(port, [user(image)], a.max_tokens, True, cut_ok=True)
    seconds = []
    for question in SECOND_QUESTIONS:  # the median of a few: one sample is mostly the machine's noise
        again = [user(image), {"role": "assistant", "content": first_text}, {"role": "user", "content": question}]
        seconds.append(chat(port, again, a.max_tokens, True, cut_ok=True)[1])
    second = statistics.median(seconds)
    return {"encode": encode_ms(log), "first": first, "second": second}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=448)
    ap.add_argument("--patch-size", type=int, default=14)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--peer-libs", action="store_true",
                    help="run sipp on the peer's libraries (libmtmd included) instead of its prebuilt artifact")
    a = ap.parse_args()
    model, proj = make_pair(a)
    peer = server.peer_bin()
    if a.peer_libs:
        SIPP_ENV.update(server.peer_libs_env(peer))
        mtmd = os.path.join(SIPP_ENV["SIPP_ARTIFACT"], "libmtmd.so")
        if not os.path.lexists(mtmd):
            os.symlink(os.path.join(peer, "libmtmd.so"), mtmd)
    png_part = data_url("image/png", png(320, 240))
    jpeg_part = data_url("image/jpeg", bundle_jpeg())
    images = {"png": [png_part], "jpeg": [jpeg_part], "png+jpeg": [png_part, jpeg_part]}
    starts = {"sipp": lambda p, lg: sipp_server(a, model, proj, p, lg),
              "llama-server": lambda p, lg: peer_server(a, peer, model, proj, p, lg)}

    # Each answer on a fresh server: a prompt read in one batch and the same prompt partly reused
    # from the cache round differently, and a random model's near-ties turn that into other text.
    # Streamed: llama-server's non-streamed reply runs its output parser, which refuses some of a
    # random model's texts with a 500.
    said = {name: {} for name in starts}
    for case, parts in images.items():
        for name, run in starts.items():
            port = free_port()
            proc = run(port, os.path.join(gw.tmpdir(), f"images-bench-{name}-{case}.log"))
            try:
                said[name][case] = (chat(port, [user(*parts)], a.max_tokens, True)[0], None)
            except CutShort as e:
                said[name][case] = (e.text, str(e))
            finally:
                stop_process(proc)
    # llama-server's output parser stops some of a random model's streams with an error event; the
    # text it sent before then is compared with the start of sipp's.
    same = True
    for case in images:
        (s_text, s_err), (p_text, p_err) = said["sipp"][case], said["llama-server"][case]
        if s_err:
            raise RuntimeError(f"sipp, {case}: {s_err}")
        eq = s_text.startswith(p_text) if p_err else s_text == p_text
        same &= eq
        cut = f" (llama-server stopped after {len(p_text)} characters: {p_err})" if p_err else ""
        print(f"same answer, {case}: {'yes' if eq else 'NO'}{cut}\n  sipp         {s_text!r}\n"
              f"  llama-server {p_text!r}")

    rows = {name: [] for name in starts}
    for r in range(a.rounds):
        for name, run in starts.items():
            port = free_port()
            log = os.path.join(gw.tmpdir(), f"images-bench-{name}-{r}.log")
            proc = run(port, log)
            try:
                res = one_round(a, port, log, png_part)
            finally:
                stop_process(proc)
            print(f"bench: {name} round {r + 1}: " + ", ".join(f"{k} {v:.0f} ms" for k, v in res.items() if v),
                  file=sys.stderr)
            rows[name].append(res)
    tokens = (a.image_size // a.patch_size) ** 2
    libs = "the peer's libraries" if a.peer_libs else "its prebuilt artifact"
    print(f"\nsipp on {libs}; model: synthetic qwen2 vocab, chatml, n_embd {a.n_embd}, {a.n_layer} layers, Q8_0; projector llava "
          f"{a.image_size}px / {a.patch_size} ({tokens} tokens an image); 1 slot, {a.threads} threads; "
          f"medians of {a.rounds} rounds\n")
    print("| measure | sipp ms | llama-server ms | sipp / llama-server |")
    print("|---|---|---|---|")
    med = {n: {k: statistics.median(v) for k in rows[n][0] if (v := [x[k] for x in rows[n] if x[k] is not None])}
           for n in rows}
    for k, label in (("encode", "encode one image"), ("first", "first turn, time to first token"),
                     ("second", "second turn (same image), time to first token")):
        s, p = med["sipp"].get(k), med["llama-server"].get(k)
        print(f"| {label} | {s:.0f} | " + (f"{p:.0f} | {s / p:.3f} |" if p else "n/a | n/a |"))
    print(f"\nsipp's second turn / its first turn: {med['sipp']['second'] / med['sipp']['first']:.3f} (target <= 0.3)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
