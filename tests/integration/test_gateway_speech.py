"""POST /v1/audio/speech: text to speech through the gateway's tts kind (flite, a Pocket TTS and a Qwen3-TTS
pair).

Every format the route gives is decoded by a real decoder from Debian (flac, lame, opusdec, Python's
wave module) and compared with what `sipp speak` makes of the same text and voice: the WAV's samples
are the same, the other formats decode to the same length at their declared rate. The streamed forms
(stream_format audio: chunked bytes; sse: speech.audio.delta events with base64 audio, then
speech.audio.done) carry the same bytes. A Pocket TTS and a Qwen3-TTS pair (sipp-synth --tts-pair pocket,
qwen3tts) give the samples `sipp speak --seed` gives, which tests/integration/test_speech_pair.py holds equal
to llama-tts.
Bad input is a 400 naming it, and the gateway keeps serving. The official openai npm client's
audio.speech.create is run too, for every format and both stream formats (tests/integration/js)."""

import array
import base64
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import wave

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from test_gateway_openai_js import JS_DIR, NODE_TIMEOUT_S, ensure_client  # noqa: E402
from tests.support.wait import wait_until  # noqa: E402

TEXT = "Hello world. This is sipp speaking! How are you today?"
SPEECH = "/v1/audio/speech"
DECODE_TIMEOUT_S = 60
WAIT_S = 300  # a bound for what must happen, not a time it must happen in
MAX_CHARS = 400
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def wav_of(data):
    """(rate, samples) of WAV bytes."""
    with tempfile.NamedTemporaryFile(suffix=".wav") as f:
        f.write(data)
        f.flush()
        with wave.open(f.name) as w:
            return w.getframerate(), array.array("h", w.readframes(w.getnframes()))


def decode(command, data, suffix):
    """Decodes data with a Debian decoder (command(src, out)) into a WAV: (rate, samples)."""
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "in" + suffix), os.path.join(d, "out.wav")
        with open(src, "wb") as f:
            f.write(data)
        p = subprocess.run(command(src, out), capture_output=True, text=True, timeout=DECODE_TIMEOUT_S)
        assert p.returncode == 0, p.stderr
        with open(out, "rb") as f:
            return wav_of(f.read())


def speak_cli(*args):
    """`sipp speak ... -o FILE` as a WAV: (rate, samples)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cli.wav")
        p = subprocess.run([gw.SIPP, "speak", *args, "-o", out], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        with open(out, "rb") as f:
            return wav_of(f.read())


def flite_config(extra=""):
    return (f'[limits]\nmax_speech_chars = {MAX_CHARS}\n\n[[targets]]\nname = "voice"\nrecipe = "flite"\n{extra}\n'
            + gw.local_target("tiny"))


class FliteSpeechTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.g = gw.serve_config(flite_config())
        cls.rate, cls.samples = speak_cli("flite", TEXT)

    @classmethod
    def tearDownClass(cls):
        cls.g.stop()

    def speech(self, **fields):
        body = {"model": "voice", "input": TEXT, **fields}
        return self.g.request("POST", SPEECH, body)

    def ok(self, **fields):
        status, headers, data = self.speech(**fields)
        self.assertEqual(status, 200, data[:500])
        return headers, data

    def refused(self, words, **fields):
        status, _, data = self.speech(**fields)
        self.assertEqual(status, 400, data[:500])
        message = json.loads(data)["error"]["message"]
        for w in words:
            self.assertIn(w, message)
        return message

    def test_listed_with_its_voices(self):
        status, _, body = self.g.json("GET", "/v1/models")
        self.assertEqual(status, 200)
        entry = next(m for m in body["data"] if m["id"] == "voice")
        self.assertEqual(entry["capabilities"], ["speech"])
        self.assertEqual(entry["sipp"]["recipe"], "flite")
        self.assertIn("slt", entry["voices"])
        self.assertIn("awb", entry["voices"])
        status, _, show = self.g.json("POST", "/api/show", {"model": "voice"})  # Ollama's, for any kind
        self.assertEqual(status, 200, show)
        self.assertEqual((show["details"]["family"], show["details"]["format"]), ("tts", "builtin"))
        self.assertEqual(show["capabilities"], ["speech"])

    def test_wav_is_the_cli_samples(self):
        headers, data = self.ok(response_format="wav")
        self.assertEqual(headers["content-type"], "audio/wav")
        self.assertEqual(wav_of(data), (self.rate, self.samples))
        self.assertEqual(self.rate, 16000)

    def test_default_format_is_mp3(self):
        headers, data = self.ok()
        self.assertEqual(headers["content-type"], "audio/mpeg")
        rate, s = decode(lambda src, out: ["lame", "--decode", "--quiet", src, out], data, ".mp3")
        self.assertEqual((rate, len(s)), (self.rate, len(self.samples)))

    def test_flac_is_lossless(self):
        _, data = self.ok(response_format="flac")
        self.assertEqual(data[:4], b"fLaC")
        decoded = decode(lambda src, out: ["flac", "-d", "-f", "-s", src, "-o", out], data, ".flac")
        self.assertEqual(decoded, (self.rate, self.samples))

    def test_opus_decodes_at_48_khz(self):
        headers, data = self.ok(response_format="opus")
        self.assertEqual(headers["content-type"], "audio/ogg")
        self.assertEqual((data[:4], data[28:36]), (b"OggS", b"OpusHead"))
        rate, s = decode(lambda src, out: ["opusdec", "--quiet", "--rate", "48000", src, out], data, ".opus")
        self.assertEqual((rate, len(s)), (48000, len(self.samples) * 3))

    def test_pcm_is_24_khz(self):
        _, data = self.ok(response_format="pcm")
        self.assertEqual(len(data) // 2, -(-len(self.samples) * 24000 // 16000))

    def test_openai_voice_names_and_own_voices(self):
        _, alloy = self.ok(response_format="wav", voice="alloy")  # alloy is slt, the default
        self.assertEqual(wav_of(alloy)[1], self.samples)
        _, awb = self.ok(response_format="wav", voice="awb")
        self.assertEqual(wav_of(awb), speak_cli("flite", TEXT, "--voice", "awb"))
        _, fable = self.ok(response_format="wav", voice="fable")  # fable is awb
        self.assertEqual(fable, awb)
        _, custom = self.ok(response_format="wav", voice={"id": "awb"})
        self.assertEqual(custom, awb)

    def test_speed(self):
        _, fast = self.ok(response_format="wav", speed=2.0)
        self.assertLess(len(wav_of(fast)[1]), len(self.samples) * 0.7)
        self.refused(["'speed'", "0.25", "4.0"], speed=4.5)
        self.refused(["'speed'"], speed="fast")

    def test_instructions_are_named_ignored(self):
        headers, _ = self.ok(response_format="wav", instructions="Speak cheerfully.")
        self.assertIn("instructions", headers.get("sipp-ignored", ""))

    def test_streamed_audio_is_chunked_with_placeholder_sizes(self):
        conn, resp = self.g.stream(SPEECH, {"model": "voice", "input": TEXT, "response_format": "wav",
                                            "stream_format": "audio"})
        try:
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.getheader("Transfer-Encoding"), "chunked")
            data = resp.read()
        finally:
            conn.close()
        self.assertEqual(struct.unpack("<I", data[4:8])[0], 0xFFFFFFFF)
        self.assertEqual(data[36:40], b"data")
        self.assertEqual(data[44:], self.samples.tobytes())

    def test_sse_events_carry_the_audio(self):
        _, plain = self.ok(response_format="pcm")
        status, ctype, events = self.g.sse(SPEECH, {"model": "voice", "input": TEXT, "response_format": "pcm",
                                                    "stream_format": "sse"})
        self.assertEqual((status, ctype), (200, "text/event-stream"))
        parsed = [json.loads(d) for _, d in events]
        self.assertEqual(parsed[-1]["type"], "speech.audio.done")
        deltas = parsed[:-1]
        self.assertGreaterEqual(len(deltas), 3)  # one a sentence at least
        self.assertTrue(all(e["type"] == "speech.audio.delta" for e in deltas))
        self.assertEqual(b"".join(base64.b64decode(e["audio"]) for e in deltas), plain)
        self.assertEqual(parsed[-1]["usage"], {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})  # flite

    def test_bad_input_is_a_400_naming_it(self):
        self.refused(["'input'", "empty"], input="  ")
        self.refused(["'input'", "missing"], input=None)
        self.refused(["'input'", "max_speech_chars", str(MAX_CHARS)], input="a" * (MAX_CHARS + 1))
        self.refused(["'voice'", "nobody", "slt", "alloy"], voice="nobody")
        self.refused(["'response_format'", "aac"], response_format="aac")
        self.refused(["'response_format'", "ogg"], response_format="ogg")
        self.refused(["'stream_format'", "chunks"], stream_format="chunks")
        self.refused(["'seed'"], seed=-1)
        self.refused(["'de'", "English only"], language="de")  # flite's voices speak English
        self.refused(["'language'"], language=7)
        self.refused(["'temperature'"], temperature=0.5)

    def test_the_field_table_rows(self):
        """docs/api-fields.md's speech rows: honored fields answer 200 unnamed, ignored ones are named in
        sipp-ignored, and a field in no row is a 400."""
        examples = {"model": "voice", "input": TEXT, "voice": "alloy", "response_format": "wav", "speed": 1.0,
                    "stream_format": None, "seed": 1, "language": "en", "instructions": "Cheerfully."}
        with open(os.path.join(ROOT, "docs", "api-fields.md")) as f:
            rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in f if ln.startswith("| speech |")]
        self.assertEqual(sorted(r[1] for r in rows), sorted(examples))
        for _, field, decision, _, _ in rows:
            status, headers, data = self.speech(**{"response_format": "wav", field: examples[field]})
            self.assertEqual(status, 200, (field, data[:300]))
            self.assertEqual(field in headers.get("sipp-ignored", ""), decision == "ignored", field)
        self.refused(["'temperature'", "api-fields.md"], temperature=0.5)

    def test_kinds_that_do_not_match_are_400s(self):
        status, _, body = self.g.json("POST", SPEECH, {"model": "tiny", "input": TEXT})
        self.assertEqual(status, 400)
        self.assertIn("'tiny' does not speak", body["error"]["message"])
        status, _, body = self.g.json("POST", "/v1/chat/completions", gw.chat_body("voice"))
        self.assertEqual(status, 400)
        self.assertIn("text-to-speech", body["error"]["message"])
        self.assertIn("/v1/audio/speech", body["error"]["message"])
        status, _, body = self.g.json("POST", "/v1/embeddings", {"model": "voice", "input": "x"})
        self.assertEqual(status, 400)

    def test_a_client_that_leaves_and_the_gateway_lives(self):
        long_text = " ".join(["This sentence is one of many."] * 12)
        conn, resp = self.g.stream(SPEECH, {"model": "voice", "input": long_text, "response_format": "pcm",
                                            "stream_format": "audio"})
        self.assertEqual(resp.status, 200)
        resp.read(64)
        conn.close()  # gone mid-speech
        wait_until(lambda: re.search(r'"POST /v1/audio/speech" 200 .*\(client gone\)', self.g.text()), WAIT_S,
                   "the abandoned speech's end")
        headers, data = self.ok(response_format="wav")
        self.assertEqual(wav_of(data)[1], self.samples)
        self.assertEqual(self.g.request("GET", "/health")[0], 200)

    def test_metrics_count_speech(self):
        before = gw.metric(self.g.metrics(), "sipp_requests_total", target="voice", code="200") or 0
        self.ok(response_format="wav")
        # counted when the reply is done, just after the client has it; an earlier test's request may be
        # counted meanwhile too (it also ends after its client has it), so this one is at least one more
        wait_until(lambda: (gw.metric(self.g.metrics(), "sipp_requests_total", target="voice", code="200") or 0)
                   >= before + 1, WAIT_S, "the request's count")


class ConfigTest(unittest.TestCase):
    def test_check_names_bad_speech_keys(self):
        cfg = gw.write("speech-bad.toml", '[[targets]]\nname = "a"\nrecipe = "flite"\nmodel = "x.gguf"\n\n'
                       '[[targets]]\nname = "b"\nrecipe = "flite"\nvoice = "nobody"\nspeaker = "s.wav"\n\n'
                       '[[targets]]\nname = "c"\nrecipe = "speechify"\nmodel = "x.gguf"\n\n'
                       '[[targets]]\nname = "d"\nrecipe = "flite"\nbatch_frames = true\n\n'
                       '[[targets]]\nname = "e"\nrecipe = "flite"\nspeakers = { alloy = "a.wav" }\n\n'
                       '[[targets]]\nname = "f"\nrecipe = "flite"\nlanguage = "de"\n\n'
                       '[limits]\nmax_speech_chars = 0\n')
        p = subprocess.run([gw.SIPP, "serve", "--check", "--config", cfg], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1)
        for words in ["'a' model: recipe \"flite\"", "'b' speaker", "unknown flite voice 'nobody'", "kal16",
                      "recipe: 'speechify' is not one of", "max_speech_chars",
                      "'d' batch_frames: only a recipe = \"tts\" pair",
                      "'e' speakers: only a recipe = \"tts\" pair", "'f' language: only a speech target"]:
            self.assertIn(words, p.stderr)

    def test_serve_voice_adds_a_flite_target(self):
        g = gw.Gateway(["--voice=awb", "--port", "0", gw.model()])
        try:
            status, _, body = g.json("GET", "/v1/models")
            self.assertEqual(sorted(m["id"] for m in body["data"]), ["tiny", "voice"])
            status, _, data = g.request("POST", SPEECH, {"model": "voice", "input": TEXT, "response_format": "wav"})
            self.assertEqual(status, 200)
            self.assertEqual(wav_of(data), speak_cli("flite", TEXT, "--voice", "awb"))
        finally:
            self.assertEqual(g.stop(), 0)


class PairSpeechTest(unittest.TestCase):
    """A Pocket TTS pair: the API's WAV is `sipp speak --seed`'s samples (itself llama-tts's)."""

    PAIR, NAME = "pocket", "pocket"
    FRAMES_TWO_SENTENCES = None  # its tail frames: a count of its own
    SHAPE = ["--vocab", os.path.join(gw.VOCAB_DIR, "ggml-vocab-llama-spm.gguf"), "--n-embd", "64", "--n-layer", "2",
             "--n-head", "4", "--n-head-kv", "4", "--n-ff", "128", "--n-ctx", "512"]

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix=f"sipp-speech-{cls.PAIR}-")
        prefix = os.path.join(cls.dir, cls.PAIR)
        subprocess.run([gw.SYNTH, "--out", prefix, "--tts-pair", cls.PAIR, *cls.SHAPE], check=True,
                       capture_output=True, timeout=120)
        cls.model, cls.mmproj = prefix + ".gguf", prefix + "-mmproj.gguf"
        # no recipe: told from the projector (a speech pair's)
        cfg = (f'[[targets]]\nname = "{cls.NAME}"\nmodel = "{cls.model}"\nmmproj = "{cls.mmproj}"\n'
               "threads = 1\nparallel = 2\n")
        cls.g = gw.serve_config(cfg)

    @classmethod
    def tearDownClass(cls):
        cls.g.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_same_samples_as_sipp_speak(self):
        status, headers, data = self.g.request("POST", SPEECH, {"model": self.NAME, "input": "Hello world.",
                                                                "response_format": "wav", "seed": 1})
        self.assertEqual(status, 200, data[:500])
        rate, ours = wav_of(data)
        ref_rate, ref = speak_cli(self.model, "--mmproj", self.mmproj, "Hello world.", "--seed", "1")
        self.assertEqual((rate, ref_rate), (24000, 24000))
        self.assertGreater(len(ref), 0)
        self.assertEqual(ours, ref)

    def test_sse_done_counts_prompt_rows_and_frames(self):
        status, _, events = self.g.sse(SPEECH, {"model": self.NAME, "input": "Hello world. Goodbye!",
                                                "response_format": "pcm", "stream_format": "sse", "seed": 1})
        self.assertEqual(status, 200)
        done = json.loads(events[-1][1])
        self.assertEqual(done["type"], "speech.audio.done")
        usage = done["usage"]
        self.assertGreater(usage["input_tokens"], 2)  # each sentence's prompt rows
        self.assertEqual(usage["output_tokens"], self.FRAMES_TWO_SENTENCES or usage["output_tokens"])
        self.assertGreater(usage["output_tokens"], 0)
        self.assertEqual(usage["total_tokens"], usage["input_tokens"] + usage["output_tokens"])

    def test_configured_speakers_are_voices(self):
        clip = os.path.join(self.dir, "speaker.wav")
        if not os.path.exists(clip):
            subprocess.run([gw.SIPP, "speak", "flite", "This is my voice, speaking for reference.", "-o", clip],
                           check=True, capture_output=True, timeout=60)
        cfg = (f'[[targets]]\nname = "s"\nmodel = "{self.model}"\nmmproj = "{self.mmproj}"\nthreads = 1\n'
               f'speakers = {{ alloy = "{clip}" }}\n')
        g = gw.serve_config(cfg)
        try:
            entry = next(m for m in g.json("GET", "/v1/models")[2]["data"] if m["id"] == "s")
            self.assertEqual(entry["voices"], ["default", "alloy"])
            body = {"model": "s", "input": "Hello world.", "response_format": "wav", "seed": 1}
            _, with_clip = speak_cli(self.model, "--mmproj", self.mmproj, "Hello world.", "--seed", "1", "--speaker",
                                     clip)
            _, plain = speak_cli(self.model, "--mmproj", self.mmproj, "Hello world.", "--seed", "1")
            for voice, want in (("alloy", with_clip), ("nova", plain), ("default", plain)):
                status, _, data = g.request("POST", SPEECH, {**body, "voice": voice})
                self.assertEqual(status, 200, data[:300])
                self.assertEqual(wav_of(data)[1], want, voice)
            status, _, data = g.request("POST", SPEECH, {**body, "voice": "nobody"})
            self.assertEqual(status, 400)
            self.assertIn("default, alloy", json.loads(data)["error"]["message"])
        finally:
            g.stop()

    def test_a_missing_speaker_clip_is_named(self):
        cfg = gw.write(f"{self.PAIR}-speaker.toml", f'[[targets]]\nname = "p"\nmodel = "{self.model}"\n'
                       f'mmproj = "{self.mmproj}"\nspeaker = "no-such.wav"\n')
        p = subprocess.run([gw.SIPP, "serve", "--check", "--config", cfg], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn("speaker clip", p.stderr)
        self.assertIn("no-such.wav", p.stderr)

    def test_listed_and_voices(self):
        status, _, body = self.g.json("GET", "/v1/models")
        entry = next(m for m in body["data"] if m["id"] == self.NAME)
        self.assertEqual((entry["capabilities"], entry["voices"], entry["sipp"]["recipe"]),
                         (["speech"], ["default"], "tts"))
        status, _, data = self.g.request("POST", SPEECH, {"model": self.NAME, "input": "Hi.", "voice": "slt"})
        self.assertEqual(status, 400)
        self.assertIn("default", json.loads(data)["error"]["message"])


    def test_a_language_the_model_does_not_take_is_named(self):
        status, _, data = self.g.request("POST", SPEECH, {"model": self.NAME, "input": "Hi.", "language": "xx"})
        self.assertEqual(status, 400, data[:300])
        self.assertIn("'xx'", json.loads(data)["error"]["message"])


class Qwen3PairSpeechTest(PairSpeechTest):
    """A Qwen3-TTS pair (sipp-synth --tts-pair qwen3tts, told from its projector too): the same holds, and a
    language its vocabulary has is taken (its samples are `sipp speak --language`'s)."""

    PAIR, NAME = "qwen3tts", "talker"
    FRAMES_TWO_SENTENCES = 2  # one frame a sentence
    SHAPE = ["--vocab", os.path.join(gw.VOCAB_DIR, "ggml-vocab-qwen2.gguf"), "--n-embd", "64", "--n-layer", "2",
             "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128", "--n-ctx", "1024"]

    def test_a_language_is_spoken(self):
        status, _, data = self.g.request("POST", SPEECH, {"model": self.NAME, "input": "Hello world.",
                                                          "response_format": "wav", "seed": 1, "language": "de"})
        self.assertEqual(status, 200, data[:500])
        _, ref = speak_cli(self.model, "--mmproj", self.mmproj, "Hello world.", "--seed", "1", "--language", "de")
        self.assertEqual(wav_of(data)[1], ref)

    def test_a_target_language_is_the_default(self):
        cfg = (f'[[targets]]\nname = "de"\nrecipe = "tts"\nmodel = "{self.model}"\nmmproj = "{self.mmproj}"\n'
               'threads = 1\nlanguage = "de"\n')
        g = gw.serve_config(cfg)
        try:
            body = {"model": "de", "input": "Hello world.", "response_format": "wav", "seed": 1}
            _, german = speak_cli(self.model, "--mmproj", self.mmproj, "Hello world.", "--seed", "1", "--language", "de")
            _, english = speak_cli(self.model, "--mmproj", self.mmproj, "Hello world.", "--seed", "1")
            for extra, want in (({}, german), ({"language": "en"}, english)):
                status, _, data = g.request("POST", SPEECH, {**body, **extra})
                self.assertEqual(status, 200, data[:300])
                self.assertEqual(wav_of(data)[1], want, extra)
        finally:
            g.stop()

    def test_batch_frames_target_speaks_the_same(self):
        cfg = (f'[[targets]]\nname = "b"\nrecipe = "tts"\nmodel = "{self.model}"\nmmproj = "{self.mmproj}"\n'
               "threads = 1\nparallel = 2\nbatch_frames = true\n")
        g = gw.serve_config(cfg)
        try:
            status, _, data = g.request("POST", SPEECH, {"model": "b", "input": "Hello world.", "response_format": "wav",
                                                         "seed": 1})
            self.assertEqual(status, 200, data[:500])
            _, ref = speak_cli(self.model, "--mmproj", self.mmproj, "Hello world.", "--seed", "1")
            self.assertEqual(wav_of(data)[1], ref)
        finally:
            g.stop()

    def test_a_language_the_model_does_not_take_is_named(self):
        super().test_a_language_the_model_does_not_take_is_named()
        _, _, data = self.g.request("POST", SPEECH, {"model": self.NAME, "input": "Hi.", "language": "xx"})
        self.assertIn("english", json.loads(data)["error"]["message"])  # the languages it has are listed


@unittest.skipUnless(shutil.which("node") and shutil.which("npm"), "node and npm are needed for the openai client")
class OpenAIClientSpeechTest(unittest.TestCase):
    def test_audio_speech_create(self):
        ensure_client()
        g = gw.serve_config(flite_config())
        try:
            r = subprocess.run(["node", "speech_client.mjs", f"{g.base}/v1", "voice"], cwd=JS_DIR,
                               capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
            self.assertTrue(lines, f"no result from node:\n{r.stdout}\n{r.stderr}")
            result = json.loads(lines[-1])
            self.assertTrue(result["ok"], f"{result.get('error')}\n--- gateway log:\n{g.text()[-3000:]}")
            self.assertEqual(result["checked"], ["wav", "pcm", "flac", "mp3", "opus", "stream-audio", "stream-sse",
                                                 "errors"])
        finally:
            self.assertEqual(g.stop(), 0)


def whisper_model():
    """A synthetic whisper.cpp model (sipp-synth --whisper test), or None when this build has none."""
    path = os.path.join(gw.tmpdir(), "ggml-loop-whisper.bin")
    if not os.path.exists(path):
        r = subprocess.run([gw.SYNTH, "--whisper", "test", "--out", path, "--vocab",
                            os.path.join(gw.VOCAB_DIR, "ggml-vocab-gpt-2.gguf")], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            return None
    return path


@unittest.skipUnless(shutil.which("node") and shutil.which("npm"), "node and npm are needed for the openai client")
class VoiceLoopTest(unittest.TestCase):
    """flite speaks a question, the whisper kind transcribes it, a chat answers, the tts kind speaks the
    answer: four requests to one gateway, through the official openai client only."""

    def test_voice_loop(self):
        whisper = whisper_model()
        cfg = flite_config() + (f'[[targets]]\nname = "whisper"\nmodel = "{whisper}"\nbackend = "cpu"\n'
                                "threads = 1\n" if whisper else "")
        check = subprocess.run([gw.SIPP, "serve", "--check", "--config", gw.write("loop.toml", cfg)],
                               capture_output=True, text=True, timeout=60)
        if not whisper or check.returncode != 0:
            self.skipTest(f"this gateway serves no whisper.cpp target yet: {check.stderr.strip()[:300]}")
        ensure_client()
        g = gw.serve_config(cfg)
        try:
            r = subprocess.run(["node", "voice_loop.mjs", f"{g.base}/v1", "voice", "whisper", "tiny"], cwd=JS_DIR,
                               capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
            self.assertTrue(lines, f"no result from node:\n{r.stdout}\n{r.stderr}")
            result = json.loads(lines[-1])
            self.assertTrue(result["ok"], f"{result.get('error')}\n--- gateway log:\n{g.text()[-3000:]}")
        finally:
            self.assertEqual(g.stop(), 0)


if __name__ == "__main__":
    unittest.main()
