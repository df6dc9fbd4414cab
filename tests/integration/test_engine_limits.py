"""The engine's limits as the gateway meets them (issue 21, items 2, 3, 7 and 11).

- Finished requests leave their KV in idle slots; a later request needing most of the context must
  not fail because of them (item 2), and a request without max_tokens runs until the context is
  full and ends with finish_reason "length", streamed to [DONE] (item 3).
- An embeddings request stops between inputs when its client disconnects or its request times out,
  and gives back its admission permit (item 7).
- A model whose embeddings are not finite answers an error naming the cause, not 200 with [] (item 11).
"""

import concurrent.futures
import json
import math
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf_corrupt  # noqa: E402
import test_gateway_support as gw  # noqa: E402

CTX = 256
# Enough embedding work to outlast the request timeout many times over on any machine this runs on:
# the most inputs a request may carry, each a long sentence.
EMBED_INPUTS = 2048
EMBED_TEXT = "the quick brown fox jumps over the lazy dog and keeps on running far away " * 6
EMBED_TIMEOUT_S = 2
DISCONNECT_AFTER_S = 1.0


def embed_body(model):
    return {"model": model, "input": [EMBED_TEXT] * EMBED_INPUTS}


class ContextLimitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.g = gw.serve_config(gw.local_target("tiny", parallel=4, ctx=CTX))

    @classmethod
    def tearDownClass(cls):
        cls.g.stop()

    def fill_idle_slots(self):
        """Three concurrent requests (so they take three slots) that finish and leave ~70 cells each
        in idle slots."""
        def one(i):
            return self.g.json("POST", "/v1/completions",
                               {"model": "tiny", "prompt": f"warm up number {i}", "max_tokens": 64,
                                "ignore_eos": True, "temperature": 0})

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            for status, _, out in pool.map(one, range(3)):
                self.assertEqual(status, 200, out)

    def test_idle_kv_does_not_fail_a_live_request(self):
        self.fill_idle_slots()
        status, _, out = self.g.json("POST", "/v1/completions",
                                     {"model": "tiny", "prompt": "hi", "max_tokens": CTX * 3 // 4, "ignore_eos": True})
        self.assertEqual(status, 200, out)
        self.assertEqual(out["choices"][0]["finish_reason"], "length")
        self.assertEqual(out["usage"]["completion_tokens"], CTX * 3 // 4)

    def test_no_max_tokens_runs_until_the_context_is_full(self):
        self.fill_idle_slots()
        status, _, out = self.g.json("POST", "/v1/completions", {"model": "tiny", "prompt": "hi", "ignore_eos": True})
        self.assertEqual(status, 200, out)
        self.assertEqual(out["choices"][0]["finish_reason"], "length")
        used = out["usage"]["prompt_tokens"] + out["usage"]["completion_tokens"]
        self.assertGreaterEqual(used, CTX - 2, out["usage"])
        self.assertLessEqual(used, CTX, out["usage"])

    def test_no_max_tokens_stream_ends_with_done(self):
        self.fill_idle_slots()
        conn, resp = self.g.stream("/v1/completions",
                                   {"model": "tiny", "prompt": "hi", "ignore_eos": True, "stream": True})
        try:
            self.assertEqual(resp.status, 200)
            events = list(gw.read_sse(resp))
        finally:
            conn.close()
        datas = [d for _, d in events]
        self.assertEqual(datas[-1], "[DONE]", datas[-3:])
        chunks = [json.loads(d) for d in datas[:-1]]
        self.assertFalse([c for c in chunks if "error" in c], "an error event in the stream")
        reasons = [c["choices"][0].get("finish_reason") for c in chunks if c.get("choices")]
        self.assertEqual([r for r in reasons if r], ["length"])


class EmbeddingCancelTest(unittest.TestCase):
    def test_embedding_stops_at_the_request_timeout(self):
        g = gw.serve_config(f"[server]\nrequest_timeout_seconds = {EMBED_TIMEOUT_S}\n\n" + gw.local_target("tiny"))
        try:
            t0 = time.monotonic()
            status, _, out = g.json("POST", "/v1/embeddings", embed_body("tiny"))
            self.assertEqual(status, 504, str(out)[:300])
            self.assertIn("timed out", out["error"]["message"])
            self.assertLess(time.monotonic() - t0, gw.HTTP_TIMEOUT_S)
            status, _, out = g.json("POST", "/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 2})
            self.assertEqual(status, 200, out)
        finally:
            self.assertEqual(g.stop(), 0)

    def test_disconnect_cancels_and_frees_the_admission_permit(self):
        # One permit; the request timeout is far shorter than the whole embedding would run, so a
        # completion after the disconnect gets 200 only if the embedding stopped and let go.
        config = ("[server]\nmax_concurrent_requests = 1\nrequest_timeout_seconds = 20\n\n"
                  + gw.local_target("tiny"))
        g = gw.serve_config(config)
        try:
            body = json.dumps(embed_body("tiny")).encode()
            sock = socket.create_connection((g.host, g.port), timeout=gw.HTTP_TIMEOUT_S)
            sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            time.sleep(DISCONNECT_AFTER_S)
            sock.close()
            status, _, out = g.json("POST", "/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 2})
            self.assertEqual(status, 200, out)
        finally:
            self.assertEqual(g.stop(), 0)


class NonFiniteEmbeddingTest(unittest.TestCase):
    def test_nan_embeddings_are_an_error_naming_the_cause(self):
        with open(gw.model(), "rb") as f:
            data = f.read()
        path = os.path.join(gw.tmpdir(), "nan-norm.gguf")
        with open(path, "wb") as f:
            f.write(gguf_corrupt.with_tensor_filled(data, "output_norm.weight", math.nan))
        g = gw.serve_config(gw.local_target("nan", path=path))
        try:
            for route, body in (("/v1/embeddings", {"model": "nan", "input": ["hello", "world"]}),
                                ("/v1/embed", {"model": "nan", "input": ["hello"]})):
                with self.subTest(route=route):
                    status, _, out = g.json("POST", route, body)
                    self.assertNotEqual(status, 200, out)
                    self.assertIn("not finite", out["error"]["message"])
                    self.assertIn("input 0", out["error"]["message"])
        finally:
            self.assertEqual(g.stop(), 0)


if __name__ == "__main__":
    unittest.main()
