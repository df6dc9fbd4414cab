"""One prefix, many conversations: a new conversation whose first tokens (an agent's instructions and
tools) another slot already holds reads them from that slot's cells instead of evaluating them
again, whether that slot is still generating or idle, on chat completions and on the translated
APIs; and its greedy answer is the same as on a fresh server, where nothing is shared.

Two slots (parallel = 2) of a synthetic model with Qwen2.5's template; the shared prefix is a system
prompt of about 1,500 tokens. The reuse is read from the answer's usage (cached_tokens,
cache_read_input_tokens) and from /metrics (sipp_cached_tokens_total).
"""

import json
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_api_fields as fields  # noqa: E402
import test_gateway_support as gw  # noqa: E402

SYSTEM = "You are a careful coding agent. " + " ".join(
    f"Rule {i}: read the file, run the tests, then explain change number {i} briefly." for i in range(90))
SLACK = 32  # tokens after the shared system prompt that differ (the user turn and the template's markers)
RUNNING_TOKENS = 400
ANSWER_TOKENS = 8
# a first user turn far longer than SLACK: losing it shows
HISTORY = "Here is the log of the failing build. " + " ".join(f"line {i}: error in module {i % 7}" for i in range(40))
CTX = 8192


def model_path():
    return fields.make_model(os.path.join(gw.tmpdir(), "prefix-qwen25.gguf"), "Qwen-Qwen2.5-7B-Instruct.jinja")


def config():
    return gw.local_target("qwen", path=model_path(), parallel=2, ctx=CTX)


def chat(words, tokens=ANSWER_TOKENS, **kw):
    return {"model": "qwen", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": words}],
            "max_tokens": tokens, "temperature": 0, **kw}


def messages(words):
    return {"model": "qwen", "system": SYSTEM, "messages": [{"role": "user", "content": words}],
            "max_tokens": ANSWER_TOKENS, "temperature": 0}


class Running:
    """A long greedy generation on the first slot, streamed on a thread; first_token waits until it
    has read its prompt and is generating."""

    def __init__(self, g):
        self.first = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(g,), daemon=True)
        self.thread.start()

    def _run(self, g):
        try:
            body = chat("Write a long story about lighthouses.", RUNNING_TOKENS, stream=True, ignore_eos=True)
            conn, resp = g.stream("/v1/chat/completions", body, timeout=600)
            for raw in resp:
                if raw.startswith(b"data: {") and b'"content"' in raw:
                    self.first.set()
            conn.close()
        except Exception as e:  # noqa: BLE001 (raised by join)
            self.error = e
        finally:
            self.first.set()

    def join(self):
        self.thread.join(600)
        if self.error:
            raise self.error


class PrefixSharingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gw.serve_config(config())
        # each answer alone, on a server of its own: nothing to share
        cls.alone = {}
        for words in ("List the files here.", "What does main.c do?", "Run the unit tests."):
            out = cls.alone_answer("/v1/chat/completions", chat(words))
            assert out["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, out["usage"]
            cls.alone[words] = (out["choices"][0]["message"]["content"], out["usage"]["prompt_tokens"])
        out = cls.alone_answer("/v1/messages", messages("Run the unit tests."))
        assert out["usage"]["cache_read_input_tokens"] == 0, out["usage"]
        cls.alone_messages = "".join(b["text"] for b in out["content"] if b["type"] == "text")
        cls.prompt_tokens = out["usage"]["input_tokens"]

    @staticmethod
    def alone_answer(path, body):
        fresh = gw.serve_config(config())
        try:
            st, _, out = fresh.json("POST", path, body)
            assert st == 200, out
            return out
        finally:
            fresh.stop()

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def cached_total(self):
        return gw.metric(self.gw.metrics(), "sipp_cached_tokens_total", target="qwen") or 0

    def assert_shared(self, words):
        before = self.cached_total()
        st, _, out = self.gw.json("POST", "/v1/chat/completions", chat(words))
        self.assertEqual(st, 200, out)
        text, prompt = self.alone[words]
        self.assertEqual(out["usage"]["prompt_tokens"], prompt)
        cached = out["usage"]["prompt_tokens_details"]["cached_tokens"]
        self.assertGreaterEqual(cached, prompt - SLACK, f"{cached} of {prompt} prompt tokens reused")
        self.assertEqual(self.cached_total() - before, cached)
        self.assertEqual(out["choices"][0]["message"]["content"], text, "the same greedy answer as alone")

    def test_a_new_conversation_shares_a_running_ones_prefix(self):
        run = Running(self.gw)
        self.assertTrue(run.first.wait(300))
        try:
            self.assert_shared("List the files here.")
        finally:
            run.join()

    def test_a_new_conversation_shares_an_idle_slots_prefix(self):
        st, _, out = self.gw.json("POST", "/v1/chat/completions", chat("Something else first."))
        self.assertEqual(st, 200, out)
        self.assert_shared("What does main.c do?")

    def test_an_idle_conversation_keeps_its_slot_when_a_new_one_shares_its_prefix(self):
        # A's first turn (a long user message), then B's (sharing only the system prompt), then A's
        # second turn: B takes the other slot and copies the prompt's cells, so A's turn 2 finds its
        # whole first turn. (Its history is in the user message: a random model's answer, tokenized
        # again from its text, need not be the tokens it generated.)
        fresh = gw.serve_config(config())
        try:
            first = chat(HISTORY)
            st, _, a1 = fresh.json("POST", "/v1/chat/completions", first)
            self.assertEqual(st, 200, a1)
            st, _, b1 = fresh.json("POST", "/v1/chat/completions", chat("What does main.c do?"))
            self.assertEqual(st, 200, b1)
            self.assertGreaterEqual(b1["usage"]["prompt_tokens_details"]["cached_tokens"],
                                    b1["usage"]["prompt_tokens"] - SLACK, "B shares the system prompt")
            turn2 = dict(first)
            turn2["messages"] = first["messages"] + [a1["choices"][0]["message"],
                                                     {"role": "user", "content": "Shorter, please."}]
            st, _, a2 = fresh.json("POST", "/v1/chat/completions", turn2)
            self.assertEqual(st, 200, a2)
            cached = a2["usage"]["prompt_tokens_details"]["cached_tokens"]
            self.assertGreaterEqual(cached, a1["usage"]["prompt_tokens"] - SLACK,
                                    f"A's turn 2 lost its first turn to B: {a2['usage']}")
        finally:
            fresh.stop()

    def test_the_messages_api_reports_the_shared_prefix(self):
        st, _, out = self.gw.json("POST", "/v1/chat/completions", chat("Warm the prefix up."))
        self.assertEqual(st, 200, out)
        st, _, out = self.gw.json("POST", "/v1/messages", messages("Run the unit tests."))
        self.assertEqual(st, 200, out)
        u = out["usage"]
        self.assertEqual(u["input_tokens"] + u["cache_read_input_tokens"], self.prompt_tokens)
        self.assertGreaterEqual(u["cache_read_input_tokens"], self.prompt_tokens - SLACK)
        self.assertEqual("".join(b["text"] for b in out["content"] if b["type"] == "text"), self.alone_messages)


if __name__ == "__main__":
    unittest.main()
