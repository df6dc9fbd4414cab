"""Media measured before they are decoded (issue 44): headers that lie must not crash or swell sipp.

  SameSamplesTest   sipp decodes audio itself (src/model/audio_decode.c), with the pinned llama.cpp's
                    miniaudio as libmtmd's helper uses it: for WAV at several rates and widths, FLAC and
                    MP3 (Debian's flac and lame encoders), sipp's samples are byte for byte the ones
                    libmtmd's helper gives (build/tests/mtmd_probe with MTMD_PROBE_DUMP).
  HeaderTest        the forged clips are refused from their headers, naming what they claim: a 140-byte
                    FLAC claiming 2^36 samples at 250 Hz, the same at 16 kHz, a FLAC claiming 600 s in
                    140 bytes, an 8-bit WAV at 1 Hz and at 100 Hz, a clip over max_audio_seconds.
  GatewayTest       the same clips through the gateway, as chat input_audio and to
                    /v1/audio/transcriptions: a 400 naming the clip and the gateway still serving; 16
                    JPEGs claiming 8192 x 8192 in one request: a 400 naming [limits] media_max_decoded_mb,
                    the gateway's peak RSS (VmHWM) raised by less than 1 GB; a request past the shared
                    budget; the budget given back (the sipp_media_decoded_bytes gauge is 0 afterwards).
  BudgetTest        a small shared budget ([limits] media_decoded_budget_mb) and requests that each fit
                    it: while one decodes, another is a 429 with Retry-After, never a crash or a swell.

Everything talks to loopback; only processes started here are stopped.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support.audio import flac_header, wav, wav_pcm8  # noqa: E402
from tests.support.images import jpeg_claiming, png  # noqa: E402
from tests.support.models import make_projector  # noqa: E402

BUILD = os.environ.get("SIPP_BUILD", "build")
PROBE = os.path.join(BUILD, "tests", "mtmd_probe")
DECODE = os.path.join(BUILD, "tests", "audio_decode")
RATE = 16000  # the qwen2a projector's (whisper's) rate
GIB = 1 << 30
FORGED = {  # name -> (bytes, what the refusal names)
    "flac-250hz": (flac_header(250, (1 << 36) - 1, pad=98), "250 Hz"),
    "flac-2^36": (flac_header(16000, (1 << 36) - 1, pad=98), "more than its 140 bytes can hold"),
    "flac-600s-in-140-bytes": (flac_header(8000, 600 * 8000 - 1, pad=98), "more than its 140 bytes"),
    "wav-1hz": (wav_pcm8(1, 600_000), "1 Hz"),
    "wav-100hz": (wav_pcm8(100, 750_000), "100 Hz"),
    "wav-too-long": (wav_pcm8(8000, 8000 * 11), "max_audio_seconds"),  # 11 s, over the limit set below
}
MAX_AUDIO_S = 10


def encoder(name):
    return shutil.which(name)


class SameSamplesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        gw.check_build()
        cls.dir = tempfile.mkdtemp(prefix="sipp-media-")
        cls.model = gw.model()
        cls.proj = make_projector(cls.dir, "qwen2a")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def clips(self):
        w16 = os.path.join(self.dir, "a16k.wav")
        with open(w16, "wb") as f:
            f.write(wav(0.7))
        yield w16
        for name, data in (("a44k.wav", wav(0.6, rate=44100, tone_hz=300)), ("a8k8.wav", wav_pcm8(8000, 5000)),
                           ("a22k.wav", wav(0.4, rate=22050, tone_hz=1000))):
            path = os.path.join(self.dir, name)
            with open(path, "wb") as f:
                f.write(data)
            yield path
        if encoder("flac"):
            out = os.path.join(self.dir, "a.flac")
            subprocess.run(["flac", "-s", "-f", "-o", out, w16], check=True, timeout=60)
            yield out
        if encoder("lame"):
            out = os.path.join(self.dir, "a.mp3")
            subprocess.run(["lame", "--silent", "-b", "64", w16, out], check=True, timeout=60)
            yield out

    def test_sipp_decodes_what_libmtmd_decodes(self):
        if not (encoder("flac") and encoder("lame")):
            self.fail("flac and lame are needed (scripts/setup-debian.sh installs them)")
        for clip in self.clips():
            with self.subTest(clip=os.path.basename(clip)):
                ref, mine = clip + ".mtmd", clip + ".sipp"
                r = subprocess.run([PROBE, self.model, self.proj, clip], capture_output=True, text=True, timeout=120,
                                   env={**os.environ, "MTMD_PROBE_DUMP": ref})
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                r = subprocess.run([DECODE, clip, str(RATE), mine], capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(ref, "rb") as a, open(mine, "rb") as b:
                    want, got = a.read(), b.read()
                self.assertGreater(len(want), 1000)
                self.assertEqual(len(got), len(want))
                self.assertTrue(got == want, "sipp's samples differ from libmtmd's")


class HeaderTest(unittest.TestCase):
    def test_forged_clips_are_refused_from_their_headers(self):
        with tempfile.TemporaryDirectory() as d:
            for name, (data, says) in FORGED.items():
                if name == "wav-too-long":
                    continue  # the tool's limit is the default, 600 s
                with self.subTest(clip=name):
                    path = os.path.join(d, name)
                    with open(path, "wb") as f:
                        f.write(data)
                    r = subprocess.run([DECODE, path, str(RATE), path + ".out"], capture_output=True, text=True,
                                       timeout=60)
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    self.assertIn(says, r.stderr)
                    self.assertFalse(os.path.exists(path + ".out"))


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def data_url(kind, data):
    return f"data:{kind};base64," + base64.b64encode(data).decode()


def chat_with(parts, model):
    return {"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": parts}]}


def audio_part(data, fmt):
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode(), "format": fmt}}


def image_part(data, kind="image/jpeg"):
    return {"type": "image_url", "image_url": {"url": data_url(kind, data)}}


def transcription_form(data, model):
    b = "sipp-media-limits"
    body = (f'--{b}\r\nContent-Disposition: form-data; name="model"\r\n\r\n{model}\r\n'
            f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="clip"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{b}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={b}"}


def serve_media(cls, limits, targets):
    """Starts cls.gw: [limits] text, then targets (name, projector kind, max_tokens) on a copy of the tiny
    model, each with its synthetic projector, in a directory of cls's own."""
    gw.check_build()
    cls.dir = tempfile.mkdtemp(prefix="sipp-media-")
    model = os.path.join(cls.dir, "model.gguf")
    shutil.copy(gw.model(), model)
    text = f"[limits]\n{limits}\n\n"
    for name, kind, max_tokens in targets:
        proj = make_projector(cls.dir, kind)
        text += gw.local_target(name, path=model, parallel=1, ctx=2048,
                                extra=f'mmproj = "{proj}"\nmax_tokens = {max_tokens}')
    cls.gw = gw.serve_config(text)


class GatewayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        serve_media(cls, f"max_audio_seconds = {MAX_AUDIO_S}", [("ears", "qwen2a", 2), ("eyes", "llava", 2)])

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def refused(self, status, data, *words):
        self.assertEqual(status, 400, data[:500])
        msg = json.loads(data)["error"]["message"]
        for w in words:
            self.assertIn(w, msg)
        s, _, _ = self.gw.request("GET", "/health")
        self.assertEqual(s, 200, "the gateway stopped serving")
        self.assertIsNone(self.gw.proc.poll())
        return msg

    def test_forged_clips_on_chat_and_transcriptions(self):
        for name, (data, says) in FORGED.items():
            fmt = "flac" if name.startswith("flac") else "wav"
            with self.subTest(clip=name, route="chat"):
                s, _, body = self.gw.request("POST", "/v1/chat/completions",
                                             json.dumps(chat_with([audio_part(data, fmt)], "ears")),
                                             {"Content-Type": "application/json"})
                self.refused(s, body, says, "input_audio")
            with self.subTest(clip=name, route="transcriptions"):
                body, headers = transcription_form(data, "ears")
                s, _, out = self.gw.request("POST", "/v1/audio/transcriptions", body, headers)
                self.refused(s, out, says, "file")

    def test_a_real_clip_still_transcribes(self):
        body, headers = transcription_form(wav(0.5), "ears")
        s, _, out = self.gw.request("POST", "/v1/audio/transcriptions", body, headers)
        self.assertEqual(s, 200, out[:500])
        self.assertIn("text", json.loads(out))

    def test_sixteen_jpegs_claiming_8192_squared(self):
        parts = [image_part(jpeg_claiming(8192, 8192)) for _ in range(16)]
        body = json.dumps(chat_with(parts, "eyes"))
        self.assertLess(len(body), 4096)
        before = vm_hwm_kib(self.gw.proc.pid)
        s, _, out = self.gw.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        msg = self.refused(s, out, "media_max_decoded_mb", "content[2]")
        rise = (vm_hwm_kib(self.gw.proc.pid) - before) * 1024
        self.assertLess(rise, GIB, f"peak RSS rose by {rise >> 20} MB ({msg})")
        self.assertEqual(gw.metric(self.gw.metrics(), "sipp_media_decoded_bytes"), 0)

    def test_small_images_still_answer(self):
        parts = [image_part(png(24, 24, shade=k), "image/png") for k in range(3)]
        s, _, out = self.gw.request("POST", "/v1/chat/completions", json.dumps(chat_with(parts, "eyes")),
                                    {"Content-Type": "application/json"})
        self.assertEqual(s, 200, out[:500])
        self.assertEqual(gw.metric(self.gw.metrics(), "sipp_media_decoded_bytes"), 0)


class BudgetTest(unittest.TestCase):
    """[limits] media_decoded_budget_mb = 8, images of 1500 x 1500 (6.4 MB decoded each): one request at a
    time fits, two at once do not."""
    ROUNDS = 12

    @classmethod
    def setUpClass(cls):
        serve_media(cls, "media_decoded_budget_mb = 8", [("a", "llava", 1), ("b", "llava", 1)])
        cls.image = png(1500, 1500)

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def post(self, model, out):
        body = json.dumps(chat_with([image_part(self.image, "image/png")], model))
        out.append(self.gw.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"},
                                   timeout=300))

    def test_a_request_past_the_whole_budget_is_a_400(self):
        parts = [image_part(self.image, "image/png")] * 2
        s, _, out = self.gw.request("POST", "/v1/chat/completions", json.dumps(chat_with(parts, "a")),
                                    {"Content-Type": "application/json"}, timeout=300)
        self.assertEqual(s, 400, out[:300])
        self.assertIn("media_decoded_budget_mb", json.loads(out)["error"]["message"])

    def test_concurrent_requests_share_the_budget(self):
        busy = 0
        for _ in range(self.ROUNDS):
            out = []
            threads = [threading.Thread(target=self.post, args=(m, out)) for m in ("a", "b")]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for s, h, body in out:
                self.assertIn(s, (200, 429), body[:300])
                if s == 429:
                    busy += 1
                    self.assertIn("media_decoded_budget_mb", json.loads(body)["error"]["message"])
                    self.assertIn("retry-after", {k.lower() for k in h})
            if busy:
                break
        self.assertGreater(busy, 0, f"no request of {self.ROUNDS} pairs waited for the budget")
        self.assertEqual(gw.metric(self.gw.metrics(), "sipp_media_decoded_bytes"), 0)
        self.assertIsNone(self.gw.proc.poll())


if __name__ == "__main__":
    unittest.main()
