"""Images and audio in chats on every route (issue 30), as the gateway translates them.

Every API's image shape becomes chat's image_url part with a data: URL (OpenAI's image_url parts,
Responses' input_image, Anthropic's base64 image blocks, Ollama's images, the native chat's parts),
which libsipp decodes and gives the target's projector (mmproj in the target's config).

  ImagesWithoutProjectorTest  a target without mmproj refuses an image on each route with a 400
                              naming the target and mmproj, before its model is loaded; a remote
                              URL, an Anthropic url source, a Responses file_id and other shapes
                              sipp does not take are 400s naming the field; /v1/models and
                              /api/show say vision only for a target with a projector.
  ProjectorConfigTest         mmproj in the config: a missing file, "auto" with none or two
                              projectors beside the model, [limits] image_max_bytes and friends.
  ImagesWithProjectorTest     a real projector (sipp-synth --projector llava) through libsipp's
                              libmtmd: a 200 with usage on each route. These pass only once libsipp
                              takes media parts (sipp_model_params.mmproj) and sipp-synth writes a
                              projector; until then they fail, by design.

Everything talks to loopback; only processes started here are stopped.
"""

import base64
import json
import os
import shutil
import struct
import subprocess
import sys
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support.audio import wav  # noqa: E402

TEXT_ONLY = "plain"  # a target without a projector
LAZY = "lazy"  # the same, loaded on demand: an image must not load it
VISION_CFG = "seeing"  # a target whose config names a projector (a stand-in file: never loaded here)
CHECK_TIMEOUT_S = 60
SYNTH_TIMEOUT_S = 300
N_EMBD = 64  # gw.TINY's width, which the projector's output must match
ANTHROPIC = {"anthropic-version": "2023-06-01"}


def png(width=8, height=8, rgb=(200, 30, 30)):
    """A small valid PNG (8-bit RGB, one colour), made with zlib and struct."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) +
            chunk(b"IEND", b""))


PNG_B64 = base64.b64encode(png()).decode()
DATA_URL = "data:image/png;base64," + PNG_B64


WAV_B64 = base64.b64encode(wav(0.1, amplitude=0)).decode()


def chat_image(model, url=DATA_URL, **image_url):
    return {"model": model, "max_tokens": 3, "temperature": 0,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                                      {"type": "image_url", "image_url": {"url": url, **image_url}}]}]}


def responses_image(model, url=DATA_URL, **extra):
    return {"model": model, "max_output_tokens": 3, "temperature": 0,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "What is this?"},
                                                   {"type": "input_image", "image_url": url, **extra}]}]}


def messages_image(model, source=None):
    source = source or {"type": "base64", "media_type": "image/png", "data": PNG_B64}
    return {"model": model, "max_tokens": 3, "temperature": 0,
            "messages": [{"role": "user", "content": [{"type": "image", "source": source},
                                                      {"type": "text", "text": "What is this?"}]}]}


def count_image(model):
    body = messages_image(model)
    del body["max_tokens"], body["temperature"]
    return body


def ollama_chat_image(model):
    return {"model": model, "stream": False, "options": {"num_predict": 3, "temperature": 0},
            "messages": [{"role": "user", "content": "What is this?", "images": [PNG_B64]}]}


def ollama_generate_image(model, **extra):
    return {"model": model, "stream": False, "prompt": "What is this?", "images": [PNG_B64],
            "options": {"num_predict": 3, "temperature": 0}, **extra}


def native_image(model):
    return {**chat_image(model), "stream": False}


# (route, body maker, extra headers) for each API's image request
ROUTES = [
    ("/v1/chat/completions", chat_image, None),
    ("/v1/chat", native_image, None),
    ("/v1/responses", responses_image, None),
    ("/v1/messages", messages_image, ANTHROPIC),
    ("/v1/messages/count_tokens", count_image, ANTHROPIC),
    ("/api/chat", ollama_chat_image, None),
    ("/api/generate", ollama_generate_image, None),
]


def projector_model(name):
    """A copy of the tiny model in a directory of its own (name) beside a synthetic LLaVA projector,
    mmproj-model-f16.gguf, which libmtmd loads: its path, for mmproj = "auto"."""
    d = os.path.join(gw.tmpdir(), name)
    os.makedirs(d, exist_ok=True)
    model = os.path.join(d, "model.gguf")
    shutil.copy(gw.model(), model)
    synth_projector(os.path.join(d, "mmproj-model-f16.gguf"))
    return model


def synth_projector(path, n_embd=N_EMBD):
    """A synthetic LLaVA projector for a model n_embd wide, at path."""
    r = subprocess.run([gw.SYNTH, "--projector", "llava", "--n-embd", str(n_embd), "--out", path],
                       capture_output=True, text=True, timeout=SYNTH_TIMEOUT_S)
    assert r.returncode == 0, f"sipp-synth --projector: {r.stderr}"
    return path


def check(text, name):
    path = gw.write(name, text)
    return subprocess.run([gw.SIPP, "serve", "--check", "--config", path], capture_output=True, text=True,
                          timeout=CHECK_TIMEOUT_S)


class ImagesWithoutProjectorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # the projector file is a stand-in: nothing here loads the model of that target
        cls.mmproj = gw.write("stand-in-mmproj.gguf", "not read before a load")
        cls.gw = gw.serve_config(
            gw.local_target(TEXT_ONLY, parallel=1) +
            gw.local_target(LAZY, parallel=1, extra='load = "on_demand"') +
            gw.local_target(VISION_CFG, parallel=1, extra=f'load = "on_demand"\nmmproj = "{cls.mmproj}"'))

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def post(self, path, body, headers=None):
        status, _, b = self.gw.json("POST", path, body, headers)
        return status, json.dumps(b)

    def test_each_route_refuses_an_image_for_a_target_without_a_projector(self):
        for path, make, headers in ROUTES:
            with self.subTest(route=path):
                status, msg = self.post(path, make(TEXT_ONLY), headers)
                self.assertEqual(status, 400, msg)
                self.assertIn(f"'{TEXT_ONLY}'", msg)
                self.assertIn("mmproj", msg)

    def test_audio_is_refused_the_same_way(self):
        body = {"model": TEXT_ONLY, "max_tokens": 3, "messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}}]}]}
        status, msg = self.post("/v1/chat/completions", body)
        self.assertEqual(status, 400, msg)
        self.assertIn("mmproj", msg)

    def test_the_refusal_comes_before_a_load(self):
        status, msg = self.post("/v1/chat/completions", chat_image(LAZY))
        self.assertEqual(status, 400, msg)
        self.assertIn("mmproj", msg)
        _, _, model = self.gw.json("GET", f"/v1/models/{LAZY}")
        self.assertEqual(model["state"], "unloaded", "an image request loaded a model that cannot take it")

    def test_a_text_request_still_runs(self):
        body = {"model": TEXT_ONLY, "max_tokens": 2, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Hi"}]}]}
        status, msg = self.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, msg)

    def test_remote_urls_are_refused_naming_the_field(self):
        cases = [
            ("/v1/chat/completions", chat_image(VISION_CFG, "https://example.com/a.png"),
             "'messages[0].content[1].image_url.url'"),
            ("/v1/chat", {**chat_image(VISION_CFG, "http://example.com/a.png"), "stream": False},
             "'messages[0].content[1].image_url.url'"),
            ("/v1/responses", responses_image(VISION_CFG, "https://example.com/a.png"),
             "'input[0].content[1].image_url'"),
        ]
        string_form = chat_image(VISION_CFG)
        string_form["messages"][0]["content"][1]["image_url"] = "https://example.com/a.png"
        cases.append(("/v1/chat/completions", string_form, "'messages[0].content[1].image_url.url'"))
        for path, body, field in cases:
            with self.subTest(route=path, field=field):
                status, msg = self.post(path, body)
                self.assertEqual(status, 400, msg)
                self.assertIn(field, msg)
                self.assertIn("fetching remote images is off", msg)
                self.assertIn("[media] fetch = true", msg)

    def test_an_anthropic_url_source_is_refused(self):
        body = messages_image(VISION_CFG, {"type": "url", "url": "https://example.com/a.png"})
        status, msg = self.post("/v1/messages", body, ANTHROPIC)
        self.assertEqual(status, 400, msg)
        self.assertIn("'messages[0].content[0].source'", msg)
        self.assertIn("fetching remote images is off", msg)
        self.assertIn("[media] fetch = true", msg)

    def test_a_responses_file_id_is_refused(self):
        body = responses_image(VISION_CFG)
        part = body["input"][0]["content"][1]
        del part["image_url"]
        part["file_id"] = "file-abc"
        status, msg = self.post("/v1/responses", body)
        self.assertEqual(status, 400, msg)
        self.assertIn("'input[0].content[1].file_id'", msg)

    def test_shapes_sipp_does_not_take_are_refused_by_name(self):
        audio = {"model": VISION_CFG, "messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "ogg"}}]}]}
        file_item = responses_image(VISION_CFG)
        file_item["input"][0]["content"][1] = {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE"}
        cases = [
            ("/v1/chat/completions", audio, "'messages[0].content[0].input_audio.format'"),
            ("/v1/chat/completions", chat_image(VISION_CFG, 7), "'messages[0].content[1].image_url'"),
            ("/v1/responses", file_item, "'input[0].content[1]' is an input_file of type 'application/pdf'"),
            ("/api/generate", ollama_generate_image(VISION_CFG, raw=True), "'images'"),
            ("/api/chat", {**ollama_chat_image(VISION_CFG),
                           "messages": [{"role": "user", "content": "x", "images": [3]}]}, "'messages[0].images[0]'"),
        ]
        for path, body, field in cases:
            with self.subTest(route=path, field=field):
                status, msg = self.post(path, body)
                self.assertEqual(status, 400, msg)
                self.assertIn(field, msg)

    def test_models_say_vision_for_a_target_with_a_projector(self):
        _, _, listing = self.gw.json("GET", "/v1/models")
        caps = {m["id"]: m.get("capabilities") for m in listing["data"]}
        self.assertEqual(caps[VISION_CFG], ["vision"])
        self.assertEqual(caps[TEXT_ONLY], [])
        _, _, show = self.gw.json("POST", "/api/show", {"model": VISION_CFG})
        self.assertIn("vision", show["capabilities"])
        _, _, show = self.gw.json("POST", "/api/show", {"model": TEXT_ONLY})
        self.assertEqual(show["capabilities"], ["completion"])


class ProjectorConfigTest(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(gw.tmpdir(), f"projector-{self._testMethodName}")
        os.makedirs(self.dir, exist_ok=True)
        self.model = os.path.join(self.dir, "model.gguf")
        shutil.copy(gw.model(), self.model)

    def target(self, mmproj):
        return f'[[targets]]\nname = "v"\nmodel = "{self.model}"\nmmproj = "{mmproj}"\nmmproj_offload = false\n'

    def test_a_missing_projector_file_is_named(self):
        missing = os.path.join(self.dir, "mmproj-missing.gguf")
        r = check(self.target(missing), "missing.toml")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("mmproj file", r.stderr)
        self.assertIn(missing, r.stderr)

    def test_auto_finds_the_projector_beside_the_model(self):
        r = check(self.target("auto"), "auto-none.toml")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("mmproj*.gguf", r.stderr)
        synth_projector(os.path.join(self.dir, "mmproj-model-f16.gguf"))
        r = check(self.target("auto"), "auto-one.toml")
        self.assertEqual(r.returncode, 0, r.stderr)
        gw.write(os.path.join(self.dir, "mmproj-model-q8_0.gguf"), "x")
        r = check(self.target("auto"), "auto-two.toml")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("mmproj-model-f16.gguf", r.stderr)
        self.assertIn("mmproj-model-q8_0.gguf", r.stderr)

    def test_a_relative_projector_is_found_beside_the_config(self):
        synth_projector(os.path.join(self.dir, "mmproj-rel.gguf"))
        r = check(self.target("mmproj-rel.gguf"), os.path.join(self.dir, "rel.toml"))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_check_reads_the_projector_header(self):
        """--check refuses what a load would refuse, from the headers only: a text model given as the
        projector, a projector of another width than the model's, a file that is no GGUF at all."""
        text_model = os.path.join(self.dir, "mmproj-text.gguf")
        shutil.copy(gw.model(), text_model)
        narrow = synth_projector(os.path.join(self.dir, "mmproj-narrow.gguf"), N_EMBD // 2)
        junk = gw.write(os.path.join(self.dir, "mmproj-junk.gguf"), "x")
        for mmproj, words in ((text_model, ["is not a multimodal projector", "architecture is 'llama'"]),
                              (narrow, [f"gives {N_EMBD // 2}-wide embeddings", f"takes {N_EMBD} (n_embd)",
                                        self.model]),
                              (junk, [junk])):
            r = check(self.target(mmproj), f"check-{os.path.basename(mmproj)}.toml")
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn("target 'v': mmproj: ", r.stderr)
            for w in [mmproj, *words]:
                self.assertIn(w, r.stderr)
        r = check(self.target(synth_projector(os.path.join(self.dir, "mmproj-good.gguf"))), "check-good.toml")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_media_limits(self):
        t = f'[[targets]]\nname = "t"\nmodel = "{self.model}"\n'
        ok = "[limits]\nimage_max_bytes = 1048576\nimage_max_pixels = 4000000\nmedia_max_items = 4\n\n" + t
        r = check(ok, "limits-ok.toml")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = check("[limits]\nmedia_max_items = 0\nimage_max_bytes = \"big\"\n\n" + t, "limits-bad.toml")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("media_max_items", r.stderr)
        self.assertIn("image_max_bytes", r.stderr)


class ImagesWithProjectorTest(unittest.TestCase):
    """Pass once libsipp takes media parts and sipp-synth writes a projector (expected to fail before)."""

    @classmethod
    def setUpClass(cls):
        model = projector_model("vision")
        d = os.path.dirname(model)
        cls.gw = gw.serve_config(gw.local_target(VISION_CFG, path=model, parallel=1, ctx=2048,
                                                 extra='mmproj = "auto"\nmmproj_offload = false') + "\n" +
                                 gw.local_target("plain", path=model, parallel=1, ctx=2048))
        cls.mmproj_bytes = os.path.getsize(os.path.join(d, "mmproj-model-f16.gguf"))

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def test_the_memory_estimate_counts_the_projector(self):
        _, _, listing = self.gw.json("GET", "/v1/models")
        est = {m["id"]: m["sipp"]["memory_estimate"]["weights_bytes"] for m in listing["data"]}
        extra = est[VISION_CFG] - est["plain"]
        self.assertGreater(extra, self.mmproj_bytes // 2, est)
        self.assertLessEqual(extra, self.mmproj_bytes, est)

    def test_each_route_answers_an_image(self):
        for path, make, headers in ROUTES:
            with self.subTest(route=path):
                status, _, body = self.gw.json("POST", path, make(VISION_CFG), headers)
                self.assertEqual(status, 200, body)
                if path == "/v1/messages/count_tokens":
                    self.assertGreater(body["input_tokens"], 0)
                elif path.startswith("/api/"):
                    self.assertGreater(body["prompt_eval_count"], 0)
                else:
                    self.assertIn("usage", body)

    def test_the_image_counts_in_the_prompt(self):
        text = {"model": VISION_CFG, "max_tokens": 1, "temperature": 0, "stream": False,
                "messages": [{"role": "user", "content": "What is this?"}]}
        _, _, plain = self.gw.json("POST", "/v1/chat", text)
        status, _, seen = self.gw.json("POST", "/v1/chat", native_image(VISION_CFG))
        self.assertEqual(status, 200, seen)
        self.assertGreater(seen["usage"]["media_tokens"], 0)
        self.assertGreater(seen["usage"]["prompt_tokens"], plain["usage"]["prompt_tokens"])
        self.assertGreater(gw.metric(self.gw.metrics(), "sipp_media_tokens_total", target=VISION_CFG), 0)

    def test_detail_is_named_as_ignored(self):
        status, headers, body = self.gw.json("POST", "/v1/chat/completions", chat_image(VISION_CFG, detail="low"))
        self.assertEqual(status, 200, body)
        self.assertIn("messages[0].content[1].image_url.detail", headers.get("sipp-ignored", ""))
        status, headers, body = self.gw.json("POST", "/v1/responses", responses_image(VISION_CFG, detail="low"))
        self.assertEqual(status, 200, body)
        self.assertIn("input[0].content[1].detail", headers.get("sipp-ignored", ""))

    def test_the_loaded_model_says_vision(self):
        self.gw.json("POST", "/v1/chat/completions", chat_image(VISION_CFG))
        _, _, model = self.gw.json("GET", f"/v1/models/{VISION_CFG}")
        self.assertEqual(model["sipp"]["state"] if "sipp" in model else model["state"], "loaded", model)
        self.assertIn("vision", model["capabilities"])

    def test_audio_to_a_vision_projector_is_a_400_with_libsipps_message(self):
        body = {"model": VISION_CFG, "max_tokens": 3, "messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}}]}]}
        status, _, b = self.gw.json("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 400, b)
        self.assertIn("audio", json.dumps(b))


if __name__ == "__main__":
    unittest.main()
