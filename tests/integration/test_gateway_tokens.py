"""llama-server's token and template routes: /tokenize, /detokenize, /apply-template,
/v1/chat/completions/input_tokens and /v1/responses/input_tokens, in its shapes and with its
defaults, giving the same tokens, text and prompt as llama-server on the same model.

Two synthetic models: one of Qwen2's vocabulary with Qwen2.5's template (tools rendered into the
prompt, <|im_start|> a special token), and one of Llama 3's vocabulary, whose tokenizer adds BOS.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support import api_fields, peer  # noqa: E402

TEMPLATES = os.path.join(os.path.dirname(gw.VOCAB), "..", "source", "models", "templates")
QWEN_VOCAB = os.path.join(os.path.dirname(gw.VOCAB), "ggml-vocab-qwen2.gguf")
TEXTS = ["Hello world", " leading space", "<|im_start|>user\nHi<|im_end|>", "naïve café 日本語 🙂", ""]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
CHAT = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Oslo?"}],
        "tools": TOOLS}


EXAMPLES = {"tokenize": {"model": {"model": "llama"}, "content": {"content": "a"}, "add_special": {"add_special": True},
                         "parse_special": {"parse_special": False}, "with_pieces": {"with_pieces": True},
                         "user": {"user": "u"}},
            "detokenize": {"model": {"model": "llama"}, "tokens": {"tokens": [1]}, "user": {"user": "u"}}}
BASE = {"tokenize": {"model": "llama", "content": "Hi"}, "detokenize": {"model": "llama", "tokens": [9906]}}


class Tokens(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.qwen = gw.synth_model("tokens-qwen.gguf", "--chat-template-file",
                                  os.path.join(TEMPLATES, "Qwen-Qwen2.5-7B-Instruct.jinja"), vocab=QWEN_VOCAB)
        cls.llama = gw.synth_model("tokens-llama.gguf")
        cls.g = gw.serve_config(gw.local_target("qwen", path=cls.qwen, parallel=1) +
                                gw.local_target("llama", path=cls.llama, parallel=1) +
                                '[[targets]]\nname = "far"\ntype = "openai_compatible"\n'
                                f'base_url = "http://127.0.0.1:{gw.closed_port()}/v1"\n')

    @classmethod
    def tearDownClass(cls):
        cls.g.stop()

    def post(self, path, body, status=200):
        st, _, out = self.g.json("POST", path, body)
        self.assertEqual(st, status, out)
        return out

    def test_tokenize_defaults_and_pieces(self):
        plain = self.post("/tokenize", {"model": "llama", "content": "Hello world"})["tokens"]
        self.assertTrue(all(isinstance(t, int) for t in plain))
        special = self.post("/tokenize", {"model": "llama", "content": "Hello world", "add_special": True})["tokens"]
        self.assertEqual(special[1:], plain, "add_special adds BOS, and is off by default")
        pieces = self.post("/tokenize", {"model": "llama", "content": "Hello world", "with_pieces": True})["tokens"]
        self.assertEqual([p["id"] for p in pieces], plain)
        self.assertEqual("".join(p["piece"] for p in pieces), "Hello world")
        chat = self.post("/tokenize", {"model": "qwen", "content": "<|im_start|>"})["tokens"]
        self.assertEqual(len(chat), 1, "parse_special is on by default")
        raw = self.post("/tokenize", {"model": "qwen", "content": "<|im_start|>", "parse_special": False})["tokens"]
        self.assertGreater(len(raw), 1)

    def test_a_piece_that_is_not_utf8_is_its_bytes(self):
        pieces = self.post("/tokenize", {"model": "qwen", "content": "𓀀𓁐", "with_pieces": True})["tokens"]
        self.assertTrue(any(isinstance(p["piece"], list) for p in pieces), pieces)
        joined = b"".join(bytes(p["piece"]) if isinstance(p["piece"], list) else p["piece"].encode()
                          for p in pieces)
        self.assertEqual(joined.decode(), "𓀀𓁐")

    def test_mixed_content_and_detokenize_round_trip(self):
        ids = self.post("/tokenize", {"model": "llama", "content": ["Hi", 11, " there"], "add_special": True})["tokens"]
        self.assertEqual(ids[0], 128000)
        self.assertEqual(ids[2], 11)
        text = self.post("/detokenize", {"model": "llama", "tokens": ids})["content"]
        self.assertEqual(text, "<|begin_of_text|>Hi, there")

    def test_apply_template_renders_tools(self):
        prompt = self.post("/apply-template", {"model": "qwen", **CHAT})["prompt"]
        self.assertIn("get_weather", prompt)
        self.assertIn("<|im_start|>system\nBe brief.", prompt)
        self.assertTrue(prompt.endswith("<|im_start|>assistant\n"), prompt[-60:])

    def test_input_tokens_count_the_rendered_prompt(self):
        prompt = self.post("/apply-template", {"model": "qwen", **CHAT})["prompt"]
        n = len(self.post("/tokenize", {"model": "qwen", "content": prompt, "add_special": True})["tokens"])
        chat = self.post("/v1/chat/completions/input_tokens", {"model": "qwen", **CHAT})
        self.assertEqual(chat, {"object": "response.input_tokens", "input_tokens": n})
        resp = self.post("/v1/responses/input_tokens",
                         {"model": "qwen", "instructions": "Be brief.", "input": "Weather in Oslo?",
                          "tools": [{"type": "function", "name": "get_weather", **{
                              k: TOOLS[0]["function"][k] for k in ("description", "parameters")}}]})
        self.assertEqual(resp, chat)

    def test_the_field_table_rows(self):
        for api in ("tokenize", "detokenize"):
            api_fields.check_rows(self, self.g, api, f"/{api}", BASE[api], EXAMPLES[api])

    def test_bad_fields_are_named(self):
        cases = [("/tokenize", {}, "'content'"), ("/tokenize", {"content": 5}, "'content'"),
                 ("/tokenize", {"content": ["a", 1.5]}, "'content[1]'"),
                 ("/tokenize", {"content": "a", "with_pieces": 1}, "'with_pieces'"),
                 ("/tokenize", {"content": "a", "tokens": [1]}, "'tokens'"),
                 ("/detokenize", {}, "'tokens'"), ("/detokenize", {"tokens": [-1]}, "'tokens[0]'"),
                 ("/detokenize", {"tokens": [10 ** 9]}, "'tokens[0]'"),
                 ("/apply-template", {"messages": "hi"}, "'messages'")]
        for path, body, name in cases:
            with self.subTest(path=path, body=body):
                out = self.post(path, {"model": "llama", **body}, status=400)
                self.assertIn(name, out["error"]["message"])

    def test_a_remote_target_is_refused_naming_the_route(self):
        for path, body in (("/tokenize", {"content": "a"}), ("/apply-template", CHAT)):
            with self.subTest(path=path):
                out = self.post(path, {"model": "far", **body}, status=400)
                self.assertIn(path, out["error"]["message"])
                self.assertIn("local target", out["error"]["message"])

    def test_tokens_match_llama_cpps_vocabulary_tests(self):
        # llama.cpp's test-tokenizer-0 cases for these vocabularies (inputs and the ids its reference
        # tokenizers give, without BOS and with special texts as text): /tokenize with
        # "parse_special": false must give the same ids
        for name, vocab in (("llama", gw.VOCAB), ("qwen", QWEN_VOCAB)):
            with open(vocab + ".inp", encoding="utf-8") as f:
                inputs = f.read().split("\n__ggml_vocab_test__\n")[:-1]
            with open(vocab + ".out") as f:
                outputs = [[int(t) for t in line.split()] for line in f.read().split("\n")[:len(inputs)]]
            self.assertEqual(len(inputs), len(outputs))
            self.assertGreater(len(inputs), 20)
            for text, ids in zip(inputs, outputs):
                with self.subTest(model=name, text=text):
                    out = self.post("/tokenize", {"model": name, "content": text, "parse_special": False})
                    self.assertEqual(out["tokens"], ids)

    def test_same_as_llama_server(self):
        for name, path in (("qwen", self.qwen), ("llama", self.llama)):
            with self.subTest(model=name):
                base = peer.start(self, ["-m", path, "-c", "1024", "--jinja"], f"llama-server-tokens-{name}.log")
                for text in TEXTS:
                    for flags in ({}, {"add_special": True}, {"with_pieces": True}, {"parse_special": False}):
                        body = {"content": text, **flags}
                        self.assertEqual(self.post("/tokenize", {"model": name, **body}),
                                         peer.post(base, "/tokenize", body), body)
                ids = peer.post(base, "/tokenize", {"content": "".join(TEXTS), "add_special": True})["tokens"]
                self.assertEqual(self.post("/detokenize", {"model": name, "tokens": ids}),
                                 peer.post(base, "/detokenize", {"tokens": ids}))
                chat = CHAT if name == "qwen" else {"messages": CHAT["messages"]}
                self.assertEqual(self.post("/apply-template", {"model": name, **chat}),
                                 peer.post(base, "/apply-template", chat))
                self.assertEqual(self.post("/v1/chat/completions/input_tokens", {"model": name, **chat}),
                                 peer.post(base, "/v1/chat/completions/input_tokens", chat))


if __name__ == "__main__":
    unittest.main()
