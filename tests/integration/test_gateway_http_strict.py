"""Integration tests of the gateway's HTTP/1.1 strictness (issue 27, items 6 and 8): request smuggling
through Content-Length beside Transfer-Encoding, Transfer-Encoding split over several lines, HTTP/1.1
without Host, and NUL bytes in the request line.

libmicrohttpd parses the request itself and lets these through (it reads the first of several header
lines and cuts the request line at a NUL); sipp refuses them before reading any body, and closes the
connection so that whatever follows is never read as a request. The tests send exact bytes over a raw
socket on loopback and read until the server closes, so a second response would be seen. Every wait
is bounded. The server has one remote target on a closed port: it needs no model and starts at once.
"""

import os
import re
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

QUIET_S = 1.5  # how long an open connection must stay silent to count as "no more responses"
CLOSE_WAIT_S = 10  # how long a refused connection may take to close
CHAT = b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
CHAT_BODY = b'{"model": "nope", "messages": [{"role": "user", "content": "hi"}]}'
MODELS = b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n"


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def chunked(body):
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def status_lines(data):
    """The status codes of every response in data (a body without a line end runs into the next)."""
    return [int(m) for m in re.findall(rb"HTTP/1\.[01] (\d{3}) ", data)]


class StrictHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gw.serve_config('[[targets]]\nname = "far"\ntype = "openai_compatible"\n'
                                 f'base_url = "http://127.0.0.1:{closed_port()}/v1"\n')

    @classmethod
    def tearDownClass(cls):
        assert cls.gw.stop() == 0, cls.gw.text()

    def exchange(self, data):
        """Sends data on one connection and reads until the server closes it or stays quiet for
        QUIET_S: (the status codes of every response, whether the server closed, the bytes)."""
        sock = socket.create_connection((self.gw.host, self.gw.port), timeout=CLOSE_WAIT_S)
        out, closed = b"", False
        deadline = time.monotonic() + CLOSE_WAIT_S
        try:
            sock.sendall(data)
            while time.monotonic() < deadline:
                sock.settimeout(QUIET_S)
                try:
                    chunk = sock.recv(65536)
                except socket.timeout:
                    break
                except OSError:
                    closed = True
                    break
                if not chunk:
                    closed = True
                    break
                out += chunk
        finally:
            sock.close()
        return status_lines(out), closed, out

    def assertRefused(self, data, status, *words):
        codes, closed, out = self.exchange(data)
        self.assertEqual(codes, [status], out)
        self.assertTrue(closed, f"the connection stayed open after {status}: {out!r}")
        for w in words:
            self.assertIn(w, out.decode("utf-8", "replace"))

    # ---- 6: request smuggling ------------------------------------------------------------------

    def test_content_length_beside_transfer_encoding_is_400_and_closes(self):
        # the request: a proxy reading Content-Length sees one request, sipp used to answer two
        self.assertRefused(CHAT + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(CHAT_BODY)
                           + MODELS, 400, "both Content-Length and Transfer-Encoding")
        self.assertRefused(CHAT + b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n" % len(CHAT_BODY)
                           + CHAT_BODY + MODELS, 400, "both Content-Length and Transfer-Encoding")

    def test_transfer_encoding_lines_are_one_list(self):
        for lines in ([b"chunked", b"gzip"], [b"chunked, gzip"], [b"gzip", b"chunked"], [b"gzip, chunked"]):
            head = b"".join(b"Transfer-Encoding: %s\r\n" % v for v in lines)
            with self.subTest(lines=lines):
                self.assertRefused(CHAT + head + b"\r\n" + chunked(CHAT_BODY) + MODELS, 501, "'gzip'")
        # chunked twice, no coding at all, or a list that libmicrohttpd would not read as chunked (it
        # would wait for a body it cannot delimit): 400 at once
        for lines in ([b"chunked", b"chunked"], [b"chunked, chunked"], [b""], [b" , "], [b"chunked ,"],
                      [b", chunked"], [b"chunked", b""], [b"chunked  "]):
            head = b"".join(b"Transfer-Encoding: %s\r\n" % v for v in lines)
            with self.subTest(lines=lines):
                self.assertRefused(CHAT + head + b"\r\n" + chunked(CHAT_BODY) + MODELS, 400, "naming chunked once")

    def test_a_chunked_body_alone_is_read(self):
        # the body is read and parsed: the answer names the model it asked for
        for te in (b"chunked", b"Chunked", b"  chunked"):
            with self.subTest(te=te):
                codes, closed, out = self.exchange(CHAT + b"Transfer-Encoding: %s\r\n\r\n" % te + chunked(CHAT_BODY))
                self.assertEqual(codes, [404], out)
                self.assertIn(b"model_not_found", out)
                self.assertFalse(closed, out)

    # ---- 8: Host and the request line ------------------------------------------------------------

    def test_http11_needs_one_host(self):
        self.assertRefused(b"GET /v1/models HTTP/1.1\r\n\r\n", 400, "needs a Host header")
        self.assertRefused(b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n", 400,
                           "more than one Host")
        self.assertRefused(b"GET /v1/models HTTP/1.0\r\nHost: localhost\r\nHost: 127.0.0.1\r\n\r\n", 400,
                           "more than one Host")
        codes, _, out = self.exchange(b"GET /v1/models HTTP/1.0\r\n\r\n")  # HTTP/1.0 has no Host to send
        self.assertEqual(codes, [200], out)

    def test_nul_in_the_request_line_is_refused(self):
        self.assertRefused(b"G\0T /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "NUL byte in its method")
        self.assertRefused(b"G\0 /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "NUL byte in its method")
        self.assertRefused(b"GET /health\0junk HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "NUL byte in its target")
        self.assertRefused(b"GET /v1/models?x=1\0 HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "NUL byte in its target")

    def test_ordinary_request_lines_still_pass(self):
        # queries, percent-encoding and pipelined requests on one connection: each answered in turn
        reqs = [b"GET /v1/models?x=1&y=%20 HTTP/1.1\r\nHost: localhost\r\n\r\n",
                b"GET /v1/models/far HTTP/1.1\r\nHost: localhost\r\n\r\n",
                b"GET /v1/models/f%61r HTTP/1.1\r\nHost: localhost\r\n\r\n",
                b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"]
        codes, closed, out = self.exchange(b"".join(reqs))
        self.assertEqual(codes, [200, 200, 200, 200], out)
        self.assertFalse(closed, out)


if __name__ == "__main__":
    unittest.main()
