"""Integration tests of `sipp serve`: every route over real HTTP on loopback, on one local target.

One gateway serves the whole class (a tiny synthetic model, 2 slots, 1 thread). Streams are parsed
as a client parses server-sent events. See test_gateway_support.py for the harness.
"""

import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

TARGET = "tiny"
LONG = 100000  # max_tokens that only the context ends
DISCONNECT_TIMEOUT_S = 10


class GatewayRoutesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gw.serve_model(gw.model(TARGET), "--parallel", "2", "--ctx-size", "2048")

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    # ---- operations ----------------------------------------------------------------------------

    def test_health_and_ready(self):
        status, hdrs, body = self.gw.json("GET", "/health")
        self.assertEqual(status, 200)
        self.assertEqual(body["status"], "ok")
        self.assertRegex(hdrs["x-request-id"], r"^[0-9a-f]{32}$")
        status, _, body = self.gw.json("GET", "/ready")
        self.assertEqual(status, 200)
        self.assertEqual(body["targets"], [{"name": TARGET, "type": "local", "state": "ready"}])

    def test_request_id_echoed(self):
        _, hdrs, _ = self.gw.request("GET", "/health", headers={"x-request-id": "abc-123"})
        self.assertEqual(hdrs["x-request-id"], "abc-123")
        # an unusable one is replaced
        _, hdrs, _ = self.gw.request("GET", "/health", headers={"x-request-id": "bad id with spaces"})
        self.assertRegex(hdrs["x-request-id"], r"^[0-9a-f]{32}$")
        status, hdrs, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body(TARGET),
                                          headers={"x-request-id": "chat-7"})
        self.assertEqual(status, 200)
        self.assertEqual(hdrs["x-request-id"], "chat-7")
        self.assertEqual(body["id"], "chatcmpl-chat-7")

    def test_models(self):
        status, _, body = self.gw.json("GET", "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(body["object"], "list")
        self.assertEqual([m["id"] for m in body["data"]], [TARGET])
        self.assertEqual(body["data"][0]["object"], "model")
        status, _, body = self.gw.json("GET", f"/v1/models/{TARGET}")
        self.assertEqual((status, body["id"]), (200, TARGET))
        status, _, body = self.gw.json("GET", "/v1/models/nope")
        self.assertEqual(status, 404)
        self.assertEqual(body["error"]["code"], "model_not_found")

    def test_backends(self):
        status, _, body = self.gw.json("GET", "/v1/backends")
        self.assertEqual(status, 200)
        t = body["targets"][0]
        self.assertEqual(t["name"], TARGET)
        for key in ("backend", "reason", "devices", "gpu_layers"):
            self.assertIn(key, t)
        self.assertIn("cpu", [b["name"] for b in body["backends"]])

    def test_unknown_route_and_method(self):
        status, _, body = self.gw.json("GET", "/v2/nothing")
        self.assertEqual(status, 404)
        self.assertEqual(set(body["error"]), {"message", "type", "code"})
        status, hdrs, body = self.gw.json("GET", "/v1/chat/completions")
        self.assertEqual(status, 405)
        self.assertEqual(body["error"]["code"], "method_not_allowed")
        self.assertEqual(hdrs["allow"], "POST")
        status, hdrs, body = self.gw.json("PUT", "/health")
        self.assertEqual((status, hdrs["allow"]), (405, "GET, HEAD"))
        self.assertIn("use GET", body["error"]["message"])
        status, hdrs, _ = self.gw.json("DELETE", f"/v1/models/{TARGET}")
        self.assertEqual((status, hdrs["allow"]), (405, "GET, HEAD"))

    def test_head_is_get_without_body(self):
        for path in ("/", "/health", "/ready", "/v1/models", f"/v1/models/{TARGET}"):
            status, hdrs, body = self.gw.request("HEAD", path)
            self.assertEqual(status, 200, path)
            self.assertEqual(body, b"", path)
            _, get_hdrs, get_body = self.gw.request("GET", path)
            self.assertEqual(hdrs["content-type"], get_hdrs["content-type"], path)
        status, _, body = self.gw.request("HEAD", "/v1/models/nope")
        self.assertEqual((status, body), (404, b""))

    # ---- OpenAI: chat ---------------------------------------------------------------------------

    def test_chat_plain(self):
        status, hdrs, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body(TARGET, max_tokens=6))
        self.assertEqual(status, 200, body)
        self.assertTrue(hdrs["content-type"].startswith("application/json"))
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["model"], TARGET)
        choice = body["choices"][0]
        self.assertEqual(choice["message"]["role"], "assistant")
        self.assertIsInstance(choice["message"]["content"], str)
        self.assertIn(choice["finish_reason"], ("stop", "length"))
        u = body["usage"]
        self.assertGreater(u["prompt_tokens"], 0)
        self.assertLessEqual(u["completion_tokens"], 6)
        self.assertEqual(u["total_tokens"], u["prompt_tokens"] + u["completion_tokens"])
        self.assertIn("cached_tokens", u["prompt_tokens_details"])

    def test_chat_stream_matches_plain(self):
        body = gw.chat_body(TARGET, content="Tell me a story", max_tokens=12, seed=3, ignore_eos=True)
        status, _, plain = self.gw.json("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200)
        status, ctype, events = self.gw.sse("/v1/chat/completions",
                                            dict(body, stream=True, stream_options={"include_usage": True}))
        self.assertEqual(status, 200)
        self.assertTrue(ctype.startswith("text/event-stream"))
        self.assertEqual(events[-1], (None, "[DONE]"))
        chunks = [json.loads(d) for _, d in events[:-1]]
        self.assertEqual(chunks[0]["choices"][0]["delta"]["role"], "assistant")
        for c in chunks:
            self.assertEqual(c["object"], "chat.completion.chunk")
            self.assertEqual(c["id"], chunks[0]["id"])
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        self.assertEqual(text, plain["choices"][0]["message"]["content"])
        finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
        self.assertEqual(len(finals), 1)
        self.assertEqual(finals[0]["choices"][0]["finish_reason"], "length")
        usage = chunks[-1]
        self.assertEqual(usage["choices"], [])
        self.assertEqual(usage["usage"]["completion_tokens"], 12)
        # the same prompt again: its prefix comes from a slot's KV
        self.assertGreater(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 0)

    def test_chat_stream_without_usage(self):
        _, _, events = self.gw.sse("/v1/chat/completions", gw.chat_body(TARGET, stream=True, max_tokens=3))
        self.assertEqual(events[-1][1], "[DONE]")
        for _, d in events[:-1]:
            self.assertNotIn("usage", json.loads(d))

    def test_chat_content_parts_and_system(self):
        body = gw.chat_body(TARGET)
        body["messages"] = [{"role": "system", "content": "Be brief."},
                            {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "!"}]}]
        status, _, out = self.gw.json("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, out)

    def test_max_completion_tokens(self):
        body = gw.chat_body(TARGET, ignore_eos=True)
        del body["max_tokens"]
        body["max_completion_tokens"] = 5
        status, _, out = self.gw.json("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200)
        self.assertEqual(out["usage"]["completion_tokens"], 5)
        self.assertEqual(out["choices"][0]["finish_reason"], "length")

    def test_stop_string(self):
        body = {"model": TARGET, "prompt": "The quick brown fox", "max_tokens": 16, "temperature": 0,
                "ignore_eos": True}
        status, _, full = self.gw.json("POST", "/v1/completions", body)
        self.assertEqual(status, 200)
        text = full["choices"][0]["text"]
        self.assertGreater(len(text), 6, text)
        stop = text[len(text) // 2:len(text) // 2 + 3]
        for stop_field in (stop, [stop, "never-appears-xyz"]):
            status, _, cut = self.gw.json("POST", "/v1/completions", dict(body, stop=stop_field))
            self.assertEqual(status, 200)
            self.assertEqual(cut["choices"][0]["finish_reason"], "stop")
            self.assertEqual(cut["choices"][0]["text"], text[:text.index(stop)])

    def test_sampling_fields_accepted(self):
        body = gw.chat_body(TARGET, temperature=0.7, top_p=0.9, top_k=20, min_p=0.05, seed=42, ignore_eos=True,
                            presence_penalty=0.1, frequency_penalty=0.1, user="u1", n=1)
        status, _, a = self.gw.json("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, a)
        status, _, b = self.gw.json("POST", "/v1/chat/completions", body)
        self.assertEqual(a["choices"][0]["message"]["content"], b["choices"][0]["message"]["content"])

    # ---- OpenAI: completions ------------------------------------------------------------------

    def test_completions_plain_and_stream(self):
        body = {"model": TARGET, "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "ignore_eos": True}
        status, _, plain = self.gw.json("POST", "/v1/completions", body)
        self.assertEqual(status, 200, plain)
        self.assertEqual(plain["object"], "text_completion")
        self.assertEqual(plain["choices"][0]["finish_reason"], "length")
        self.assertEqual(plain["usage"]["completion_tokens"], 8)
        _, _, events = self.gw.sse("/v1/completions", dict(body, stream=True, stream_options={"include_usage": True}))
        self.assertEqual(events[-1][1], "[DONE]")
        chunks = [json.loads(d) for _, d in events[:-1]]
        text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
        self.assertEqual(text, plain["choices"][0]["text"])
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 8)
        # one chunk per piece the engine published (a token's text), also when the connection's thread
        # reads late on a loaded machine (it used to send all that had arrived as one chunk)
        pieces = [c for c in chunks if c["choices"] and c["choices"][0]["text"]]
        self.assertTrue(1 < len(pieces) <= 8, len(pieces))
        # a prompt given as an array of one string
        status, _, arr = self.gw.json("POST", "/v1/completions", dict(body, prompt=["Once upon a time"]))
        self.assertEqual(arr["choices"][0]["text"], plain["choices"][0]["text"])

    # ---- errors -------------------------------------------------------------------------------

    def assertError(self, status, body, code, expected_status, field=None):
        self.assertEqual(status, expected_status, body)
        self.assertEqual(set(body["error"]), {"message", "type", "code"})
        self.assertEqual(body["error"]["code"], code)
        if field:
            self.assertIn(field, body["error"]["message"])

    def test_malformed_json(self):
        for raw in (b"{not json", b"", b"[1, 2]", b'{"a": 1} trailing'):
            status, _, body = self.gw.json("POST", "/v1/chat/completions", raw)
            self.assertEqual(status, 400, raw)
            self.assertIn(body["error"]["code"], ("invalid_json", "invalid_field"))

    def test_wrong_field_types_name_the_field(self):
        cases = [
            ({"model": TARGET, "messages": "hi"}, "messages"),
            ({"model": TARGET, "messages": []}, "messages"),
            ({"model": TARGET, "messages": [{"role": "user"}], "max_tokens": "5"}, "max_tokens"),
            ({"model": TARGET, "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
            ({"model": TARGET, "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
            ({"model": TARGET, "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "temperature"),
            ({"model": TARGET, "messages": [{"role": "user", "content": "x"}], "temperature": 7}, "temperature"),
            ({"model": TARGET, "messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),
            ({"model": TARGET, "messages": [{"role": "user", "content": "x"}], "stop": 5}, "stop"),
            ({"model": TARGET, "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
            ({"model": TARGET, "messages": [{"role": "user", "content": "x"}], "n": 0}, "'n'"),
            ({"model": TARGET, "messages": [{"role": "user", "content": "x"}], "top_k": -1}, "top_k"),
            ({"model": 5, "messages": [{"role": "user", "content": "x"}]}, "model"),
            ({"model": TARGET, "messages": [{"role": "user", "content": "x"}], "stream_options": 1}, "stream_options"),
        ]
        for body, field in cases:
            with self.subTest(field=field, body=body):
                status, _, out = self.gw.json("POST", "/v1/chat/completions", body)
                self.assertError(status, out, "invalid_field", 400, field)
        status, _, out = self.gw.json("POST", "/v1/completions", {"model": TARGET, "prompt": 12})
        self.assertError(status, out, "invalid_field", 400, "prompt")

    def test_unknown_model(self):
        status, _, out = self.gw.json("POST", "/v1/chat/completions", gw.chat_body("no-such-model"))
        self.assertError(status, out, "model_not_found", 404, "no-such-model")

    def test_body_too_large(self):
        big = json.dumps(gw.chat_body(TARGET, content="x" * (1024 * 1024 + 10)))
        status, _, out = self.gw.json("POST", "/v1/chat/completions", big,
                                      headers={"Content-Type": "application/json"})
        self.assertError(status, out, "request_too_large", 413, "max_request_bytes")
        # the connection's server is still fine
        self.assertEqual(self.gw.request("GET", "/health")[0], 200)

    def test_body_too_large_answered_before_the_body(self):
        # a client that waits for "100 Continue" gets the 413 without sending its body
        sock = socket.create_connection((self.gw.host, self.gw.port), timeout=gw.HTTP_TIMEOUT_S)
        try:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 50000000\r\nExpect: 100-continue\r\n\r\n")
            got = b""
            while b"\r\n\r\n" not in got:
                chunk = sock.recv(4096)
                self.assertTrue(chunk)
                got += chunk
            self.assertTrue(got.startswith(b"HTTP/1.1 413"), got[:100])
        finally:
            sock.close()

    def test_context_too_long(self):
        status, _, out = self.gw.json("POST", "/v1/completions",
                                      {"model": TARGET, "prompt": "word " * 3000, "max_tokens": 2})
        self.assertError(status, out, "context_length_exceeded", 400, "context")

    # ---- sipp-native --------------------------------------------------------------------------

    def native(self, path, body):
        status, _, events = self.gw.sse(path, body)
        self.assertEqual(status, 200)
        return events

    def test_native_query_stream(self):
        events = self.native("/v1/query", {"model": TARGET, "prompt": "Hello", "max_tokens": 6, "ignore_eos": True,
                                           "temperature": 0})
        names = [e for e, _ in events]
        self.assertEqual(names[-2:], ["usage", "done"])
        self.assertTrue(all(n == "token" for n in names[:-2]), names)
        text = "".join(json.loads(d)["text"] for e, d in events if e == "token")
        usage = json.loads(events[-2][1])
        self.assertEqual(usage["generated_tokens"], 6)
        for key in ("prompt_tokens", "cached_tokens", "ttft_ms", "decode_tokens_per_s"):
            self.assertIn(key, usage)
        done = json.loads(events[-1][1])
        self.assertEqual(done["finish_reason"], "length")
        status, _, plain = self.gw.json("POST", "/v1/query", {"model": TARGET, "prompt": "Hello", "max_tokens": 6,
                                                              "ignore_eos": True, "temperature": 0, "stream": False})
        self.assertEqual(status, 200)
        self.assertEqual(plain["text"], text)
        self.assertEqual(plain["usage"]["generated_tokens"], 6)

    def test_native_chat_context_key(self):
        key = "conv-1"
        msgs = [{"role": "user", "content": "Hi, who are you?"}]
        body = {"model": TARGET, "messages": msgs, "max_tokens": 4, "context_key": key, "temperature": 0}
        status, _, first = self.gw.json("POST", "/v1/chat", dict(body, stream=False))
        self.assertEqual(status, 200, first)
        self.assertEqual(first["context_key"], key)
        msgs2 = msgs + [{"role": "assistant", "content": first["text"]}, {"role": "user", "content": "And then?"}]
        events = self.native("/v1/chat", dict(body, messages=msgs2))
        done = json.loads(events[-1][1])
        self.assertEqual(done["context_key"], key)
        usage = json.loads(events[-2][1])
        self.assertGreater(usage["cached_tokens"], 0)

    def test_native_error_event_before_stream(self):
        status, _, out = self.gw.json("POST", "/v1/query", {"model": TARGET, "prompt": 3})
        self.assertError(status, out, "invalid_field", 400, "prompt")

    # ---- embeddings ---------------------------------------------------------------------------

    def test_embeddings(self):
        status, _, out = self.gw.json("POST", "/v1/embeddings", {"model": TARGET, "input": ["hello", "world"]})
        self.assertEqual(status, 200, out)
        self.assertEqual(out["object"], "list")
        self.assertEqual([d["index"] for d in out["data"]], [0, 1])
        vec = out["data"][0]["embedding"]
        self.assertEqual(len(vec), 64)
        self.assertAlmostEqual(sum(v * v for v in vec), 1.0, places=3)
        self.assertGreater(out["usage"]["prompt_tokens"], 0)
        status, _, nat = self.gw.json("POST", "/v1/embed", {"model": TARGET, "input": "hello", "normalize": False})
        self.assertEqual(status, 200, nat)
        self.assertEqual(nat["n_embd"], 64)
        self.assertEqual(len(nat["embeddings"]), 1)
        status, _, bad = self.gw.json("POST", "/v1/embeddings", {"model": TARGET, "input": [1, 2]})
        self.assertError(status, bad, "invalid_field", 400, "input")

    # ---- concurrency and disconnects ----------------------------------------------------------

    def test_concurrent_streams(self):
        n = 4
        results = [None] * n

        def one(i):
            status, _, events = self.gw.sse("/v1/completions", {"model": TARGET, "prompt": f"Story {i}",
                                                               "max_tokens": 10, "ignore_eos": True, "stream": True})
            results[i] = (status, events)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(gw.HTTP_TIMEOUT_S)
        for status, events in results:
            self.assertEqual(status, 200)
            self.assertEqual(events[-1][1], "[DONE]")
            chunks = [json.loads(d) for _, d in events[:-1]]
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")

    def test_disconnect_mid_stream_frees_the_slot(self):
        sock = socket.create_connection((self.gw.host, self.gw.port), timeout=gw.HTTP_TIMEOUT_S)
        body = json.dumps({"model": TARGET, "prompt": "Go on forever", "max_tokens": LONG, "ignore_eos": True,
                           "stream": True})
        sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        got = b""
        while got.count(b"data:") < 3:
            chunk = sock.recv(4096)
            self.assertTrue(chunk, "the stream ended early")
            got += chunk
        m = self.gw.metrics()
        self.assertEqual(gw.metric(m, "sipp_active_requests", target=TARGET), 1)
        self.assertEqual(gw.metric(m, "sipp_engine_running_requests", target=TARGET), 1)
        sock.close()

        def freed():
            m = self.gw.metrics()
            return (gw.metric(m, "sipp_active_requests", target=TARGET) == 0 and
                    gw.metric(m, "sipp_engine_running_requests", target=TARGET) == 0)

        gw.wait_until(freed, DISCONNECT_TIMEOUT_S, "the slot of a disconnected stream being freed")
        gw.wait_until(lambda: "(client gone)" in self.gw.text(), DISCONNECT_TIMEOUT_S, "the log noting the disconnect")

    def test_disconnect_while_waiting_for_plain_answer(self):
        sock = socket.create_connection((self.gw.host, self.gw.port), timeout=gw.HTTP_TIMEOUT_S)
        body = json.dumps({"model": TARGET, "prompt": "Go on forever", "max_tokens": LONG, "ignore_eos": True})
        sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        gw.wait_until(lambda: gw.metric(self.gw.metrics(), "sipp_engine_running_requests", target=TARGET) == 1,
                      DISCONNECT_TIMEOUT_S, "the request reaching a slot")
        sock.close()
        gw.wait_until(lambda: gw.metric(self.gw.metrics(), "sipp_engine_running_requests", target=TARGET) == 0,
                      DISCONNECT_TIMEOUT_S, "the slot being freed")

    # ---- metrics ------------------------------------------------------------------------------

    def test_metrics(self):
        self.gw.json("POST", "/v1/chat/completions", gw.chat_body(TARGET, max_tokens=3))
        self.gw.json("POST", "/v1/chat/completions", gw.chat_body("unknown-x"))
        status, hdrs, raw = self.gw.request("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(hdrs["content-type"].startswith("text/plain"))
        m = gw.parse_metrics(raw.decode())
        self.assertGreaterEqual(gw.metric(m, "sipp_requests_total", target=TARGET, code="200"), 1)
        self.assertGreaterEqual(gw.metric(m, "sipp_requests_total", target="", code="404"), 1)
        self.assertGreaterEqual(gw.metric(m, "sipp_errors_total", code="model_not_found"), 1)
        self.assertGreater(gw.metric(m, "sipp_prompt_tokens_total", target=TARGET), 0)
        self.assertGreater(gw.metric(m, "sipp_generated_tokens_total", target=TARGET), 0)
        self.assertGreater(gw.metric(m, "sipp_ttft_seconds_count", target=TARGET), 0)
        self.assertGreater(gw.metric(m, "sipp_request_duration_seconds_bucket", target=TARGET, le="+Inf"), 0)
        self.assertEqual(gw.metric(m, "sipp_target_ready", target=TARGET), 1)
        self.assertEqual(gw.metric(m, "sipp_engine_slots", target=TARGET), 2)
        for name in ("sipp_active_requests", "sipp_queued_requests", "sipp_engine_queued_requests"):
            self.assertIsNotNone(gw.metric(m, name, target=TARGET), name)
        text = raw.decode()
        self.assertIn("# TYPE sipp_ttft_seconds histogram", text)


class GatewayStartupTest(unittest.TestCase):
    """/ready is 503 while a target loads; a bad model leaves /ready at 503 and its requests at 503."""

    def test_ready_503_for_a_failed_target(self):
        bad = gw.write("broken.gguf", "this is not a GGUF file")
        g = gw.serve_config(gw.local_target("good") + gw.local_target("broken", path=bad), wait_ready=False)
        try:
            status, _, body = g.json("GET", "/health")
            self.assertEqual(status, 200)

            def settled():
                s, _, b = g.json("GET", "/ready")
                states = {t["name"]: t["state"] for t in b["targets"]}
                return (s, b) if states.get("broken") == "failed" and states.get("good") == "ready" else None

            status, body = gw.wait_until(settled, gw.READY_TIMEOUT_S, "the targets settling")
            self.assertEqual(status, 503)
            broken = [t for t in body["targets"] if t["name"] == "broken"][0]
            self.assertIn("broken.gguf", broken["error"])
            status, _, out = g.json("POST", "/v1/chat/completions", gw.chat_body("broken"))
            self.assertEqual(status, 503)
            self.assertEqual(out["error"]["code"], "not_ready")
            status, _, out = g.json("POST", "/v1/chat/completions", gw.chat_body("good", max_tokens=2))
            self.assertEqual(status, 200, out)
        finally:
            self.assertEqual(g.stop(), 0)

    def test_ready_503_while_loading(self):
        g = gw.serve_model(gw.model(TARGET), wait_ready=False)
        try:
            # the first answer comes before or after the load; both must be consistent
            status, _, body = g.json("GET", "/ready")
            self.assertIn(status, (200, 503))
            if status == 503:
                self.assertEqual(body["targets"][0]["state"], "loading")
                s2, hdrs, out = g.json("POST", "/v1/chat/completions", gw.chat_body(TARGET))
                if s2 == 503:
                    self.assertIn("retry-after", hdrs)
            g.wait_ready()
        finally:
            self.assertEqual(g.stop(), 0)


if __name__ == "__main__":
    unittest.main()
