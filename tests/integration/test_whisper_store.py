"""whisper.cpp models in the store (issue 46): a catalog entry with "recipe": "whispercpp" pulled by
name into the store as NAME.bin (sha256-checked, the whole file walked), listed with its recipe,
removed, resolved by name by `sipp transcribe` and a gateway target, and pulled through the gateway's
Ollama /api/pull.

No file can be downloaded here: the model is sipp-synth's synthetic whisper model, served by a loopback
HTTP server (httpfixture.py) with a catalog this test writes (SIPP_CATALOG). A wrong file under a
whisper entry (a GGUF model, junk, a truncated model, the wrong sha256) is refused with one line naming
it, and leaves nothing in the store, partial/ included.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from httpfixture import HTTPFixture  # noqa: E402
from tests.support.audio import wav  # noqa: E402

RUN_TIMEOUT_S = 300
EXIT_OK, EXIT_RUNTIME = 0, 1
THREADS = 2
GREEDY = (("beam_size", "1"), ("best_of", "1"))
TOKEN_ENV, TOKEN = "SIPP_TEST_WHISPER_ADMIN", "whisper-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SEEDS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz", "corpus", "whisper_file")


def sha(data):
    return hashlib.sha256(data).hexdigest()


def synth(out, *args):
    r = subprocess.run([gw.SYNTH, "--out", out, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    with open(out, "rb") as f:
        return f.read()


def form(fields, clip):
    """A multipart/form-data body with the text fields and the clip as `file`, and its headers."""
    b = uuid.uuid4().hex
    out = b"".join(f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields)
    out += (f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="clip.wav"\r\n'
            f"Content-Type: audio/wav\r\n\r\n").encode() + clip + b"\r\n" + f"--{b}--\r\n".encode()
    return out, {"Content-Type": f"multipart/form-data; boundary={b}"}


class WhisperStoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.build_dir = tempfile.mkdtemp(prefix="sipp-whisper-store-")
        vocab = os.path.join(gw.VOCAB_DIR, "ggml-vocab-gpt-2.gguf")
        cls.path = os.path.join(cls.build_dir, "ggml-test.bin")
        cls.model = synth(cls.path, "--whisper", "test", "--vocab", vocab)
        cls.gguf = synth(os.path.join(cls.build_dir, "tiny.gguf"), "--vocab", gw.VOCAB, *gw.TINY)
        cls.clip = wav(1.0)
        cls.clip_path = os.path.join(cls.build_dir, "clip.wav")
        with open(cls.clip_path, "wb") as f:
            f.write(cls.clip)
        cls.fx = HTTPFixture()
        cls.url = cls.fx.add("/w/ggml-test.bin", cls.model)
        cls.fx.add("/w/tiny.gguf", cls.gguf)
        cls.fx.add("/w/ggml-half.bin", cls.model[: len(cls.model) // 2])
        cls.fx.add("/w/ggml-junk.bin", b"<html>not a model</html>\n" * 40)
        # fuzz_whisper_file's seeds (tests/fuzz/make_whisper_seeds.py): one whole, the others forged
        cls.seeds = sorted(os.listdir(SEEDS))
        for name in cls.seeds:
            with open(os.path.join(SEEDS, name), "rb") as f:
                cls.fx.add(f"/seeds/{name}", f.read())

    @classmethod
    def tearDownClass(cls):
        cls.fx.stop()
        shutil.rmtree(cls.build_dir, ignore_errors=True)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sipp-whisper-store-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.store = os.path.join(self.tmp, "models")
        self.catalog = os.path.join(self.tmp, "catalog.json")
        u = self.fx.url
        entries = [
            {"name": "whisper-test", "url": self.url, "recipe": "whispercpp", "sha256": sha(self.model),
             "size": len(self.model), "labels": ["transcription"]},
            {"name": "whisper-two", "url": self.url, "sha256": sha(self.model)},  # recipe told from .bin
            {"name": "whisper-wrong-sha", "url": self.url, "recipe": "whispercpp", "sha256": "0" * 64},
            {"name": "whisper-gguf", "url": u("/w/tiny.gguf"), "recipe": "whispercpp"},
            {"name": "whisper-half", "url": u("/w/ggml-half.bin"), "recipe": "whispercpp"},
            {"name": "whisper-junk", "url": u("/w/ggml-junk.bin"), "recipe": "whispercpp"},
        ]
        with open(self.catalog, "w") as f:
            json.dump({"version": 1, "models": entries}, f)
        self.fx.set(mode="normal", drops=0, chunk_delay=0)
        self.fx.wait_idle()
        self.fx.reset_counters()
        self.env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        self.env.update({"SIPP_MODELS_DIR": self.store, "SIPP_CATALOG": self.catalog, "NO_PROXY": "*",
                         "no_proxy": "*", "HOME": self.tmp})

    def sipp(self, *args):
        return subprocess.run([gw.SIPP, *args], capture_output=True, text=True, env=self.env,
                              stdin=subprocess.DEVNULL, timeout=RUN_TIMEOUT_S)

    def ok(self, r):
        self.assertEqual(r.returncode, EXIT_OK, f"stdout: {r.stdout}\nstderr: {r.stderr}")
        return r

    def fails(self, r, *needles):
        self.assertEqual(r.returncode, EXIT_RUNTIME, f"stdout: {r.stdout}\nstderr: {r.stderr}")
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        for n in needles:
            self.assertIn(n, lines[0])

    def store_files(self):
        d = self.store
        return sorted(n for n in os.listdir(d) if n != "partial" and not n.startswith(".")) if os.path.isdir(d) else []

    def partials(self):
        d = os.path.join(self.store, "partial")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def listed(self):
        return {m["name"]: m for m in json.loads(self.ok(self.sipp("models", "list", "--json")).stdout)["models"]}

    def transcribe(self, model):
        r = self.ok(self.sipp("transcribe", model, self.clip_path, "--threads", str(THREADS), "--backend", "cpu",
                              "--beam-size", "1", "--best-of", "1", "--format", "json"))
        return json.loads(r.stdout)["text"]

    def test_pull_by_name_list_transcribe_rm(self):
        r = self.ok(self.sipp("pull", "whisper-test"))
        self.assertIn("pulled whisper-test", r.stdout)
        self.assertIn("verified", r.stdout)
        self.assertEqual(self.store_files(), ["whisper-test.bin", "whisper-test.json"])
        with open(os.path.join(self.store, "whisper-test.bin"), "rb") as f:
            self.assertEqual(f.read(), self.model)
        m = self.listed()["whisper-test"]
        self.assertEqual((m["recipe"], m["sha256_verified"], m["size"]), ("whispercpp", True, len(self.model)))
        self.assertEqual(m["path"], os.path.join(self.store, "whisper-test.bin"))
        self.assertIn("whispercpp", self.ok(self.sipp("models", "list")).stdout)
        self.assertEqual(self.ok(self.sipp("models", "path", "whisper-test")).stdout.strip(), m["path"])
        info = self.ok(self.sipp("models", "info", "whisper-test")).stdout
        self.assertIn("whisper-test (in the store)", info)
        self.assertIn("whisper.cpp ggml (recipe whispercpp)", info)
        # sipp verify takes the store name too (test_verify_whisper.py compares backends)
        v = json.loads(self.ok(self.sipp("verify", "whisper-test", "--backends", "cpu", "--json")).stdout)
        self.assertEqual((v["recipe"], v["model"]["path"]), ("whispercpp", m["path"]))
        # a second pull of the same entry does nothing; the store name transcribes as the file does
        self.fx.reset_counters()
        self.assertIn("already", self.ok(self.sipp("pull", "whisper-test")).stdout)
        self.assertEqual(self.fx.bytes_served, 0)
        self.assertEqual(self.transcribe("whisper-test"), self.transcribe(self.path))
        # the catalog lists the others with their recipe
        everything = json.loads(self.ok(self.sipp("models", "list", "--all", "--json")).stdout)["models"]
        self.assertEqual({m["name"]: m["recipe"] for m in everything}["whisper-two"], "whispercpp")
        self.ok(self.sipp("models", "rm", "whisper-test"))
        self.assertEqual(self.store_files(), [])
        self.fails(self.sipp("models", "rm", "whisper-test"), "not in the store")

    def test_an_interrupted_pull_resumes(self):
        size = len(self.model)
        self.fx.set(drop_after=size // 2, drops=1)
        self.fails(self.sipp("pull", "whisper-test", "--retries", "0"), "resume")
        self.assertEqual(self.store_files(), [])
        self.assertEqual(self.partials(), ["whisper-test.bin.part", "whisper-test.bin.part.json"])
        r = self.ok(self.sipp("pull", "whisper-test"))
        self.assertIn("resumed", r.stdout)
        self.assertEqual(self.fx.bytes_served, size, "the resume fetched only the missing half")
        self.assertEqual((self.store_files(), self.partials()), (["whisper-test.bin", "whisper-test.json"], []))
        # rm takes a partial download of a whisper model too
        self.fx.set(drop_after=size // 2, drops=1)
        self.fails(self.sipp("pull", "whisper-two", "--retries", "0"), "resume")
        self.ok(self.sipp("models", "rm", "whisper-two"))
        self.assertEqual(self.partials(), [])

    def test_a_copied_in_whisper_model_is_listed_and_junk_is_not(self):
        os.makedirs(self.store)
        shutil.copy(self.path, os.path.join(self.store, "mine.bin"))
        with open(os.path.join(self.store, "notes.bin"), "wb") as f:
            f.write(b"not a model")
        models = self.listed()
        self.assertEqual(set(models), {"mine"})
        self.assertEqual((models["mine"]["recipe"], models["mine"]["sha256_verified"]), ("whispercpp", False))
        self.ok(self.sipp("models", "rm", "mine"))
        self.assertEqual(self.store_files(), ["notes.bin"])

    def test_wrong_files_are_refused_and_leave_nothing(self):
        cases = [
            ("whisper-wrong-sha", ("sha256 mismatch for whisper-wrong-sha.bin", sha(self.model))),
            ("whisper-gguf", ("/w/tiny.gguf", "not a whisper.cpp model", "GGUF file")),
            ("whisper-half", ("/w/ggml-half.bin", "not a usable whisper.cpp model")),
            ("whisper-junk", ("/w/ggml-junk.bin", "not a whisper.cpp model")),
        ]
        for name, needles in cases:
            with self.subTest(entry=name):
                self.fails(self.sipp("pull", name), *needles)
                self.assertEqual(self.store_files(), [])
                self.assertEqual(self.partials(), [])
        # the same checks for a URL of a .bin with no catalog entry
        self.fails(self.sipp("pull", self.fx.url("/w/ggml-half.bin")), "not a usable whisper.cpp model")
        self.fails(self.sipp("pull", self.url, "--sha256", "1" * 64), "sha256 mismatch")
        self.assertEqual((self.store_files(), self.partials()), ([], []))
        r = self.ok(self.sipp("pull", self.url))
        self.assertIn("pulled ggml-test", r.stdout)
        self.assertEqual(self.listed()["ggml-test"]["recipe"], "whispercpp")

    def test_forged_headers_are_refused_before_anything_is_read_past_the_file(self):
        self.assertIn("whole.bin", self.seeds)
        for name in self.seeds:
            with self.subTest(seed=name):
                r = self.sipp("pull", self.fx.url(f"/seeds/{name}"), "--name", "forged")
                if name == "whole.bin":
                    self.ok(r)
                    self.ok(self.sipp("models", "rm", "forged"))
                else:
                    self.fails(r, f"/seeds/{name}", "not a usable whisper.cpp model")
                self.assertEqual((self.store_files(), self.partials()), ([], []))

    def test_gateway_serves_the_store_name_and_pulls_through_api_pull(self):
        self.ok(self.sipp("pull", "whisper-test"))
        cfg = (f'[[tokens]]\nenv = "{TOKEN_ENV}"\nadmin = true\n\n[store]\nallow_private_sources = true\n\n'
               f'[[targets]]\nname = "by-name"\nmodel = "whisper-test"\nbackend = "cpu"\nthreads = {THREADS}\n\n'
               f'[[targets]]\nname = "by-path"\nmodel = "{self.path}"\nbackend = "cpu"\nthreads = {THREADS}\n')
        g = gw.serve_config(cfg, env={**self.env, TOKEN_ENV: TOKEN})
        try:
            texts = {}
            for target in ("by-name", "by-path"):
                body, headers = form([("model", target), *GREEDY], self.clip)
                status, _, data = g.request("POST", "/v1/audio/transcriptions", body, {**headers, **AUTH},
                                            timeout=RUN_TIMEOUT_S)
                self.assertEqual(status, 200, data)
                texts[target] = json.loads(data)["text"]
            self.assertEqual(texts["by-name"], texts["by-path"])
            self.assertEqual(texts["by-name"], self.transcribe(self.path))
            status, _, tags = g.json("GET", "/api/tags", headers=AUTH)
            self.assertEqual(status, 200)
            tag = {m["name"]: m for m in tags["models"]}["by-name:latest"]
            self.assertEqual((tag["details"]["format"], tag["details"]["family"], tag["size"]),
                             ("ggml", "whisper", len(self.model)))
            status, _, cat = g.json("GET", "/v1/catalog", headers=AUTH)
            self.assertEqual({e["name"]: e["recipe"] for e in cat["data"]}["whisper-test"], "whispercpp")
            status, _, body = g.json("POST", "/api/pull", {"model": "whisper-two", "stream": False}, AUTH)
            self.assertEqual((status, body), (200, {"status": "success"}))
            status, _, body = g.json("POST", "/api/pull", {"model": "whisper-gguf", "stream": False}, AUTH)
            self.assertEqual(status, 502, body)
            self.assertIn("not a whisper.cpp model", body["error"])
        finally:
            g.stop()
        self.assertEqual(self.store_files(), ["whisper-test.bin", "whisper-test.json", "whisper-two.bin",
                                              "whisper-two.json"])
        self.assertEqual(self.listed()["whisper-two"]["recipe"], "whispercpp")
        # a gateway serving the store finds both, as whisper targets
        d = gw.Gateway(["--models-dir", self.store, "--port", "0", "--threads", str(THREADS)], env=self.env)
        try:
            status, _, models = d.json("GET", "/v1/models")
            self.assertEqual(status, 200)
            recipes = {m["id"]: m.get("recipe") for m in models["data"]}
            self.assertEqual(recipes, {"whisper-test": "whispercpp", "whisper-two": "whispercpp"})
            body, headers = form([("model", "whisper-two"), *GREEDY], self.clip)
            status, _, data = d.request("POST", "/v1/audio/transcriptions", body, headers, timeout=RUN_TIMEOUT_S)
            self.assertEqual(status, 200, data)
            self.assertEqual(json.loads(data)["text"], texts["by-path"])
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
