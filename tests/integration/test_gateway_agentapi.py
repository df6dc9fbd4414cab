"""The APIs agent clients speak, over real HTTP against `sipp serve`: OpenAI's Responses API
(/v1/responses), Anthropic's Messages API (/v1/messages) and Ollama's API (/api/*).

Each API is checked for its shapes, its streamed event sequence against the documented order, its
errors in its own shape (every error code the route can give), its bounded response store (Responses),
its authentication (x-api-key for Anthropic's clients), and a client that disconnects mid-stream
freeing its slot. Ollama's /api/pull downloads from a loopback HTTP server (httpfixture) into a store
directory of the test's own. The official npm clients run in test_gateway_agent_clients_js.py.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpfixture  # noqa: E402
import test_gateway_support as gw  # noqa: E402

TARGET = "tiny"
TOKEN_ENV = "SIPP_AGENTAPI_TOKEN"
TOKEN = "agent-api-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# ErrorShapesTest's tokens (secrets are at least 16 bytes: config.c)
ALL_TOKEN = "shapes-all-secret-0001"
SCOPED_TOKEN = "shapes-scoped-secret-02"
BURST_TOKEN = "shapes-burst-secret-003"
LONG = 100000  # max tokens that only the context ends
DISCONNECT_TIMEOUT_S = 10
TTL_S = 1
CTX = 2048
GATE_TIMEOUT_S = 30  # the gated upstream holds its second half back at most this long

RESPONSES_ORDER = [
    "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
    "response.output_text.delta", "response.output_text.done", "response.content_part.done",
    "response.output_item.done",
]
MESSAGES_ORDER = ["message_start", "content_block_start", "ping", "content_block_delta", "content_block_stop",
                  "message_delta", "message_stop"]  # Anthropic's example stream, ping included


def kinds(types):
    """Consecutive repeats collapsed: the documented order names each kind of event once."""
    return [t for i, t in enumerate(types) if i == 0 or types[i - 1] != t]


def ndjson(data):
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


class AgentAPIBase(unittest.TestCase):
    """One gateway with a token for the class."""

    extra = ""

    @classmethod
    def setUpClass(cls):
        cls.store = tempfile.mkdtemp(prefix="sipp-agentapi-store-", dir=gw.tmpdir())
        cfg = (f'[[tokens]]\nenv = "{TOKEN_ENV}"\n\n{cls.extra}\n' +
               gw.local_target(TARGET, parallel=2, ctx=CTX))
        cls.gw = gw.serve_config(cfg, env={TOKEN_ENV: TOKEN, "SIPP_MODELS_DIR": cls.store, "NO_PROXY": "*"})

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    def post(self, path, body, headers=None):
        return self.gw.json("POST", path, body, {**AUTH, **(headers or {})})

    def sse(self, path, body, headers=None):
        status, ctype, events = self.gw.sse(path, body, {**AUTH, **(headers or {})})
        self.assertEqual(status, 200, events)
        self.assertTrue(ctype.startswith("text/event-stream"), ctype)
        return events

    def assert_openai_error(self, status, body, want_status, code, *words):
        self.assertEqual(status, want_status, body)
        self.assertEqual(set(body), {"error"})
        self.assertEqual(body["error"]["code"], code, body)
        for w in words:
            self.assertIn(w, body["error"]["message"])

    def assert_disconnect_frees_slot(self, path, body, marker):
        sock = socket.create_connection((self.gw.host, self.gw.port), timeout=gw.HTTP_TIMEOUT_S)
        data = json.dumps(body)
        sock.sendall((f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(data)}\r\n\r\n{data}").encode())
        got = b""
        while got.count(marker) < 3:
            chunk = sock.recv(4096)
            self.assertTrue(chunk, f"the stream ended early: {got[-500:]!r}")
            got += chunk
        m = self.gw.metrics()
        self.assertEqual(gw.metric(m, "sipp_engine_running_requests", target=TARGET), 1)
        sock.close()

        def freed():
            m = self.gw.metrics()
            return (gw.metric(m, "sipp_active_requests", target=TARGET) == 0 and
                    gw.metric(m, "sipp_engine_running_requests", target=TARGET) == 0)

        gw.wait_until(freed, DISCONNECT_TIMEOUT_S, f"the slot of a disconnected {path} stream being freed")


class ResponsesTest(AgentAPIBase):
    def create(self, **kw):
        body = {"model": TARGET, "input": "Hello there", "max_output_tokens": 6, "temperature": 0, **kw}
        return self.post("/v1/responses", body)

    def test_plain(self):
        status, _, r = self.create(instructions="Be brief.", metadata={"k": "v"})
        self.assertEqual(status, 200, r)
        self.assertEqual(r["object"], "response")
        self.assertTrue(r["id"].startswith("resp_"))
        self.assertEqual(r["status"], "incomplete")
        self.assertEqual(r["incomplete_details"], {"reason": "max_output_tokens"})
        self.assertEqual(r["instructions"], "Be brief.")
        self.assertEqual(r["metadata"], {"k": "v"})
        self.assertEqual(r["model"], TARGET)
        item = r["output"][0]
        self.assertEqual((item["type"], item["role"]), ("message", "assistant"))
        self.assertEqual(item["content"][0]["type"], "output_text")
        u = r["usage"]
        self.assertEqual(u["output_tokens"], 6)
        self.assertEqual(u["total_tokens"], u["input_tokens"] + u["output_tokens"])
        self.assertIn("cached_tokens", u["input_tokens_details"])

    def test_input_items_list_and_roles(self):
        items = [{"type": "message", "role": "developer", "content": "Be brief."},
                 {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
                 {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]},
                 {"role": "user", "content": "How are you?"}]
        status, _, r = self.create(input=items)
        self.assertEqual(status, 200, r)
        status, _, listed = self.gw.json("GET", f"/v1/responses/{r['id']}/input_items", headers=AUTH)
        self.assertEqual(status, 200, listed)
        self.assertEqual(listed["object"], "list")
        texts = [i["content"][0]["text"] for i in listed["data"]]
        self.assertEqual(texts, ["How are you?", "Hello.", "Hi", "Be brief."])  # newest first
        self.assertEqual(listed["first_id"], listed["data"][0]["id"])

    def test_input_items_pagination(self):
        """limit, order, after, before, has_more, first_id and last_id as OpenAI's list pages."""
        texts = [f"turn {i}" for i in range(7)]
        status, _, r = self.create(input=[{"role": "user", "content": t} for t in texts])
        self.assertEqual(status, 200, r)
        path = f"/v1/responses/{r['id']}/input_items"

        def page(query):
            status, _, listed = self.gw.json("GET", f"{path}?{query}", headers=AUTH)
            self.assertEqual(status, 200, listed)
            got = [i["content"][0]["text"] for i in listed["data"]]
            ids = [i["id"] for i in listed["data"]]
            self.assertEqual((listed["first_id"], listed["last_id"]), (ids[0], ids[-1]) if ids else (None, None))
            return got, ids, listed["has_more"]

        everything, ids, more = page("order=asc")
        self.assertEqual((everything, more), (texts, False))
        # Walk forward in pages of 3, each after the last id of the one before: newest first by default.
        seen, cursor = [], None
        for _ in range(len(texts)):
            got, ids, more = page("limit=3" + (f"&after={cursor}" if cursor else ""))
            seen += got
            cursor = ids[-1]
            if not more:
                break
        self.assertEqual(seen, texts[::-1])
        got, _, more = page("order=asc&limit=2")
        self.assertEqual((got, more), (texts[:2], True))
        asc_ids = page("order=asc")[1]
        got, _, more = page(f"order=asc&limit=2&after={asc_ids[4]}")
        self.assertEqual((got, more), (texts[5:7], False))
        got, _, more = page(f"order=asc&limit=2&before={asc_ids[4]}")  # the two just before it
        self.assertEqual((got, more), (texts[2:4], True))
        got, _, more = page(f"order=asc&after={asc_ids[1]}&before={asc_ids[4]}")
        self.assertEqual((got, more), (texts[2:4], False))
        got, _, more = page(f"order=asc&after={asc_ids[6]}")
        self.assertEqual((got, more), ([], False))
        for query, name in (("limit=0", "limit"), ("limit=101", "limit"), ("limit=x", "limit"), ("order=up", "order"),
                            ("after=msg_nope", "after"), ("before=msg_nope", "before"), ("page=2", "page"),
                            ("include=file_search_call.results", "include")):
            with self.subTest(query=query):
                status, _, err = self.gw.json("GET", f"{path}?{query}", headers=AUTH)
                self.assertEqual(status, 400, err)
                self.assertIn(f"'{name}'", err["error"]["message"])

    def test_stream_event_order(self):
        _, _, plain = self.create()
        events = self.sse("/v1/responses", {"model": TARGET, "input": "Hello there", "max_output_tokens": 6,
                                            "temperature": 0, "stream": True})
        data = [json.loads(d) for _, d in events]
        names = [e for e, _ in events]
        self.assertEqual(names, [d["type"] for d in data])  # the SSE event name is the type
        self.assertEqual(kinds(names), RESPONSES_ORDER + ["response.incomplete"])
        self.assertEqual([d["sequence_number"] for d in data], list(range(len(data))))
        text = "".join(d["delta"] for d in data if d["type"] == "response.output_text.delta")
        self.assertEqual(text, plain["output"][0]["content"][0]["text"])
        done = next(d for d in data if d["type"] == "response.output_text.done")
        self.assertEqual(done["text"], text)
        final = data[-1]["response"]
        self.assertEqual(final["status"], "incomplete")
        self.assertEqual(final["usage"]["output_tokens"], 6)
        self.assertEqual(data[0]["response"]["status"], "in_progress")
        # The streamed response is stored too.
        status, _, got = self.gw.json("GET", f"/v1/responses/{final['id']}", headers=AUTH)
        self.assertEqual(status, 200)
        self.assertEqual(got["output"], final["output"])

    def test_previous_response_id_reuses_the_kv(self):
        _, _, first = self.create(instructions="Be brief.", input="Tell me about the sea")
        status, _, second = self.create(instructions="Be brief.", input="And the mountains?",
                                        previous_response_id=first["id"])
        self.assertEqual(status, 200, second)
        self.assertEqual(second["previous_response_id"], first["id"])
        # The follow-up carries the history and finds the first turn's tokens in the KV.
        self.assertGreater(second["usage"]["input_tokens"], first["usage"]["input_tokens"] + first["usage"]["output_tokens"])
        self.assertGreaterEqual(second["usage"]["input_tokens_details"]["cached_tokens"], first["usage"]["input_tokens"])
        # A third turn continues from the second.
        status, _, third = self.create(instructions="Be brief.", input="And rivers?", previous_response_id=second["id"])
        self.assertEqual(status, 200)
        self.assertGreater(third["usage"]["input_tokens"], second["usage"]["input_tokens"])
        self.assertGreaterEqual(third["usage"]["input_tokens_details"]["cached_tokens"], second["usage"]["input_tokens"])

    def test_get_delete(self):
        _, _, r = self.create()
        status, _, got = self.gw.json("GET", f"/v1/responses/{r['id']}", headers=AUTH)
        self.assertEqual(status, 200)
        self.assertEqual(got, r)
        status, _, deleted = self.gw.json("DELETE", f"/v1/responses/{r['id']}", headers=AUTH)
        self.assertEqual(status, 200)
        self.assertEqual(deleted, {"id": r["id"], "object": "response", "deleted": True})
        for method in ("GET", "DELETE"):
            status, _, body = self.gw.json(method, f"/v1/responses/{r['id']}", headers=AUTH)
            self.assert_openai_error(status, body, 404, "not_found", r["id"])
        status, _, body = self.create(previous_response_id=r["id"])
        self.assert_openai_error(status, body, 404, "not_found", "'previous_response_id'", r["id"])
        # another method on a stored response's path: 405 with every method the path has
        status, hdrs, body = self.gw.json("PUT", f"/v1/responses/{r['id']}", {}, AUTH)
        self.assertEqual((status, hdrs["allow"]), (405, "GET, HEAD, DELETE"), body)

    def test_store_false_is_not_kept(self):
        _, _, r = self.create(store=False)
        self.assertFalse(r["store"])
        status, _, body = self.gw.json("GET", f"/v1/responses/{r['id']}", headers=AUTH)
        self.assert_openai_error(status, body, 404, "not_found")

    def test_errors_name_the_field(self):
        cases = [
            ({"max_output_tokens": 0}, "'max_output_tokens'"),
            ({"temperature": 5}, "'temperature'"),
            ({"input": 7}, "'input'"),
            ({"input": None}, "'input' is missing"),
            ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
             "'input[0].content[0].image_url'"),
            ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
             "'input[0].content[0].file_id'"),
            ({"input": [{"role": "robot", "content": "x"}]}, "'input[0].role'"),
            ({"input": [{"type": "item_reference", "id": "x"}]}, "'input[0].type'"),
            ({"instructions": 3}, "'instructions'"),
            ({"text": {"color": "red"}}, "'text.color'"),
            ({"include": [5]}, "'include[0]'"),
            ({"truncation": "auto"}, "'truncation'"),
            ({"tools": [{"type": "hosted_thing", "name": "apply_patch"}]}, "'tools[0].type'"),
            ({"tools": [{"type": "custom", "name": ""}]}, "'tools[0].name'"),
            ({"tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}}, "'tool_choice'"),
            ({"tools": [{"type": "function", "parameters": {"type": "object"}}]}, "'tools[0].name'"),
            ({"tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
              "tool_choice": {"type": "function", "name": "g"}}, "'tool_choice'"),
            ({"tool_choice": "sometimes"}, "'tool_choice'"),
            ({"text": {"format": {"type": "bogus"}}}, "'text.format.type'"),
            ({"reasoning": {"effort": 3}}, "'reasoning.effort'"),
            ({"reasoning": {"effort": "high", "colour": "red"}}, "'reasoning.colour'"),
            ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "'input[0].call_id'"),
            ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]}, "'input[0].arguments'"),
            ({"input": [{"type": "function_call_output", "output": "x"}]}, "'input[0].call_id'"),
            ({"store": "yes"}, "'store'"),
            ({"previous_response_id": 5}, "'previous_response_id'"),
            ({"background": True}, "'background'"),
            ({"top_logprobs": 2}, "'top_logprobs'"),
        ]
        for extra, name in cases:
            with self.subTest(extra=extra):
                status, _, body = self.create(**extra)
                self.assert_openai_error(status, body, 400, "invalid_field", name)
        # The slot stays usable.
        status, _, _ = self.create()
        self.assertEqual(status, 200)

    def test_error_codes(self):
        status, _, body = self.gw.json("POST", "/v1/responses", "{not json", AUTH)
        self.assert_openai_error(status, body, 400, "invalid_json")
        status, _, body = self.gw.json("POST", "/v1/responses", [1], AUTH)
        self.assert_openai_error(status, body, 400, "invalid_field")
        status, _, body = self.create(model="nope")
        self.assert_openai_error(status, body, 404, "model_not_found", "'nope'")
        status, _, body = self.gw.json("POST", "/v1/responses", {"model": TARGET, "input": "x"})
        self.assert_openai_error(status, body, 401, "missing_api_key")
        status, _, body = self.gw.json("POST", "/v1/responses", {"model": TARGET, "input": "x"},
                                       {"Authorization": "Bearer wrong"})
        self.assert_openai_error(status, body, 401, "invalid_api_key")
        status, _, body = self.gw.json("PUT", "/v1/responses", {}, AUTH)
        self.assert_openai_error(status, body, 405, "method_not_allowed")
        status, _, body = self.gw.json("GET", "/v1/responses/resp_x/other", headers=AUTH)
        self.assert_openai_error(status, body, 404, "route_not_found")
        status, _, body = self.create(input="word " * 3000)
        self.assert_openai_error(status, body, 400, "context_length_exceeded")

    def test_web_page_lists_the_routes(self):
        status, _, page = self.gw.request("GET", "/")
        self.assertEqual(status, 200)
        for route in ("/v1/responses", "/v1/messages", "/v1/messages/count_tokens", "/api/chat", "/api/generate",
                      "/api/embed", "/api/tags", "/api/pull", "/v1/chat/completions"):
            self.assertIn(f"{route}</code>".encode(), page.replace(b"ID</code>", b"</code>"), route)

    def test_disconnect_mid_stream_frees_the_slot(self):
        self.assert_disconnect_frees_slot("/v1/responses", {"model": TARGET, "input": "Go on", "max_output_tokens": LONG,
                                                             "stream": True, "store": False},
                                          b"response.output_text.delta")


class ResponsesStoreBoundsTest(unittest.TestCase):
    """[responses] max_stored, max_stored_bytes and ttl_seconds."""

    def serve(self, table):
        return gw.serve_config(f"[responses]\n{table}\n\n" + gw.local_target(TARGET, parallel=1, ctx=CTX))

    def create(self, g, **kw):
        status, _, r = g.json("POST", "/v1/responses", {"model": TARGET, "input": "Hi", "max_output_tokens": 2,
                                                        "temperature": 0, **kw})
        self.assertEqual(status, 200, r)
        return r["id"]

    def test_count_bound_drops_the_oldest(self):
        g = self.serve("max_stored = 2")
        try:
            ids = [self.create(g) for _ in range(3)]
            self.assertEqual(g.json("GET", f"/v1/responses/{ids[0]}")[0], 404)
            self.assertEqual(g.json("GET", f"/v1/responses/{ids[1]}")[0], 200)
            self.assertEqual(g.json("GET", f"/v1/responses/{ids[2]}")[0], 200)
        finally:
            self.assertEqual(g.stop(), 0)

    def test_byte_bound(self):
        g = self.serve("max_stored_bytes = 100")
        try:
            rid = self.create(g)  # a response is well over 100 bytes of JSON: not kept
            status, _, body = g.json("GET", f"/v1/responses/{rid}")
            self.assertEqual(status, 404, body)
            self.assertIn("not stored", g.text())
        finally:
            self.assertEqual(g.stop(), 0)

    def test_ttl_expires(self):
        g = self.serve(f"ttl_seconds = {TTL_S}")
        try:
            rid = self.create(g)
            time.sleep(TTL_S + 0.5)  # past the TTL however slow the machine is
            status, _, body = g.json("POST", "/v1/responses", {"model": TARGET, "input": "x", "previous_response_id": rid})
            self.assertEqual(status, 404, body)
            self.assertIn(rid, body["error"]["message"])
        finally:
            self.assertEqual(g.stop(), 0)

    def test_bad_config_names_the_key(self):
        path = gw.write("bad-responses.toml", "[responses]\nmax_stored = -1\ncolour = 1\n" + gw.local_target(TARGET))
        r = subprocess.run([gw.SIPP, "serve", "--config", path, "--check"], capture_output=True, text=True,
                           timeout=gw.HTTP_TIMEOUT_S)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("[responses]", r.stderr)
        self.assertIn("max_stored", r.stderr)
        self.assertIn("colour", r.stderr)


class MessagesTest(AgentAPIBase):
    def body(self, **kw):
        return {"model": TARGET, "system": "Be brief.", "messages": [{"role": "user", "content": "Hello there"}],
                "max_tokens": 6, "temperature": 0, **kw}

    def assert_anthropic_error(self, status, body, want_status, etype, *words):
        self.assertEqual(status, want_status, body)
        self.assertEqual(body["type"], "error", body)
        self.assertEqual(set(body["error"]), {"type", "message"})
        self.assertEqual(body["error"]["type"], etype, body)
        for w in words:
            self.assertIn(w, body["error"]["message"])

    def test_plain_and_count_tokens(self):
        status, _, m = self.post("/v1/messages", self.body())
        self.assertEqual(status, 200, m)
        self.assertEqual((m["type"], m["role"], m["model"]), ("message", "assistant", TARGET))
        self.assertTrue(m["id"].startswith("msg_"))
        self.assertEqual(m["content"][0]["type"], "text")
        self.assertEqual(m["stop_reason"], "max_tokens")
        self.assertIsNone(m["stop_sequence"])
        u = m["usage"]
        self.assertEqual(u["output_tokens"], 6)
        status, _, c = self.post("/v1/messages/count_tokens", {"model": TARGET, "system": "Be brief.",
                                                               "messages": [{"role": "user", "content": "Hello there"}]})
        self.assertEqual(status, 200, c)
        self.assertEqual(c["input_tokens"], u["input_tokens"] + u["cache_read_input_tokens"])

    def test_system_blocks_and_text_blocks(self):
        body = self.body(system=[{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}],
                         messages=[{"role": "user", "content": [{"type": "text", "text": "Hello there"}]}])
        status, _, blocks = self.post("/v1/messages", body)
        _, _, plain = self.post("/v1/messages", self.body())
        self.assertEqual(status, 200, blocks)
        self.assertEqual(blocks["content"], plain["content"])

    def test_stop_sequence(self):
        _, _, plain = self.post("/v1/messages", self.body(max_tokens=12))
        text = plain["content"][0]["text"]
        words = [w for w in text.split(" ") if w]
        self.assertGreater(len(words), 2, text)
        stop = words[2]
        _, _, m = self.post("/v1/messages", self.body(max_tokens=12, stop_sequences=["never-appears-here", stop]))
        self.assertEqual(m["stop_reason"], "stop_sequence", m)
        self.assertEqual(m["stop_sequence"], stop)
        self.assertEqual(m["content"][0]["text"], text[:text.index(stop)])

    def test_stream_event_order(self):
        _, _, plain = self.post("/v1/messages", self.body())
        events = self.sse("/v1/messages", self.body(stream=True))
        names = [e for e, _ in events]
        data = [json.loads(d) for _, d in events]
        self.assertEqual(names, [d["type"] for d in data])
        self.assertEqual(kinds(names), MESSAGES_ORDER)
        text = "".join(d["delta"]["text"] for d in data if d["type"] == "content_block_delta")
        self.assertEqual(text, plain["content"][0]["text"])
        delta = next(d for d in data if d["type"] == "message_delta")
        self.assertEqual(delta["delta"]["stop_reason"], "max_tokens")
        self.assertEqual(delta["usage"]["output_tokens"], 6)
        self.assertEqual(data[0]["message"]["content"], [])

    def test_x_api_key(self):
        status, _, m = self.gw.json("POST", "/v1/messages", self.body(), {"x-api-key": TOKEN, "anthropic-version": "2023-06-01"})
        self.assertEqual(status, 200, m)
        status, _, body = self.gw.json("POST", "/v1/messages", self.body(), {"x-api-key": "wrong"})
        self.assert_anthropic_error(status, body, 401, "authentication_error")
        status, _, body = self.gw.json("POST", "/v1/messages", self.body())
        self.assert_anthropic_error(status, body, 401, "authentication_error", "x-api-key")

    def test_errors_in_anthropic_shape(self):
        cases = [
            ({"max_tokens": None}, "'max_tokens' is missing"),
            ({"max_tokens": 0}, "'max_tokens'"),
            ({"temperature": 1.5}, "'temperature'"),
            ({"top_k": -1}, "'top_k'"),
            ({"messages": []}, "'messages'"),
            ({"messages": [{"role": "tool", "content": "x"}]}, "'messages[0].role'"),
            ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
             "'messages[0].content[0].source'"),
            ({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
             "'messages[0].content[0].type'"),
            ({"system": 5}, "'system'"),
            ({"stop_sequences": "x"}, "'stop_sequences'"),
            ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "'thinking.budget_tokens'"),  # no thinking tags
            ({"thinking": {"type": "enabled"}}, "'thinking.budget_tokens'"),
            ({"thinking": {"type": "sometimes"}}, "'thinking.type'"),
            ({"tools": [{"type": "web_search_20250305", "name": "web_search"}],
              "tool_choice": {"type": "tool", "name": "web_search"}}, "'tool_choice.name'"),
            ({"tools": [{"input_schema": {"type": "object"}}]}, "'tools[0].name'"),
            ({"tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "tool", "name": "g"}},
             "'tool_choice'"),
            ({"tool_choice": {"type": "maybe"}}, "'tool_choice.type'"),
            ({"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]},
             "'messages[0].content[0].tool_use_id'"),
            ({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}]},
             "'messages[0].content[0].input'"),
            ({"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]},
             "'messages[0].content[0].type'"),
            ({"fallbacks": [{"model": "x"}]}, "'fallbacks'"),
            ({"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}},
             "'context_management.edits[0].type'"),
        ]
        for extra, name in cases:
            with self.subTest(extra=extra):
                status, _, body = self.post("/v1/messages", self.body(**extra))
                self.assert_anthropic_error(status, body, 400, "invalid_request_error", name)
        status, _, body = self.gw.json("POST", "/v1/messages", "{bad", AUTH)
        self.assert_anthropic_error(status, body, 400, "invalid_request_error", "not valid JSON")
        status, _, body = self.post("/v1/messages", self.body(model="nope"))
        self.assert_anthropic_error(status, body, 404, "not_found_error", "'nope'")
        status, _, body = self.post("/v1/messages/count_tokens", {"model": TARGET, "messages": [], "max_tokens": 3})
        self.assert_anthropic_error(status, body, 400, "invalid_request_error", "'max_tokens'")
        status, _, body = self.gw.json("GET", "/v1/messages", headers=AUTH)
        self.assert_anthropic_error(status, body, 405, "invalid_request_error")
        status, _, body = self.post("/v1/messages", self.body(messages=[{"role": "user", "content": "word " * 3000}]))
        self.assert_anthropic_error(status, body, 400, "invalid_request_error")

    def test_disconnect_mid_stream_frees_the_slot(self):
        self.assert_disconnect_frees_slot("/v1/messages", self.body(max_tokens=LONG, stream=True), b"content_block_delta")


class OllamaTest(AgentAPIBase):
    # /api/pull and /api/delete need the admin scope, and the loopback fixture needs allow_private_sources
    # (test_gateway_callers.py checks both refusals).
    extra = "admin = true\n\n[store]\nallow_private_sources = true\n"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.http = httpfixture.HTTPFixture()
        with open(gw.model(TARGET), "rb") as f:
            cls.gguf = f.read()
        cls.url = cls.http.add("/files/pulled.gguf", cls.gguf)

    @classmethod
    def tearDownClass(cls):
        cls.http.stop()
        super().tearDownClass()

    def chat(self, **kw):
        body = {"model": TARGET, "messages": [{"role": "user", "content": "Hello there"}], "stream": False,
                "options": {"num_predict": 6, "temperature": 0}, **kw}
        return self.post("/api/chat", body)

    def assert_ollama_error(self, status, body, want_status, *words):
        self.assertEqual(status, want_status, body)
        self.assertEqual(set(body), {"error"}, body)
        self.assertIsInstance(body["error"], str)
        for w in words:
            self.assertIn(w, body["error"])

    def test_version_tags_ps_show(self):
        status, _, v = self.gw.json("GET", "/api/version")
        self.assertEqual(status, 200)
        self.assertRegex(v["version"], r"^\d+\.\d+\.\d+$")
        _, _, tags = self.gw.json("GET", "/api/tags", headers=AUTH)
        m = tags["models"][0]
        self.assertEqual(m["name"], f"{TARGET}:latest")
        self.assertEqual(m["details"]["format"], "gguf")
        self.assertEqual(m["details"]["family"], "llama")
        self.assertGreater(m["size"], 0)
        _, _, ps = self.gw.json("GET", "/api/ps", headers=AUTH)
        self.assertEqual(ps["models"][0]["name"], f"{TARGET}:latest")
        self.assertEqual(ps["models"][0]["context_length"], CTX)
        for name in (TARGET, f"{TARGET}:latest"):
            status, _, show = self.post("/api/show", {"model": name})
            self.assertEqual(status, 200, show)
            self.assertEqual(show["model_info"]["general.architecture"], "llama")
            self.assertEqual(show["model_info"]["llama.embedding_length"], 64)
        status, _, body = self.post("/api/show", {"model": "nope"})
        self.assert_ollama_error(status, body, 404, "'nope'")

    def test_chat_plain_and_stream(self):
        status, _, r = self.chat(model=f"{TARGET}:latest")
        self.assertEqual(status, 200, r)
        self.assertEqual(r["model"], f"{TARGET}:latest")  # the name the client used
        self.assertTrue(r["done"])
        self.assertEqual(r["done_reason"], "length")
        self.assertEqual(r["eval_count"], 6)
        self.assertEqual(r["message"]["role"], "assistant")
        for k in ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_duration"):
            self.assertIsInstance(r[k], int, k)
        self.assertRegex(r["created_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$")
        body = {"model": TARGET, "messages": [{"role": "user", "content": "Hello there"}],
                "options": {"num_predict": 6, "temperature": 0}}  # stream defaults to true
        status, hdrs, data = self.gw.request("POST", "/api/chat", body, AUTH)
        self.assertEqual(status, 200)
        self.assertEqual(hdrs["content-type"], "application/x-ndjson")
        lines = ndjson(data)
        self.assertTrue(all(not x["done"] for x in lines[:-1]))
        self.assertTrue(lines[-1]["done"])
        self.assertEqual(lines[-1]["done_reason"], "length")
        self.assertEqual("".join(x["message"]["content"] for x in lines), r["message"]["content"])

    def test_generate_templated_raw_and_system(self):
        opts = {"num_predict": 4, "temperature": 0}
        _, _, templated = self.post("/api/generate", {"model": TARGET, "prompt": "Hello", "stream": False, "options": opts})
        _, _, raw = self.post("/api/generate", {"model": TARGET, "prompt": "Hello", "raw": True, "stream": False,
                                                "options": opts})
        _, _, system = self.post("/api/generate", {"model": TARGET, "prompt": "Hello", "system": "Be brief.",
                                                   "stream": False, "options": opts})
        self.assertEqual(templated["eval_count"], 4)
        self.assertGreater(templated["prompt_eval_count"], raw["prompt_eval_count"])  # the chat template wraps it
        self.assertGreater(system["prompt_eval_count"], templated["prompt_eval_count"])
        self.assertIsInstance(raw["response"], str)
        # An empty prompt loads the model, as Ollama's clients use it.
        _, _, loaded = self.post("/api/generate", {"model": TARGET, "stream": False})
        self.assertEqual((loaded["done"], loaded["done_reason"]), (True, "load"))
        _, _, loaded = self.post("/api/chat", {"model": TARGET, "messages": []})
        self.assertEqual(loaded["done_reason"], "load")

    def test_options(self):
        _, _, a = self.chat(options={"num_predict": 8, "temperature": 0, "top_k": 1, "seed": 3, "num_thread": 1,
                                     "num_ctx": CTX, "repeat_penalty": 1.0, "min_p": 0.0, "top_p": 1.0})
        self.assertEqual(a["eval_count"], 8)
        words = [w for w in a["message"]["content"].split(" ") if w]
        self.assertGreater(len(words), 1, a)
        _, _, b = self.chat(options={"num_predict": 8, "temperature": 0, "top_k": 1, "seed": 3, "repeat_penalty": 1.0,
                                     "stop": [words[1]]})
        self.assertEqual(b["done_reason"], "stop")
        self.assertTrue(a["message"]["content"].startswith(b["message"]["content"]))
        for ka in (-1, "-1m", None):
            status, _, r = self.chat(keep_alive=ka)
            self.assertEqual(status, 200, (ka, r))

    def test_refusals_name_the_field(self):
        cases = [
            ({"options": {"num_predict": 0}}, "'options.num_predict'"),
            ({"options": {"temperature": "hot"}}, "'options.temperature'"),
            ({"options": {"mirostat": 2}}, "'options.mirostat'"),
            ({"options": {"num_ctx": 64}}, "'options.num_ctx'"),
            ({"options": 3}, "'options'"),
            ({"keep_alive": "5 minutes"}, "'keep_alive'"),
            ({"keep_alive": True}, "'keep_alive'"),
            ({"format": 3}, "'format'"),
            ({"messages": [{"role": "user", "content": "x", "images": [3]}]}, "'messages[0].images[0]'"),
            ({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}, "mmproj"),
            ({"stream": "no"}, "'stream'"),
            ({"think": "very"}, "'think'"),
            ({"messages": [{"role": "tool", "content": "x"}]}, "'messages[0]'"),
            ({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": {}}}]}]},
             "'messages[0].tool_calls[0]'"),
            ({"tools": [{"type": "function", "function": {"parameters": {"type": "object"}}}]}, "'tools[0].function.name'"),
            ({"mystery": 1}, "'mystery'"),
        ]
        for extra, name in cases:
            with self.subTest(extra=extra):
                status, _, body = self.chat(**extra)
                self.assert_ollama_error(status, body, 400, name)
        gen = [({"template": "{{ .Prompt }}"}, "'template'"), ({"suffix": "end"}, "'suffix'"),
               ({"context": [1, 2]}, "'context'"), ({"raw": True, "system": "s"}, "'system'"), ({"prompt": 3}, "'prompt'")]
        for extra, name in gen:
            with self.subTest(extra=extra):
                status, _, body = self.post("/api/generate", {"model": TARGET, "prompt": "x", "stream": False, **extra})
                self.assert_ollama_error(status, body, 400, name)

    def test_error_codes(self):
        status, _, body = self.chat(model="nope")
        self.assert_ollama_error(status, body, 404, "'nope'")
        status, _, body = self.chat(model=f"{TARGET}:7b")
        self.assert_ollama_error(status, body, 404)
        status, _, body = self.gw.json("POST", "/api/chat", "{x", AUTH)
        self.assert_ollama_error(status, body, 400, "not valid JSON")
        status, _, body = self.gw.json("POST", "/api/chat", {"model": TARGET})
        self.assert_ollama_error(status, body, 401)
        status, _, body = self.gw.json("GET", "/api/chat", headers=AUTH)
        self.assert_ollama_error(status, body, 405)
        status, _, body = self.chat(messages=[{"role": "user", "content": "word " * 3000}])
        self.assert_ollama_error(status, body, 400)

    def test_embed_and_legacy_embeddings(self):
        status, _, e = self.post("/api/embed", {"model": TARGET, "input": ["hello", "world"]})
        self.assertEqual(status, 200, e)
        self.assertEqual(len(e["embeddings"]), 2)
        self.assertAlmostEqual(sum(x * x for x in e["embeddings"][0]), 1.0, places=3)
        self.assertGreater(e["prompt_eval_count"], 0)
        _, _, one = self.post("/api/embed", {"model": TARGET, "input": "hello"})
        self.assertEqual(len(one["embeddings"]), 1)
        status, _, legacy = self.post("/api/embeddings", {"model": TARGET, "prompt": "hello"})
        self.assertEqual(status, 200, legacy)
        self.assertEqual(len(legacy["embedding"]), len(e["embeddings"][0]))
        norm = sum(x * x for x in legacy["embedding"]) ** 0.5
        for a, b in zip(e["embeddings"][0], legacy["embedding"]):
            self.assertAlmostEqual(a, b / norm, places=4)  # the same vector, not normalized
        for body, name in (({"model": TARGET, "input": []}, "'input'"), ({"model": TARGET, "input": [1]}, "'input[0]'"),
                           ({"model": TARGET, "input": "x", "dimensions": 3}, "'dimensions'"),
                           ({"model": TARGET, "input": "x", "options": {"temperature": 1}}, "'options'")):
            status, _, err = self.post("/api/embed", body)
            self.assert_ollama_error(status, err, 400, name)

    def test_pull_and_delete(self):
        status, hdrs, data = self.gw.request("POST", "/api/pull", {"model": self.url}, AUTH)
        self.assertEqual(status, 200)
        self.assertEqual(hdrs["content-type"], "application/x-ndjson")
        lines = ndjson(data)
        self.assertEqual(lines[0], {"status": "pulling manifest"})
        self.assertEqual(lines[-1]["status"], "success", lines)
        progress = [x for x in lines if x["status"].startswith("pulling pulled")]
        self.assertTrue(progress, lines)
        self.assertEqual(progress[-1]["completed"], len(self.gguf))
        self.assertEqual(progress[-1]["total"], len(self.gguf))
        with open(os.path.join(self.store, "pulled.gguf"), "rb") as f:
            self.assertEqual(f.read(), self.gguf)
        status, _, body = self.post("/api/pull", {"model": self.url, "stream": False})
        self.assertEqual((status, body), (200, {"status": "success"}))
        status, _, body = self.gw.json("DELETE", "/api/delete", {"model": "pulled"}, AUTH)
        self.assertEqual(status, 200, body)
        self.assertFalse(os.path.exists(os.path.join(self.store, "pulled.gguf")))
        status, _, body = self.gw.json("DELETE", "/api/delete", {"model": "pulled"}, AUTH)
        self.assert_ollama_error(status, body, 404, "pulled")
        status, _, body = self.gw.json("DELETE", "/api/delete", {"model": TARGET}, AUTH)
        self.assert_ollama_error(status, body, 400, TARGET)

    def test_pull_cancelled_when_the_client_goes_away(self):
        slow = self.http.add("/files/slow.gguf", self.gguf)
        self.http.set(chunk_delay=0.2)  # about a minute for the whole file: the client leaves long before
        try:
            sock = socket.create_connection((self.gw.host, self.gw.port), timeout=gw.HTTP_TIMEOUT_S)
            data = json.dumps({"model": slow})
            sock.sendall((f"POST /api/pull HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(data)}\r\n\r\n{data}").encode())
            got = b""
            while b'"completed"' not in got:
                chunk = sock.recv(4096)
                self.assertTrue(chunk, f"the pull ended early: {got!r}")
                got += chunk
            sock.close()
            self.assertTrue(self.http.wait_idle(DISCONNECT_TIMEOUT_S), "the download went on after the client left")
            self.assertFalse(os.path.exists(os.path.join(self.store, "slow.gguf")))
        finally:
            self.http.set(chunk_delay=0)

    def test_pull_failures(self):
        missing = self.http.url("/files/missing.gguf")
        status, _, data = self.gw.request("POST", "/api/pull", {"model": missing}, AUTH)
        self.assertEqual(status, 200)  # the stream began; the error is its last line, as Ollama sends it
        last = ndjson(data)[-1]
        self.assertEqual(set(last), {"error"})
        self.assertIn("404", last["error"])
        status, _, body = self.post("/api/pull", {"model": missing, "stream": False})
        self.assertEqual(status, 502, body)  # the source's failure, not the gateway's
        self.assertIn("404", body["error"])
        self.assertIn(missing, body["error"])
        status, _, body = self.post("/api/pull", {"model": ""})
        self.assert_ollama_error(status, body, 400, "'model'")
        status, _, body = self.post("/api/pull", {"model": self.url, "insecure": True})
        self.assert_ollama_error(status, body, 400, "'insecure'")

    def test_disconnect_mid_stream_frees_the_slot(self):
        self.assert_disconnect_frees_slot("/api/chat", {"model": TARGET, "messages": [{"role": "user", "content": "Go"}],
                                                        "options": {"num_predict": -1}}, b'"done":false')


if __name__ == "__main__":
    unittest.main()


QWEN_TEMPLATE = os.path.join(os.path.dirname(gw.VOCAB), "..", "source", "models", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
QWEN_VOCAB = os.path.join(os.path.dirname(gw.VOCAB), "ggml-vocab-qwen2.gguf")
TOOL = "qwen"
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                                                   "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                  "required": ["city", "days"], "additionalProperties": False}


def valid_weather(args):
    """The arguments obey WEATHER_SCHEMA: a random-weight model only manages it under the grammar."""
    return (isinstance(args, dict) and set(args) == {"city", "days"} and args["city"] in ("Paris", "Rome", "Oslo") and
            isinstance(args["days"], int) and not isinstance(args["days"], bool) and 1 <= args["days"] <= 7)


class AgentToolsTest(unittest.TestCase):
    """Tools, tool choice and structured output through each API, on a random-weight model with a real
    vocabulary and a real template (Qwen 2.5): the output can only be valid when the grammar made from
    the schema really constrains it."""

    @classmethod
    def setUpClass(cls):
        gw.check_build()
        cls.path = os.path.join(gw.tmpdir(), "qwen.gguf")
        r = subprocess.run([gw.SYNTH, "--out", cls.path, "--vocab", QWEN_VOCAB, "--chat-template-file", QWEN_TEMPLATE,
                            "--seed", "1", *gw.TINY], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        cls.gw = gw.serve_config(gw.local_target(TOOL, path=cls.path, parallel=2, ctx=4096))

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    # ---- Responses ----

    def responses_body(self, **kw):
        return {"model": TOOL, "input": "What is the weather in Paris?", "max_output_tokens": 400, "temperature": 0,
                "tools": [{"type": "function", "name": "get_weather", "description": "Weather by city",
                           "parameters": WEATHER_SCHEMA, "strict": True}],
                "tool_choice": "required", "parallel_tool_calls": False, **kw}

    def test_responses_required_tool(self):
        status, _, r = self.gw.json("POST", "/v1/responses", self.responses_body())
        self.assertEqual(status, 200, r)
        calls = [o for o in r["output"] if o["type"] == "function_call"]
        self.assertEqual(len(calls), 1, r["output"])
        self.assertEqual(calls[0]["name"], "get_weather")
        self.assertTrue(calls[0]["call_id"].startswith("call_"))
        self.assertTrue(valid_weather(json.loads(calls[0]["arguments"])), calls[0]["arguments"])
        self.assertEqual(r["status"], "completed")

    def test_responses_named_tool_streamed(self):
        body = self.responses_body(tool_choice={"type": "function", "name": "get_weather"}, stream=True)
        _, _, events = self.gw.sse("/v1/responses", body)
        data = [json.loads(d) for _, d in events]
        names = kinds([d["type"] for d in data])
        self.assertEqual(names, ["response.created", "response.in_progress", "response.output_item.added",
                                 "response.function_call_arguments.delta", "response.function_call_arguments.done",
                                 "response.output_item.done", "response.completed"])
        args = "".join(d["delta"] for d in data if d["type"] == "response.function_call_arguments.delta")
        done = next(d for d in data if d["type"] == "response.function_call_arguments.done")
        self.assertEqual(done["arguments"], args)
        self.assertTrue(valid_weather(json.loads(args)), args)
        final = data[-1]["response"]
        self.assertEqual(final["output"][0]["arguments"], args)
        # The streamed call equals the plain one (same prompt, greedy).
        _, _, plain = self.gw.json("POST", "/v1/responses", self.responses_body(tool_choice={"type": "function",
                                                                                          "name": "get_weather"}))
        self.assertEqual(plain["output"][0]["arguments"], args)

    def test_responses_tool_round_trip(self):
        _, _, first = self.gw.json("POST", "/v1/responses", self.responses_body())
        call = next(o for o in first["output"] if o["type"] == "function_call")
        out = {"type": "function_call_output", "call_id": call["call_id"], "output": "Sunny, 21 C"}
        # Through the store ...
        status, _, second = self.gw.json("POST", "/v1/responses", self.responses_body(
            input=[out], previous_response_id=first["id"], tool_choice="none", max_output_tokens=8))
        self.assertEqual(status, 200, second)
        self.assertEqual(second["output"][0]["type"], "message")
        self.assertGreaterEqual(second["usage"]["input_tokens_details"]["cached_tokens"], first["usage"]["input_tokens"])
        # ... and with the whole history in the input, as a client with store: false sends it.
        items = [{"role": "user", "content": "What is the weather in Paris?"},
                 {"type": "function_call", "call_id": call["call_id"], "name": call["name"], "arguments": call["arguments"]},
                 out]
        status, _, third = self.gw.json("POST", "/v1/responses", self.responses_body(
            input=items, store=False, tool_choice="none", max_output_tokens=8))
        self.assertEqual(status, 200, third)
        self.assertEqual(third["output"], [dict(second["output"][0], id=third["output"][0]["id"])])

    def custom_body(self, **kw):
        tool = {"type": "custom", "name": "apply_patch", "description": "Edit files.",
                "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" /(.+)/'}}
        return self.responses_body(**{"tools": [tool], "tool_choice": {"type": "custom", "name": "apply_patch"},
                                      "max_output_tokens": 24, **kw})

    def test_responses_custom_tool_call(self):
        """A custom (freeform) tool, as Codex sends apply_patch to gpt-5 models: the model sees a function
        of one string, its call comes back as a custom_tool_call with that string as input (streamed as
        custom_tool_call_input events, never as function-call arguments); the Lark grammar is
        enforced (test_custom_tools.py), so sipp-ignored does not name it."""
        status, headers, r = self.gw.json("POST", "/v1/responses", self.custom_body())
        self.assertEqual(status, 200, r)
        self.assertIsNone(headers.get("sipp-ignored"))
        calls = [o for o in r["output"] if o["type"] == "custom_tool_call"]
        self.assertEqual(len(calls), 1, r["output"])
        self.assertEqual(calls[0]["name"], "apply_patch")
        self.assertTrue(calls[0]["id"].startswith("ctc_"), calls[0])
        self.assertIsInstance(calls[0]["input"], str)
        self.assertNotIn("arguments", calls[0])
        _, _, events = self.gw.sse("/v1/responses", self.custom_body(stream=True))
        data = [json.loads(d) for _, d in events]
        self.assertEqual(kinds([d["type"] for d in data]),
                         ["response.created", "response.in_progress", "response.output_item.added",
                          "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done",
                          "response.output_item.done", data[-1]["type"]])
        added = next(d["item"] for d in data if d["type"] == "response.output_item.added")
        self.assertEqual((added["type"], added["input"]), ("custom_tool_call", ""))
        done = next(d for d in data if d["type"] == "response.custom_tool_call_input.done")
        self.assertEqual(done["input"], calls[0]["input"], "streamed and plain answers agree (greedy)")
        self.assertEqual(done["item_id"], added["id"])

    def test_responses_custom_tool_round_trip(self):
        items = [{"role": "user", "content": "Create hello.txt"},
                 {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch",
                  "input": "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"},
                 {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done!"}]
        body = self.custom_body(input=items, tool_choice="none", max_output_tokens=4)
        status, _, first = self.gw.json("POST", "/v1/responses", body)
        self.assertEqual(status, 200, first)
        self.assertEqual(first["output"][0]["type"], "message")
        # The call and its output reach the prompt: changing the patch changes what the model reads.
        items[1]["input"] = items[1]["input"].replace("hello", "goodbye")
        status, _, second = self.gw.json("POST", "/v1/responses", dict(body, input=items))
        self.assertEqual(status, 200, second)
        self.assertLess(second["usage"]["input_tokens_details"]["cached_tokens"], second["usage"]["input_tokens"] - 4)
        for bad, field in (({"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": 3},
                            "'input[0].input'"),
                           ({"type": "custom_tool_call", "name": "apply_patch", "input": "x"}, "'input[0].call_id'")):
            status, _, e = self.gw.json("POST", "/v1/responses", dict(body, input=[bad]))
            self.assertEqual(status, 400, e)
            self.assertIn(field, e["error"]["message"])
        status, _, e = self.gw.json("POST", "/v1/responses", self.custom_body(
            tools=[{"type": "custom", "name": "p", "format": {"type": "regex"}}]))
        self.assertEqual(status, 400, e)
        self.assertIn("'tools[0].format.type'", e["error"]["message"])

    def test_a_missing_forced_tool_is_named_as_the_kind_it_is(self):
        """tool_choice forcing a tool that is not in tools: a custom tool is called a custom tool (it was
        "function" before), a function a function, Anthropic's tool a tool; each lists the tools."""
        for body, words in ((self.custom_body(tool_choice={"type": "custom", "name": "apply_pach"}),
                             "names custom tool 'apply_pach'"),
                            (self.custom_body(tool_choice={"type": "function", "name": "apply_pach"}),
                             "names function 'apply_pach'")):
            status, _, e = self.gw.json("POST", "/v1/responses", body)
            self.assertEqual(status, 400, e)
            self.assertIn(words, e["error"]["message"])
            self.assertIn("(tools: apply_patch)", e["error"]["message"])
        status, _, e = self.gw.json("POST", "/v1/messages", self.messages_body(
            tool_choice={"type": "tool", "name": "get_wether"}))
        self.assertEqual(status, 400, e)
        self.assertIn("names tool 'get_wether'", e["error"]["message"])
        self.assertIn("(tools: get_weather)", e["error"]["message"])

    def test_responses_json_schema(self):
        body = {"model": TOOL, "input": "Weather?", "max_output_tokens": 400, "temperature": 0,
                "text": {"format": {"type": "json_schema", "name": "weather", "schema": WEATHER_SCHEMA, "strict": True}}}
        status, _, r = self.gw.json("POST", "/v1/responses", body)
        self.assertEqual(status, 200, r)
        self.assertEqual(r["text"]["format"]["type"], "json_schema")
        self.assertTrue(valid_weather(json.loads(r["output"][0]["content"][0]["text"])), r["output"])

    # ---- Messages ----

    def messages_body(self, **kw):
        return {"model": TOOL, "max_tokens": 400, "temperature": 0,
                "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
                "tools": [{"name": "get_weather", "description": "Weather by city", "input_schema": WEATHER_SCHEMA}],
                "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}, **kw}

    def test_messages_tool_choice_tool(self):
        status, _, m = self.gw.json("POST", "/v1/messages", self.messages_body())
        self.assertEqual(status, 200, m)
        self.assertEqual(m["stop_reason"], "tool_use")
        uses = [b for b in m["content"] if b["type"] == "tool_use"]
        self.assertEqual(len(uses), 1, m["content"])
        self.assertEqual(uses[0]["name"], "get_weather")
        self.assertTrue(valid_weather(uses[0]["input"]), uses[0])
        # The answer goes back as a tool_result, and the model answers in prose.
        follow = self.messages_body(tool_choice={"type": "none"}, max_tokens=8, messages=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": m["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0]["id"], "content": "Sunny"},
                                         {"type": "tool_result", "tool_use_id": uses[0]["id"], "is_error": True,
                                          "content": [{"type": "text", "text": "timeout"}]}]}])
        status, _, m2 = self.gw.json("POST", "/v1/messages", follow)
        self.assertEqual(status, 200, m2)
        self.assertEqual(m2["content"][0]["type"], "text")
        status, _, counted = self.gw.json("POST", "/v1/messages/count_tokens",
                                          {k: follow[k] for k in ("model", "messages", "tools", "tool_choice")})
        self.assertEqual(status, 200, counted)
        self.assertEqual(counted["input_tokens"], m2["usage"]["input_tokens"] + m2["usage"]["cache_read_input_tokens"])

    def test_messages_tool_streamed(self):
        _, _, events = self.gw.sse("/v1/messages", self.messages_body(stream=True))
        data = [json.loads(d) for _, d in events]
        self.assertEqual(kinds([d["type"] for d in data]), MESSAGES_ORDER)
        start = next(d for d in data if d["type"] == "content_block_start")
        self.assertEqual(start["content_block"]["type"], "tool_use")
        partial = "".join(d["delta"]["partial_json"] for d in data if d["type"] == "content_block_delta")
        self.assertTrue(all(d["delta"]["type"] == "input_json_delta" for d in data if d["type"] == "content_block_delta"))
        self.assertTrue(valid_weather(json.loads(partial)), partial)
        delta = next(d for d in data if d["type"] == "message_delta")
        self.assertEqual(delta["delta"]["stop_reason"], "tool_use")
        _, _, plain = self.gw.json("POST", "/v1/messages", self.messages_body())
        self.assertEqual(json.loads(partial), plain["content"][0]["input"])

    # ---- Ollama ----

    def test_ollama_format_schema_and_tool_history(self):
        body = {"model": TOOL, "messages": [{"role": "user", "content": "Weather?"}], "stream": False,
                "format": WEATHER_SCHEMA, "options": {"num_predict": 400, "temperature": 0}}
        status, _, r = self.gw.json("POST", "/api/chat", body)
        self.assertEqual(status, 200, r)
        self.assertTrue(valid_weather(json.loads(r["message"]["content"])), r["message"])
        status, _, r = self.gw.json("POST", "/api/generate", {"model": TOOL, "prompt": "Weather?", "stream": False,
                                                             "format": WEATHER_SCHEMA,
                                                             "options": {"num_predict": 400, "temperature": 0}})
        self.assertEqual(status, 200, r)
        self.assertTrue(valid_weather(json.loads(r["response"])), r)
        # A conversation with a tool call and its answer renders through the template.
        history = [{"role": "user", "content": "Weather in Paris?"},
                   {"role": "assistant", "content": "", "tool_calls": [
                       {"function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 1}}}]},
                   {"role": "tool", "content": "Sunny"}]
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}]
        status, _, r = self.gw.json("POST", "/api/chat", {"model": TOOL, "messages": history, "tools": tools,
                                                         "stream": False, "options": {"num_predict": 4}})
        self.assertEqual(status, 200, r)
        self.assertEqual(r["message"]["role"], "assistant")


class BodyTypeTest(unittest.TestCase):
    """Without tokens a POST body must be application/json (415 otherwise, against cross-site form
    posts), except that Ollama's routes also take none, text/plain or the form type of curl -d, as
    Ollama does for its clients and its curl examples, when the request has no Origin (a browser's
    cross-site POST, a page's form included, always has one)."""

    @classmethod
    def setUpClass(cls):
        cls.gw = gw.serve_config(gw.local_target(TARGET, parallel=1, ctx=CTX))
        cls.body = json.dumps({"model": TARGET})

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    def post(self, path, headers, body=None):
        """Posts with exactly these headers (no Content-Type unless given): (status, JSON body)."""
        conn = self.gw.connect()
        try:
            conn.request("POST", path, body=self.body if body is None else body, headers=headers)
            r = conn.getresponse()
            return r.status, json.loads(r.read())
        finally:
            conn.close()

    def test_ollama_takes_no_type_or_text_plain_without_origin(self):
        for headers in ({}, {"Content-Type": "text/plain"}, {"Content-Type": "text/plain; charset=utf-8"},
                        {"Content-Type": "application/x-www-form-urlencoded"}, {"Content-Type": "application/json"}):
            with self.subTest(headers=headers):
                status, body = self.post("/api/show", headers)
                self.assertEqual(status, 200, body)
                self.assertIn("model_info", body)

    def test_ollama_refuses_other_types_and_any_type_but_json_with_origin(self):
        own = f"http://{self.gw.host}:{self.gw.port}"
        for headers in ({"Content-Type": "multipart/form-data; boundary=x"},
                        {"Origin": own}, {"Origin": own, "Content-Type": "text/plain"},
                        {"Origin": own, "Content-Type": "application/x-www-form-urlencoded"}):
            with self.subTest(headers=headers):
                status, body = self.post("/api/show", headers)
                self.assertEqual(status, 415, body)
                self.assertEqual(set(body), {"error"})  # Ollama's shape
                self.assertIn("application/json", body["error"])
        status, body = self.post("/api/show", {"Origin": own, "Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        status, body = self.post("/api/chat", {"Origin": "http://evil.example", "Content-Type": "text/plain"})
        self.assertEqual(status, 403, body)
        self.assertIn("allowed_origins", body["error"])

    def test_curl_d_as_in_ollamas_examples(self):
        """curl -d sends the form type: Ollama's documented `curl URL/api/generate -d '{...}'` works,
        while the same post with an Origin (what a page's form sends) is refused."""
        body = json.dumps({"model": TARGET, "prompt": "Hello", "stream": False, "options": {"num_predict": 2}})
        url = f"{self.gw.base}/api/generate"
        r = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", url, "-d", body],
                           capture_output=True, text=True, timeout=gw.HTTP_TIMEOUT_S)
        out, code = r.stdout.rsplit("\n", 1)
        self.assertEqual(code, "200", r.stdout + r.stderr)
        self.assertTrue(json.loads(out)["done"])
        r = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", url, "-H", f"Origin: {self.gw.base}", "-d", body],
                           capture_output=True, text=True, timeout=gw.HTTP_TIMEOUT_S)
        out, code = r.stdout.rsplit("\n", 1)
        self.assertEqual(code, "415", r.stdout + r.stderr)
        self.assertIn("application/json", json.loads(out)["error"])

    def test_other_apis_still_need_json(self):
        chat = json.dumps({"model": TARGET, "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]})
        status, body = self.post("/v1/messages", {}, chat)
        self.assertEqual(status, 415, body)
        self.assertEqual((body["type"], body["error"]["type"]), ("error", "invalid_request_error"), body)
        status, body = self.post("/v1/responses", {"Content-Type": "text/plain"}, chat)
        self.assertEqual((status, body["error"]["code"]), (415, "unsupported_media_type"), body)
        status, body = self.post("/v1/chat/completions", {}, chat)
        self.assertEqual((status, body["error"]["code"]), (415, "unsupported_media_type"), body)


class ErrorShapesTest(unittest.TestCase):
    """The errors that come from the gateway around a route (size limit, rate limit, token scope, a
    remote target that cannot be reached) in each API's own shape, with the same statuses as OpenAI's routes."""

    ROUTES = [
        ("/v1/responses", {"model": TARGET, "input": "x", "max_output_tokens": 2}, "openai"),
        ("/v1/messages", {"model": TARGET, "max_tokens": 2, "messages": [{"role": "user", "content": "x"}]}, "anthropic"),
        ("/api/chat", {"model": TARGET, "stream": False, "messages": [{"role": "user", "content": "x"}]}, "ollama"),
    ]

    @classmethod
    def setUpClass(cls):
        cfg = ('[server]\nmax_request_bytes = 4096\n\n[security.rate_limit]\nrequests_per_minute = 1\nburst = 10\n\n'
               '[[tokens]]\nenv = "SIPP_SHAPES_ALL"\ncaller = "all"\n\n'
               '[[tokens]]\nenv = "SIPP_SHAPES_SCOPED"\ncaller = "scoped"\ntargets = ["remote"]\n\n'
               '[[tokens]]\nenv = "SIPP_SHAPES_BURST"\ncaller = "burst"\n\n' +
               gw.local_target(TARGET, parallel=1, ctx=CTX) +
               '[[targets]]\nname = "remote"\ntype = "openai_compatible"\nbase_url = "http://127.0.0.1:9/v1"\n')
        cls.gw = gw.serve_config(cfg, env={"SIPP_SHAPES_ALL": ALL_TOKEN, "SIPP_SHAPES_SCOPED": SCOPED_TOKEN,
                                           "SIPP_SHAPES_BURST": BURST_TOKEN})

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    def check(self, shape, status, body, want, anthropic_type, *words):
        self.assertEqual(status, want, body)
        if shape == "openai":
            message = body["error"]["message"]
        elif shape == "anthropic":
            self.assertEqual((body["type"], body["error"]["type"]), ("error", anthropic_type), body)
            message = body["error"]["message"]
        else:
            self.assertEqual(set(body), {"error"})
            message = body["error"]
        for w in words:
            self.assertIn(w, message)

    def test_413_404_502_429(self):
        for path, body, shape in self.ROUTES:
            with self.subTest(path=path):
                big = dict(body, padding="x" * 8192)
                status, _, b = self.gw.json("POST", path, big, {"Authorization": f"Bearer {ALL_TOKEN}"})
                self.check(shape, status, b, 413, "request_too_large", "max_request_bytes")
                # a target outside the token's scope is, to that caller, one that does not exist
                status, _, b = self.gw.json("POST", path, body, {"Authorization": f"Bearer {SCOPED_TOKEN}"})
                self.check(shape, status, b, 404, "not_found_error", f"'{TARGET}'", "does not exist")
                status, _, b = self.gw.json("POST", path, dict(body, model="remote"), {"Authorization": f"Bearer {SCOPED_TOKEN}"})
                self.check(shape, status, b, 502, "api_error", "'remote'", "no upstream replica answered")
        statuses = []
        for _ in range(11):  # the burst of 10, then one over it (one request a minute refills it)
            status, hdrs, b = self.gw.json("POST", "/v1/messages", self.ROUTES[1][1], {"x-api-key": BURST_TOKEN})
            statuses.append(status)
        self.assertEqual(statuses[-1], 429, statuses)
        self.check("anthropic", status, b, 429, "rate_limit_error", "rate limit")
        self.assertIn("retry-after", hdrs)
        status, _, b = self.gw.json("POST", "/api/chat", self.ROUTES[2][1], {"Authorization": f"Bearer {BURST_TOKEN}"})
        self.check("ollama", status, b, 429, None, "rate limit")


class RemoteTargetTest(unittest.TestCase):
    """A remote (openai_compatible) target through every API: the gateway translates to chat
    completions for the upstream (here another sipp serve, on the Qwen-templated model) and the answer
    back, tools included."""

    @classmethod
    def setUpClass(cls):
        gw.check_build()
        path = os.path.join(gw.tmpdir(), "remote-qwen.gguf")
        r = subprocess.run([gw.SYNTH, "--out", path, "--vocab", QWEN_VOCAB, "--chat-template-file", QWEN_TEMPLATE,
                            "--seed", "1", *gw.TINY], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        cls.up = gw.serve_config(gw.local_target("upstream-qwen", path=path, parallel=2, ctx=4096))
        try:
            cls.gw = gw.serve_config(f'[[targets]]\nname = "far"\ntype = "openai_compatible"\n'
                                     f'base_url = "{cls.up.base}/v1"\nmodel = "upstream-qwen"\n')
        except Exception:
            cls.up.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        rc_up = cls.up.stop()
        assert rc == 0 and rc_up == 0, (rc, rc_up)

    def direct(self, **kw):
        """The upstream's own chat completion: what every API must give back."""
        body = {"model": "upstream-qwen", "messages": [{"role": "user", "content": "Hello there"}], "temperature": 0,
                "max_tokens": 6, **kw}
        status, _, out = self.up.json("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, out)
        return out

    def test_text_through_every_api(self):
        want = self.direct()["choices"][0]["message"]["content"]
        _, _, r = self.gw.json("POST", "/v1/responses", {"model": "far", "input": "Hello there", "max_output_tokens": 6,
                                                         "temperature": 0})
        self.assertEqual(r["output"][0]["content"][0]["text"], want, r)
        self.assertEqual(r["status"], "incomplete")
        self.assertEqual(r["usage"]["output_tokens"], 6)
        _, _, m = self.gw.json("POST", "/v1/messages", {"model": "far", "max_tokens": 6, "temperature": 0,
                                                        "messages": [{"role": "user", "content": "Hello there"}]})
        self.assertEqual(m["content"][0]["text"], want, m)
        self.assertEqual(m["stop_reason"], "max_tokens")
        _, _, o = self.gw.json("POST", "/api/chat", {"model": "far", "stream": False, "messages": [
            {"role": "user", "content": "Hello there"}], "options": {"num_predict": 6, "temperature": 0, "top_k": 0,
                                                                     "top_p": 1, "repeat_penalty": 1}})
        self.assertEqual(o["message"]["content"], want, o)
        self.assertEqual(o["eval_count"], 6)

    def test_streams_have_the_documented_sequence(self):
        want = self.direct()["choices"][0]["message"]["content"]
        _, _, events = self.gw.sse("/v1/responses", {"model": "far", "input": "Hello there", "max_output_tokens": 6,
                                                     "temperature": 0, "stream": True})
        data = [json.loads(d) for _, d in events]
        self.assertEqual(kinds([d["type"] for d in data]), RESPONSES_ORDER + ["response.incomplete"])
        self.assertEqual("".join(d["delta"] for d in data if d["type"] == "response.output_text.delta"), want)
        _, _, events = self.gw.sse("/v1/messages", {"model": "far", "max_tokens": 6, "temperature": 0, "stream": True,
                                                    "messages": [{"role": "user", "content": "Hello there"}]})
        self.assertEqual(kinds([e for e, _ in events]), MESSAGES_ORDER)

    def test_streamed_tool_call_through_the_upstream(self):
        """The upstream streams the call (name first, argument fragments after); relayed as they come,
        the fragments reassemble to arguments that follow the schema."""
        tools = [{"name": "get_weather", "input_schema": WEATHER_SCHEMA}]
        _, _, events = self.gw.sse("/v1/messages", {
            "model": "far", "max_tokens": 400, "temperature": 0, "tools": tools, "stream": True,
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}})
        data = [(e, json.loads(d)) for e, d in events]
        start = next(d for e, d in data if e == "content_block_start" and d["content_block"]["type"] == "tool_use")
        self.assertEqual(start["content_block"]["name"], "get_weather")
        args = "".join(d["delta"]["partial_json"] for e, d in data
                       if e == "content_block_delta" and d["delta"]["type"] == "input_json_delta")
        self.assertTrue(valid_weather(json.loads(args)), args)
        self.assertEqual(next(d for e, d in data if e == "message_delta")["delta"]["stop_reason"], "tool_use")

    def test_ollama_stream_through_the_upstream(self):
        want = self.direct()["choices"][0]["message"]["content"]
        status, _, raw = self.gw.request("POST", "/api/chat", {"model": "far", "messages": [
            {"role": "user", "content": "Hello there"}], "options": {"num_predict": 6, "temperature": 0, "top_k": 0,
                                                                     "top_p": 1, "repeat_penalty": 1}})
        self.assertEqual(status, 200, raw)
        lines = ndjson(raw)
        self.assertEqual("".join(x["message"]["content"] for x in lines), want)
        self.assertEqual((lines[-1]["done"], lines[-1]["done_reason"], lines[-1]["eval_count"]), (True, "length", 6))

    def test_tool_call_through_the_upstream(self):
        tools = [{"name": "get_weather", "input_schema": WEATHER_SCHEMA}]
        status, _, m = self.gw.json("POST", "/v1/messages", {
            "model": "far", "max_tokens": 400, "temperature": 0, "tools": tools,
            "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}})
        self.assertEqual(status, 200, m)
        self.assertEqual(m["stop_reason"], "tool_use", m)
        self.assertTrue(valid_weather(m["content"][0]["input"]), m["content"])
        # An error of the upstream keeps its status, in the API's shape and names.
        status, _, e = self.gw.json("POST", "/v1/messages", {
            "model": "far", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}],
            "tools": [{"name": "", "input_schema": {"type": "object"}}]})
        self.assertEqual(status, 400, e)
        self.assertEqual(e["type"], "error")
        self.assertIn("'tools[0].name'", e["error"]["message"])


class GatedUpstream(ThreadingHTTPServer):
    """An OpenAI-compatible upstream on loopback that streams the first half of its answer ("Hel")
    and holds the rest ("lo", the finish and usage, [DONE]) until the test opens the gate: what a
    client reads before that can only have been relayed piece by piece."""

    daemon_threads = True
    FIRST = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": None}]}
    REST = [{"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}]

    def __init__(self):
        self.gate = threading.Event()
        self.bodies = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                outer.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()  # HTTP/1.0: the body ends when the connection closes
                self.send(outer.FIRST)
                if "fail" in json.dumps(outer.bodies[-1]["messages"]):  # an error mid-stream
                    self.send({"error": {"message": "the upstream broke off", "type": "server_error"}})
                    return
                outer.gate.wait(GATE_TIMEOUT_S)
                for chunk in outer.REST:
                    self.send(chunk)
                self.wfile.write(b"data: [DONE]\n\n")

            def send(self, chunk):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

        super().__init__(("127.0.0.1", 0), Handler)


class RemoteStreamTest(unittest.TestCase):
    """Responses, Messages and Ollama streams to a remote target pass the upstream's chunks through as
    they come: the first text reaches the client while the upstream still holds the rest back."""

    @classmethod
    def setUpClass(cls):
        gw.check_build()
        cls.up = GatedUpstream()
        threading.Thread(target=cls.up.serve_forever, daemon=True).start()
        port = cls.up.server_address[1]
        try:
            cls.gw = gw.serve_config(f'[[targets]]\nname = "far"\ntype = "openai_compatible"\n'
                                     f'base_url = "http://127.0.0.1:{port}/v1"\nmodel = "gated"\n')
        except Exception:
            cls.up.shutdown()
            raise

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        cls.up.shutdown()
        cls.up.server_close()
        assert rc == 0, rc

    def relay(self, path, body, first_piece, read_event):
        """Posts a stream; returns (events before the gate opened, events after)."""
        self.up.gate.clear()
        conn, resp = self.gw.stream(path, body)
        try:
            self.assertEqual(resp.status, 200)
            before = []
            while not before or not first_piece(before[-1]):
                ev = read_event(resp)
                self.assertIsNotNone(ev, f"the stream ended before its first piece: {before}")
                before.append(ev)
            self.assertFalse(self.up.gate.is_set())
            self.up.gate.set()
            after = []
            while (ev := read_event(resp)) is not None:
                after.append(ev)
            return before, after
        finally:
            self.up.gate.set()
            conn.close()
        
    @staticmethod
    def sse_event(resp):
        return next(gw.read_sse(resp, 1), None)

    @staticmethod
    def ndjson_line(resp):
        line = resp.readline()
        return json.loads(line) if line.strip() else None

    def test_responses_stream_is_incremental(self):
        before, after = self.relay("/v1/responses", {"model": "far", "input": "Hi", "stream": True},
                                   lambda e: json.loads(e[1]).get("delta") == "Hel", self.sse_event)
        data = [json.loads(d) for _, d in before + after]
        self.assertEqual(kinds([d["type"] for d in data]), RESPONSES_ORDER + ["response.completed"])
        self.assertEqual([d["sequence_number"] for d in data], list(range(len(data))))
        self.assertEqual(data[-1]["response"]["output"][0]["content"][0]["text"], "Hello")
        self.assertEqual(data[-1]["response"]["usage"]["output_tokens"], 2)
        self.assertTrue(self.up.bodies[-1]["stream"])

    def test_messages_stream_is_incremental(self):
        body = {"model": "far", "max_tokens": 8, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
        before, after = self.relay("/v1/messages", body,
                                   lambda e: json.loads(e[1]).get("delta", {}).get("text") == "Hel", self.sse_event)
        events = before + after
        self.assertEqual(kinds([e for e, _ in events]), MESSAGES_ORDER)
        text = "".join(json.loads(d)["delta"].get("text", "") for e, d in events if e == "content_block_delta")
        self.assertEqual(text, "Hello")
        final = next(json.loads(d) for e, d in events if e == "message_delta")
        self.assertEqual((final["delta"]["stop_reason"], final["usage"]["output_tokens"]), ("end_turn", 2))

    def test_ollama_chat_stream_is_incremental(self):
        body = {"model": "far", "messages": [{"role": "user", "content": "Hi"}]}  # stream: true by default
        before, after = self.relay("/api/chat", body, lambda e: e["message"]["content"] == "Hel", self.ndjson_line)
        lines = before + after
        self.assertEqual("".join(x["message"]["content"] for x in lines), "Hello")
        self.assertTrue(lines[-1]["done"])
        self.assertEqual((lines[-1]["done_reason"], lines[-1]["eval_count"]), ("stop", 2))

    def test_an_error_mid_stream_ends_it_in_each_apis_shape(self):
        _, _, events = self.gw.sse("/v1/responses", {"model": "far", "input": "fail", "stream": True})
        last = json.loads(events[-1][1])
        self.assertEqual(last["type"], "response.failed", events)
        self.assertIn("the upstream broke off", json.dumps(last))
        _, _, events = self.gw.sse("/v1/messages", {"model": "far", "max_tokens": 8, "stream": True,
                                                    "messages": [{"role": "user", "content": "fail"}]})
        self.assertEqual(events[-1][0], "error", events)
        self.assertIn("the upstream broke off", events[-1][1])
        status, _, raw = self.gw.request("POST", "/api/chat", {"model": "far", "messages": [
            {"role": "user", "content": "fail"}]})
        lines = ndjson(raw)
        self.assertEqual(status, 200, lines)
        # The text before the error may come in its own line or not, as the two chunks arrive together or not.
        self.assertIn("".join(x.get("message", {}).get("content", "") for x in lines), ("", "Hel"), lines)
        self.assertIn("the upstream broke off", lines[-1]["error"])
