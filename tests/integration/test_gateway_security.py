"""Integration tests of the gateway's guards: bearer tokens and per-token scopes (401, 404), CORS,
the per-client rate limit (429 + Retry-After), admission (max_concurrent_requests, max_queue: 429),
timeouts (504) and unreachable upstreams (502)."""

import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support.ports import closed_port  # noqa: E402

TOKENS = {"SIPP_GW_TEST_ALICE": "alice-secret-0123456789", "SIPP_GW_TEST_BOB": "bob-secret-0123456789"}
ORIGIN = "http://app.example"
LONG = 100000
WAIT_S = 15


def bearer(secret):
    return {"Authorization": f"Bearer {secret}"}


class AuthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cfg = (f'[server]\nallowed_origins = ["{ORIGIN}"]\n\n'
               '[[tokens]]\nenv = "SIPP_GW_TEST_ALICE"\ncaller = "alice"\ntargets = ["tiny"]\n\n'
               '[[tokens]]\nenv = "SIPP_GW_TEST_BOB"\ncaller = "bob"\n\n'
               + gw.local_target("tiny")
               + f'[[targets]]\nname = "far"\ntype = "openai_compatible"\nbase_url = "http://127.0.0.1:{closed_port()}/v1"\n')
        cls.gw = gw.serve_config(cfg, env=TOKENS)

    @classmethod
    def tearDownClass(cls):
        assert cls.gw.stop() == 0, cls.gw.text()

    def test_missing_and_invalid_token(self):
        status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body())
        self.assertEqual((status, body["error"]["code"]), (401, "missing_api_key"))
        self.assertEqual(body["error"]["type"], "authentication_error")
        status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body(), headers=bearer("wrong"))
        self.assertEqual((status, body["error"]["code"]), (401, "invalid_api_key"))
        status, _, body = self.gw.json("GET", "/v1/models", headers={"Authorization": "Basic abc"})
        self.assertEqual(status, 401)
        # operations routes stay open
        self.assertEqual(self.gw.request("GET", "/health")[0], 200)
        self.assertEqual(self.gw.request("GET", "/ready")[0], 200)
        self.assertEqual(self.gw.request("GET", "/metrics")[0], 200)

    def test_valid_token(self):
        status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body(max_tokens=2),
                                       headers=bearer(TOKENS["SIPP_GW_TEST_ALICE"]))
        self.assertEqual(status, 200, body)

    def test_scopes(self):
        alice, bob = bearer(TOKENS["SIPP_GW_TEST_ALICE"]), bearer(TOKENS["SIPP_GW_TEST_BOB"])
        # a target outside alice's scope is, to her, a target that does not exist: the same 404
        status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body("far"), headers=alice)
        self.assertEqual((status, body["error"]["code"]), (404, "model_not_found"))
        _, _, missing = self.gw.json("POST", "/v1/chat/completions", gw.chat_body("ghost"), headers=alice)
        self.assertEqual(body["error"]["message"].replace("far", "ghost"), missing["error"]["message"])
        # alice sees only her target; bob sees both
        _, _, models = self.gw.json("GET", "/v1/models", headers=alice)
        self.assertEqual([m["id"] for m in models["data"]], ["tiny"])
        _, _, models = self.gw.json("GET", "/v1/models", headers=bob)
        self.assertEqual(sorted(m["id"] for m in models["data"]), ["far", "tiny"])
        # bob may use "far", whose upstream is down: 502
        status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body("far"), headers=bob)
        self.assertEqual((status, body["error"]["code"]), (502, "upstream_error"))

    def test_cors(self):
        status, hdrs, _ = self.gw.request("OPTIONS", "/v1/chat/completions",
                                          headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
        self.assertEqual(status, 204)
        self.assertEqual(hdrs["access-control-allow-origin"], ORIGIN)
        self.assertIn("Authorization", hdrs["access-control-allow-headers"])
        status, _, body = self.gw.json("OPTIONS", "/v1/chat/completions", headers={"Origin": "http://evil.example"})
        self.assertEqual((status, body["error"]["code"]), (403, "origin_not_allowed"))
        _, hdrs, _ = self.gw.request("GET", "/health", headers={"Origin": ORIGIN})
        self.assertEqual(hdrs["access-control-allow-origin"], ORIGIN)
        _, hdrs, _ = self.gw.request("GET", "/health", headers={"Origin": "http://evil.example"})
        self.assertNotIn("access-control-allow-origin", hdrs)


class BlackHole:
    """A listener that accepts connections (the kernel's backlog does) and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def close(self):
        self.sock.close()


class RateLimitTest(unittest.TestCase):
    """No local model: a remote target that never answers, for the upstream timeout."""

    @classmethod
    def setUpClass(cls):
        cls.hole = BlackHole()
        cfg = ('[security.rate_limit]\nrequests_per_minute = 60\nburst = 4\n\n'
               f'[[targets]]\nname = "slow"\ntype = "openai_compatible"\nbase_url = "http://127.0.0.1:{cls.hole.port}/v1"\n'
               'timeout_seconds = 1\n')
        cls.gw = gw.serve_config(cfg)

    @classmethod
    def tearDownClass(cls):
        assert cls.gw.stop() == 0, cls.gw.text()
        cls.hole.close()

    def test_rate_limit(self):
        statuses = []
        for _ in range(10):
            status, hdrs, body = self.gw.json("GET", "/v1/models")
            statuses.append(status)
            if status == 429:
                break
        self.assertEqual(statuses[-1], 429, statuses)
        self.assertEqual(body["error"]["code"], "rate_limit_exceeded")
        self.assertEqual(body["error"]["type"], "rate_limit_error")
        retry = int(hdrs["retry-after"])
        self.assertGreaterEqual(retry, 1)
        time.sleep(retry + 0.2)
        self.assertEqual(self.gw.request("GET", "/v1/models")[0], 200)
        # /health is never limited
        for _ in range(10):
            self.assertEqual(self.gw.request("GET", "/health")[0], 200)

    def test_upstream_timeout(self):
        t0 = time.monotonic()
        status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body("slow"))
        if status == 429:  # the other test drained the bucket: wait for a token
            time.sleep(2)
            status, _, body = self.gw.json("POST", "/v1/chat/completions", gw.chat_body("slow"))
        self.assertEqual((status, body["error"]["code"]), (504, "timeout"), body)
        self.assertLess(time.monotonic() - t0, WAIT_S)


class AdmissionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cfg = ('[server]\nmax_concurrent_requests = 1\nmax_queue = 1\nrequest_timeout_seconds = 3\n\n'
               + gw.local_target("tiny", parallel=1, ctx=8192))
        cls.gw = gw.serve_config(cfg)

    @classmethod
    def tearDownClass(cls):
        assert cls.gw.stop() == 0, cls.gw.text()

    def start_long_stream(self):
        conn, resp = self.gw.stream("/v1/completions", {"model": "tiny", "prompt": "Forever", "max_tokens": LONG,
                                                        "ignore_eos": True, "stream": True})
        self.assertEqual(resp.status, 200)
        resp.readline()
        return conn

    def test_queue_full_then_queued_request_runs(self):
        holder = self.start_long_stream()
        result = {}

        def queued():
            result["r"] = self.gw.json("POST", "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2})

        t = threading.Thread(target=queued)
        t.start()
        try:
            gw.wait_until(lambda: gw.metric(self.gw.metrics(), "sipp_queued_requests", target="tiny") == 1, WAIT_S,
                          "a request waiting in the queue")
            status, hdrs, body = self.gw.json("POST", "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2})
            self.assertEqual((status, body["error"]["code"]), (429, "queue_full"))
            self.assertGreaterEqual(int(hdrs["retry-after"]), 1)
        finally:
            holder.close()
        t.join(WAIT_S)
        status, _, body = result["r"]
        self.assertEqual(status, 200, body)

    def test_request_timeout(self):
        t0 = time.monotonic()
        status, _, body = self.gw.json("POST", "/v1/completions",
                                       {"model": "tiny", "prompt": "Forever", "max_tokens": LONG, "ignore_eos": True})
        self.assertEqual((status, body["error"]["code"]), (504, "timeout"), body)
        self.assertLess(time.monotonic() - t0, WAIT_S)
        # streamed: the error arrives as an event after the stream began
        _, _, events = self.gw.sse("/v1/completions", {"model": "tiny", "prompt": "Forever", "max_tokens": LONG,
                                                       "ignore_eos": True, "stream": True})
        last = json.loads(events[-1][1])
        self.assertEqual(last["error"]["code"], "timeout")


if __name__ == "__main__":
    unittest.main()
