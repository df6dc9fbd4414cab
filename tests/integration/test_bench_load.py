"""bench/load.py, the benchmark's client, against a real `sipp serve` on loopback: it must count
every generated token of requests that run to their limit, and must count a stream that ends short
of max_tokens as a failed request rather than as tokens (a server that fails must not look fast).
"""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

LOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "load.py")
LOAD_TIMEOUT_S = 300


def load(server, *args):
    p = subprocess.run([sys.executable, LOAD, server.base, "tiny", *args], capture_output=True, text=True,
                       timeout=LOAD_TIMEOUT_S)
    if p.returncode != 0:
        raise AssertionError(f"load.py failed: {p.stderr}")
    return json.loads(p.stdout)


class BenchLoadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # 128 tokens of context shared by 2 slots: a request can never reach 1000 tokens.
        cls.gw = gw.serve_model(gw.model("tiny"), "--parallel", "2", "--ctx-size", "128")

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def test_counts_tokens_of_finished_requests(self):
        out = load(self.gw, "--clients", "2", "--requests", "2", "--max-tokens", "5", "--suffixes", "a,b,c,d,e")
        self.assertEqual((out["requests"], out["n_errors"], out["generated_tokens"]), (4, 0, 20), out)
        self.assertGreater(out["aggregate_tokens_per_s"], 0)
        self.assertGreater(out["ttft_ms_p50"], 0)

    def test_short_stream_is_a_failed_request(self):
        # The warm-up request would fail too, so it gets a limit it can reach; then the context ends
        # every counted request early, with finish_reason "length" and no error event.
        out = load(self.gw, "--clients", "1", "--requests", "2", "--max-tokens", "1000", "--warmup-tokens", "4")
        self.assertEqual((out["requests"], out["n_errors"], out["generated_tokens"]), (0, 2, 0), out)
        self.assertIn("short stream", out["errors"][0])


if __name__ == "__main__":
    unittest.main()
