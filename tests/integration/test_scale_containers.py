"""Three sipp containers behind nginx under load (issue 48): what scale-out promises, with the image.

Three containers of the image (make image), each serving one synthetic model with two slots on a
loopback port, behind docs/nginx-sipp.conf run as in test_nginx.py. Nine clients stream completions
through nginx in a loop while the test samples each container's routing gauges (vllm:num_requests_*,
the names an inference gateway reads). One container is stopped mid-stream and started again.

- No request is lost: the only failed requests are streams that had started on the stopped
  container (at most what it held when it was stopped, one per client at most); every request sent
  after that succeeds, nginx passing it to another container.
- The gauges move as the load moves: while all three serve, each runs requests; with one stopped the
  two others hold more waiting requests on average; started again, it runs requests again.

Skipped, with the reason, only where podman cannot run containers at all.
"""

import http.client
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

import tests.integration.test_nginx as nginx_test
from tests.integration import test_gateway_support as gw
from tests.support import containers as ct
from tests.support.ports import free_port
from tests.support.wait import wait_until

N = 3
SLOTS = 2
CLIENTS = 9  # three per container: two running, one waiting, while all three serve
TOKENS = 48
PHASE_S = 6
READY_TIMEOUT_S = 90
HTTP_TIMEOUT_S = 120
SLOW = ["--n-embd", "128", "--n-layer", "4", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "256", "--type", "q8_0"]


def gauges(port):
    """(running, waiting) of one container, None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            m = gw.parse_metrics(r.read().decode())
    except OSError:
        return None
    return (gw.metric(m, "vllm:num_requests_running", model_name="m"),
            gw.metric(m, "vllm:num_requests_waiting", model_name="m"))


class Load:
    """CLIENTS threads streaming completions through nginx until stop(); each result is
    (start, end, ok, started, client), started meaning the response headers had arrived."""

    def __init__(self, port):
        self.port, self.results, self.stopping = port, [], threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def one(self):
        body = json.dumps({"model": "m", "prompt": "Tell a long story", "max_tokens": TOKENS, "ignore_eos": True,
                           "stream": True})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HTTP_TIMEOUT_S)
        t0, started = time.monotonic(), False
        try:
            conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            started = True
            ok = resp.status == 200 and b"[DONE]" in resp.read()
        except (OSError, http.client.HTTPException):
            ok = False
        finally:
            conn.close()
        with self.lock:
            self.results.append((t0, time.monotonic(), ok, started, threading.get_ident()))

    def loop(self):
        while not self.stopping.is_set():
            self.one()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(HTTP_TIMEOUT_S)


class ScaleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tag = ct.image()
        cls.dir = tempfile.mkdtemp(prefix="sipp-scale-")
        os.mkdir(os.path.join(cls.dir, "models"))
        r = subprocess.run([gw.SYNTH, "--out", os.path.join(cls.dir, "models", "m.gguf"), "--vocab", gw.VOCAB,
                            "--seed", "3", *SLOW], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        cls.names = [f"sipp-test-scale-{i}" for i in range(N)]
        cls.ports = [free_port() for _ in range(N)]
        ct.remove(*cls.names)
        for name, port in zip(cls.names, cls.ports):
            ct.podman("run", "-d", "--name", name, "--read-only", "-p", f"127.0.0.1:{port}:8080", "-v",
                      f"{cls.dir}/models:/models:ro", cls.tag, "serve", "/models/m.gguf", "--host", "0.0.0.0",
                      "--port", "8080", "--no-auth", "--threads", "1", "--parallel", str(SLOTS), "--ctx-size",
                      "4096")
        try:
            for port in cls.ports:
                wait_until(lambda: gauges(port) is not None, READY_TIMEOUT_S, f"the container on {port}")
            cls.nginx = nginx_test.Nginx(cls.ports, os.path.join(cls.dir))
        except AssertionError:
            cls.cleanup()
            raise

    @classmethod
    def cleanup(cls):
        ct.remove(*cls.names)
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        cls.nginx.stop()
        cls.cleanup()

    def sample(self, seconds):
        """Per container, the gauges sampled for `seconds` (None while it does not answer)."""
        rows, end = [], time.monotonic() + seconds
        while time.monotonic() < end:
            rows.append([gauges(p) for p in self.ports])
            time.sleep(0.2)
        return [[r[i] for r in rows] for i in range(N)]

    def test_stop_and_restart_under_load(self):
        load = Load(self.nginx.port)
        try:
            before = self.sample(PHASE_S)
            victim = 0
            # the most streams it held (running and waiting) while sampled; a last sample alone can
            # miss one (nginx balances by connections, so a container may hold more than its share)
            held = max(sum(g) for g in before[victim] if g) if any(before[victim]) else 0
            stopped_at = time.monotonic()
            ct.podman("stop", "--time", "1", self.names[victim])
            during = self.sample(PHASE_S)
            ct.podman("start", self.names[victim])
            wait_until(lambda: gauges(self.ports[victim]) is not None, READY_TIMEOUT_S, "the restarted container")
            after = self.sample(PHASE_S * 2)
        finally:
            load.stop()
        results = load.results
        failed = [r for r in results if not r[2]]
        print(f"\n{len(results)} requests, {len(failed)} failed; the stopped container held {held}", flush=True)
        self.assertGreater(len(results), CLIENTS * 2)
        # lost: only streams that had started on the stopped container, sent before it stopped
        self.assertLessEqual(len(failed), max(held, SLOTS + 1), failed)
        clients = [r[4] for r in failed]
        self.assertEqual(len(clients), len(set(clients)), "a client saw more than one failed stream")
        for t0, _, _, started, _ in failed:
            self.assertLess(t0, stopped_at + 1.5, "a request sent after the stop failed")
            self.assertTrue(started, "a request that had not started streaming failed: nginx should retry it")
        # every container ran requests while all three served
        for i in range(N):
            self.assertGreater(max(g[0] for g in before[i] if g), 0, f"container {i} ran nothing")
            self.assertTrue(all(g[0] <= SLOTS for g in before[i] if g))
        # the load moved to the two others: more waiting there on average
        survivors = [i for i in range(N) if i != victim]

        def mean_waiting(rows):
            vals = [sum(rows[i][k][1] for i in survivors) for k in range(len(rows[0]))
                    if all(rows[i][k] for i in survivors)]
            return sum(vals) / len(vals)

        self.assertGreater(mean_waiting(during), mean_waiting(before), (before, during))
        self.assertTrue(any(g is None for g in during[victim]), "the stopped container still answered")
        # and back to the restarted one
        self.assertGreater(max((g[0] for g in after[victim] if g), default=0), 0, "the restarted container ran nothing")


if __name__ == "__main__":
    unittest.main()
