"""The gateway with a target split across rpc servers (backend = "rpc"): config keys, a target that
waits (not ready, requests refused with the reason) until its server is up and then loads by itself,
its placement in /v1/backends, and a server lost mid-generation: the target is served by a child
process the gateway supervises, which ends with a line naming the server (exit 75) while the gateway
and its other targets carry on, and which is started again when the server is back.

Servers run on loopback addresses (127.0.0.4, 127.0.0.5) on ports the kernel just gave out, and, for
the supervised target's test, in a network namespace joined to the gateway's by a veth pair (on
loopback when namespaces cannot be made, or with SIPP_TEST_RPC_LOOPBACK=1)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import unittest

from tests.integration import test_gateway_support as gw
from tests.support.ports import free_port

LOST_EXIT = 75
WAIT_S = 60
SUPERVISED_PORT = 50052
RETRY_WINDOW_S = 4  # the keeper retries a waiting rpc target at 0.5, 1, 2 s, ...


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


class Host:
    """Where one rpc-server runs: a network namespace joined to this one by a veth pair (a second
    host, as far as the gateway can tell), or a loopback address when namespaces cannot be made (not
    root, no iproute2) or SIPP_TEST_RPC_LOOPBACK=1 asks for that variant. The namespace's name and
    subnet carry this process's pid; it is always deleted."""

    def __init__(self, loopback_addr):
        pid = os.getpid()
        self.ns = f"sippgw{pid % 100000}"
        self.veth = f"sg{pid % 100000}"
        net = 1 + pid % 250
        self.here, self.addr = f"10.81.{net}.1", f"10.81.{net}.2"  # 10.77, 10.79: test_rpc, bench
        self.namespace = (os.environ.get("SIPP_TEST_RPC_LOOPBACK") != "1" and os.geteuid() == 0 and
                          shutil.which("ip") is not None and self._create())
        if not self.namespace:
            self.addr = loopback_addr
            print(f"test_gateway_rpc: no network namespace; the rpc-server runs on loopback ({loopback_addr})")

    @staticmethod
    def _ip(*args):
        return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30).returncode == 0

    def _create(self):
        steps = [("netns", "add", self.ns),
                 ("link", "add", self.veth + "a", "type", "veth", "peer", "name", self.veth + "b"),
                 ("link", "set", self.veth + "b", "netns", self.ns),
                 ("addr", "add", self.here + "/24", "dev", self.veth + "a"),
                 ("-n", self.ns, "addr", "add", self.addr + "/24", "dev", self.veth + "b"),
                 ("link", "set", self.veth + "a", "up"),
                 ("-n", self.ns, "link", "set", self.veth + "b", "up"),
                 ("-n", self.ns, "link", "set", "lo", "up")]
        for step in steps:
            if not self._ip(*step):
                self.delete()
                return False
        return True

    def prefix(self):
        return ["ip", "netns", "exec", self.ns] if self.namespace else []

    def delete(self):
        self._ip("link", "delete", self.veth + "a")  # and its peer with it
        self._ip("netns", "delete", self.ns)


class HostedServer(Server):
    """An rpc-server on a Host; the port is fixed inside a namespace (nothing else is there)."""

    def __init__(self, host):
        self.where = host
        self.host = host.addr
        self.port = SUPERVISED_PORT if host.namespace else free_port(host.addr)
        self.endpoint = f"{self.host}:{self.port}"
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([*self.where.prefix(), gw.SIPP, "rpc-server", "--host", self.host, "--port",
                                      str(self.port), "--threads", "1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:  # the listening socket, seen from the gateway's side
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"rpc-server {self.endpoint} did not listen")


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
        """Requests that arrive while the supervisor waits for the target's servers get a 503 naming the
        target and the server at once, never a wait to request_timeout_seconds (a 504); SIGTERM ends the
        waiting target's supervisor and the server exits cleanly."""
        g = gw.serve_config("[server]\nrequest_timeout_seconds = 2\n" + self.config(), wait_ready=False)
        try:
            gw.wait_until(lambda: g.json("GET", "/ready")[2]["targets"][0]["state"] == "waiting", WAIT_S,
                          "the target waiting for its servers")
            statuses = {}
            end = time.monotonic() + RETRY_WINDOW_S  # across several of the keeper's retries
            while time.monotonic() < end:
                status, _, body = g.json("POST", "/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 2})
                statuses[status] = statuses.get(status, 0) + 1
                self.assertIn("model 'tiny' is not ready", body["error"]["message"], body)
                self.assertIn(self.a.endpoint, body["error"]["message"], body)
            self.assertEqual(set(statuses), {503}, statuses)
            self.assertEqual(g.stop(), 0, g.text()[-2000:])
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
            self.assertIn("model 'tiny' is not ready", body["error"]["message"])
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

            # A server lost mid-generation: the target's process ends with one line naming it, and
            # the gateway carries on (GatewayRpcSupervisedTest checks the rest).
            conn, resp = g.stream("/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 100000,
                                                      "stream": True, "temperature": 0, "ignore_eos": True})
            self.assertEqual(resp.status, 200)
            resp.readline()
            self.b.stop()
            events = list(gw.read_sse(resp))
            conn.close()
            errors = [d for _, d in events if d.startswith('{"error"')]
            self.assertEqual(len(errors), 1, events[-3:])
            self.assertIn(f"rpc server {self.b.endpoint} went away", errors[0])
            self.assertIsNone(g.proc.poll(), g.text())
            # The stream's error can reach the client before the gateway has reaped the process.
            gw.wait_until(lambda: f"exited with status {LOST_EXIT}" in g.text(), WAIT_S, "the target's exit line")
        finally:
            g.kill()


class GatewayRpcSupervisedTest(unittest.TestCase):
    """A gateway with a cpu target and an rpc-split target of the same model; the rpc-server dies
    mid-stream and comes back."""

    @classmethod
    def setUpClass(cls):
        cls.where = Host("127.0.0.7")
        cls.server = HostedServer(cls.where)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.where.delete()

    def config(self):
        return (gw.local_target(name="cpu", path=six_layers(), parallel=2, extra='backend = "cpu"') +
                gw.local_target(name="split", path=six_layers(), parallel=1,
                                extra=f'backend = "rpc"\nrpc = ["{self.server.endpoint}"]'))

    def greedy(self, g, model):
        status, _, body = g.json("POST", "/v1/completions", {"model": model, "prompt": "The sea", "max_tokens": 12,
                                                             "temperature": 0})
        self.assertEqual(status, 200, body)
        return body["choices"][0]["text"]

    def target(self, g, name):
        _, _, body = g.json("GET", "/ready")
        return next(t for t in body["targets"] if t["name"] == name)

    def test_a_lost_server_ends_the_stream_and_the_target_comes_back(self):
        self.server.start()
        g = gw.serve_config(self.config(), wait_ready=False)
        try:
            g.wait_ready(WAIT_S)
            expected = self.greedy(g, "cpu")
            self.assertEqual(self.greedy(g, "split"), expected)
            _, _, models = g.json("GET", "/v1/models")
            split = next(m for m in models["data"] if m["id"] == "split")
            first_pid = split["sipp"]["supervised"]["pid"]
            self.assertGreater(first_pid, 0, split)
            status, _, body = g.json("GET", "/v1/backends")
            placed = next(t for t in body["targets"] if t["name"] == "split")
            self.assertEqual(placed["backend"], "rpc", placed)
            self.assertIn(self.server.endpoint, {p["host"] for p in placed["placement"]})

            # Mid-stream: the cpu target answers while the split one streams, the server dies, the
            # stream ends with an error event naming it (not a hang), and the gateway stays up.
            conn, resp = g.stream("/v1/completions", {"model": "split", "prompt": "hi", "max_tokens": 100000,
                                                      "stream": True, "temperature": 0, "ignore_eos": True})
            self.assertEqual(resp.status, 200)
            self.assertTrue(resp.readline().startswith(b"data: "))
            self.assertEqual(self.greedy(g, "cpu"), expected)
            self.server.stop()
            events = list(gw.read_sse(resp))
            conn.close()
            errors = [json.loads(d)["error"]["message"] for _, d in events if d.startswith('{"error"')]
            self.assertEqual(len(errors), 1, events[-3:])
            self.assertIn(f"rpc server {self.server.endpoint} went away", errors[0])
            self.assertIsNone(g.proc.poll(), g.text())

            # Not ready, saying why; its requests get 503 naming it and the host; cpu still answers.
            gw.wait_until(lambda: self.target(g, "split")["state"] == "waiting", WAIT_S, "split to be waiting")
            status, _, body = g.json("GET", "/ready")
            self.assertEqual(status, 503, body)
            self.assertIn(self.server.endpoint, self.target(g, "split")["error"])
            status, hdrs, body = g.json("POST", "/v1/chat/completions", gw.chat_body("split"))
            self.assertEqual(status, 503, body)
            self.assertIn("'split'", body["error"]["message"])
            self.assertIn(self.server.endpoint, body["error"]["message"])
            self.assertIn("retry-after", hdrs)
            self.assertEqual(self.greedy(g, "cpu"), expected)
            self.assertEqual(gw.metric(g.metrics(), "sipp_target_ready", target="split"), 0)
            with self.assertRaises(ProcessLookupError):  # the first child is gone (and reaped)
                os.kill(first_pid, 0)

            # The server is back: the supervisor finds it and starts the target's process again.
            self.server.start()
            g.wait_ready(WAIT_S)
            self.assertEqual(self.greedy(g, "split"), expected)
            metrics = g.metrics()
            self.assertEqual(gw.metric(metrics, "sipp_target_ready", target="split"), 1)
            self.assertEqual(gw.metric(metrics, "sipp_supervised_restarts_total", target="split"), 1)
            _, _, models = g.json("GET", "/v1/models")
            split = next(m for m in models["data"] if m["id"] == "split")
            second_pid = split["sipp"]["supervised"]["pid"]
            self.assertNotEqual(second_pid, first_pid)
            self.assertIn(self.server.endpoint, split["sipp"]["supervised"]["last_exit"])

            # A clean stop ends the child too, by its pid.
            self.assertEqual(g.stop(), 0, g.text())
            with self.assertRaises(ProcessLookupError):
                os.kill(second_pid, 0)
        finally:
            g.kill()
            self.server.stop()

    def test_streams_pass_through_piece_by_piece(self):
        self.server.start()
        g = gw.serve_config(self.config(), wait_ready=False)
        try:
            g.wait_ready(WAIT_S)
            status, ctype, events = g.sse("/v1/chat/completions", gw.chat_body("split", stream=True, max_tokens=8,
                                                                                temperature=0))
            self.assertEqual(status, 200)
            self.assertIn("text/event-stream", ctype)
            chunks = [e for e in events if e[1] != "[DONE]"]
            self.assertGreater(len(chunks), 2, events)  # one per piece, not one at the end
            for api in ("/v1/embeddings",):
                status, _, split = g.json("POST", api, {"model": "split", "input": "hello"})
                self.assertEqual(status, 200, split)
                status, _, cpu = g.json("POST", api, {"model": "cpu", "input": "hello"})
                a, b = split["data"][0]["embedding"], cpu["data"][0]["embedding"]
                self.assertLess(max(abs(x - y) for x, y in zip(a, b)), 1e-3)
            # The translated APIs reach it as any remote target (the whole answer, then their events).
            translated = [("/v1/messages", {"max_tokens": 6, "messages": [{"role": "user", "content": "hi"}]}),
                          ("/v1/responses", {"max_output_tokens": 6, "input": "hi"}),
                          ("/api/chat", {"stream": False, "options": {"num_predict": 6},
                                         "messages": [{"role": "user", "content": "hi"}]})]
            for path, body in translated:
                with self.subTest(path=path):
                    status, _, answer = g.json("POST", path, {"model": "split", **body})
                    self.assertEqual(status, 200, answer)
        finally:
            g.stop()
            self.server.stop()

    def test_a_model_the_child_cannot_load_shows_its_reason(self):
        self.server.start()
        bad = gw.write("not-a-model.gguf", "GGUF this is not a model\n")
        config = (gw.local_target(name="cpu", path=six_layers(), parallel=1, extra='backend = "cpu"') +
                  gw.local_target(name="broken", path=bad, parallel=1,
                                  extra=f'backend = "rpc"\nrpc = ["{self.server.endpoint}"]'))
        g = gw.serve_config(config, wait_ready=False)
        try:
            state = gw.wait_until(lambda: (lambda t: t if t["state"] == "failed" else None)(self.target(g, "broken")),
                                  WAIT_S, "the broken target to fail")
            self.assertIn("not-a-model.gguf", state["error"])
            status, _, body = g.json("POST", "/v1/completions", {"model": "broken", "prompt": "hi", "max_tokens": 2})
            self.assertEqual(status, 503, body)
            self.assertIn("not-a-model.gguf", body["error"]["message"])
            self.assertEqual(self.greedy(g, "cpu"), self.greedy(g, "cpu"))
        finally:
            g.stop()
            self.server.stop()

    def test_the_child_dies_with_the_gateway(self):
        self.server.start()
        g = gw.serve_config(self.config(), wait_ready=False)
        try:
            g.wait_ready(WAIT_S)
            _, _, models = g.json("GET", "/v1/models")
            pid = next(m for m in models["data"] if m["id"] == "split")["sipp"]["supervised"]["pid"]
            g.proc.kill()  # no shutdown: PR_SET_PDEATHSIG ends the child
            g.proc.wait(WAIT_S)

            def gone():
                try:
                    os.kill(pid, 0)
                    with open(f"/proc/{pid}/stat") as f:  # a zombie waits for init to reap it
                        return f.read().split(")")[-1].split()[0] == "Z"
                except (ProcessLookupError, FileNotFoundError):
                    return True
            gw.wait_until(gone, WAIT_S, "the supervised child to end with its gateway")
        finally:
            g.kill()
            self.server.stop()


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
