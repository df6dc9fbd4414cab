"""docs/api-fields.md, row by row, against `sipp serve`: the honesty rule's table of every request
field of chat completions, Responses, Messages and Ollama chat/generate.

For each row its example is merged into a small valid request of its API: an `ignored` row answers
200 with the `sipp-ignored` header naming the field (`[]` read as `[0]`), and the same greedy output
and prompt size as the request without it; a `refused` row answers 400 with a message naming the
field; an `honored` row answers 200 and is not named in `sipp-ignored`. Then the adapted shapes the
agents send: namespace tools (flattened, calls returned with their namespace, plain and streamed),
built-in and server tools (left out and named; forcing one is a 400), a `system` message among the
Messages turns, `thinking` and `output_config.effort` (the template's switch changes the prompt),
the header on streamed replies, and the debug log line.
"""

import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(ROOT, "docs", "api-fields.md")
TEMPLATES = os.path.join(os.path.dirname(gw.VOCAB), "..", "source", "models", "templates")
QWEN_VOCAB = os.path.join(os.path.dirname(gw.VOCAB), "ggml-vocab-qwen2.gguf")
MODEL = "qwen"
THINKER = "thinker"
STRICT = "strict"  # a template that takes a system prompt only at the start (Mistral Nemo's)
OSS = "oss"  # gpt-oss's template, which reads reasoning_effort
N = 4  # tokens generated per request
SYNTH_TIMEOUT_S = 120
DECISIONS = ("honored", "ignored", "refused")

PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages",
         "ollama-chat": "/api/chat", "ollama-generate": "/api/generate"}


def base_body(api):
    greedy = {"temperature": 0, "seed": 1}
    if api == "chat":
        return {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": N, **greedy}
    if api == "responses":
        return {"model": MODEL, "input": "Hi", "max_output_tokens": N, "temperature": 0}
    if api == "messages":
        return {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": N, "temperature": 0}
    opts = {"options": {"num_predict": N, "temperature": 0, "seed": 1}, "stream": False}
    if api == "ollama-chat":
        return {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], **opts}
    return {"model": MODEL, "prompt": "Hi", **opts}


def output_of(api, body):
    """The generated text and the prompt's size, in any API's answer."""
    if api == "chat":
        return body["choices"][0]["message"].get("content"), body["usage"]["prompt_tokens"]
    if api == "responses":
        text = "".join(p.get("text", "") for it in body["output"] if it["type"] == "message" for p in it["content"])
        return text, body["usage"]["input_tokens"]
    if api == "messages":
        u = body["usage"]
        return "".join(b.get("text", "") for b in body["content"]), u["input_tokens"] + u["cache_read_input_tokens"]
    if api == "ollama-chat":
        return body["message"]["content"], body["prompt_eval_count"]
    return body["response"], body["prompt_eval_count"]


def read_table():
    """The rows of docs/api-fields.md: (api, field, decision, example or None)."""
    rows = []
    with open(TABLE) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 5 or cells[0] not in PATHS:
                continue
            api, field, decision, example, _ = cells
            ex = None if example == "-" else json.loads(example.strip("`"))
            rows.append((api, field, decision, ex))
    return rows


def ignored_name(field):
    """What sipp-ignored says for a row's field: its first word, an array's first element."""
    return field.split(" ")[0].replace("[]", "[0]")


def make_model(path, template, seed=1, vocab=QWEN_VOCAB):
    if not os.path.exists(path):
        r = subprocess.run([gw.SYNTH, "--out", path, "--vocab", vocab, "--chat-template-file",
                            os.path.join(TEMPLATES, template), "--seed", str(seed), *gw.TINY],
                           capture_output=True, text=True, timeout=SYNTH_TIMEOUT_S)
        assert r.returncode == 0, r.stderr
    return path


class FieldTableTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        qwen = make_model(os.path.join(gw.tmpdir(), "fields-qwen25.gguf"), "Qwen-Qwen2.5-7B-Instruct.jinja")
        thinker = make_model(os.path.join(gw.tmpdir(), "fields-qwen3.gguf"), "Qwen-Qwen3-0.6B.jinja")
        strict = make_model(os.path.join(gw.tmpdir(), "fields-nemo.gguf"), "mistralai-Mistral-Nemo-Instruct-2407.jinja",
                            vocab=os.path.join(os.path.dirname(gw.VOCAB), "ggml-vocab-llama-spm.gguf"))
        oss = make_model(os.path.join(gw.tmpdir(), "fields-oss.gguf"), "openai-gpt-oss-120b.jinja")
        cls.gw = gw.serve_config(gw.local_target(OSS, path=oss, parallel=1, ctx=4096) +
                                 gw.local_target(MODEL, path=qwen, parallel=2, ctx=4096) +
                                 gw.local_target(THINKER, path=thinker, parallel=1, ctx=4096) +
                                 gw.local_target(STRICT, path=strict, parallel=1, ctx=4096),
                                 env={"SIPP_LOG": "debug"})
        cls.rows = read_table()

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def post(self, api, body, path=None):
        return self.gw.json("POST", path or PATHS[api], body)

    def test_the_table_covers_every_api_and_decision(self):
        self.assertGreater(len(self.rows), 100)
        for api in PATHS:
            decisions = {d for a, _, d, _ in self.rows if a == api}
            self.assertIn("honored", decisions, api)
        for api, field, decision, _ in self.rows:
            self.assertIn(decision, DECISIONS, f"{api} {field}")
        keys = [(a, f) for a, f, _, _ in self.rows]
        self.assertEqual(len(keys), len(set(keys)), "a field has two rows")

    def test_every_row(self):
        baselines = {}
        for api, field, decision, example in self.rows:
            if example is None:
                continue
            with self.subTest(api=api, field=field, decision=decision):
                if api not in baselines:
                    st, h, b = self.post(api, base_body(api))
                    self.assertEqual(st, 200, b)
                    self.assertIsNone(h.get("sipp-ignored"), f"{api}: the base request ignores nothing")
                    baselines[api] = output_of(api, b)
                body = {**base_body(api), **example}
                st, h, b = self.post(api, body)
                named = [n.strip() for n in (h.get("sipp-ignored") or "").split(",") if n.strip()]
                top = field.split(" ")[0].split("[")[0].split(".")[0]
                if decision == "refused":
                    self.assertEqual(st, 400, b)
                    msg = json.dumps(b)
                    self.assertIn(f"'{top}", msg, f"the message names '{top}'")
                elif decision == "ignored":
                    self.assertEqual(st, 200, b)
                    self.assertIn(ignored_name(field), named)
                    if "tools" not in example:  # a tool list changes the prompt even when one is left out
                        self.assertEqual(output_of(api, b), baselines[api], "an ignored field changed the output")
                else:
                    self.assertEqual(st, 200, b)
                    self.assertNotIn(top, named)

    def test_ignored_is_named_on_streams_and_in_the_debug_log(self):
        conn, resp = self.gw.stream("/v1/responses", {**base_body("responses"), "stream": True,
                                                      "client_metadata": {"a": "b"}, "include": ["x.y"]})
        try:
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.getheader("sipp-ignored"), "client_metadata, include[0]")
            resp.read()
        finally:
            conn.close()
        conn, resp = self.gw.stream("/v1/messages?beta=true", {**base_body("messages"), "stream": True,
                                                               "metadata": {"user_id": "u"}},
                                    headers={"anthropic-beta": "claude-code-20250219,made-up-2030-01-01",
                                             "anthropic-version": "2023-06-01", "x-app": "cli"})
        try:
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.getheader("sipp-ignored"), "metadata")
            rid = resp.getheader("x-request-id")
            resp.read()
        finally:
            conn.close()
        gw.wait_until(lambda: f"id={rid} ignored: metadata" in self.gw.text(), 10, "the debug line")

    def test_a_field_in_no_row_is_refused(self):
        for api in PATHS:
            st, _, b = self.post(api, {**base_body(api), "frobnicate": 1})
            self.assertEqual(st, 400, api)
            self.assertIn("'frobnicate'", json.dumps(b))

    # ---- Responses: namespace and built-in tools ----

    NS_TOOLS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
                {"type": "namespace", "name": "multi_agent_v1", "description": "agents",
                 "tools": [{"type": "function", "name": "spawn_agent", "description": "spawn",
                            "parameters": {"type": "object", "properties": {"task": {"type": "string"}},
                                           "required": ["task"]}}]},
                {"type": "web_search", "external_web_access": False}]

    def test_namespace_calls_come_back_namespaced(self):
        body = {**base_body("responses"), "max_output_tokens": 64, "tools": self.NS_TOOLS,
                "tool_choice": {"type": "function", "name": "spawn_agent", "namespace": "multi_agent_v1"}}
        st, h, b = self.post("responses", body)
        self.assertEqual(st, 200, b)
        self.assertEqual(h.get("sipp-ignored"), "tools[2]")
        calls = [it for it in b["output"] if it["type"] == "function_call"]
        self.assertTrue(calls, b["output"])
        self.assertEqual((calls[0]["name"], calls[0]["namespace"]), ("spawn_agent", "multi_agent_v1"))
        st, _, events = self.gw.sse("/v1/responses", {**body, "stream": True})
        self.assertEqual(st, 200)
        added = [json.loads(d)["item"] for e, d in events if e == "response.output_item.added"]
        done = [json.loads(d)["item"] for e, d in events if e == "response.output_item.done"]
        for items in (added, done):
            fc = [it for it in items if it["type"] == "function_call"]
            self.assertEqual((fc[0]["name"], fc[0]["namespace"]), ("spawn_agent", "multi_agent_v1"))
        # The call and its output sent back (the next turn) reach the model as the joined name.
        turn2 = {**base_body("responses"), "tools": self.NS_TOOLS, "input": [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c1", "name": "spawn_agent", "namespace": "multi_agent_v1",
             "arguments": "{\"task\": \"x\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "done"}]}
        st, _, b = self.post("responses", turn2)
        self.assertEqual(st, 200, b)

    def test_forcing_a_built_in_tool_is_refused(self):
        st, _, b = self.post("responses", {**base_body("responses"), "tools": self.NS_TOOLS,
                                           "tool_choice": {"type": "web_search"}})
        self.assertEqual(st, 400, b)
        self.assertIn("'tool_choice'", b["error"]["message"])
        self.assertIn("web_search", b["error"]["message"])

    def test_server_tools_of_messages(self):
        tools = [{"name": "Bash", "input_schema": {"type": "object"}},
                 {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
        st, h, b = self.post("messages", {**base_body("messages"), "tools": tools})
        self.assertEqual(st, 200, b)
        self.assertEqual(h.get("sipp-ignored"), "tools[1]")
        st, _, b = self.post("messages", {**base_body("messages"), "tools": tools,
                                          "tool_choice": {"type": "tool", "name": "web_search"}})
        self.assertEqual(st, 400, b)
        self.assertIn("'tool_choice.name'", b["error"]["message"])
        st, _, b = self.post("messages", {**base_body("messages"), "context_management": {
            "edits": [{"type": "clear_tool_uses_20250919"}]}})
        self.assertEqual(st, 400, b)
        self.assertIn("'context_management.edits[0].type'", b["error"]["message"])

    # ---- Messages: system among the turns, thinking, effort ----

    def count(self, body, model=MODEL):
        body = {k: v for k, v in body.items() if k not in ("max_tokens", "temperature")}
        st, _, b = self.post("messages", {**body, "model": model}, path="/v1/messages/count_tokens")
        self.assertEqual(st, 200, b)
        return b["input_tokens"]

    def test_a_system_message_among_the_turns_is_rendered(self):
        turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                 {"role": "system", "content": [{"type": "text", "text": "Answer in French.",
                                                 "cache_control": {"type": "ephemeral"}}]},
                 {"role": "user", "content": "Again"}]
        without = [m for m in turns if m["role"] != "system"]
        body = {**base_body("messages"), "messages": turns}
        st, h, b = self.post("messages", body)
        self.assertEqual(st, 200, b)
        self.assertEqual(h.get("sipp-ignored"), "cache_control")
        self.assertGreater(self.count(body), self.count({**body, "messages": without}))
        # A template that refuses it there gets it folded into the system prompt.
        for model in (STRICT, MODEL):
            st, _, b = self.post("messages", {**body, "model": model, "system": "Be brief."})
            self.assertEqual(st, 200, b)
            self.assertGreater(self.count({**body, "system": "Be brief."}, model),
                               self.count({**body, "messages": without, "system": "Be brief."}, model))
        st, _, b = self.post("responses", {**base_body("responses"), "model": STRICT, "input": [
            {"type": "message", "role": "user", "content": "Hi"},
            {"type": "message", "role": "developer", "content": "Answer in French."},
            {"type": "message", "role": "user", "content": "Again"}]})
        self.assertEqual(st, 200, b)

    def test_thinking_and_effort_switch_the_template(self):
        base = base_body("messages")
        off = self.count({**base, "thinking": {"type": "disabled"}}, THINKER)
        adaptive = self.count({**base, "thinking": {"type": "adaptive", "display": "omitted"}}, THINKER)
        enabled = self.count({**base, "thinking": {"type": "enabled", "budget_tokens": 64}}, THINKER)
        self.assertGreater(off, adaptive, "disabled thinking closes an empty think block in the prompt")
        self.assertEqual(adaptive, enabled)
        st, h, b = self.post("messages", {**base, "model": THINKER, "thinking": {"type": "adaptive",
                                                                                  "display": "omitted"},
                                          "output_config": {"effort": "high"}})
        self.assertEqual(st, 200, b)
        self.assertEqual(h.get("sipp-ignored"), "thinking.display")
        st, _, b = self.post("messages", {**base, "output_config": {"effort": "extreme"}})
        self.assertEqual(st, 400, b)
        self.assertIn("'output_config.effort'", b["error"]["message"])
        # effort is the template's reasoning_effort: one slot's cache shows where prompts part. A prompt
        # the slot holds whole re-reads only its last token.
        def messages_effort(effort):
            st, _, b = self.post("messages", {**base, "model": OSS, "output_config": {"effort": effort}})
            self.assertEqual(st, 200, b)
            return b["usage"]["input_tokens"] + b["usage"]["cache_read_input_tokens"], b["usage"]["cache_read_input_tokens"]
        messages_effort("low")
        total, cached = messages_effort("high")
        self.assertLess(cached, total - 1, "effort high renders another prompt than low")
        total, cached = messages_effort("max")
        self.assertEqual(cached, total - 1, "max is high")
        st, _, b = self.post("chat", {**base_body("chat"), "model": OSS, "reasoning_effort": "high"})
        self.assertEqual(b["usage"]["prompt_tokens_details"]["cached_tokens"], b["usage"]["prompt_tokens"] - 1,
                         "Messages' effort high is chat's reasoning_effort high")
        # Responses' reasoning.effort "none" is the same switch.
        body = {**base_body("responses"), "model": THINKER}
        st, _, on = self.post("responses", body)
        st2, _, none = self.post("responses", {**body, "reasoning": {"effort": "none"}})
        self.assertEqual((st, st2), (200, 200))
        self.assertGreater(none["usage"]["input_tokens"], on["usage"]["input_tokens"])


if __name__ == "__main__":
    unittest.main()
