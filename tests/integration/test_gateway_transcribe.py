"""Speech to text on the gateway (issue 46): a whisper.cpp target (recipe whispercpp, told from the
file) answering OpenAI's /v1/audio/transcriptions and /v1/audio/translations.

On a synthetic whisper model (sipp-synth --whisper test) and a clip flite speaks, the gateway's
answer in every response format is the bytes `sipp transcribe` prints for the same clip and
threads, and its segments are whisper-cli's (built from the same whisper.cpp, tests/integration/
test_transcribe.py); the official `openai` npm client gets the same in every format, streamed too.
Bad audio is a 400 naming the field and the gateway keeps serving; two clips run at once on
parallel = 2; a client that goes away cancels its clip; the target is loaded on demand and evicted
like any model; the config refuses a recipe the file contradicts.
"""

import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from test_transcribe import build_peer, whisper_cli  # noqa: E402
from tests.support import npm  # noqa: E402
from tests.support.wait import wait_until  # noqa: E402

JS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
NODE_TIMEOUT_S = 600
THREADS = 2
MODEL = "ears"
FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
SENTENCE = "the quick brown fox jumps over the lazy dog"
# Greedy decoding (one decoder per window, where the defaults run five), as the gateway's form and the
# CLI's flags both say it: the checks of every format and client run in a fraction of the time. The
# defaults are checked against whisper-cli and the CLI once each.
GREEDY = (("beam_size", "1"), ("best_of", "1"))
GREEDY_FLAGS = ("--beam-size", "1", "--best-of", "1")
TIMEOUT_S = 300


# tests/fuzz/corpus/audio/wav_chunk_size_wraps: a fmt chunk of 0xFFFFFFF8 bytes took miniaudio's WAV reader
# back to the same chunk for ever (one request held a core until the process was killed)
with open(os.path.join(os.path.dirname(__file__), "..", "fuzz", "corpus", "audio", "wav_chunk_size_wraps"), "rb") as _f:
    HANG_WAV = _f.read()
HANG_WAV = HANG_WAV[:4] + struct.pack("<I", len(HANG_WAV) - 8) + HANG_WAV[8:]  # its RIFF size true: past that check


def form(fields=(), files=()):
    """A multipart/form-data body and its headers: fields (name, text), files (name, filename, bytes)."""
    b = uuid.uuid4().hex
    out = b""
    for name, value in fields:
        out += f'--{b}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
    for name, filename, data in files:
        out += (f'--{b}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"
    return out + f"--{b}--\r\n".encode(), {"Content-Type": f"multipart/form-data; boundary={b}"}


def silent_wav(frames, rate=16000):
    data = b"\0\0" * frames
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " +
            struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) + b"data" + struct.pack("<I", len(data)) + data)


def speak(path, text):
    r = subprocess.run([gw.SIPP, "speak", "flite", text, "--voice", "slt", "-o", path], capture_output=True,
                       text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stderr


def cli(model, clip, fmt, *extra, greedy=True):
    r = subprocess.run([gw.SIPP, "transcribe", model, clip, "--threads", str(THREADS), "--backend", "cpu",
                        "--format", fmt, *(GREEDY_FLAGS if greedy else ()), *extra], capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    # the CLI ends a JSON answer with a newline; the HTTP body is the JSON alone
    return r.stdout[:-1] if fmt in ("json", "verbose_json") else r.stdout


def target(name, path, extra=""):
    return f'[[targets]]\nname = "{name}"\nmodel = "{path}"\nbackend = "cpu"\nthreads = {THREADS}\n{extra}\n'


class GatewayTranscribeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = gw.tmpdir()
        cls.model = os.path.join(cls.tmp, "ggml-test-whisper.bin")
        r = subprocess.run([gw.SYNTH, "--whisper", "test", "--out", cls.model, "--vocab",
                            os.path.join(gw.BUILD, "llama", "vocab", "ggml-vocab-gpt-2.gguf")],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        assert r.returncode == 0, r.stderr
        cls.clip = os.path.join(cls.tmp, "fox.wav")
        speak(cls.clip, SENTENCE)
        with open(cls.clip, "rb") as f:
            cls.clip_bytes = f.read()
        cfg = '[limits]\nmax_audio_seconds = 20\n\n' + target(MODEL, cls.model, "parallel = 2")
        cls.gw = gw.serve_config(cfg)

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def post(self, fields, data=None, route="/v1/audio/transcriptions", greedy=True):
        fields = [("model", MODEL), *(GREEDY if greedy else ()), *fields]
        body, headers = form(fields, [("file", "clip.wav", self.clip_bytes if data is None else data)])
        return self.gw.request("POST", route, body, headers, timeout=TIMEOUT_S)

    def test_every_format_is_the_cli_transcript(self):
        for fmt in FORMATS:
            with self.subTest(format=fmt):
                status, headers, body = self.post([("response_format", fmt)])
                self.assertEqual(status, 200, body)
                self.assertEqual(body.decode(), cli(self.model, self.clip, fmt))
                json_type = fmt in ("json", "verbose_json")
                self.assertTrue(headers["content-type"].startswith("application/json" if json_type else "text/plain"))
        status, _, body = self.post([("response_format", "verbose_json"), ("timestamp_granularities[]", "word"),
                                     ("timestamp_granularities[]", "segment")])
        self.assertEqual(status, 200, body)
        self.assertEqual(body.decode(), cli(self.model, self.clip, "verbose_json", "--words"))
        self.assertTrue(json.loads(body)["words"])
        # whisper-cli's defaults (beam 5, best of 5, the temperature fallback): the CLI's transcript
        status, _, body = self.post([], greedy=False)
        self.assertEqual(status, 200, body)
        self.assertEqual(body.decode(), cli(self.model, self.clip, "json", greedy=False))
        status, _, body = self.post([("response_format", "verbose_json")], route="/v1/audio/translations")
        self.assertEqual(status, 200, body)
        self.assertEqual(body.decode(), cli(self.model, self.clip, "verbose_json", "--translate"))
        self.assertEqual(json.loads(body)["task"], "translate")

    def test_segments_are_whisper_clis(self):
        build_peer()
        ref, ref_lang = whisper_cli(self.model, self.clip, "auto", os.path.join(self.tmp, "ref"))
        status, _, body = self.post([("response_format", "verbose_json")], greedy=False)
        self.assertEqual(status, 200, body)
        doc = json.loads(body)
        got = [(round(s["start"] * 1000), round(s["end"] * 1000), s["text"]) for s in doc["segments"]]
        self.assertEqual(got, ref)
        self.assertEqual(doc["language"], ref_lang)

    def test_openai_npm_client(self):
        if not (shutil.which("node") and shutil.which("npm")):
            self.skipTest("node and npm are needed for the openai client")
        npm.ensure(JS_DIR, "openai")
        r = subprocess.run(["node", "openai_transcribe.mjs", self.gw.base, MODEL, self.clip, json.dumps(dict(GREEDY))],
                           cwd=JS_DIR,
                           capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        self.assertTrue(lines, f"no result from node:\n{r.stdout}\n{r.stderr}")
        res = json.loads(lines[-1])
        self.assertTrue(res["ok"], res.get("error"))
        for api, flag in (("transcriptions", ()), ("translations", ("--translate",))):
            for fmt in FORMATS:
                with self.subTest(api=api, format=fmt):
                    want = cli(self.model, self.clip, fmt, *flag)
                    got = res[api][fmt]
                    self.assertEqual(got, json.loads(want) if fmt in ("json", "verbose_json") else want)
        text = json.loads(cli(self.model, self.clip, "json"))["text"]
        self.assertEqual(res["stream"]["done"]["text"], text)
        self.assertEqual("".join(res["stream"]["deltas"]).strip(), text.strip())
        self.assertGreater(res["stream"]["done"]["usage"]["seconds"], 0)
        self.assertEqual(res["bad"]["status"], 400)
        self.assertIn("'file'", res["bad"]["message"])

    def test_streamed_events(self):
        body, headers = form([("model", MODEL), *GREEDY, ("stream", "true")], [("file", "clip.wav", self.clip_bytes)])
        conn = self.gw.connect(TIMEOUT_S)
        conn.request("POST", "/v1/audio/transcriptions", body, headers)
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertTrue(resp.getheader("Content-Type").startswith("text/event-stream"))
        events = [data for _, data in gw.read_sse(resp)]
        conn.close()
        self.assertEqual(events[-1], "[DONE]")
        parsed = [json.loads(e) for e in events[:-1]]
        self.assertEqual([e["type"] for e in parsed[:-1]], ["transcript.text.delta"] * (len(parsed) - 1))
        self.assertEqual(parsed[-1]["type"], "transcript.text.done")
        self.assertEqual(parsed[-1]["text"], json.loads(cli(self.model, self.clip, "json"))["text"])

    def test_bad_audio_is_a_400_and_the_gateway_lives(self):
        cases = [
            ("not audio", b"just some bytes, not a clip" * 10, [], "'file'"),
            ("truncated", self.clip_bytes[: len(self.clip_bytes) // 3], [], "truncated"),
            ("no samples", silent_wav(0), [], "0 samples"),
            ("over max_audio_seconds", silent_wav(16000 * 25), [], "max_audio_seconds"),
            ("unknown language", None, [("language", "xx")], "language 'xx'"),
            ("unknown format", None, [("response_format", "docx")], "'response_format'"),
            ("word without verbose_json", None, [("timestamp_granularities[]", "word")], "timestamp_granularities"),
            ("stream with srt", None, [("stream", "true"), ("response_format", "srt")], "'stream'"),
            ("streamed, not audio", b"RIFF but nothing more" * 4, [("stream", "true")], "'file'"),
            ("a chunk size that wraps", HANG_WAV, [], "more than the 41 that follow it"),
            ("streamed, unknown language", None, [("stream", "true"), ("language", "xx")], "language 'xx'"),
            ("beam_size too large", None, [("beam_size", "9")], "'beam_size'"),
            ("refused field", None, [("chunking_strategy", "auto")], "'chunking_strategy'"),
            ("unknown field", None, [("colour", "blue")], "'colour'"),
        ]
        for name, data, fields, needle in cases:
            with self.subTest(case=name):
                status, _, body = self.post(fields, data)
                self.assertEqual(status, 400, body)
                err = json.loads(body)["error"]
                self.assertEqual(err["type"], "invalid_request_error")
                self.assertIn(needle, err["message"])
        status, _, body = self.post([])
        self.assertEqual(status, 200, body)

    def test_the_shared_media_budget_holds_the_decoded_clip(self):
        ten_seconds = silent_wav(16000 * 10)  # 1.2 MB decoded: its 16 kHz samples twice, as floats
        g = gw.serve_config("[limits]\nmedia_decoded_budget_mb = 1\n\n" + target("small", self.model))
        try:
            body, headers = form([("model", "small"), *GREEDY], [("file", "ten.wav", ten_seconds)])
            status, _, data = g.request("POST", "/v1/audio/transcriptions", body, headers, timeout=TIMEOUT_S)
            self.assertEqual(status, 400, data)
            self.assertIn("media_decoded_budget_mb", json.loads(data)["error"]["message"])
            body, headers = form([("model", "small"), *GREEDY], [("file", "clip.wav", self.clip_bytes)])
            status, _, data = g.request("POST", "/v1/audio/transcriptions", body, headers, timeout=TIMEOUT_S)
            self.assertEqual(status, 200, data)
        finally:
            g.stop()

    def test_two_clips_at_once(self):
        want = cli(self.model, self.clip, "json")
        results = [None, None]

        def one(i):
            results[i] = self.post([])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT_S)
        for status, _, body in results:
            self.assertEqual(status, 200, body)
            self.assertEqual(body.decode(), want)

    def test_a_chat_is_refused_and_the_listing_says_what_it_is(self):
        status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body(MODEL))
        self.assertEqual(status, 400)
        self.assertIn("/v1/audio/transcriptions", body["error"]["message"])
        status, _, body = self.gw.json("GET", "/v1/models")
        entry = [m for m in body["data"] if m["id"] == MODEL][0]
        self.assertEqual(entry["recipe"], "whispercpp")
        self.assertEqual(entry["capabilities"], ["transcription", "translation"])
        self.assertGreater(entry["sipp"]["memory"]["total_bytes"], 0)
        self.assertGreaterEqual(entry["sipp"]["memory_estimate"]["total_bytes"], entry["sipp"]["memory"]["total_bytes"])
        status, _, body = self.gw.json("GET", "/v1/backends")
        t = [t for t in body["targets"] if t["name"] == MODEL][0]
        self.assertEqual((t["recipe"], t["backend"]), ("whispercpp", "cpu"))
        status, _, show = self.gw.json("POST", "/api/show", {"model": MODEL})  # Ollama's, for any kind
        self.assertEqual(status, 200, show)
        self.assertEqual((show["details"]["family"], show["details"]["format"]), ("whisper", "ggml"))
        self.assertEqual(show["capabilities"], ["transcription", "translation"])

    def test_a_client_that_goes_away_cancels_its_clip(self):
        long_clip = os.path.join(self.tmp, "long.wav")
        speak(long_clip, " ".join([SENTENCE] * 100))  # about five minutes: ten of whisper's windows
        with open(long_clip, "rb") as f:
            data = f.read()
        g = gw.serve_config("[server]\nmax_request_bytes = 16777216\n\n" + target("one", self.model, "parallel = 1"))
        try:
            cancelled = lambda: gw.metric(g.metrics(), "sipp_errors_total", code="not_ready") or 0  # noqa: E731
            before = cancelled()
            body, headers = form([("model", "one")], [("file", "long.wav", data)])
            sock = socket.create_connection((g.host, g.port))
            head = (f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: {g.host}:{g.port}\r\n"
                    f"Content-Type: {headers['Content-Type']}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
            sock.sendall(head + body)
            time.sleep(0.3)
            sock.close()
            # The abandoned clip ends cancelled (a 503 nobody reads), not transcribed to its end. How soon
            # depends on the machine's load, so the test asks what happened, not how fast.
            line = wait_until(lambda: re.search(r'"POST /v1/audio/transcriptions" .*', g.text()), TIMEOUT_S,
                              "the abandoned clip's end").group(0)
            self.assertRegex(line, r'" 503 .* target=one .*\(client gone\)$')
            self.assertEqual(cancelled(), before + 1)
            # and the one state serves the next clip
            body, headers = form([("model", "one"), *GREEDY], [("file", "clip.wav", self.clip_bytes)])
            status, _, _ = g.request("POST", "/v1/audio/transcriptions", body, headers, timeout=TIMEOUT_S)
            self.assertEqual(status, 200)
        finally:
            g.stop()

    def test_a_target_language_is_the_default(self):
        g = gw.serve_config(target("de", self.model, 'language = "de"'))
        try:
            body, headers = form([("model", "de"), ("response_format", "verbose_json"), *GREEDY],
                                 [("file", "clip.wav", self.clip_bytes)])
            status, _, by_target = g.request("POST", "/v1/audio/transcriptions", body, headers, timeout=TIMEOUT_S)
            self.assertEqual(status, 200, by_target)
            status, _, asked = self.post([("response_format", "verbose_json"), ("language", "de")])
            self.assertEqual(status, 200, asked)
            self.assertEqual(json.loads(by_target)["language"], json.loads(asked)["language"])
            self.assertEqual(json.loads(by_target)["text"], json.loads(asked)["text"])
            status, _, auto = self.post([("response_format", "verbose_json")])
            self.assertNotEqual(json.loads(auto)["language"], json.loads(asked)["language"])
        finally:
            g.stop()

    def test_loaded_on_demand_and_evicted(self):
        other = os.path.join(self.tmp, "ggml-other.bin")
        shutil.copy(self.model, other)
        cfg = ('[server]\nmax_loaded_models = 1\n\n' + target("a", self.model, 'load = "on_demand"') +
               target("b", other, 'load = "on_demand"'))
        g = gw.serve_config(cfg)
        try:
            states = lambda: {m["id"]: m["state"] for m in g.json("GET", "/v1/models")[2]["data"]}  # noqa: E731
            self.assertEqual(states(), {"a": "unloaded", "b": "unloaded"})
            for name, want in (("a", {"a": "loaded", "b": "unloaded"}), ("b", {"a": "unloaded", "b": "loaded"})):
                body, headers = form([("model", name), *GREEDY], [("file", "clip.wav", self.clip_bytes)])
                status, _, body = g.request("POST", "/v1/audio/transcriptions", body, headers, timeout=TIMEOUT_S)
                self.assertEqual(status, 200, body)
                self.assertEqual(states(), want)
            self.assertIn("sipp_model_evictions_total 1\n", g.request("GET", "/metrics")[2].decode())
            entry = [m for m in g.json("GET", "/v1/models")[2]["data"] if m["id"] == "a"][0]
            self.assertEqual((entry["sipp"]["loads"], entry["sipp"]["evictions"]), (1, 1))
        finally:
            g.stop()

    def test_config_checks_the_recipe_against_the_file(self):
        gguf = gw.model()
        cases = [
            (target("w", gguf, 'recipe = "whispercpp"'), "is not a whisper.cpp model"),
            (target("w", self.model, 'recipe = "llamacpp"'), "is a whisper.cpp model"),
            (target("w", self.model, f'mmproj = "{gguf}"'), "mmproj is a key of llama models"),
            (target("w", self.model, 'recipe = "espeak"'), "not one of llamacpp, whispercpp"),
        ]
        for text, needle in cases:
            with self.subTest(needle=needle):
                path = gw.write(f"recipe-{uuid.uuid4().hex}.toml", text)
                r = subprocess.run([gw.SIPP, "serve", "--config", path, "--check"], capture_output=True, text=True,
                                   timeout=TIMEOUT_S)
                self.assertNotEqual(r.returncode, 0)
                self.assertIn(needle, r.stderr)
        path = gw.write(f"recipe-{uuid.uuid4().hex}.toml", target("w", self.model))
        r = subprocess.run([gw.SIPP, "serve", "--config", path, "--check"], capture_output=True, text=True,
                           timeout=TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
