"""One request to every route of the gateway, against one server (make check's smoke test).

One `sipp serve` of a tiny model for the whole class: each route answers a plain, valid request with
200 and the shape its API promises. The route's own test file checks the details; this one only shows,
within seconds, that nothing is broken outright."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

TARGET = "smoke"
MSGS = [{"role": "user", "content": "Hello"}]

# (name, method, path, body, a key the JSON answer must have); body None for a GET.
ROUTES = [
    ("health", "GET", "/health", None, None),
    ("ready", "GET", "/ready", None, None),
    ("models", "GET", "/v1/models", None, "data"),
    ("backends", "GET", "/v1/backends", None, None),
    ("mcp_tools", "GET", "/v1/mcp/tools", None, "data"),
    ("openai_chat", "POST", "/v1/chat/completions", {"model": TARGET, "messages": MSGS, "max_tokens": 4}, "choices"),
    ("openai_completions", "POST", "/v1/completions", {"model": TARGET, "prompt": "Hello", "max_tokens": 4},
     "choices"),
    ("openai_embeddings", "POST", "/v1/embeddings", {"model": TARGET, "input": "hello"}, "data"),
    ("openai_responses", "POST", "/v1/responses", {"model": TARGET, "input": "Hello", "max_output_tokens": 4},
     "output"),
    ("anthropic_messages", "POST", "/v1/messages", {"model": TARGET, "messages": MSGS, "max_tokens": 4}, "content"),
    ("anthropic_count_tokens", "POST", "/v1/messages/count_tokens", {"model": TARGET, "messages": MSGS},
     "input_tokens"),
    ("ollama_tags", "GET", "/api/tags", None, "models"),
    ("catalog", "GET", "/v1/catalog", None, "data"),
    ("ollama_chat", "POST", "/api/chat", {"model": TARGET, "messages": MSGS, "stream": False,
                                          "options": {"num_predict": 4}}, "message"),
    ("ollama_generate", "POST", "/api/generate", {"model": TARGET, "prompt": "Hello", "stream": False,
                                                  "options": {"num_predict": 4}}, "response"),
    ("native_query", "POST", "/v1/query", {"model": TARGET, "prompt": "Hello", "max_tokens": 4, "stream": False},
     None),
    ("native_chat", "POST", "/v1/chat", {"model": TARGET, "messages": MSGS, "max_tokens": 4, "stream": False}, None),
    ("native_embed", "POST", "/v1/embed", {"model": TARGET, "input": "hello"}, None),
    ("erase_slots", "POST", f"/v1/models/{TARGET}/erase_slots", {}, "erased"),
    ("openai_speech", "POST", "/v1/audio/speech", {"model": "voice", "input": "Hello.", "response_format": "wav"},
     None),
    ("lora_adapters", "GET", "/lora-adapters", None, None),
    ("tokenize", "POST", "/tokenize", {"model": TARGET, "content": "Hello"}, "tokens"),
    ("detokenize", "POST", "/detokenize", {"model": TARGET, "tokens": [9906]}, "content"),
    ("apply_template", "POST", "/apply-template", {"model": TARGET, "messages": MSGS}, "prompt"),
    ("chat_input_tokens", "POST", "/v1/chat/completions/input_tokens", {"model": TARGET, "messages": MSGS},
     "input_tokens"),
    ("props", "GET", f"/props?model={TARGET}", None, "total_slots"),
    ("slots", "GET", f"/slots?model={TARGET}", None, None),
    ("responses_input_tokens", "POST", "/v1/responses/input_tokens", {"model": TARGET, "input": "Hello"},
     "input_tokens"),
]


class SmokeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gw.serve_model(gw.model(TARGET), "--parallel", "2", "--ctx-size", "512", "--voice")

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def check_route(self, method, path, body, key):
        status, headers, data = self.gw.request(method, path, body)
        self.assertEqual(status, 200, f"{method} {path}: {data[:400]!r}")
        if key is None:
            return
        out = json.loads(data)
        self.assertIn(key, out, f"{method} {path}: {out!r}")

    def test_metrics(self):
        self.assertTrue(self.gw.metrics())


def _route_test(method, path, body, key):
    return lambda self: self.check_route(method, path, body, key)


for _name, _method, _path, _body, _key in ROUTES:
    setattr(SmokeTest, f"test_{_name}", _route_test(_method, _path, _body, _key))

if __name__ == "__main__":
    unittest.main()
