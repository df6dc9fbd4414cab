"""sipp behind a real load balancer: nginx (Debian's nginx-light) in front of several `sipp serve`.

The test runs docs/nginx-sipp.conf itself, with only its ports and paths changed, as a process of its
own on loopback with its files in a temporary directory. It checks what docs/scale-out.md promises:
one address for several instances; /ready through it; tokens streamed through unbuffered (the first
event arrives while the instance is still generating); a conversation kept on one instance by the
context key header; an instance that is not ready (its rpc server is down) skipped; and an instance
killed in the middle of a load losing no request that had not started streaming.
"""

import concurrent.futures
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from tests.integration import test_gateway_support as gw
from tests.support.ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "docs", "nginx-sipp.conf")
START_S = 30
HTTP_S = 120
LOAD_REQUESTS = 8
LOAD_STREAMS = 4
LONG_TOKENS = 800  # long enough that requests are in flight when an instance is killed


def instance_config(extra=""):
    return gw.local_target(parallel=2, ctx=4096) + extra


class Nginx:
    def __init__(self, upstreams, directory):
        self.port = free_port()
        self.dir = directory
        with open(EXAMPLE) as f:
            text = f.read()
        servers = "".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=5s;\n" for p in upstreams)
        text, n = re.subn(r"(        server 127\.0\.0\.1:808\d [^\n]*\n)+", servers, text)
        assert n == 1, "docs/nginx-sipp.conf no longer has the upstream server lines this test replaces"
        text = text.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{self.port};")
        text = text.replace("pid /run/nginx-sipp.pid;", f"pid {directory}/nginx.pid;")
        temps = "".join(f"    {k}_temp_path {directory}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        text = text.replace("http {\n", "http {\n" + temps, 1)
        if os.geteuid() == 0:
            text = "user root;\n" + text
        self.conf = os.path.join(directory, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(text)
        self.log = open(os.path.join(directory, "nginx.log"), "w+")
        self.proc = subprocess.Popen(["nginx", "-p", directory, "-c", self.conf, "-g", "daemon off;"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        raise AssertionError(f"nginx did not start: {self.text()}")

    def text(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.log.close()

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HTTP_S)
        try:
            hdrs = dict(headers or {})
            data = None
            if body is not None:
                data = json.dumps(body)
                hdrs["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=hdrs)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()


def served(g):
    """The requests an instance answered, by its own /metrics."""
    return sum(v for (name, labels), v in g.metrics().items()
               if name == "sipp_requests_total" and ("target", "tiny") in labels)


@unittest.skipUnless(shutil.which("nginx"), "nginx is not installed (apt-get install -y nginx-light)")
class NginxTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sipp-nginx-")
        os.chmod(self.tmp, 0o755)
        self.instances = []
        self.nginx = None

    def tearDown(self):
        if self.nginx:
            self.nginx.stop()
        for g in self.instances:
            g.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, n, extra_upstreams=()):
        self.instances = [gw.serve_config(instance_config()) for _ in range(n)]
        ports = [g.port for g in self.instances] + list(extra_upstreams)
        self.nginx = Nginx(ports, self.tmp)

    def completion(self, key=None, max_tokens=8, stream=False, **extra):
        body = {"model": "tiny", "prompt": "Hello there", "max_tokens": max_tokens, "temperature": 0, **extra}
        if stream:
            body["stream"] = True
        headers = {}
        if key:
            body["context_key"] = key
            headers["X-Sipp-Context-Key"] = key
        return body, headers

    def test_one_address_ready_sticky_and_streaming(self):
        self.start(2)
        status, body = self.nginx.request("GET", "/ready")
        self.assertEqual(status, 200, body)

        # A conversation stays on one instance.
        before = [served(g) for g in self.instances]
        for turn in range(4):
            body, headers = self.completion(key="conversation-1")
            status, data = self.nginx.request("POST", "/v1/completions", body, headers)
            self.assertEqual(status, 200, data)
        # An instance counts a request once its reply is sent, a moment after the client has it.
        deadline = time.monotonic() + START_S
        grew = [served(g) - b for g, b in zip(self.instances, before)]
        while sum(grew) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
            grew = [served(g) - b for g, b in zip(self.instances, before)]
        self.assertEqual(sorted(grew), [0, 4], grew)

        # Streaming is passed through as it is made: the first event arrives while the instance
        # that serves the request is still generating.
        body, headers = self.completion(key="conversation-2", max_tokens=LONG_TOKENS * 4, stream=True,
                                        ignore_eos=True)
        conn = http.client.HTTPConnection("127.0.0.1", self.nginx.port, timeout=HTTP_S)
        try:
            conn.request("POST", "/v1/completions", body=json.dumps(body),
                         headers={"Content-Type": "application/json", **headers})
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertIn("text/event-stream", resp.getheader("Content-Type", ""))
            first = resp.readline()
            while first.strip() == b"":
                first = resp.readline()
            self.assertTrue(first.startswith(b"data:"), first)
            active = sum(gw.metric(g.metrics(), "sipp_active_requests", target="tiny") or 0 for g in self.instances)
            self.assertEqual(active, 1, "the stream reached the client only after the generation ended")
        finally:
            conn.close()

    def test_an_instance_that_is_not_ready_is_skipped(self):
        # A third instance whose only target waits for an rpc server that is not there: it answers
        # 503 to every request and /ready says not_ready.
        dead = f"127.0.0.1:{free_port()}"
        waiting = gw.serve_config(gw.local_target(extra=f'backend = "rpc"\nrpc = ["{dead}"]'), wait_ready=False)
        self.start(2, extra_upstreams=[waiting.port])
        self.instances.append(waiting)
        self.assertEqual(waiting.request("GET", "/ready")[0], 503)
        for i in range(12):
            body, headers = self.completion(key=f"spread-{i}")
            status, data = self.nginx.request("POST", "/v1/completions", body, headers)
            self.assertEqual(status, 200, data)

    def test_instance_killed_mid_load_loses_no_request_that_had_not_started_streaming(self):
        self.start(2)
        victim, survivor = self.instances

        def plain(i):
            body, headers = self.completion(key=f"load-{i}", max_tokens=LONG_TOKENS, ignore_eos=True)
            return self.nginx.request("POST", "/v1/completions", body, headers)

        def streamed(i):
            """(status, got_headers, complete) of one streaming request."""
            body, headers = self.completion(key=f"stream-{i}", max_tokens=LONG_TOKENS, stream=True, ignore_eos=True)
            conn = http.client.HTTPConnection("127.0.0.1", self.nginx.port, timeout=HTTP_S)
            try:
                conn.request("POST", "/v1/completions", body=json.dumps(body),
                             headers={"Content-Type": "application/json", **headers})
                resp = conn.getresponse()
                try:
                    data = resp.read()
                except (http.client.IncompleteRead, ConnectionError):
                    return resp.status, True, False
                return resp.status, True, b"[DONE]" in data
            except (ConnectionError, http.client.RemoteDisconnected):
                return None, False, False
            finally:
                conn.close()

        with concurrent.futures.ThreadPoolExecutor(max_workers=LOAD_REQUESTS + LOAD_STREAMS) as pool:
            plains = [pool.submit(plain, i) for i in range(LOAD_REQUESTS)]
            streams = [pool.submit(streamed, i) for i in range(LOAD_STREAMS)]
            deadline = time.monotonic() + HTTP_S
            while time.monotonic() < deadline:
                if (gw.metric(victim.metrics(), "sipp_active_requests", target="tiny") or 0) > 0:
                    break
                time.sleep(0.02)
            victim.kill()
            results = [f.result(timeout=HTTP_S * 2) for f in plains]
            stream_results = [f.result(timeout=HTTP_S * 2) for f in streams]
        for status, data in results:
            self.assertEqual(status, 200, data[:300])
            self.assertEqual(json.loads(data)["usage"]["completion_tokens"], LONG_TOKENS)
        for status, got_headers, complete in stream_results:
            # A stream either finished, or had started (headers sent) on the killed instance.
            self.assertTrue(complete or got_headers, (status, got_headers, complete))
        self.assertGreater(served(survivor), 0)
        # nginx saw the instance go and moved its requests (its log names the upstream it lost).
        self.assertIn(f"127.0.0.1:{victim.port}", self.nginx.text())


if __name__ == "__main__":
    unittest.main()
