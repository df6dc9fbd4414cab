"""sipp.store: the model store through libsipp (list, pull with progress, info, path, remove), against
a real HTTP server on loopback and a store in a temporary directory."""

import hashlib
import http.server
import os
import shutil
import subprocess
import tempfile
import threading
import unittest

import _support
import sipp
import sipp.store


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass


class StoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sipp-pystore-")
        cls.served = os.path.join(cls.tmp, "served")
        os.makedirs(cls.served)
        shutil.copy(_support.model(), os.path.join(cls.served, "tiny-model.gguf"))
        with open(os.path.join(cls.served, "tiny-model.gguf"), "rb") as f:
            cls.sha = hashlib.sha256(f.read()).hexdigest()
        handler = lambda *a, **kw: _Quiet(*a, directory=cls.served, **kw)  # noqa: E731
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.url = f"http://127.0.0.1:{cls.server.server_address[1]}/tiny-model.gguf"
        cls.saved_env = {k: os.environ.get(k) for k in ("SIPP_MODELS_DIR", "no_proxy", "NO_PROXY")}
        os.environ["SIPP_MODELS_DIR"] = os.path.join(cls.tmp, "store")
        os.environ["no_proxy"] = os.environ["NO_PROXY"] = "127.0.0.1"

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()
        for k, v in cls.saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(cls.tmp, True)

    def setUp(self):
        for m in sipp.store.list():
            sipp.store.remove(m["name"])

    def test_pull_list_info_path_remove(self):
        seen = []
        r = sipp.store.pull(self.url, sha256=self.sha, progress=seen.append)
        self.assertEqual(r["name"], "tiny-model")
        self.assertTrue(r["verified"])
        self.assertFalse(r["already"])
        self.assertEqual(r["sha256"], self.sha)
        self.assertEqual(r["size"], os.path.getsize(_support.model()))
        self.assertTrue(seen and seen[-1]["file_done"], seen[-1:])
        self.assertEqual(seen[-1]["done"], r["size"])

        models = sipp.store.list()
        self.assertEqual([m["name"] for m in models], ["tiny-model"])
        m = models[0]
        self.assertEqual(m["path"], r["path"])
        self.assertEqual(m["source"], self.url)
        self.assertTrue(m["verified"] and m["managed"])
        self.assertEqual(m["recipe"], "llamacpp")
        self.assertEqual(m["files"][0]["sha256"], self.sha)
        self.assertEqual(m["files"][0]["url"], self.url)
        self.assertEqual(sipp.store.directory(), os.environ["SIPP_MODELS_DIR"])

        info = sipp.store.info("tiny-model")
        self.assertEqual(info["path"], r["path"])
        self.assertEqual(info["architecture"], "llama")
        self.assertEqual(info["n_layer"], 2)
        self.assertEqual(info["n_embd"], 64)
        self.assertEqual(info["tokenizer"], "llama")
        self.assertEqual(info["sha256"], self.sha)
        self.assertGreater(info["n_params"], 0)
        self.assertIn("q8_0", [t["type"] for t in info["tensor_types"]])
        self.assertIsNone(sipp.store.info(_support.model(), hash=False)["sha256"])
        self.assertEqual(sipp.store.path("tiny-model"), r["path"])

        again = sipp.store.pull(self.url)
        self.assertTrue(again["already"])
        sipp.store.remove("tiny-model")
        self.assertEqual(sipp.store.list(), [])

    def test_info_of_a_projector(self):
        # a multimodal projector (sipp-synth --projector): "projector" says what it takes in and the
        # width of its embeddings; a text model has none
        out = os.path.join(_support.tmpdir(), "mmproj-llava.gguf")
        r = subprocess.run([_support.SYNTH, "--out", out, "--projector", "llava", "--n-embd", "64"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        info = sipp.store.info(out, hash=False)
        self.assertEqual(info["architecture"], "clip")
        self.assertEqual(info["projector"],
                         {"vision": True, "audio": False, "type": "mlp", "image_size": 48, "patch_size": 8,
                          "n_embd": 64})
        self.assertIsNone(sipp.store.info(_support.model(), hash=False)["projector"])

    def test_errors_name_the_input(self):
        with self.assertRaises(sipp.NotFoundError) as cm:
            sipp.store.info("no-such-model")
        self.assertIn("no-such-model", str(cm.exception))
        with self.assertRaises(sipp.NotFoundError):
            sipp.store.remove("no-such-model")
        with self.assertRaises(sipp.SippError) as cm:
            sipp.store.pull(self.url, sha256="0" * 64)
        self.assertIn("sha256", str(cm.exception).lower())
        self.assertEqual(sipp.store.list(), [], "a failed pull left a model in the store")
        with self.assertRaises(sipp.InvalidArgumentError):
            sipp.store.pull(self.url, sha256="not-hex")
        with self.assertRaises(sipp.ModelError):
            sipp.store.info(__file__)  # exists, and is not GGUF

    def test_progress_can_stop_a_pull(self):
        with self.assertRaises(sipp.CancelledError):
            sipp.store.pull(self.url, progress=lambda p: False)
        self.assertEqual(sipp.store.list(), [])

    def test_an_exception_in_progress_stops_the_pull_and_is_raised(self):
        def boom(p):
            raise KeyError("from the callback")

        with self.assertRaises(KeyError):
            sipp.store.pull(self.url, progress=boom)
        self.assertEqual(sipp.store.list(), [])


if __name__ == "__main__":
    unittest.main()
