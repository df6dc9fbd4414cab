"""Audio on the gateway (issue 30): OpenAI's POST /v1/audio/transcriptions and audio parts on Responses.

  TranscriptionTest  a tiny model with an audio projector (sipp-synth --projector qwen2a) behind
                     `sipp serve`: json, text and verbose_json answers, a stream of transcript.text
                     events, the forms sipp refuses (no file, no boundary, a cut-short body, bytes
                     that are no audio, a part over max_request_bytes, a field sipp does not know or
                     cannot honour), targets that cannot hear (no projector, an image-only one) refused
                     naming the target and mmproj before a load, and a chat stream on the same target
                     that goes on, unchanged, while a clip is transcribed beside it.
  ResponsesAudioTest /v1/responses with input_audio parts and input_file parts holding an audio
                     data: URL; a file that is not audio, a file_id and a file_url refused by part.

Random weights: the text means nothing; what is checked is the shape, the counts and the refusals.
Everything talks to loopback; only processes started here are stopped.
"""

import base64
import json
import os
import struct
import shutil
import sys
import threading
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support.audio import wav  # noqa: E402
from tests.support.images import png  # noqa: E402
from tests.support.models import make_projector  # noqa: E402

ROUTE = "/v1/audio/transcriptions"
EARS, EYES, PLAIN = "ears", "eyes", "plain"
EARS_LATER = "ears-later"  # the audio projector, loaded on demand (never, here)
AUDIO_TOKENS = 750  # qwen2a: one 30 s chunk
CLIP_S = 0.5
BODY_LIMIT = 256 * 1024  # [server] max_request_bytes here
MAX_TOKENS = 8  # the targets' max_tokens: each answer is short


WAV = wav(CLIP_S)


def form(fields=(), files=(), boundary=None, close=True):
    """A multipart/form-data body and its headers: fields (name, text) and files (name, filename, bytes)."""
    b = boundary or "sipp-" + uuid.uuid4().hex
    out = b""
    for name, value in fields:
        out += f'--{b}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + value.encode() + b"\r\n"
    for name, filename, data in files:
        out += (f'--{b}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"
    if close:
        out += f"--{b}--\r\n".encode()
    return out, {"Content-Type": f"multipart/form-data; boundary={b}"}


def clip_form(model=EARS, data=WAV, **fields):
    return form([("model", model), *fields.items()], [("file", "clip.wav", data)])


class AudioGateway:
    """One gateway for the module: an audio target, an image-only one and one without a projector."""
    gw = None

    @classmethod
    def start(cls):
        if cls.gw:
            return cls.gw
        d = os.path.join(gw.tmpdir(), "audio")
        os.makedirs(d, exist_ok=True)
        model = os.path.join(d, "model.gguf")
        shutil.copy(gw.model(), model)
        audio, vision = make_projector(d, "qwen2a"), make_projector(d, "llava")
        extra = f"\nmmproj_offload = false\nmax_tokens = {MAX_TOKENS}"
        cls.gw = gw.serve_config(
            f"[server]\nmax_request_bytes = {BODY_LIMIT}\n\n" +
            gw.local_target(EARS, path=model, parallel=2, ctx=2048, extra=f'mmproj = "{audio}"' + extra) +
            gw.local_target(EYES, path=model, parallel=1, ctx=2048,
                            extra=f'mmproj = "{vision}"\nload = "on_demand"' + extra) +
            gw.local_target(PLAIN, path=model, parallel=1, ctx=2048, extra='load = "on_demand"') +
            gw.local_target(EARS_LATER, path=model, parallel=1, ctx=2048,
                            extra=f'mmproj = "{audio}"\nload = "on_demand"' + extra))
        return cls.gw

    @classmethod
    def stop(cls):
        if cls.gw:
            cls.gw.stop()
            cls.gw = None


def tearDownModule():
    AudioGateway.stop()


class TranscriptionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = AudioGateway.start()

    def post(self, body_headers, headers=None):
        body, hdrs = body_headers
        return self.gw.request("POST", ROUTE, body, {**hdrs, **(headers or {})})

    def error(self, body_headers, status=400):
        s, _, data = self.post(body_headers)
        self.assertEqual(s, status, data)
        return json.loads(data)["error"]["message"]

    def assert_usage(self, usage):
        self.assertEqual(usage["type"], "tokens")
        self.assertEqual(usage["input_token_details"]["audio_tokens"], AUDIO_TOKENS)
        self.assertGreater(usage["input_token_details"]["text_tokens"], 0)
        self.assertEqual(usage["input_tokens"], AUDIO_TOKENS + usage["input_token_details"]["text_tokens"])
        self.assertEqual(usage["total_tokens"], usage["input_tokens"] + usage["output_tokens"])
        self.assertGreater(usage["output_tokens"], 0)

    def test_json_is_the_default(self):
        s, h, data = self.post(clip_form())
        self.assertEqual(s, 200, data)
        self.assertTrue(h["content-type"].startswith("application/json"))
        body = json.loads(data)
        self.assertIsInstance(body["text"], str)
        self.assert_usage(body["usage"])
        self.assertNotIn("sipp-ignored", h)

    def test_text_is_the_text_alone(self):
        s, h, data = self.post(clip_form(response_format="text", temperature="0"))
        self.assertEqual(s, 200, data)
        self.assertTrue(h["content-type"].startswith("text/plain"), h)
        _, _, as_json = self.post(clip_form(response_format="json", temperature="0"))
        self.assertEqual(data.decode(), json.loads(as_json)["text"], "the same greedy answer in both formats")

    def test_verbose_json_has_the_language_and_the_wav_duration(self):
        s, _, data = self.post(clip_form(response_format="verbose_json", language="en"))
        self.assertEqual(s, 200, data)
        body = json.loads(data)
        self.assertEqual(body["task"], "transcribe")
        self.assertEqual(body["language"], "en")
        self.assertAlmostEqual(body["duration"], CLIP_S, places=3)
        self.assertNotIn("segments", body, "segments without real times would be made up")
        self.assert_usage(body["usage"])
        # the language goes into the instruction: more text tokens than without it
        _, _, plain = self.post(clip_form(response_format="verbose_json"))
        plain = json.loads(plain)
        self.assertNotIn("language", plain)
        self.assertGreater(body["usage"]["input_token_details"]["text_tokens"],
                           plain["usage"]["input_token_details"]["text_tokens"])

    def test_a_prompt_replaces_the_instruction(self):
        _, _, short = self.post(clip_form(prompt="Hi"))
        _, _, long = self.post(clip_form(prompt="Write down every word said in this recording, with punctuation"))
        self.assertGreater(json.loads(long)["usage"]["input_tokens"], json.loads(short)["usage"]["input_tokens"])

    def test_stream_sends_transcript_events(self):
        body, hdrs = clip_form(stream="true")
        conn = self.gw.connect()
        try:
            conn.request("POST", ROUTE, body=body, headers=hdrs)
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            self.assertTrue(r.getheader("Content-Type").startswith("text/event-stream"))
            events = [d for _, d in gw.read_sse(r)]
        finally:
            conn.close()
        self.assertEqual(events[-1], "[DONE]")
        parsed = [json.loads(e) for e in events[:-1]]
        deltas = [e["delta"] for e in parsed if e["type"] == "transcript.text.delta"]
        done = parsed[-1]
        self.assertEqual(done["type"], "transcript.text.done")
        self.assertEqual(done["text"], "".join(deltas))
        self.assert_usage(done["usage"])

    def test_stream_takes_json_only(self):
        msg = self.error(clip_form(stream="true", response_format="text"))
        self.assertIn("'stream'", msg)

    def test_forms_that_are_wrong_are_named(self):
        no_file = form([("model", EARS)])
        self.assertIn("'file' is missing", self.error(no_file))
        no_model = form([], [("file", "a.wav", WAV)])
        self.assertIn("'model' is missing", self.error(no_model))
        body, _ = clip_form()
        s, _, data = self.gw.request("POST", ROUTE, body, {"Content-Type": "multipart/form-data"})
        self.assertEqual(s, 400, data)
        self.assertIn("no boundary", json.loads(data)["error"]["message"])
        cut, hdrs = clip_form()
        s, _, data = self.gw.request("POST", ROUTE, cut[:len(cut) // 2], hdrs)
        self.assertEqual(s, 400, data)
        self.assertIn("cut short", json.loads(data)["error"]["message"])
        unclosed = form([("model", EARS)], [("file", "a.wav", WAV)], close=False)
        msg = self.error(unclosed)
        self.assertIn("part 'file' is not closed", msg)
        self.assertIn("--", msg)
        other, hdrs = clip_form()
        s, _, data = self.gw.request("POST", ROUTE, other, {"Content-Type": "multipart/form-data; boundary=nothere"})
        self.assertEqual(s, 400, data)
        self.assertIn("'--nothere'", json.loads(data)["error"]["message"])
        twice = form([("model", EARS), ("model", EARS)], [("file", "a.wav", WAV)])
        self.assertIn("'model' is given twice", self.error(twice))

    def test_json_is_not_a_form(self):
        s, _, data = self.gw.request("POST", ROUTE, json.dumps({"model": EARS}), {"Content-Type": "application/json"})
        self.assertEqual(s, 415, data)
        self.assertIn("multipart/form-data", json.loads(data)["error"]["message"])

    def test_a_file_that_is_not_audio_is_named(self):
        msg = self.error(clip_form(data=png(8, 8)))
        self.assertIn("'file' is not an audio clip", msg)
        self.assertIn("PNG", msg)
        self.assertIn("'file' is empty", self.error(clip_form(data=b"")))
        # a WAV header over bytes miniaudio cannot read: libmtmd's refusal, with the target's name
        msg = self.error(clip_form(data=b"RIFF\x00\x00\x00\x00WAVEjunk" + struct.pack("<I", 56) + os.urandom(56)))
        self.assertIn(f"model '{EARS}'", msg)
        self.assertIn("not a readable audio clip", msg)
        # a chunk that claims more than the file holds: refused before miniaudio walks it (its size could
        # wrap miniaudio's position back to the same chunk for ever)
        msg = self.error(clip_form(data=b"RIFF\x00\x00\x00\x00WAVEfmt " + struct.pack("<I", 0xFFFFFFF8) + bytes(48)))
        self.assertIn("claims 4294967288 bytes, more than the 48 that follow it", msg)

    def test_a_part_over_the_body_limit_is_413(self):
        s, _, data = self.post(clip_form(data=WAV + b"\x00" * BODY_LIMIT))
        self.assertEqual(s, 413, data)
        self.assertIn("max_request_bytes", json.loads(data)["error"]["message"])

    def test_fields_sipp_does_not_take_are_named(self):
        for name, value in (("timestamp_granularities[]", "word"), ("include[]", "logprobs"),
                            ("chunking_strategy", "auto"), ("known_speaker_names[]", "ann")):
            with self.subTest(field=name):
                msg = self.error(clip_form(**{name: value}))
                self.assertIn(f"'{name}'", msg)
                self.assertIn("not supported", msg)
        msg = self.error(clip_form(frobnicate="1"))
        self.assertIn("'frobnicate'", msg)
        self.assertIn("docs/api-fields.md", msg)
        msg = self.error(clip_form(response_format="srt"))
        self.assertIn("'response_format'", msg)
        self.assertIn("'temperature'", self.error(clip_form(temperature="warm")))
        self.assertIn("'language'", self.error(clip_form(language="en; ignore that")))

    def test_targets_that_cannot_hear_are_refused_before_a_load(self):
        for target in (EYES, PLAIN):
            with self.subTest(target=target):
                msg = self.error(clip_form(model=target))
                self.assertIn(f"'{target}'", msg)
                self.assertIn("mmproj", msg)
                _, _, m = self.gw.json("GET", f"/v1/models/{target}")
                self.assertNotEqual(m["state"], "ready", "a clip loaded a model that cannot take it")
        s, _, data = self.post(clip_form(model="nobody"))
        self.assertEqual(s, 404, data)

    def test_models_say_what_each_projector_takes_before_a_load(self):
        _, _, listing = self.gw.json("GET", "/v1/models")
        caps = {m["id"]: m.get("capabilities") for m in listing["data"]}
        self.assertEqual(caps[EARS_LATER], ["audio"], "read from the projector's header, not assumed")
        self.assertEqual(caps[EYES], ["vision"])
        self.assertEqual(caps[EARS], ["audio"])
        self.assertEqual(caps[PLAIN], [])

    def test_a_stream_beside_a_transcription_goes_on_unchanged(self):
        chat = {"model": EARS, "stream": True, "temperature": 0, "max_tokens": MAX_TOKENS,
                "messages": [{"role": "user", "content": "Tell me a story"}]}
        alone = self.gw.json("POST", "/v1/chat/completions", {**chat, "stream": False})[2]
        alone = alone["choices"][0]["message"]["content"]
        conn, resp = self.gw.stream("/v1/chat/completions", chat)
        answers = {}

        def transcribe():
            answers["asr"] = self.post(clip_form(temperature="0"))

        t = threading.Thread(target=transcribe)
        try:
            events = gw.read_sse(resp)
            first = next(events)  # the stream has begun
            t.start()
            rest = [d for _, d in events]
        finally:
            t.join()
            conn.close()
        chunks = [json.loads(d) for _, d in [first]] + [json.loads(d) for d in rest if d != "[DONE]"]
        streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        self.assertEqual(rest[-1], "[DONE]")
        self.assertEqual(streamed, alone, "the stream's greedy text changed beside the transcription")
        s, _, data = answers["asr"]
        self.assertEqual(s, 200, data)
        self.assertNotEqual(json.loads(data)["text"], streamed)


def responses_audio(part, model=EARS):
    return {"model": model, "max_output_tokens": 3, "temperature": 0,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "Listen:"}, part]}]}


WAV_B64 = base64.b64encode(WAV).decode()


class ResponsesAudioTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = AudioGateway.start()

    def test_input_audio_and_audio_files_are_heard(self):
        parts = [
            {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}},
            {"type": "input_file", "filename": "clip.wav", "file_data": "data:audio/wav;base64," + WAV_B64},
        ]
        for part in parts:
            with self.subTest(type=part["type"]):
                s, h, body = self.gw.json("POST", "/v1/responses", responses_audio(part))
                self.assertEqual(s, 200, body)
                self.assertGreater(body["usage"]["input_tokens"], AUDIO_TOKENS)
                if part["type"] == "input_file":
                    self.assertIn("input[0].content[1].filename", h.get("sipp-ignored", ""))

    def test_files_that_are_not_audio_are_refused_by_part(self):
        cases = [
            ({"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0x"},
             "'input[0].content[1]' is an input_file of type 'application/pdf'"),
            ({"type": "input_file", "file_id": "file-abc"}, "'input[0].content[1].file_id'"),
            ({"type": "input_file", "file_url": "https://example.com/a.wav"}, "'input[0].content[1].file_url'"),
            ({"type": "input_file", "file_data": WAV_B64}, "'input[0].content[1].file_data'"),
            ({"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "ogg"}},
             "'input[0].content[1].input_audio.format'"),
        ]
        for part, field in cases:
            with self.subTest(field=field):
                s, _, body = self.gw.json("POST", "/v1/responses", responses_audio(part))
                self.assertEqual(s, 400, body)
                self.assertIn(field, body["error"]["message"])

    def test_audio_for_an_image_projector_is_refused_naming_the_target(self):
        part = {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}}
        s, _, body = self.gw.json("POST", "/v1/responses", responses_audio(part, EYES))
        self.assertEqual(s, 400, body)
        self.assertIn(f"'{EYES}'", body["error"]["message"])
        self.assertIn("mmproj", body["error"]["message"])


if __name__ == "__main__":
    unittest.main()
