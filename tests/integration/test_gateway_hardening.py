"""Integration tests of the gateway against hostile clients and web pages (issue 21, items 4, 5, 6,
8, 9, 10, 12): connection exhaustion (read timeout, connection caps, bounded body memory), rate
limited token guessing, DNS rebinding and cross-site requests without tokens, SIGHUP, streams at
the shutdown deadline, invalid UTF-8 echoed in errors, and HTTP framing tricks.

Everything talks to a `sipp serve` on loopback; every wait is bounded. Servers that need no model
get a remote target on a closed port, so that they start at once.
"""

import http.client
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support.ports import closed_port  # noqa: E402

WAIT_S = 15
READ_TIMEOUT_S = 2
SLOW_BYTE_S = 0.5
LONG = 100000
SECRET = "hardening-secret-0123456789"
TOKEN_ENV = "SIPP_GW_HARDEN_TOKEN"
MIB = 1 << 20


def remote_target(name="far"):
    return f'[[targets]]\nname = "{name}"\ntype = "openai_compatible"\nbase_url = "http://127.0.0.1:{closed_port()}/v1"\n'


def raw(g, data, timeout=WAIT_S):
    """Sends raw bytes and parses the one response: (status, headers as a lower-case dict, body)."""
    return gw.raw_request(g, data, timeout)


def raw_json(g, data):
    status, hdrs, body = raw(g, data)
    return status, hdrs, json.loads(body)  # the body must be valid JSON text, whatever was echoed


def closed_by_server(sock, deadline):
    """True once the server closes sock (reads end or reset) before deadline."""
    while time.monotonic() < deadline:
        try:
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            if sock.recv(4096) == b"":
                return True
        except socket.timeout:
            return False
        except OSError:
            return True
    return False


def served(g):
    """True when a fresh connection gets an answer to GET /health."""
    try:
        return raw(g, b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", timeout=5)[0] == 200
    except OSError:
        return False


class OpenServerTest(unittest.TestCase):
    """No tokens: the guards against web pages, the framing and echo checks, and the read timeout."""

    @classmethod
    def setUpClass(cls):
        cfg = (f'[server]\nread_timeout_seconds = {READ_TIMEOUT_S}\nallowed_hosts = ["sipp.internal"]\n'
               'allowed_origins = ["http://app.example"]\n\n' + gw.local_target("tiny"))
        cls.gw = gw.serve_config(cfg)

    @classmethod
    def tearDownClass(cls):
        assert cls.gw.stop() == 0, cls.gw.text()

    def get(self, path, **headers):
        return self.gw.json("GET", path, headers=headers)

    def post(self, body, **headers):
        hdrs = {"Content-Type": "application/json", **headers}
        return self.gw.json("POST", "/v1/completions", json.dumps(body), headers=hdrs)

    # ---- 6: DNS rebinding and cross-site requests -------------------------------------------------

    def test_a_foreign_host_is_refused(self):
        status, _, body = self.get("/v1/models", Host="attacker.example")
        self.assertEqual((status, body["error"]["code"]), (403, "host_not_allowed"))
        self.assertIn("allowed_hosts", body["error"]["message"])
        for host in ("attacker.example:8080", "localhost.attacker.example", "127.0.0.1.nip.io", "[bad"):
            self.assertEqual(self.get("/health", Host=host)[0], 403, host)
        for host in ("localhost", f"localhost:{self.gw.port}", "127.0.0.1", "127.1.2.3:80", "[::1]:8080",
                     "10.1.2.3:8080", "[fe80::1]", "app.localhost", "sipp.internal", "SIPP.internal:443"):
            self.assertEqual(self.get("/v1/models", Host=host)[0], 200, host)

    def test_cross_origin_requests_are_refused(self):
        body = {"model": "tiny", "prompt": "hi", "max_tokens": 1}
        status, _, err = self.post(body, Origin="http://evil.example")
        self.assertEqual((status, err["error"]["code"]), (403, "origin_not_allowed"))
        status, _, err = self.get("/v1/models", Origin="null")
        self.assertEqual(status, 403)
        # the page this server serves, and a configured origin, may
        self.assertEqual(self.post(body, Origin=f"http://127.0.0.1:{self.gw.port}")[0], 200)
        status, hdrs, _ = self.post(body, Origin="http://app.example")
        self.assertEqual((status, hdrs.get("access-control-allow-origin")), (200, "http://app.example"))

    def test_post_bodies_must_be_json(self):
        body = json.dumps({"model": "tiny", "prompt": "hi", "max_tokens": 1})
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            status, _, err = self.gw.json("POST", "/v1/completions", body, headers={"Content-Type": ctype})
            self.assertEqual((status, err["error"]["code"]), (415, "unsupported_media_type"), ctype)
            self.assertIn(ctype.split(";")[0], err["error"]["message"])
        status, _, err = raw_json(self.gw, (f"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
                                            f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        self.assertEqual(status, 415)
        self.assertEqual(self.post(json.loads(body), **{"Content-Type": "application/json; charset=utf-8"})[0], 200)

    def test_a_form_is_taken_from_the_page_itself_only(self):
        """A multipart form (the transcription route's) can be posted cross-site without a preflight:
        the gateway's own page (its Hold to talk) may post one, another site may not."""
        b = "sipp-form"
        form = (f'--{b}\r\nContent-Disposition: form-data; name="model"\r\n\r\ntiny\r\n--{b}--\r\n')
        hdrs = {"Content-Type": f"multipart/form-data; boundary={b}"}
        for origin, want in ((f"http://127.0.0.1:{self.gw.port}", 400), ("http://evil.example", 403), (None, 400)):
            h = dict(hdrs, **({"Origin": origin} if origin else {}))
            status, _, err = self.gw.json("POST", "/v1/audio/transcriptions", form, headers=h)
            self.assertEqual(status, want, f"{origin}: {err}")
            if want == 400:  # past the guard: the form itself is refused (it has no file)
                self.assertNotEqual(err["error"]["code"], "unsupported_media_type", err)

    # ---- 9: invalid UTF-8 in what is echoed --------------------------------------------------------

    def test_invalid_utf8_in_the_url_and_headers(self):
        status, _, body = raw_json(self.gw, b"GET /v1/models/%ff HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.assertEqual((status, body["error"]["code"]), (404, "model_not_found"))
        self.assertIn("\\xff", body["error"]["message"])
        status, _, body = raw_json(self.gw, b"GET /nowhere%c0%80 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.assertEqual((status, body["error"]["code"]), (404, "route_not_found"))
        status, _, body = raw_json(self.gw, b"\xc0GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.assertEqual((status, body["error"]["code"]), (400, "bad_request"))
        status, _, body = raw_json(self.gw, b"GET /health HTTP/1.1\r\nHost: localhost\r\nOrigin: \xff\r\n\r\n")
        self.assertEqual((status, body["error"]["code"]), (400, "bad_request"))
        status, _, body = raw_json(self.gw, b"OPTIONS /v1/models HTTP/1.1\r\nHost: localhost\r\nOrigin: http://\xe9\r\n\r\n")
        self.assertEqual(status, 400)

    # ---- 12: framing ------------------------------------------------------------------------------

    def test_nul_in_the_path_does_not_truncate_routing(self):
        status, _, body = raw_json(self.gw, b"GET /health%00 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.assertEqual((status, body["error"]["code"]), (404, "route_not_found"))
        status, _, body = raw_json(self.gw, b"GET /v1/models/tiny%00junk HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.assertEqual(status, 404)

    def test_two_different_content_lengths(self):
        body = b'{"model": "tiny", "prompt": "hi", "max_tokens": 1}'
        head = b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        status, _, err = raw_json(self.gw, head + b"Content-Length: %d\r\nContent-Length: 5\r\n\r\n" % len(body) + body)
        self.assertEqual((status, err["error"]["code"]), (400, "bad_request"))
        self.assertIn("Content-Length", err["error"]["message"])
        same = b"Content-Length: %d\r\n" % len(body)
        self.assertEqual(raw(self.gw, head + same + same + b"\r\n" + body)[0], 200)

    def test_unsupported_transfer_encoding_is_501_at_once(self):
        t0 = time.monotonic()
        status, _, err = raw_json(self.gw, b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
                                           b"Content-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\nxx")
        self.assertEqual((status, err["error"]["code"]), (501, "not_implemented"))
        self.assertLess(time.monotonic() - t0, READ_TIMEOUT_S)

    # ---- 4: read timeout ---------------------------------------------------------------------------

    def test_a_slow_header_sender_is_cut(self):
        sock = socket.create_connection((self.gw.host, self.gw.port), timeout=WAIT_S)
        try:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")
            deadline = time.monotonic() + READ_TIMEOUT_S + WAIT_S
            cut = False
            while not cut and time.monotonic() < deadline:
                try:
                    sock.sendall(b"X")
                except OSError:
                    cut = True
                    break
                cut = closed_by_server(sock, time.monotonic() + SLOW_BYTE_S)
            self.assertTrue(cut, "a client sending one header byte every 0.5 s still holds its connection")
        finally:
            sock.close()
        self.assertTrue(served(self.gw))

    def test_an_idle_connection_is_closed_but_a_slow_answer_is_not(self):
        sock = socket.create_connection((self.gw.host, self.gw.port), timeout=WAIT_S)
        try:
            self.assertTrue(closed_by_server(sock, time.monotonic() + READ_TIMEOUT_S + WAIT_S))
        finally:
            sock.close()
        # a generation longer than read_timeout_seconds is not cut: the timeout is for reading requests
        _, _, events = self.gw.sse("/v1/completions", {"model": "tiny", "prompt": "Go", "max_tokens": 8,
                                                       "ignore_eos": True, "stream": True})
        self.assertEqual(events[-1][1], "[DONE]")


class ConnectionCapTest(unittest.TestCase):
    """max_connections_per_client and max_connections; max_buffered_bytes."""

    def hold(self, g, n):
        """n open connections, each proven accepted by one keep-alive request (a connection the
        server still closes from an earlier request may take a place for a moment: retried)."""
        socks = []
        deadline = time.monotonic() + WAIT_S
        while len(socks) < n and time.monotonic() < deadline:
            s = socket.create_connection((g.host, g.port), timeout=WAIT_S)
            try:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                resp = http.client.HTTPResponse(s, method="GET")
                resp.begin()
                resp.read()
                socks.append(s)
            except OSError:
                s.close()
                time.sleep(0.1)
        self.assertEqual(len(socks), n, "could not open the connections to hold")
        return socks

    def check_cap(self, key, cap):
        g = gw.serve_config(f"[server]\n{key} = {cap}\nread_timeout_seconds = 60\n\n" + remote_target())
        socks = []
        try:
            socks = self.hold(g, cap)
            gw.wait_until(lambda: not served(g), WAIT_S, f"a connection past {key} being refused")
            for s in socks:
                s.close()
            socks = []
            gw.wait_until(lambda: served(g), WAIT_S, "a connection being served once the others closed")
        finally:
            for s in socks:
                s.close()
            self.assertEqual(g.stop(), 0, g.text())

    def test_per_client_cap(self):
        self.check_cap("max_connections_per_client", 4)

    def test_global_cap(self):
        self.check_cap("max_connections", 4)

    def test_global_cap_stays_below_the_descriptor_limit(self):
        cfg = gw.write(f"cap-{time.monotonic_ns()}.toml", "[server]\nmax_connections = 100000\n\n" + remote_target())
        # --foreground: timeout signals sipp alone; without it the signal also goes to timeout's process
        # group, sipp included, and sipp takes the second delivery for a second Ctrl-C (exit at once)
        r = subprocess.run(["bash", "-c", f'ulimit -n 256 && exec timeout --foreground -s INT 3 "{gw.SIPP}" serve '
                                          f'--config "{cfg}" --port 0'],
                           capture_output=True, text=True, timeout=WAIT_S)
        self.assertIn(r.returncode, (0, 124), r.stderr)  # 124: timeout's status when it had to signal
        self.assertIn("max_connections lowered from 100000 to 192", r.stderr)
        self.assertIn("sipp: stopped", r.stderr)

    def test_the_soft_descriptor_limit_is_raised_for_max_connections(self):
        hard = 4096
        if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < hard:
            self.skipTest(f"the hard descriptor limit here is below {hard}")
        cfg = "[server]\nmax_connections = 1000\n\n" + remote_target()
        g = gw.Gateway(["--config", gw.write(f"soft-{time.monotonic_ns()}.toml", cfg), "--port", "0"],
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)))
        try:
            with open(f"/proc/{g.proc.pid}/limits") as fh:
                soft = next(int(line.split()[3]) for line in fh if line.startswith("Max open files"))
            self.assertGreaterEqual(soft, 1000)
            self.assertNotIn("max_connections lowered", g.text())
        finally:
            self.assertEqual(g.stop(), 0, g.text())

    def test_incomplete_bodies_are_bounded(self):
        cfg = f"[server]\nmax_request_bytes = {MIB}\nmax_buffered_bytes = {2 * MIB}\n\n" + remote_target()
        g = gw.serve_config(cfg)
        part = 900 * 1024
        body = json.dumps({"model": "far", "prompt": "x" * (MIB - 100)}).encode()
        body = body[:MIB - 64]
        head = (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body))
        socks = []
        try:
            for _ in range(2):
                s = socket.create_connection((g.host, g.port), timeout=WAIT_S)
                s.sendall(head + body[:part])
                socks.append(s)
            gw.wait_until(lambda: gw.metric(g.metrics(), "sipp_buffered_request_bytes") >= 2 * part, WAIT_S,
                          "both partial bodies being held")
            status, hdrs, err = raw_json(g, head + body)
            self.assertEqual((status, err["error"]["code"]), (503, "server_busy"))
            self.assertGreaterEqual(int(hdrs["retry-after"]), 1)
            self.assertIn("max_buffered_bytes", err["error"]["message"])
            for s in socks:  # the held ones complete and are answered (502: the upstream is down)
                s.sendall(body[part:])
                resp = http.client.HTTPResponse(s, method="POST")
                resp.begin()
                self.assertNotEqual(resp.status, 503)
            self.assertEqual(raw(g, head + body)[0], 502)  # the memory was given back
            gw.wait_until(lambda: gw.metric(g.metrics(), "sipp_buffered_request_bytes") == 0, WAIT_S,
                          "the bodies' memory being given back")
        finally:
            for s in socks:
                s.close()
            self.assertEqual(g.stop(), 0, g.text())


class TokenServerTest(unittest.TestCase):
    """Tokens and a rate limit: guessing is rate limited; the 'model' is missing error is scoped.

    ("Bearer SECRET\\0junk" is not tested here: libmicrohttpd 0.9.75 ends a header value at the NUL
    and drops the rest before sipp sees it, so what is compared is exactly the secret; see
    docs/gateway.md.)"""

    @classmethod
    def setUpClass(cls):
        cfg = ('[security.rate_limit]\nrequests_per_minute = 30\nburst = 5\n\n'
               f'[[tokens]]\nenv = "{TOKEN_ENV}"\ncaller = "scoped"\ntargets = ["tiny"]\n\n'
               + gw.local_target("tiny") + remote_target("hidden"))
        cls.gw = gw.serve_config(cfg, env={TOKEN_ENV: SECRET})

    @classmethod
    def tearDownClass(cls):
        assert cls.gw.stop() == 0, cls.gw.text()

    def test_failed_tokens_are_rate_limited(self):
        statuses = []
        for _ in range(20):
            status, hdrs, body = self.gw.json("GET", "/v1/models", headers={"Authorization": "Bearer wrong"})
            statuses.append(status)
            if status == 429:
                break
        self.assertEqual(statuses[-1], 429, statuses)
        self.assertEqual(set(statuses[:-1]), {401})
        self.assertEqual(body["error"]["code"], "rate_limit_exceeded")
        self.assertGreaterEqual(int(hdrs["retry-after"]), 1)
        # the guesser's address is spent; the valid caller has a bucket of its own
        status, _, _ = self.gw.json("GET", "/v1/models", headers={"Authorization": f"Bearer {SECRET}"})
        self.assertEqual(status, 200)

    def test_missing_model_lists_only_visible_targets(self):
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        status, _, err = self.gw.json("POST", "/v1/chat/completions", body, headers={"Authorization": f"Bearer {SECRET}"})
        if status == 429:  # the rate test spent this caller's bucket? it has its own; retry once anyway
            time.sleep(3)
            status, _, err = self.gw.json("POST", "/v1/chat/completions", body,
                                          headers={"Authorization": f"Bearer {SECRET}"})
        self.assertEqual(status, 400, err)
        self.assertIn("tiny", err["error"]["message"])
        self.assertNotIn("hidden", err["error"]["message"])


class SecretLengthTest(unittest.TestCase):
    def test_a_short_secret_is_refused(self):
        path = gw.write("short.toml", f'[[tokens]]\nenv = "{TOKEN_ENV}"\n\n' + remote_target())
        env = dict(os.environ, **{TOKEN_ENV: "short"})
        r = subprocess.run([gw.SIPP, "serve", "--check", "--config", path], capture_output=True, text=True,
                           timeout=WAIT_S, env=env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"the secret in '{TOKEN_ENV}' is 5 bytes; use at least 16", r.stderr)


class SignalTest(unittest.TestCase):
    """SIGINT drains like SIGTERM (SIGHUP reloads: test_gateway_reload.py); at the shutdown deadline a stream
    ends with an error event."""

    def stream_through_shutdown(self, sig, path, body):
        g = gw.serve_config("[server]\nshutdown_timeout_seconds = 1\n\n" + gw.local_target("tiny", parallel=1, ctx=8192))
        conn, resp = g.stream(path, body)
        try:
            self.assertEqual(resp.status, 200)
            resp.readline()
            g.signal(sig)
            events = list(gw.read_sse(resp))  # http.client raises IncompleteRead on a cut chunked body
            g.proc.wait(WAIT_S)
        finally:
            conn.close()
            status = g.stop()
        self.assertEqual(status, 0, g.text())
        self.assertIn("cancelling 1 request", g.text())
        return events

    def test_sigint_drains_and_the_stream_ends_with_an_error_event(self):
        events = self.stream_through_shutdown(signal.SIGINT, "/v1/completions",
                                              {"model": "tiny", "prompt": "Forever", "max_tokens": LONG,
                                               "ignore_eos": True, "stream": True})
        last = json.loads(events[-1][1])
        self.assertEqual(last["error"]["code"], "not_ready")
        self.assertIn("shutting down", last["error"]["message"])

    def test_sigterm_past_the_deadline_ends_a_native_stream_cleanly(self):
        events = self.stream_through_shutdown(signal.SIGTERM, "/v1/query",
                                              {"model": "tiny", "prompt": "Forever", "max_tokens": LONG,
                                               "ignore_eos": True})
        self.assertEqual(events[-1][0], "error")
        self.assertEqual(json.loads(events[-1][1])["error"]["code"], "not_ready")


if __name__ == "__main__":
    unittest.main()


class HardeningConfigTest(unittest.TestCase):
    """The [server] keys of this file: accepted with their values, refused out of range, each
    problem on its FILE:LINE."""

    def check(self, server):
        path = gw.write(f"keys-{time.monotonic_ns()}.toml", "[server]\n" + server + "\n" + remote_target())
        r = subprocess.run([gw.SIPP, "serve", "--check", "--config", path], capture_output=True, text=True,
                           timeout=WAIT_S)
        return r, path

    def test_the_keys_are_accepted(self):
        r, _ = self.check('read_timeout_seconds = 5\nmax_connections = 10\nmax_connections_per_client = 2\n'
                          'max_buffered_bytes = 2097152\nallowed_hosts = ["sipp.lan", "*"]\n')
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_bad_values_name_their_line(self):
        r, path = self.check('read_timeout_seconds = 0\nmax_connections = -1\nmax_connections_per_client = "x"\n'
                             'max_request_bytes = 4096\nmax_buffered_bytes = 100\nallowed_hosts = "sipp.lan"\n')
        self.assertEqual(r.returncode, 1, r.stderr)
        for line, words in ((2, "read_timeout_seconds"), (3, "max_connections"), (4, "max_connections_per_client"),
                            (6, "below max_request_bytes"), (7, "allowed_hosts")):
            self.assertIn(f"{path}:{line}:", r.stderr)
            self.assertTrue(any(ln.startswith(f"sipp: {path}:{line}:") and words in ln for ln in r.stderr.splitlines()),
                            f"line {line}: {words!r} not in\n{r.stderr}")

    def test_a_quoted_newline_stays_on_its_line(self):
        r, path = self.check('listen = "a\\nb"\n')
        self.assertEqual(r.returncode, 1, r.stderr)
        problems = [ln for ln in r.stderr.splitlines() if ln.strip()]
        self.assertTrue(all(ln.startswith(f"sipp: {path}") for ln in problems), problems)
        self.assertIn("a\\x0ab", r.stderr)
