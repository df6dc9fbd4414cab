"""POST /infill: fill-in-the-middle with llama-server's fields and answer, on synthetic models whose
vocabularies carry FIM tokens (sipp-synth --fim: Qwen's <|fim_prefix|>, ... appended to Qwen2's
vocabulary, with <|repo_name|> and <|file_sep|>; StarCoder's own <fim_prefix>, ... without a file
separator), and the same greedy text as llama-server's /infill on the same model.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support import api_fields, peer  # noqa: E402

VOCAB_DIR = os.path.dirname(gw.VOCAB)
CTX = 4096
N = 12
PREFIX = "def add(a, b):\n    "
SUFFIX = "\n    return c\n"
EXTRA = [{"filename": "util.py", "text": "import os\n\ndef sub(a, b):\n    return a - b\n"},
         {"text": "# notes\n"}]
BASE = {"model": "fim", "input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 2, "temperature": 0}
EXAMPLES = {"model": {"model": "fim"}, "input_prefix": {"input_prefix": "x"}, "input_suffix": {"input_suffix": "y"},
            "input_extra": {"input_extra": EXTRA}, "prompt": {"prompt": "c ="}, "n_predict": {"n_predict": 1},
            "max_tokens": {"max_tokens": 1}, "stream": {"stream": False}, "temperature": {"temperature": 0},
            "top_k": {"top_k": 5}, "top_p": {"top_p": 0.9}, "min_p": {"min_p": 0.1},
            "repeat_penalty": {"repeat_penalty": 1.1}, "presence_penalty": {"presence_penalty": 0.5},
            "frequency_penalty": {"frequency_penalty": 0.5}, "seed": {"seed": 3}, "stop": {"stop": ["zz"]},
            "ignore_eos": {"ignore_eos": True}, "cache_prompt": {"cache_prompt": True}, "user": {"user": "u"},
            "id_slot": {"id_slot": 0}, "n_probs": {"n_probs": 2}}


class Infill(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.qwen = gw.synth_model("infill-qwen.gguf", "--fim", vocab=os.path.join(VOCAB_DIR, "ggml-vocab-qwen2.gguf"))
        cls.star = gw.synth_model("infill-starcoder.gguf", "--fim",
                                  vocab=os.path.join(VOCAB_DIR, "ggml-vocab-starcoder.gguf"))
        cls.g = gw.serve_config(gw.local_target("fim", path=cls.qwen, parallel=1, ctx=CTX) +
                                gw.local_target("star", path=cls.star, parallel=1, ctx=CTX) +
                                gw.local_target("plain", parallel=1))

    @classmethod
    def tearDownClass(cls):
        cls.g.stop()

    def infill(self, body, status=200):
        st, _, out = self.g.json("POST", "/infill", body)
        self.assertEqual(st, status, out)
        return out

    def test_synth_records_the_fim_tokens(self):
        ids = self.g.json("POST", "/tokenize", {"model": "fim", "content": "<|fim_prefix|><|fim_suffix|><|fim_middle|>"
                                                "<|repo_name|><|file_sep|>"})[2]["tokens"]
        self.assertEqual(len(ids), 5, "each FIM text is one special token")

    def test_answer_shape(self):
        out = self.infill({**BASE, "n_predict": N, "input_extra": EXTRA})
        self.assertEqual(out["tokens_predicted"], N)
        self.assertEqual(out["stop_type"], "limit")
        self.assertTrue(out["stop"])
        self.assertEqual(out["model"], "fim")
        self.assertIsInstance(out["content"], str)
        self.assertGreater(out["tokens_evaluated"], len(EXTRA))
        self.assertEqual(out["has_new_line"], "\n" in out["content"])
        for key in ("truncated", "stopping_word", "tokens_cached", "timings"):
            self.assertIn(key, out)

    def test_the_prompt_is_built_as_llama_servers(self):
        # format_prompt_infill's repo-level pattern, with Qwen's tokens (FIM_REP and FIM_SEP; no BOS)
        out = self.infill({**BASE, "input_extra": EXTRA, "prompt": "c = a"})
        self.assertEqual(out["prompt"],
                         "<|repo_name|>myproject\n<|file_sep|>util.py\n" + EXTRA[0]["text"] +
                         "<|file_sep|>tmp\n" + EXTRA[1]["text"] + "<|file_sep|>filename\n"
                         "<|fim_prefix|>" + PREFIX + "c = a<|fim_suffix|>" + SUFFIX + "<|fim_middle|>")
        # StarCoder's vocabulary has neither a repository token nor a file separator: each extra file
        # follows a snippet line
        out = self.infill({**BASE, "model": "star", "input_extra": EXTRA})
        self.assertEqual(out["prompt"],
                         "".join("\n\n--- snippet ---\n\n" + e["text"] for e in EXTRA) +
                         "<fim_prefix>" + PREFIX + "<fim_suffix>" + SUFFIX + "<fim_middle>")

    def test_a_long_prefix_keeps_its_end(self):
        long_prefix = "".join(f"x{i} = {i}\n" for i in range(2000))
        out = self.infill({**BASE, "input_prefix": long_prefix})
        self.assertTrue(out["prompt"].startswith("<|repo_name|>myproject\n<|file_sep|>filename\n<|fim_prefix|>"))
        kept = out["prompt"].split("<|fim_prefix|>")[1].split("<|fim_suffix|>")[0]
        self.assertTrue(long_prefix.endswith(kept) and len(kept) < len(long_prefix), "the last 1536 tokens")

    def test_stream_is_the_same_text(self):
        body = {**BASE, "n_predict": N, "input_extra": EXTRA}
        whole = self.infill(body)
        conn, resp = self.g.stream("/infill", {**body, "stream": True})
        try:
            events = [data for _, data in gw.read_sse(resp)]
        finally:
            conn.close()
        chunks = [json.loads(d) for d in events]
        self.assertTrue(all(not c["stop"] for c in chunks[:-1]))
        self.assertTrue(chunks[-1]["stop"])
        self.assertEqual(chunks[-1]["content"], "")
        self.assertEqual("".join(c["content"] for c in chunks), whole["content"])

    def test_prompt_and_extra_change_the_prompt(self):
        plain = self.infill(BASE)["tokens_evaluated"]
        self.assertGreater(self.infill({**BASE, "prompt": "c = a +"})["tokens_evaluated"], plain)
        self.assertGreater(self.infill({**BASE, "input_extra": EXTRA})["tokens_evaluated"], plain)

    def test_a_model_without_fim_tokens_is_refused_naming_them(self):
        out = self.infill({**BASE, "model": "plain"}, status=400)
        msg = out["error"]["message"]
        for part in ("prefix token is missing", "suffix token is missing", "middle token is missing"):
            self.assertIn(part, msg)

    def test_bad_fields_are_named(self):
        cases = [({"input_prefix": None}, "'input_prefix'"), ({"input_suffix": 3}, "'input_suffix'"),
                 ({"input_extra": {"text": "a"}}, "'input_extra'"), ({"input_extra": [{"filename": "a"}]},
                                                                     "'input_extra[0].text'"),
                 ({"input_extra": [{"text": "a", "filename": 1}]}, "'input_extra[0].filename'"),
                 ({"n_predict": 0}, "'n_predict'"), ({"prompt": 5}, "'prompt'"), ({"messages": []}, "'messages'")]
        for extra, name in cases:
            with self.subTest(extra=extra):
                body = {k: v for k, v in {**BASE, **extra}.items() if v is not None}
                self.assertIn(name, self.infill(body, status=400)["error"]["message"])

    def test_the_field_table_rows(self):
        api_fields.check_rows(self, self.g, "infill", "/infill", BASE, EXAMPLES)

    def test_same_text_as_llama_server(self):
        cases = [("fim", self.qwen, {}), ("fim", self.qwen, {"input_extra": EXTRA, "prompt": "c = a"}),
                 ("star", self.star, {"input_extra": EXTRA})]
        bases = {}
        for name, path, extra in cases:
            with self.subTest(model=name, extra=extra):
                if name not in bases:
                    bases[name] = peer.start(self, ["-m", path, "-c", str(CTX)], f"llama-server-infill-{name}.log")
                body = {"input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": N, "temperature": 0, **extra}
                theirs = peer.post(bases[name], "/infill", {**body, "cache_prompt": False})
                ours = self.infill({"model": name, **body})
                self.assertEqual(ours["content"], theirs["content"])
                self.assertEqual(ours["tokens_evaluated"], theirs["tokens_evaluated"])
                self.assertEqual(ours["stop_type"], theirs["stop_type"])
                self.assertEqual(ours["prompt"], theirs["prompt"])


if __name__ == "__main__":
    unittest.main()
