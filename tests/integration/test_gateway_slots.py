"""llama-server's GET /props, GET /slots and POST /slots/ID?action=save|restore|erase on a local
target: the shapes, the admin-only rule of /slots, file names kept inside [server] slot_save_dir,
and a restored slot continuing as the saved one (the same greedy text, its KV reused).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support import api_fields  # noqa: E402

ENV = {"SIPP_T_ADMIN": "admin-secret-0123456789", "SIPP_T_USER": "user-secret-0123456789",
       "SIPP_T_SCOPED": "scoped-secret-0123456789"}
ADMIN = {"Authorization": "Bearer " + ENV["SIPP_T_ADMIN"]}
USER = {"Authorization": "Bearer " + ENV["SIPP_T_USER"]}
SCOPED = {"Authorization": "Bearer " + ENV["SIPP_T_SCOPED"]}  # may use "other" only
# Every route of llama-server's, with a body valid for "tiny" (bodies name it; GET routes by ?model=).
ROUTES = [("POST", "/tokenize", {"model": "tiny", "content": "a"}),
          ("POST", "/detokenize", {"model": "tiny", "tokens": [1]}),
          ("POST", "/apply-template", {"model": "tiny", "messages": [{"role": "user", "content": "a"}]}),
          ("POST", "/v1/chat/completions/input_tokens", {"model": "tiny", "messages": [{"role": "user", "content": "a"}]}),
          ("POST", "/v1/responses/input_tokens", {"model": "tiny", "input": "a"}),
          ("POST", "/v1/rerank", {"model": "tiny", "query": "a", "documents": ["b"]}),
          ("POST", "/infill", {"model": "tiny", "input_prefix": "a", "input_suffix": "b"}),
          ("GET", "/props?model=tiny", None), ("GET", "/slots?model=tiny", None),
          ("POST", "/slots/0?model=tiny&action=erase", {})]
PROMPT = "Once upon a time there was a"
N = 6
BAD_NAMES = ["../a.bin", "a/b.bin", ".hidden", "..", "", "x" * 300, 5]


class Slots(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = os.path.join(gw.tmpdir(), "slot-saves")
        os.makedirs(cls.dir, exist_ok=True)
        other = gw.model("other", seed=2)
        cls.g = gw.serve_config(
            f'[server]\nslot_save_dir = "{cls.dir}"\n'
            '[[tokens]]\nenv = "SIPP_T_ADMIN"\ncaller = "ops"\nadmin = true\n'
            '[[tokens]]\nenv = "SIPP_T_USER"\ncaller = "app"\n'
            '[[tokens]]\nenv = "SIPP_T_SCOPED"\ncaller = "sc"\nadmin = true\ntargets = ["other"]\n' +
            gw.local_target("tiny", parallel=2) + gw.local_target("other", path=other, parallel=1), env=ENV)

    @classmethod
    def tearDownClass(cls):
        cls.g.stop()

    def call(self, method, path, body=None, headers=ADMIN, status=200):
        st, _, out = self.g.json(method, path, body, headers=headers)
        self.assertEqual(st, status, out)
        return out

    def complete(self, prompt, key):
        out = self.call("POST", "/v1/completions", {"model": "tiny", "prompt": prompt, "max_tokens": N,
                                                     "temperature": 0, "context_key": key}, headers=USER)
        self.last_prompt_tokens = out["usage"]["prompt_tokens"]
        return out["choices"][0]["text"], out["usage"]["prompt_tokens_details"]["cached_tokens"]

    def slot_of(self, key):
        for s in self.call("GET", "/slots?model=tiny"):
            if s["context_key"] == key:
                return s
        self.fail(f"no slot holds {key}")

    def test_props(self):
        p = self.call("GET", "/props?model=tiny", headers=USER)
        self.assertEqual(p["total_slots"], 2)
        self.assertEqual(p["model_alias"], "tiny")
        self.assertTrue(p["model_path"].endswith("tiny.gguf"))
        self.assertEqual(p["default_generation_settings"]["n_ctx"], 1024)
        self.assertEqual(p["default_generation_settings"]["params"]["top_k"], 40)
        self.assertIn("<|im_start|>", p["chat_template"])
        self.assertEqual(p["modalities"], {"vision": False, "video": False, "audio": False})
        self.assertIn("sipp", p["build_info"])
        self.assertEqual((p["bos_token"], p["eos_token"]), ("<|begin_of_text|>", "<|end_of_text|>"))
        out = self.call("GET", "/props", headers=USER, status=400)
        self.assertIn("'model'", out["error"]["message"])
        self.call("GET", "/props?model=nope", headers=USER, status=404)
        self.call("GET", "/props?model=tiny", headers={}, status=401)

    def test_slots_are_admin_only(self):
        out = self.call("GET", "/slots?model=tiny", headers=USER, status=403)
        self.assertIn("admin = true", out["error"]["message"])
        self.call("POST", "/slots/0?model=tiny&action=erase", {}, headers=USER, status=403)
        slots = self.call("GET", "/slots?model=tiny")
        self.assertEqual([s["id"] for s in slots], [0, 1])
        for s in slots:
            self.assertEqual(set(s), {"id", "n_ctx", "is_processing", "n_tokens", "context_key"})

    def test_every_route_needs_a_token_and_keeps_to_its_scope(self):
        for method, path, body in ROUTES:
            with self.subTest(path=path):
                self.call(method, path, body, headers={}, status=401)
                out = self.call(method, path, body, headers=SCOPED, status=404)
                self.assertIn("'tiny' does not exist", out["error"]["message"])

    def test_save_erase_restore_continues_as_the_saved_slot(self):
        first, _ = self.complete(PROMPT, "story")
        held = self.slot_of("story")
        self.assertEqual(held["n_tokens"], self.last_prompt_tokens + N - 1, "the prompt and the answer but its last")
        saved = self.call("POST", f"/slots/{held['id']}?model=tiny&action=save", {"filename": "story.bin"})
        self.assertEqual(saved["n_saved"], held["n_tokens"])
        self.assertGreater(saved["n_written"], 0)
        self.assertTrue(os.path.isfile(os.path.join(self.dir, "story.bin")))
        follow = PROMPT + first + " and then"
        expected, cached = self.complete(follow, "story")
        self.assertGreater(cached, 0)
        erased = self.call("POST", f"/slots/{held['id']}?model=tiny&action=erase", {})
        self.assertGreater(erased["n_erased"], 0)
        restored = self.call("POST", f"/slots/{held['id']}?model=tiny&action=restore", {"filename": "story.bin"})
        self.assertEqual(restored["n_restored"], saved["n_saved"])
        self.assertEqual(self.slot_of("story")["n_tokens"], saved["n_saved"])
        again, cached = self.complete(follow, "story")
        self.assertEqual(again, expected, "the restored slot continues as the saved one")
        self.assertEqual(cached, saved["n_saved"], "its KV is reused, not read again")

    def test_file_names_stay_in_the_directory(self):
        self.complete(PROMPT, "names")
        sid = self.slot_of("names")["id"]
        for name in BAD_NAMES:
            for action in ("save", "restore"):
                with self.subTest(name=name, action=action):
                    out = self.call("POST", f"/slots/{sid}?model=tiny&action={action}", {"filename": name}, status=400)
                    self.assertIn("'filename'", out["error"]["message"])
        self.assertFalse(os.path.exists(os.path.join(os.path.dirname(self.dir), "a.bin")))

    def test_the_field_table_rows(self):
        self.complete(PROMPT, "rows")
        sid = self.slot_of("rows")["id"]
        api_fields.check_rows(self, self.g, "slots", f"/slots/{sid}?model=tiny&action=save", {"filename": "rows.bin"},
                              {"filename": {"filename": "rows2.bin"}}, headers=ADMIN)
        out = self.call("POST", f"/slots/{sid}?model=tiny&action=save", {"filename": "r.bin", "path": "/x"}, status=400)
        self.assertIn("'path'", out["error"]["message"])

    def test_bad_requests_are_named(self):
        cases = [("/slots/9?model=tiny&action=erase", "slot 9 does not exist"),
                 ("/slots/x?model=tiny&action=erase", "not a slot id"),
                 ("/slots/0?model=tiny&action=drop", "'action'"), ("/slots/0?model=tiny", "'action'"),
                 ("/slots/0?model=tiny&action=restore&x=1", "'x'")]
        for path, words in cases:
            with self.subTest(path=path):
                out = self.call("POST", path, {"filename": "missing.bin"}, status=400)
                self.assertIn(words, out["error"]["message"])
        out = self.call("POST", "/slots/0?model=tiny&action=restore", {"filename": "missing.bin"}, status=400)
        self.assertIn("missing.bin", out["error"]["message"])

    def test_a_file_of_another_model_is_refused(self):
        self.complete(PROMPT, "mine")
        sid = self.slot_of("mine")["id"]
        self.call("POST", f"/slots/{sid}?model=tiny&action=save", {"filename": "mine.bin"})
        out = self.call("POST", "/slots/0?model=other&action=restore", {"filename": "mine.bin"}, status=400)
        self.assertIn("not a slot of", out["error"]["message"])


class NoSaveDir(unittest.TestCase):
    def test_save_without_slot_save_dir_names_the_setting(self):
        g = gw.serve_config(gw.local_target("tiny", parallel=1))
        self.addCleanup(g.stop)
        st, _, out = g.json("POST", "/slots/0?action=save", {"filename": "a.bin"})
        self.assertEqual(st, 400, out)
        self.assertIn("slot_save_dir", out["error"]["message"])

    def test_serve_slot_save_path(self):
        d = os.path.join(gw.tmpdir(), "cli-saves")
        os.makedirs(d, exist_ok=True)
        g = gw.serve_model(None, "--parallel", "1", "--slot-save-path", d)
        self.addCleanup(g.stop)
        st, _, out = g.json("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2, "temperature": 0})
        self.assertEqual(st, 200, out)
        st, _, out = g.json("POST", "/slots/0?action=save", {"filename": "cli.bin"})
        self.assertEqual(st, 200, out)
        self.assertTrue(os.path.isfile(os.path.join(d, "cli.bin")))


if __name__ == "__main__":
    unittest.main()
