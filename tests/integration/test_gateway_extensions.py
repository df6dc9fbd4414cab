"""sipp's extensions of the OpenAI routes: context_key pins a conversation to a slot (its next turn
reuses the cached prompt), and usage carries sipp's timings under "sipp"."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

TARGET = "tiny"


class OpenAIExtensions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gw.serve_model(gw.model(TARGET), "--parallel", "2", "--ctx-size", "2048")

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    def chat(self, messages, **kw):
        body = {"model": TARGET, "messages": messages, "max_tokens": 8, "temperature": 0, **kw}
        status, _, out = self.gw.json("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, out)
        return out

    def test_context_key_reuses_the_conversation(self):
        first = [{"role": "user", "content": "Tell me about the sea, the waves and the old lighthouse keeper."}]
        a = self.chat(first, context_key="conv-a")
        # Another conversation in between takes the other slot, or evicts an unpinned one.
        self.chat([{"role": "user", "content": "Something else entirely, about mountains."}], context_key="conv-b")
        turn2 = first + [{"role": "assistant", "content": a["choices"][0]["message"]["content"]},
                         {"role": "user", "content": "And then?"}]
        b = self.chat(turn2, context_key="conv-a")
        self.assertGreaterEqual(b["usage"]["prompt_tokens_details"]["cached_tokens"],
                                a["usage"]["prompt_tokens"] - 1)

    def test_context_key_must_be_a_string(self):
        status, _, out = self.gw.json("POST", "/v1/completions",
                                      {"model": TARGET, "prompt": "x", "context_key": 7})
        self.assertEqual(status, 400)
        self.assertIn("context_key", out["error"]["message"])

    def test_usage_carries_sipp_timings(self):
        out = self.chat([{"role": "user", "content": "Hi"}])
        s = out["usage"]["sipp"]
        for key in ("ttft_ms", "prefill_tokens_per_s", "decode_tokens_per_s", "queue_ms", "total_ms"):
            self.assertIn(key, s)
        self.assertGreater(s["ttft_ms"], 0)


if __name__ == "__main__":
    unittest.main()
