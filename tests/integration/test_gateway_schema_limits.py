"""Integration tests of the bounds on request schemas and grammars (issue 27, items 1, 4 and 5).

Each reproducer of the issue is sent to a `sipp serve` on a tiny synthetic model (threads = 1):
  1. a json_schema of 20,000 properties (589 KB) took 6.4 GB and crashed the gateway;
  4. an enum of 50,000 values stalled the target's engine for minutes, and every other caller with it;
  5. 2,000 optional properties spun a CPU for 69 s, and a second SIGTERM did not stop the process.
Now each is a prompt 400 naming the bound and its [limits] key, on every route that turns a schema
into a grammar (chat completions' json_schema, response_format and tools, completions, the native
query, Anthropic's input_schema, Ollama's format, the Responses API's text.format); an agent's real
tool list still passes; [limits] raises and lowers the bounds; a conversion past schema_convert_ms
is refused while it finishes in the background; and a second stop signal exits at once.

Everything talks to loopback; every wait is bounded; only processes started here are stopped.
"""

import json
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

TARGET = "m2"
TOOLS_TARGET = "tools"
FAST_S = 10  # a refusal comes well within this (the reproducers took minutes, or crashed)
EXIT_S = 3  # a second signal ends the process within this
TEMPLATES = os.path.abspath(os.path.join(gw.BUILD, "llama", "source", "models", "templates"))
VOCAB = os.path.abspath(os.path.join(gw.BUILD, "llama", "vocab", "ggml-vocab-llama-bpe.gguf"))
TOOL_TEMPLATE = "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"


def props(n, prefix="p"):
    return {"type": "object", "properties": {f"{prefix}{i}": {"type": "string"} for i in range(n)}}


def enum(n):
    return {"type": "string", "enum": [f"v{i}" for i in range(n)]}


def chat(model=TARGET, **kw):
    body = {"model": model, "max_tokens": 2, "temperature": 0, "messages": [{"role": "user", "content": "hi"}]}
    body.update(kw)
    return body


def tool(name, parameters):
    return {"type": "function", "function": {"name": name, "description": "d", "parameters": parameters}}


def agent_tools(n=20):
    """A tool list the size and shape of a coding agent's: ~20 tools, nested objects and arrays, enums,
    long descriptions; about 60 KB of JSON."""
    tools = []
    for t in range(n):
        nested = {"type": "object", "properties": {f"n{i}": {"type": "string", "description": "x" * 200}
                                                   for i in range(4)}, "required": ["n0"]}
        params = {"type": "object", "properties": {
            "path": {"type": "string", "description": "The absolute path of the file to operate on. " * 20},
            "mode": {"type": "string", "enum": [f"mode{i}" for i in range(12)]},
            "count": {"type": "integer", "minimum": 0, "maximum": 1000},
            "flags": {"type": "array", "items": {"type": "string"}, "maxItems": 16},
            "options": nested,
            "edits": {"type": "array", "items": {"type": "object", "properties": {
                "old": {"type": "string"}, "new": {"type": "string"}, "all": {"type": "boolean"}},
                "required": ["old", "new"]}},
        }, "required": ["path"]}
        for i in range(4):
            params["properties"][f"extra{i}"] = {"type": "string", "description": "An optional setting. " * 10}
        tools.append(tool(f"tool_{t}", params))
    return tools


def tools_model():
    path = os.path.join(gw.tmpdir(), "hermes-tools.gguf")
    if not os.path.exists(path):
        r = gw.subprocess.run([gw.SYNTH, "--out", path, "--vocab", VOCAB, *gw.TINY, "--chat-template-file",
                               os.path.join(TEMPLATES, TOOL_TEMPLATE)], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"sipp-synth failed: {r.stderr}")
    return path


class SchemaLimitsTest(unittest.TestCase):
    """One gateway with the default [limits]."""

    @classmethod
    def setUpClass(cls):
        cfg = gw.local_target(TARGET, parallel=2) + gw.local_target(TOOLS_TARGET, tools_model(), parallel=1, ctx=4096)
        cls.gw = gw.serve_config(cfg)

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    def post(self, path, body, timeout=gw.HTTP_TIMEOUT_S):
        t0 = time.monotonic()
        status, _, data = self.gw.request("POST", path, json.dumps(body).encode(),
                                          {"Content-Type": "application/json"}, timeout=timeout)
        return status, data.decode("utf-8", "replace"), time.monotonic() - t0

    def refused(self, path, body, key, field=None):
        status, text, took = self.post(path, body)
        self.assertEqual(status, 400, text)
        self.assertIn(f"[limits] {key}", text)
        if field:
            self.assertIn(field, text)
        self.assertLess(took, FAST_S, f"the refusal took {took:.1f} s")
        return text

    def assert_alive(self):
        status, text, _ = self.post("/v1/chat/completions", chat())
        self.assertEqual(status, 200, text)

    def test_item1_large_json_schema_is_refused_and_the_gateway_lives(self):
        body = chat(json_schema=props(20000))
        self.assertGreater(len(json.dumps(body)), 500000)
        self.refused("/v1/chat/completions", body, "schema_max_bytes", "'json_schema'")
        self.assert_alive()

    def test_item4_huge_enum_is_refused_and_other_callers_go_on(self):
        other = {}

        def call():
            other["r"] = self.post("/v1/chat/completions", chat())

        t = threading.Thread(target=call)
        t.start()
        self.refused("/v1/chat/completions", chat(json_schema=enum(50000)), "schema_max_enum")
        t.join(gw.HTTP_TIMEOUT_S)
        self.assertFalse(t.is_alive())
        self.assertEqual(other["r"][0], 200, other["r"][1])
        # under the bytes bound too: the enum bound is what refuses it
        self.refused("/v1/chat/completions", chat(json_schema=enum(2000)), "schema_max_enum")
        self.refused("/v1/completions", {"model": TARGET, "prompt": "hi", "max_tokens": 2,
                                         "grammar": "root ::= " + " | ".join(f'"v{i}"' for i in range(50000))},
                     "grammar_max_bytes")
        self.refused("/v1/completions", {"model": TARGET, "prompt": "hi", "max_tokens": 2,
                                         "grammar": "root ::= " + " | ".join(f'"v{i}"' for i in range(1000))},
                     "grammar_max_alternatives")

    def test_item5_many_optional_properties_are_refused_at_once(self):
        body = chat(json_schema=props(2000))
        self.assertLess(len(json.dumps(body)), 64 * 1024)
        self.refused("/v1/chat/completions", body, "schema_max_properties")
        self.assert_alive()

    def test_every_route_that_makes_a_grammar_is_bounded(self):
        big = props(200)
        cases = [
            ("/v1/chat/completions", chat(json_schema=big), "'json_schema'"),
            ("/v1/chat/completions",
             chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": big}}),
             "'response_format.json_schema.schema'"),
            ("/v1/chat/completions", chat(tools=[tool("f", big)]), "'tools[0].function.parameters'"),
            ("/v1/chat/completions", chat(TOOLS_TARGET, tools=[tool("f", big)]), "'tools[0].function.parameters'"),
            ("/v1/completions", {"model": TARGET, "prompt": "hi", "max_tokens": 2, "json_schema": big}, None),
            ("/v1/query", {"model": TARGET, "prompt": "hi", "max_tokens": 2, "stream": False, "json_schema": big},
             None),
            ("/v1/messages", {"model": TARGET, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}],
                              "tools": [{"name": "f", "input_schema": big}]}, "'tools[0].input_schema'"),
            ("/v1/messages/count_tokens", {"model": TARGET, "messages": [{"role": "user", "content": "hi"}],
                                           "tools": [{"name": "f", "input_schema": big}]}, "'tools[0].input_schema'"),
            ("/api/chat", {"model": TARGET, "stream": False, "messages": [{"role": "user", "content": "hi"}],
                           "format": big}, None),
            ("/api/generate", {"model": TARGET, "stream": False, "prompt": "hi", "format": big}, None),
            ("/v1/responses", {"model": TARGET, "input": "hi", "max_output_tokens": 16,
                               "text": {"format": {"type": "json_schema", "name": "x", "schema": big}}}, None),
        ]
        for path, body, field in cases:
            with self.subTest(path=path, field=field):
                self.refused(path, body, "schema_max_properties", field)

    def test_each_bound_names_its_key(self):
        deep = {"type": "string"}
        for _ in range(100):
            deep = {"type": "array", "items": deep}
        many_tools = [tool(f"t{i}", props(120, "q")) for i in range(20)]  # 2,400 properties in all
        refs = {"type": "object", "$defs": {"s": {"type": "string"}},
                "properties": {f"r{i}": {"$ref": "#/$defs/s"} for i in range(100)}}
        cases = [
            (chat(json_schema=deep), "schema_max_depth"),
            (chat(TOOLS_TARGET, tools=many_tools), "schema_max_total_properties"),
            (chat(TOOLS_TARGET, tools=[tool(f"t{i}", refs) for i in range(3)]), "schema_max_refs"),
            ({"model": TARGET, "prompt": "hi", "max_tokens": 2, "grammar": 'root ::= "' + "a" * 70000 + '"'},
             "grammar_max_bytes"),
            ({"model": TARGET, "prompt": "hi", "max_tokens": 2, "grammar": 'root ::= "a"' + ' | "a"' * 300},
             "grammar_max_alternatives"),
        ]
        for body, key in cases:
            with self.subTest(key=key):
                path = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
                self.refused(path, body, key)

    def test_refs_must_be_local_and_resolve_and_cycles_are_bounded(self):
        for ref in ("https://example.com/schema.json", "#/$defs/missing", "other.json#/a", "#"):
            with self.subTest(ref=ref):
                status, text, took = self.post("/v1/chat/completions", chat(json_schema={"$ref": ref}))
                self.assertEqual(status, 400, text)
                self.assertIn("only local references", text)
                self.assertLess(took, FAST_S)
        loop = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
        status, text, took = self.post("/v1/chat/completions", chat(json_schema=loop))
        self.assertIn(status, (200, 400), text)
        self.assertLess(took, FAST_S)
        node = {"type": "object", "properties": {"name": {"type": "string"},
                                                 "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "required": ["name"]}
        tree = {"$defs": {"node": node}, "$ref": "#/$defs/node"}
        status, text, _ = self.post("/v1/chat/completions", chat(json_schema=tree))
        self.assertEqual(status, 200, text)

    def test_an_agents_tool_list_passes(self):
        """Its bounds are passed and its grammar made; the tiny test context cannot hold its ~26k
        tokens, and that refusal comes only after the tools were checked and converted."""
        tools = agent_tools()
        self.assertGreater(len(json.dumps(tools)), 50000)
        status, text, _ = self.post("/v1/chat/completions", chat(TOOLS_TARGET, tools=tools))
        self.assertEqual(status, 400, text)
        self.assertIn("context_length_exceeded", text)
        self.assertNotIn("[limits]", text)
        status, text, _ = self.post("/v1/chat/completions", chat(TOOLS_TARGET, tools=agent_tools(2)))
        self.assertEqual(status, 200, text)


class ConfiguredLimitsTest(unittest.TestCase):
    """[limits] lowers and raises the bounds; schema_convert_ms refuses a slow conversion in time."""

    @classmethod
    def setUpClass(cls):
        cfg = ("[limits]\nschema_max_enum = 4\nschema_max_properties = 1000\nschema_max_total_properties = 1000\n"
               "schema_convert_ms = 150\n\n" + gw.local_target(TARGET, parallel=1))
        cls.gw = gw.serve_config(cfg)

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    def post(self, body):
        t0 = time.monotonic()
        status, _, data = self.gw.request("POST", "/v1/chat/completions", json.dumps(body).encode(),
                                          {"Content-Type": "application/json"})
        return status, data.decode("utf-8", "replace"), time.monotonic() - t0

    def test_lowered_enum_bound(self):
        status, text, _ = self.post(chat(json_schema=enum(4)))
        self.assertEqual(status, 200, text)
        status, text, _ = self.post(chat(json_schema=enum(5)))
        self.assertEqual(status, 400, text)
        self.assertIn("has 5 values, over the limit of 4 ([limits] schema_max_enum)", text)

    def test_conversion_past_its_budget_is_refused_in_time(self):
        status, text, took = self.post(chat(json_schema=props(1000)))  # ~0.5 s of conversion on a fast Xeon
        self.assertEqual(status, 400, text)
        self.assertIn("[limits] schema_convert_ms", text)
        self.assertLess(took, FAST_S)
        status, text, _ = self.post(chat(json_schema=props(8)))
        self.assertEqual(status, 200, text)


class ConfigErrorsTest(unittest.TestCase):
    def test_unknown_and_bad_limit_keys(self):
        for text, expect in (("[limits]\nschema_max_things = 3\n", "schema_max_things"),
                             ("[limits]\nschema_max_enum = 0\n", "schema_max_enum"),
                             ("[limits]\nschema_convert_ms = \"fast\"\n", "schema_convert_ms")):
            with self.subTest(text=text):
                path = gw.write(f"limits-{time.monotonic_ns()}.toml", text + gw.local_target(TARGET))
                r = gw.subprocess.run([gw.SIPP, "serve", "--config", path, "--check"], capture_output=True,
                                      text=True, timeout=60)
                self.assertNotEqual(r.returncode, 0, r.stderr)
                self.assertIn(expect, r.stderr)


class SecondSignalTest(unittest.TestCase):
    def test_item5_second_signal_exits_at_once(self):
        cfg = ("[server]\nshutdown_timeout_seconds = 30\n\n[limits]\nschema_max_properties = 5000\n"
               "schema_max_total_properties = 5000\nschema_convert_ms = 120000\n\n" +
               gw.local_target(TARGET, parallel=1))
        g = gw.serve_config(cfg)
        try:
            body = json.dumps(chat(json_schema=props(1500))).encode()  # minutes of conversion

            def call():
                try:
                    g.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"},
                              timeout=60)
                except Exception:
                    pass  # the process goes away under it

            t = threading.Thread(target=call, daemon=True)
            t.start()
            time.sleep(1.0)
            g.signal(signal.SIGTERM)
            gw.wait_until(lambda: "shutting down" in g.text(), FAST_S, "the drain's first line")
            t0 = time.monotonic()
            g.signal(signal.SIGTERM)
            g.proc.wait(EXIT_S + 5)
            took = time.monotonic() - t0
            self.assertLess(took, EXIT_S, g.text())
            self.assertIn("second signal", g.text())
            self.assertEqual(g.proc.returncode, 0)
        finally:
            g.kill()


if __name__ == "__main__":
    unittest.main()
