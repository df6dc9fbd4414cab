"""The gateway with a target split across rpc servers (backend = "rpc"): config keys, a target that
waits (not ready, requests refused with the reason) until its server is up and then loads by itself,
its placement in /v1/backends, and a server lost mid-generation ending the process with a line naming
it (exit 75), which is what a load balancer in front routes around (docs/scale-out.md).

Servers run on loopback addresses (127.0.0.4, 127.0.0.5) on ports the kernel just gave out."""

import json
import os
import socket
import subprocess
import time
import unittest

from tests.integration import test_gateway_support as gw

LOST_EXIT = 75
WAIT_S = 60
RETRY_WINDOW_S = 4  # the keeper retries a waiting rpc target at 0.5, 1, 2 s, ...


def free_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, host):
        self.host, self.port = host, free_port(host)
        self.endpoint = f"{host}:{self.port}"
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([gw.SIPP, "rpc-server", "--host", self.host, "--port", str(self.port),
                                      "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"rpc-server {self.endpoint} did not listen")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def six_layers():
    """A tiny model with enough layers for three hosts to hold some each."""
    path = os.path.join(gw.tmpdir(), "six.gguf")
    if not os.path.exists(path):
        shape = ["--n-embd", "64", "--n-layer", "6", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128", "--type", "q8_0"]
        subprocess.run([gw.SYNTH, "--out", path, "--vocab", gw.VOCAB, "--seed", "1", *shape], check=True,
                       capture_output=True, timeout=120)
    return path


def check(text):
    path = gw.write(f"check-{time.monotonic_ns()}.toml", text)
    r = subprocess.run([gw.SIPP, "serve", "--check", "--config", path], capture_output=True, text=True, timeout=60)
    return r, path


class GatewayRpcConfigTest(unittest.TestCase):
    def test_keys_are_checked_with_their_line(self):
        cases = [
            ('backend = "rpc"\nrpc = ["10.0.0.2"]', "is not HOST:PORT"),
            ('backend = "rpc"\nrpc = []', "give at least one"),
            ('backend = "cpu"\nrpc = ["10.0.0.2:50052"]', "only used with backend = \"rpc\""),
            ('backend = "rpc"\nrpc = ["10.0.0.2:50052"]\ntensor_split = [1, "x"]', "must be a non-negative number"),
            ('backend = "rpc"\nrpc = ["10.0.0.2:50052"]\ntensor_split = "1,1"', "tensor_split"),
            ('backend = "rpc"', "needs its servers"),
        ]
        for extra, want in cases:
            with self.subTest(extra=extra):
                r, path = check(gw.local_target(extra=extra))
                self.assertNotEqual(r.returncode, 0, r.stderr)
                self.assertIn(want, r.stderr)
                self.assertIn(os.path.basename(path) + ":", r.stderr)

    def test_good_keys_pass(self):
        r, _ = check(gw.local_target(extra='backend = "rpc"\nrpc = ["10.0.0.2:50052", "host-b:50053"]\n'
                                           'tensor_split = [1, 2.5, 0]'))
        self.assertEqual(r.returncode, 0, r.stderr)


class GatewayRpcTargetTest(unittest.TestCase):
    def setUp(self):
        self.a = Server("127.0.0.4")
        self.b = Server("127.0.0.5")
        self.servers = []

    def tearDown(self):
        for s in (self.a, self.b):
            s.stop()

    def config(self):
        return gw.local_target(path=six_layers(), parallel=1, extra=f'backend = "rpc"\nrpc = ["{self.a.endpoint}", "{self.b.endpoint}"]')

    def test_requests_to_a_waiting_target_get_503_and_shutdown_fails_it(self):
        """Requests that arrive while the keeper retries the target (LOADING for a moment, then WAITING
        again) get the same 503 at once, never a wait to request_timeout_seconds (a 504); SIGTERM turns
        the waiting target FAILED and the server exits cleanly."""
        g = gw.serve_config("[server]\nrequest_timeout_seconds = 2\n" + self.config(), wait_ready=False)
        try:
            gw.wait_until(lambda: g.json("GET", "/ready")[2]["targets"][0]["state"] == "waiting", WAIT_S,
                          "the target waiting for its servers")
            statuses = {}
            end = time.monotonic() + RETRY_WINDOW_S  # across several of the keeper's retries
            while time.monotonic() < end:
                status, _, body = g.json("POST", "/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 2})
                statuses[status] = statuses.get(status, 0) + 1
                self.assertIn("waiting for its rpc servers", body["error"]["message"], body)
            self.assertEqual(set(statuses), {503}, statuses)
            self.assertEqual(g.stop(), 0, g.text()[-2000:])
            self.assertIn("target 'tiny' failed: the server stopped while it waited for its rpc servers", g.text())
        finally:
            g.kill()

    def test_waits_for_its_servers_then_serves_then_dies_naming_the_lost_one(self):
        g = gw.serve_config(self.config(), wait_ready=False)
        try:
            # Not ready, and says why: the server is not there yet.
            deadline = time.monotonic() + WAIT_S
            state = None
            while time.monotonic() < deadline:
                status, _, body = g.json("GET", "/ready")
                state = body["targets"][0]
                if state["state"] == "waiting":
                    break
                time.sleep(0.05)
            self.assertEqual(status, 503)
            self.assertEqual(state["state"], "waiting", state)
            self.assertIn(self.a.endpoint, state["error"])
            status, hdrs, body = g.json("POST", "/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 2})
            self.assertEqual(status, 503, body)
            self.assertIn("waiting for its rpc servers", body["error"]["message"])
            self.assertIn(self.a.endpoint, body["error"]["message"])
            self.assertIn("retry-after", hdrs)

            # The servers come up: the target loads by itself.
            self.a.start()
            self.b.start()
            g.wait_ready(WAIT_S)
            status, _, body = g.json("POST", "/v1/completions",
                                     {"model": "tiny", "prompt": "hi", "max_tokens": 4, "temperature": 0})
            self.assertEqual(status, 200, body)
            status, _, body = g.json("GET", "/v1/backends")
            target = body["targets"][0]
            self.assertEqual(target["backend"], "rpc")
            hosts = {p["host"] for p in target["placement"]}
            self.assertIn(self.a.endpoint, hosts)
            self.assertIn(self.b.endpoint, hosts)

            # A server lost mid-generation: the process ends with one line naming it.
            conn, resp = g.stream("/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 100000,
                                                      "stream": True, "temperature": 0, "ignore_eos": True})
            self.assertEqual(resp.status, 200)
            resp.readline()
            self.b.stop()
            g.proc.wait(timeout=WAIT_S)
            conn.close()
            self.assertEqual(g.proc.returncode, LOST_EXIT, g.text())
            self.assertIn(f"rpc server {self.b.endpoint} went away", g.text())
        finally:
            g.kill()


class GatewayTwoTargetsOneServerTest(unittest.TestCase):
    def test_two_targets_share_one_server(self):
        # An rpc-server serves one client at a time; the second target must reuse this process's
        # connection rather than wait for the server to be free.
        a = Server("127.0.0.6")
        a.start()
        try:
            extra = f'backend = "rpc"\nrpc = ["{a.endpoint}"]'
            config = (gw.local_target(name="one", path=six_layers(), parallel=1, extra=extra) +
                      gw.local_target(name="two", path=six_layers(), parallel=1, extra=extra))
            g = gw.serve_config(config, wait_ready=False)
            try:
                g.wait_ready(WAIT_S)
                for name in ("one", "two"):
                    status, _, body = g.json("POST", "/v1/completions",
                                             {"model": name, "prompt": "hi", "max_tokens": 4, "temperature": 0})
                    self.assertEqual(status, 200, body)
            finally:
                g.stop()
        finally:
            a.stop()


if __name__ == "__main__":
    unittest.main()
