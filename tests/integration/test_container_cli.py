"""What a container needs from the sipp command itself (issue 48), on tiny synthetic models.

- `sipp serve --no-auth`: an operator's explicit choice to serve a non-loopback address without
  tokens (a pod behind a network policy), said with a warning; without it such an address is still
  refused, and with [[tokens]] the flag is a contradiction and refused.
- `sipp health`: the image's HEALTHCHECK, which needs no curl: 0 when /ready answers 200, 1 with the
  reason otherwise (nothing listening, a target that failed).
- `sipp models info --json` carries sipp's memory estimate, the figure the Kubernetes manifests size
  their memory requests from: the gateway's own estimate for the same backend, context and slots.

The servers here listen on 127.0.0.1; the non-loopback cases use `--check`, which validates without
listening.
"""

import json
import subprocess
import unittest

from tests.integration import test_gateway_support as gw

RUN_TIMEOUT_S = 60


def sipp(*args):
    return subprocess.run([gw.SIPP, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


class NoAuthTest(unittest.TestCase):
    def config(self, extra=""):
        return gw.write("noauth.toml", extra + gw.local_target("tiny"))

    def test_non_loopback_without_tokens_is_still_refused(self):
        r = sipp("serve", "--config", self.config(), "--host", "0.0.0.0", "--check")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("refusing to listen on 0.0.0.0 without authentication", r.stderr)

    def test_no_auth_allows_it_with_a_warning(self):
        r = sipp("serve", "--config", self.config(), "--host", "0.0.0.0", "--check", "--no-auth")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("warning: --no-auth: 0.0.0.0:8080 checks no token", r.stderr)
        self.assertIn("valid: 1 target", r.stdout)

    def test_no_auth_with_tokens_is_a_contradiction(self):
        cfg = self.config('[[tokens]]\nenv = "SIPP_TEST_NOAUTH_TOKEN"\ncaller = "ci"\n\n')
        env = dict(gw.os.environ, SIPP_TEST_NOAUTH_TOKEN="0123456789abcdef0123456789abcdef")
        r = subprocess.run([gw.SIPP, "serve", "--config", cfg, "--check", "--no-auth"], capture_output=True,
                           text=True, timeout=RUN_TIMEOUT_S, env=env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--no-auth contradicts the 1 [[tokens]]", r.stderr)


class HealthTest(unittest.TestCase):
    def test_ready_gateway_is_healthy(self):
        g = gw.serve_model(gw.model())
        try:
            r = sipp("health", "--url", g.base)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("/ready answered 200", r.stdout)
            r = sipp("health", "--url", g.base + "/", "--path", "health")
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            g.stop()

    def test_a_failed_target_is_unhealthy(self):
        bad = gw.write("not-a-model.gguf", "this is not a GGUF file")
        g = gw.serve_config(gw.local_target("good") + gw.local_target("broken", path=bad), wait_ready=False)
        try:
            gw.wait_until(lambda: "broken" in g.text() and "failed" in g.text().lower(), 60, "the bad target failing")
            r = sipp("health", "--url", g.base)
            self.assertEqual(r.returncode, 1)
            self.assertIn("answered 503", r.stderr)
            self.assertEqual(sipp("health", "--url", g.base, "--path", "/health").returncode, 0)
        finally:
            g.stop()

    def test_nothing_listening_is_unhealthy_and_says_so(self):
        r = sipp("health", "--url", f"http://127.0.0.1:{gw.closed_port()}", "--timeout", "2")
        self.assertEqual(r.returncode, 1)
        self.assertIn("is `sipp serve` running there?", r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)

    def test_bad_usage(self):
        r = sipp("health", "extra")
        self.assertEqual(r.returncode, 2, r.stderr)


class MemoryEstimateTest(unittest.TestCase):
    def estimate(self, *flags):
        r = sipp("models", "info", gw.model(), "--json", "--no-hash", "--backend", "cpu", *flags)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["memory_estimate"]

    def test_estimate_follows_the_context_and_adds_up(self):
        small, large = self.estimate("--ctx-size", "1024"), self.estimate("--ctx-size", "2048")
        self.assertEqual(large["kv_bytes"], 2 * small["kv_bytes"])
        self.assertEqual((small["backend"], small["ctx_size"], small["parallel"]), ("cpu", 1024, 4))
        for e in (small, large):
            self.assertEqual(e["total_bytes"], e["host_bytes"] + sum(e["device_bytes"].values()))
            self.assertLessEqual(e["weights_bytes"] + e["kv_bytes"] + e["compute_bytes"], e["total_bytes"] * 2)

    def test_estimate_is_the_gateways(self):
        e = self.estimate("--ctx-size", "1024", "--parallel", "2")
        g = gw.serve_config(gw.local_target("tiny", parallel=2, ctx=1024, extra='backend = "cpu"'), wait_ready=False)
        try:
            status, _, body = g.json("GET", "/v1/models")
            self.assertEqual(status, 200, body)
            served = {m["id"]: m for m in body["data"]}["tiny"]["sipp"]["memory_estimate"]
            self.assertEqual(served["host_bytes"], e["host_bytes"])
            self.assertEqual(served["kv_bytes"], e["kv_bytes"])
        finally:
            g.stop()


if __name__ == "__main__":
    unittest.main()
