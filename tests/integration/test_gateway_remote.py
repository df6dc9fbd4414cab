"""Integration tests of remote targets (type = "openai_compatible") and of graceful shutdown.

Two upstream `sipp serve` processes run the tiny model; a gateway in front of them has one remote
target with both as replicas. Requests pass through (plain and streamed); when one upstream is
killed, its replica is ejected and requests keep succeeding on the other; when it comes back on the
same port, the health probe puts it back in rotation.
"""

import json
import os
import signal
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

UPSTREAM_KEY = "upstream-secret-0123456789"
PROBE_WAIT_S = 20
SHUTDOWN_WAIT_S = 30


def replicas(g):
    status, _, body = g.json("GET", "/v1/backends")
    assert status == 200, body
    return {r["url"]: r["healthy"] for t in body["targets"] if t["name"] == "pool" for r in t["replicas"]}


class RemoteTargetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tok = '[[tokens]]\nenv = "SIPP_GW_UPSTREAM_KEY"\ncaller = "gateway"\n\n'
        cls.up_cfg = tok + gw.local_target("tiny")
        env = {"SIPP_GW_UPSTREAM_KEY": UPSTREAM_KEY}
        cls.env = env
        cls.up = [gw.serve_config(cls.up_cfg, env=env), gw.serve_config(cls.up_cfg, env=env)]
        urls = ", ".join(f'"{u.base}/v1"' for u in cls.up)
        cfg = (f'[[targets]]\nname = "pool"\ntype = "openai_compatible"\nbase_urls = [{urls}]\nmodel = "tiny"\n'
               'api_key_env = "SIPP_GW_UPSTREAM_KEY"\ntimeout_seconds = 60\n')
        cls.gw = gw.serve_config(cfg, env=env)

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        for u in cls.up:
            u.stop()
        assert rc == 0, cls.gw.text()

    def test_chat_passthrough(self):
        status, hdrs, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body("pool", max_tokens=4),
                                          headers={"x-request-id": "remote-1"})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(hdrs["x-request-id"], "remote-1")
        self.assertEqual(body["id"], "chatcmpl-remote-1")  # the request id reached the upstream
        self.assertLessEqual(body["usage"]["completion_tokens"], 4)

    def test_tools_and_schemas_pass_through(self):
        # the upstream (another sipp) decides: its model's ChatML template has no tool-call syntax,
        # so it refuses the tools by name, and that answer comes back as it is
        tools = [{"type": "function", "function": {"name": "pick", "parameters": {"type": "object"}}}]
        status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body(
            "pool", max_tokens=30, tools=tools, tool_choice="required"))
        self.assertEqual(status, 400, body)
        self.assertIn("'tools'", body["error"]["message"])
        status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body(
            "pool", max_tokens=12, logprobs=True, top_logprobs=2, response_format={"type": "json_object"}))
        self.assertEqual(status, 200, body)
        self.assertEqual(len(body["choices"][0]["logprobs"]["content"]), body["usage"]["completion_tokens"])

    def test_stream_passthrough(self):
        status, ctype, events = self.gw.sse("/v1/chat/completions",
                                            gw.chat_body("pool", max_tokens=5, ignore_eos=True, stream=True,
                                                         stream_options={"include_usage": True}))
        self.assertEqual(status, 200)
        self.assertTrue(ctype.startswith("text/event-stream"))
        self.assertEqual(events[-1][1], "[DONE]")
        chunks = [json.loads(d) for _, d in events[:-1]]
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 5)
        m = self.gw.metrics()
        self.assertGreaterEqual(gw.metric(m, "sipp_generated_tokens_total", target="pool"), 5)
        self.assertGreater(gw.metric(m, "sipp_ttft_seconds_count", target="pool"), 0)

    def test_completions_native_and_embeddings(self):
        status, _, body = self.gw.json("POST", "/v1/completions", {"model": "pool", "prompt": "Hi", "max_tokens": 3})
        self.assertEqual((status, body["object"]), (200, "text_completion"))
        conn, resp = self.gw.stream("/v1/query", {"model": "pool", "prompt": "Hi", "max_tokens": 3})
        try:
            names = [e for e, _ in gw.read_sse(resp)]
        finally:
            conn.close()
        self.assertEqual(names[-2:], ["usage", "done"])
        status, _, body = self.gw.json("POST", "/v1/embeddings", {"model": "pool", "input": "hello"})
        self.assertEqual(status, 200, body)
        self.assertEqual(len(body["data"][0]["embedding"]), 64)

    def test_upstream_errors_pass_through(self):
        # sipp itself would refuse logit_bias for a local target; for a remote one the upstream decides
        status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body("pool", logit_bias={"1": 5}))
        self.assertEqual(status, 400, body)
        self.assertIn("'logit_bias'", body["error"]["message"])

    def test_zz_replica_ejection_and_return(self):
        # runs last in this class (alphabetical order): it kills and restarts an upstream
        victim = self.up[1]
        victim_url = f"{victim.base}/v1"
        port = victim.port
        victim.kill()
        for i in range(6):
            status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body("pool", max_tokens=2))
            self.assertEqual(status, 200, f"request {i}: {body}")
        self.assertFalse(replicas(self.gw)[victim_url])
        m = self.gw.metrics()
        self.assertEqual(gw.metric(m, "sipp_upstream_healthy", target="pool", url=victim_url), 0)
        self.assertIn("ejected", self.gw.text())
        # back on the same port: the probe returns it to rotation
        self.up[1] = gw.Gateway(["--config", gw.write("upstream-again.toml", self.up_cfg), "--port", str(port)],
                                env=self.env)
        gw.wait_until(lambda: replicas(self.gw)[victim_url], PROBE_WAIT_S, "the replica returning to rotation")
        for _ in range(4):
            self.assertEqual(self.gw.json("POST", "/v1/chat/completions", gw.chat_body("pool", max_tokens=2))[0], 200)


class DeadUpstreamTest(unittest.TestCase):
    def test_all_replicas_down_is_502(self):
        ports = [gw.closed_port() for _ in range(2)]
        urls = ", ".join(f'"http://127.0.0.1:{p}/v1"' for p in ports)
        g = gw.serve_config(f'[[targets]]\nname = "dead"\ntype = "openai_compatible"\nbase_urls = [{urls}]\n')
        try:
            status, _, body = g.json("POST", "/v1/chat/completions", gw.chat_body("dead"))
            self.assertEqual((status, body["error"]["code"]), (502, "upstream_error"))
            self.assertIn("no upstream replica answered", body["error"]["message"])
            conn, resp = g.stream("/v1/chat/completions", gw.chat_body("dead", stream=True))
            try:
                self.assertEqual(resp.status, 502)
            finally:
                conn.close()
        finally:
            self.assertEqual(g.stop(), 0)


class ShutdownTest(unittest.TestCase):
    def test_sigterm_lets_in_flight_finish(self):
        g = gw.serve_model()
        conn, resp = g.stream("/v1/completions", {"model": "tiny", "prompt": "Go", "max_tokens": 300,
                                                  "ignore_eos": True, "stream": True})
        try:
            self.assertEqual(resp.status, 200)
            resp.readline()
            g.signal(signal.SIGTERM)
            gw.wait_until(lambda: "shutting down" in g.text(), SHUTDOWN_WAIT_S, "the shutdown starting")
            # no new connections once draining
            with self.assertRaises(OSError):
                socket.create_connection((g.host, g.port), timeout=2).close()
            events = list(gw.read_sse(resp))
        finally:
            conn.close()
        self.assertEqual(events[-1][1], "[DONE]")
        finals = [json.loads(d) for _, d in events[:-1]]
        self.assertEqual(finals[-1]["choices"][0]["finish_reason"], "length")
        # the one SIGTERM ends the drain by itself: a second (g.stop's) would exit at once, unsaid
        g.proc.wait(SHUTDOWN_WAIT_S)
        self.assertEqual(g.stop(), 0, g.text())
        self.assertIn("sipp: stopped", g.text())

    def test_deadline_cancels_the_rest(self):
        cfg = '[server]\nshutdown_timeout_seconds = 1\n\n' + gw.local_target("tiny", parallel=1, ctx=8192)
        g = gw.serve_config(cfg)
        conn, resp = g.stream("/v1/completions", {"model": "tiny", "prompt": "Forever", "max_tokens": 100000,
                                                  "ignore_eos": True, "stream": True})
        try:
            resp.readline()
            t0 = time.monotonic()
            g.signal(signal.SIGINT)
            g.proc.wait(SHUTDOWN_WAIT_S)
            self.assertEqual(g.proc.returncode, 0, g.text())
            self.assertLess(time.monotonic() - t0, SHUTDOWN_WAIT_S)
            self.assertIn("cancelling 1 request", g.text())
        finally:
            conn.close()
            g.stop()


if __name__ == "__main__":
    unittest.main()
