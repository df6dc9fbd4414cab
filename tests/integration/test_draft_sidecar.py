"""Draft sidecars (issue 19): a draft model published beside a model is recognised by the store and
`sipp models info` (a file named like the model with a `draft` or `mtp` part, or the catalog entry's
"draft"), suggested by `sipp`, and never used unless asked: `--draft auto` picks it (development),
an explicit path is the production way. Runs on a sipp-synth pair, so the draft really speculates.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
import test_speculative_draft as pair  # noqa: E402

EXIT_OK, EXIT_RUNTIME = 0, 1
RUN_TIMEOUT_S = 120


class DraftSidecarTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sipp-sidecar-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.env = dict(os.environ, GGML_NO_BACKTRACE="1", SIPP_MODELS_DIR=os.path.join(self.dir, "store"),
                        SIPP_CATALOG=os.path.join(self.dir, "catalog.json"), HOME=self.dir)
        self.write_catalog([])

    def place(self, src, name):
        path = os.path.join(self.dir, name)
        shutil.copyfile(src, path)
        return path

    def write_catalog(self, models):
        with open(self.env["SIPP_CATALOG"], "w") as f:
            json.dump({"version": 1, "models": models}, f)

    def sipp(self, *args):
        return subprocess.run([gw.SIPP, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=self.env)

    def info_draft(self, model):
        r = self.sipp("models", "info", model, "--json", "--no-hash")
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)
        return json.loads(r.stdout)["draft"]

    def test_names_that_are_and_are_not_sidecars(self):
        model = self.place(pair.target(0), "m-q8_0.gguf")
        self.assertIsNone(self.info_draft(model))
        for name in ("mx-draft-q8_0.gguf", "m-q8_0-extra-draft.gguf", "draft.gguf", "m-q8_0.txt"):
            self.place(pair.draft(), name)
        self.assertIsNone(self.info_draft(model), "only the model's name with a marker part is its sidecar")
        mtp = self.place(pair.draft(), "m.MTP.q8_0.gguf")
        self.assertEqual(self.info_draft(model), {"path": mtp, "catalog": None, "pulled": True})
        first = self.place(pair.draft(), "m-draft-q8_0.gguf")  # sorts before m.MTP...
        self.assertEqual(self.info_draft(model)["path"], first)
        r = self.sipp("models", "info", model, "--no-hash")
        self.assertIn(f"draft           {first} (published beside the model; use it with --draft)", r.stdout)

    def test_suggested_never_used_unless_asked(self):
        model = self.place(pair.target(0), "t.gguf")
        sidecar = self.place(pair.draft(), "t-draft.gguf")
        flags = ["Hello", "--max-tokens", "40", "--temperature", "0", "--ignore-eos", "--threads", "1", "--stats",
                 "json"]
        plain = self.sipp(model, *flags)
        self.assertEqual(plain.returncode, EXIT_OK, plain.stderr)
        self.assertIn(f"a draft model is published beside this one: --draft {sidecar}", plain.stderr)
        stats = json.loads(plain.stderr.strip().splitlines()[-1])
        self.assertEqual((stats["speculation"], stats["draft_tokens"]), ("none", 0))
        auto = self.sipp(model, *flags, "--draft", "auto")
        self.assertEqual(auto.returncode, EXIT_OK, auto.stderr)
        self.assertIn(f"--draft auto uses '{sidecar}'", auto.stderr)
        stats = json.loads(auto.stderr.strip().splitlines()[-1])
        self.assertEqual(stats["speculation"], "draft")
        self.assertGreater(stats["accepted_tokens"], 0)
        self.assertEqual(auto.stdout, plain.stdout)

    def test_auto_without_a_sidecar_fails(self):
        model = self.place(pair.target(0), "alone.gguf")
        r = self.sipp(model, "Hi", "--draft", "auto", "--temperature", "0")
        self.assertEqual(r.returncode, EXIT_RUNTIME)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(f"--draft auto: no draft model beside '{model}'", r.stderr)

    def test_catalog_draft(self):
        store = self.env["SIPP_MODELS_DIR"]
        os.makedirs(store)
        shutil.copyfile(pair.target(0), os.path.join(store, "cat-t.gguf"))
        self.write_catalog([{"name": "cat-t", "url": "hf://org/repo/t.gguf", "draft": "cat-d"},
                            {"name": "cat-d", "url": "hf://org/repo/d.gguf"}])
        self.assertEqual(self.info_draft("cat-t"), {"path": None, "catalog": "cat-d", "pulled": False})
        r = self.sipp("cat-t", "Hi", "--draft", "auto", "--temperature", "0")
        self.assertEqual(r.returncode, EXIT_RUNTIME)
        self.assertIn("the catalog names 'cat-d' as the draft of 'cat-t', but it is not pulled; sipp pull cat-d",
                      r.stderr)
        shutil.copyfile(pair.draft(), os.path.join(store, "cat-d.gguf"))
        self.assertEqual(self.info_draft("cat-t"),
                         {"path": os.path.join(store, "cat-d.gguf"), "catalog": "cat-d", "pulled": True})

    def test_catalog_draft_must_name_another_model(self):
        self.write_catalog([{"name": "cat-t", "url": "hf://org/repo/t.gguf", "draft": "cat-t"}])
        r = self.sipp("models", "list", "--all")
        self.assertNotEqual(r.returncode, EXIT_OK)
        self.assertIn("\"draft\" must be the name of another catalog model", r.stderr)


if __name__ == "__main__":
    unittest.main()
