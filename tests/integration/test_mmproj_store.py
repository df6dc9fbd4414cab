"""Multimodal projectors (mmproj files) in the store and around it: `sipp models info` on a projector
and on a model with one beside it, `sipp pull` of a catalog entry's "mmproj" (hash checked, a bad
projector failing the whole pull cleanly), the store's listing and removal of it, and the placement a
load with a projector reports. The files are sipp-synth's (a CLIP ViT with LLaVA's MLP, a Whisper-
style audio encoder) and the downloads come from a real HTTP server on 127.0.0.1 (httpfixture.py)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpfixture import HTTPFixture  # noqa: E402

import tests.integration.test_models as store_tests  # noqa: E402
from tests.integration.common import run_sipp  # noqa: E402
from tests.support.models import make_model, make_projector  # noqa: E402

BUILD = os.environ.get("SIPP_BUILD", "build")
SIPP = os.path.join(BUILD, "bin", "sipp")
RUN_TIMEOUT_S = 60
EXIT_OK = 0
WRONG_SHA = "0" * 64


def sha(data):
    return hashlib.sha256(data).hexdigest()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def tensor_bytes(info):
    return sum(t["bytes"] for t in info["tensor_types"])


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sipp-mmproj-store-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.store = os.path.join(self.tmp, "models")
        self.env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        self.env.update({"SIPP_MODELS_DIR": self.store, "NO_PROXY": "*", "no_proxy": "*", "HOME": self.tmp})

    def sipp(self, *args):
        return subprocess.run([SIPP] + list(args), capture_output=True, text=True, env=self.env,
                              stdin=subprocess.DEVNULL, timeout=RUN_TIMEOUT_S)

    def ok(self, r):
        self.assertEqual(r.returncode, EXIT_OK, "stdout: %s\nstderr: %s" % (r.stdout, r.stderr))

    fails = store_tests.ModelStoreTest.fails  # exit 1, one "sipp: " line on stderr with every needle

    def info(self, target):
        r = self.sipp("models", "info", target, "--json", "--no-hash")
        self.ok(r)
        return json.loads(r.stdout)


class ProjectorInfoTest(Base):
    def test_a_vision_and_an_audio_projector(self):
        cases = (("llava", {"image_size": 32, "patch_size": 8},
                  {"vision": True, "audio": False, "type": "mlp", "image_size": 32, "patch_size": 8, "n_embd": 96},
                  "vision (mlp, 32 px in 8 px patches) -> 96-wide embeddings"),
                 ("qwen2a", {},
                  {"vision": False, "audio": True, "type": "qwen2a", "image_size": None, "patch_size": None,
                   "n_embd": 96},
                  "audio (qwen2a) -> 96-wide embeddings"))
        for kind, opts, want, row in cases:
            with self.subTest(kind=kind):
                path = make_projector(self.tmp, kind, n_embd=96, **opts)
                info = self.info(path)
                self.assertEqual(info["architecture"], "clip")
                self.assertEqual(info["projector"], want)
                self.assertEqual(info["file_size"], os.path.getsize(path))
                self.assertIsNone(info["mmproj"], "a projector has no projector beside it")
                r = self.sipp("models", "info", path, "--no-hash")
                self.ok(r)
                self.assertIn("projector       " + row, r.stdout)
                self.assertIn("(%d bytes)" % os.path.getsize(path), r.stdout)

    def test_a_model_names_the_projector_beside_it(self):
        d = os.path.join(self.tmp, "m")
        os.makedirs(d)
        model = make_model(d, "m.gguf")
        self.assertIsNone(self.info(model)["mmproj"])
        self.assertIn("mmproj          -\n", self.sipp("models", "info", model, "--no-hash").stdout)
        mmproj = make_projector(d, "llava", name="mmproj-m-f16.gguf")
        self.assertEqual(self.info(model)["mmproj"], mmproj)
        r = self.sipp("models", "info", model, "--no-hash")
        self.ok(r)
        self.assertIn("mmproj          %s (beside the model; use it with --mmproj auto)" % mmproj, r.stdout)
        # two projectors: none is taken, and the row says why
        shutil.copy(mmproj, os.path.join(d, "mmproj-m-q8_0.gguf"))
        self.assertIsNone(self.info(model)["mmproj"])
        self.assertIn("2 projectors beside the model", self.sipp("models", "info", model, "--no-hash").stdout)
        # ... unless one is named for the model (the store's mmproj-NAME.gguf)
        own = shutil.copy(mmproj, os.path.join(d, "mmproj-m.gguf"))
        self.assertEqual(self.info(model)["mmproj"], own)

    def test_a_projector_named_for_another_model_is_not_this_ones(self):
        d = os.path.join(self.tmp, "two")
        os.makedirs(d)
        text = make_model(d, "text.gguf")
        shutil.copy(text, os.path.join(d, "vision.gguf"))
        make_projector(d, "llava", name="mmproj-vision.gguf")
        self.assertIsNone(self.info(text)["mmproj"])
        self.assertEqual(self.info(os.path.join(d, "vision.gguf"))["mmproj"], os.path.join(d, "mmproj-vision.gguf"))

    def test_a_truncated_projector_is_an_error(self):
        path = make_projector(self.tmp, "llava")
        data = read(path)
        cut = os.path.join(self.tmp, "mmproj-cut.gguf")
        with open(cut, "wb") as f:
            f.write(data[: len(data) // 2])
        r = self.sipp("models", "info", cut, "--no-hash")
        self.fails(r, cut, "truncated")
        self.assertNotIn("Traceback", r.stderr)


class ProjectorPullTest(Base):
    @classmethod
    def setUpClass(cls):
        cls.build_dir = tempfile.mkdtemp(prefix="sipp-mmproj-pull-build-")
        cls.model = read(make_model(cls.build_dir, "vl.gguf"))
        cls.mmproj = read(make_projector(cls.build_dir, "llava"))
        cls.fx = HTTPFixture()
        cls.fx.add("/org/vl/resolve/main/vl-q8_0.gguf", cls.model)
        cls.fx.add("/org/vl/resolve/main/mmproj-vl-f16.gguf", cls.mmproj)
        cls.fx.add("/files/text.gguf", cls.model)

    @classmethod
    def tearDownClass(cls):
        cls.fx.stop()
        shutil.rmtree(cls.build_dir, ignore_errors=True)

    def setUp(self):
        super().setUp()
        self.catalog = os.path.join(self.tmp, "catalog-shipped.json")
        self.env.update({"SIPP_CATALOG": self.catalog, "SIPP_HF_ENDPOINT": self.fx.url("")})
        self.fx.set(mode="normal", drops=0, chunk_delay=0)
        self.fx.wait_idle()
        self.fx.reset_counters()

    def write_catalog(self, mmproj="mmproj-vl-f16.gguf", mmproj_sha256=None):
        entry = {"name": "vl", "url": "hf://org/vl/vl-q8_0.gguf", "sha256": sha(self.model),
                 "labels": ["chat", "vision"], "mmproj": mmproj,
                 "mmproj_sha256": mmproj_sha256 or sha(self.mmproj)}
        with open(self.catalog, "w") as f:
            json.dump({"version": 1, "models": [entry, {"name": "text", "url": self.fx.url("/files/text.gguf")}]}, f)

    def store_files(self):
        return sorted(n for n in os.listdir(self.store) if n != "partial" and not n.startswith("."))

    def partials(self):
        d = os.path.join(self.store, "partial")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def test_pull_fetches_and_checks_the_projector(self):
        self.write_catalog()
        r = self.sipp("pull", "vl")
        self.ok(r)
        self.assertIn("pulled vl", r.stdout)
        self.assertIn("projector mmproj-vl.gguf", r.stdout)
        self.assertIn(sha(self.mmproj), r.stdout)
        self.assertEqual(self.store_files(), ["mmproj-vl.gguf", "vl.gguf", "vl.json"])
        self.assertEqual(read(os.path.join(self.store, "mmproj-vl.gguf")), self.mmproj)
        self.assertEqual(self.partials(), [])
        meta = json.loads(read(os.path.join(self.store, "vl.json")))
        self.assertEqual(meta["mmproj"]["sha256"], sha(self.mmproj))
        self.assertEqual(meta["mmproj"]["url"], self.fx.url("/org/vl/resolve/main/mmproj-vl-f16.gguf"))

        # the listing shows it with its model, never as a model of its own
        r = self.sipp("models", "list", "--json")
        self.ok(r)
        models = {m["name"]: m for m in json.loads(r.stdout)["models"]}
        self.assertEqual(set(models), {"vl"})
        self.assertEqual(models["vl"]["mmproj"]["file"], "mmproj-vl.gguf")
        self.assertEqual(models["vl"]["mmproj"]["size"], len(self.mmproj))
        r = self.sipp("models", "list")
        self.ok(r)
        self.assertIn("projector mmproj-vl.gguf", r.stdout)

        # --mmproj auto finds it, and a text model pulled into the same store does not take it
        self.assertEqual(self.info("vl")["mmproj"], os.path.join(self.store, "mmproj-vl.gguf"))
        self.ok(self.sipp("pull", "text"))
        self.assertIsNone(self.info("text")["mmproj"])
        self.assertEqual(self.info("vl")["mmproj"], os.path.join(self.store, "mmproj-vl.gguf"))

        # a second pull downloads nothing; with the projector gone, only the projector
        self.fx.reset_counters()
        r = self.sipp("pull", "vl")
        self.ok(r)
        self.assertIn("already in the store", r.stdout)
        self.assertEqual(self.fx.bytes_served, 0)
        os.unlink(os.path.join(self.store, "mmproj-vl.gguf"))
        r = self.sipp("pull", "vl")
        self.ok(r)
        self.assertEqual(self.fx.bytes_served, len(self.mmproj))
        self.assertEqual(read(os.path.join(self.store, "mmproj-vl.gguf")), self.mmproj)

        # models rm takes the projector with the model
        self.ok(self.sipp("models", "rm", "vl"))
        self.assertEqual(self.store_files(), ["text.gguf", "text.json"])

    def test_a_wrong_projector_hash_fails_the_pull(self):
        self.write_catalog(mmproj_sha256="A" * 64)
        r = self.sipp("pull", "vl")
        self.fails(r, "sha256 mismatch for mmproj-vl.gguf", "expected " + "a" * 64, "got " + sha(self.mmproj),
                   "projector")
        self.assertEqual(self.store_files(), [], "nothing is installed, the model neither")
        self.assertNotIn("mmproj-vl.gguf.part", self.partials(), "the bad projector is deleted")
        # the model's verified download is kept for the next pull, which fetches only the projector
        self.write_catalog()
        self.fx.reset_counters()
        self.ok(self.sipp("pull", "vl"))
        self.assertEqual(self.fx.bytes_served, len(self.mmproj))
        self.assertEqual(self.store_files(), ["mmproj-vl.gguf", "vl.gguf", "vl.json"])

    def test_a_missing_or_wrong_projector_fails_the_pull(self):
        cases = (("mmproj-gone.gguf", None, ("projector", "mmproj-gone.gguf", "HTTP 404")),
                 (self.fx.url("/files/text.gguf"), sha(self.model), ("is not a multimodal projector",)))
        for mmproj, digest, needles in cases:
            with self.subTest(mmproj=mmproj):
                self.write_catalog(mmproj=mmproj, mmproj_sha256=digest)
                self.fails(self.sipp("pull", "vl"), *needles)
                self.assertEqual(self.store_files() if os.path.isdir(self.store) else [], [])
                self.assertFalse([p for p in self.partials() if p.startswith("mmproj")], self.partials())

    def test_catalog_mmproj_mistakes_are_named(self):
        cases = (({"mmproj": "../x.gguf"}, '"mmproj" must be'),
                 ({"mmproj": "mmproj.bin"}, '"mmproj" must be'),
                 ({"mmproj": "m.gguf", "mmproj_sha256": "xyz"}, '"mmproj_sha256" is not 64 hex digits'),
                 ({"mmproj_sha256": WRONG_SHA}, '"mmproj_sha256" without "mmproj"'))
        for extra, needle in cases:
            with self.subTest(extra=extra):
                entry = {"name": "vl", "url": "hf://org/vl/vl-q8_0.gguf"}
                entry.update(extra)
                with open(self.catalog, "w") as f:
                    json.dump({"version": 1, "models": [entry]}, f)
                self.fails(self.sipp("pull", "vl"), needle, "'vl'")


class ProjectorPlacementTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="sipp-mmproj-placement-")
        cls.model = make_model(cls.tmp.name, "m.gguf")
        cls.mmproj = make_projector(cls.tmp.name, "llava", name="mmproj-m.gguf")
        r = run_sipp(["models", "info", cls.mmproj, "--json", "--no-hash"], check=True, threads=False)
        cls.mmproj_bytes = tensor_bytes(json.loads(r.stdout))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def placement(self, *args):
        r = run_sipp([self.model, *args, "--backend", "cpu", "--max-tokens", "1", "--stats", "json", "Hi"])
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stderr.strip().splitlines()[-1])["placement"]

    def test_the_projector_has_an_entry_of_its_own(self):
        without = self.placement()
        self.assertFalse([p for p in without if p["mmproj"]], without)
        with_it = self.placement("--mmproj", "auto")
        projector = [p for p in with_it if p["mmproj"]]
        self.assertEqual(len(projector), 1, with_it)
        self.assertEqual(projector[0]["device"], "CPU")
        self.assertEqual(projector[0]["buffer_bytes"], self.mmproj_bytes)
        self.assertGreater(self.mmproj_bytes, os.path.getsize(self.mmproj) // 2)
        self.assertEqual(projector[0]["n_layers"], 0)
        self.assertEqual([p for p in with_it if not p["mmproj"]], without, "the model's entries are unchanged")

    def test_the_text_stats_name_the_projector(self):
        r = run_sipp([self.model, "--mmproj", self.mmproj, "--backend", "cpu", "--max-tokens", "1", "--stats",
                      "text", "Hi"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("CPU on local: the projector (mmproj), %.1f MiB of weights" % (self.mmproj_bytes / 2**20),
                      r.stderr)


if __name__ == "__main__":
    unittest.main()
