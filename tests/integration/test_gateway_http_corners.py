"""Integration tests of the gateway's HTTP corners (issue 44, item 4): what libmicrohttpd would answer
with an HTML page of its own is answered by sipp in JSON, absolute-form request targets, and
count_tokens past the context.

  SizesTest          a request line and headers over 16 KiB are a JSON 431 (also in thousands of tiny
                     lines, and at 100 KB), a target over 8 KiB a JSON 414, a chunked body's trailer
                     over 16 KiB a JSON 431; a 100 KB chunk extension (MHD skips extensions) reaches
                     the route instead of MHD's HTML 500; headers just under the limit are served.
  AbsoluteFormTest   "GET http://host:port/health" (RFC 9112 3.2.2) is routed by its path, and its
                     authority is checked as Host is: a foreign one is 403 host_not_allowed whatever
                     Host says; user information or a percent-encoded authority is 400.
  CountPastContextTest
                     /v1/messages/count_tokens on a prompt longer than the context answers 200 with the
                     count, context_window and exceeds_context_window; a prompt that fits answers as
                     before, with input_tokens only.

Every request is exact bytes on a raw socket to a `sipp serve` on loopback; every wait is bounded. The
servers of the first two classes have one remote target on a closed port: they need no model.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

WAIT_S = 15
HEADER_MAX = 16384  # the request line and headers sipp reads (connection.c GW_HEADER_MAX)
TARGET_MAX = 8192  # the request target (GW_TARGET_MAX)
CHAT = b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
NOPE = b'{"model": "nope", "messages": [{"role": "user", "content": "hi"}]}'
ANTHROPIC = {"anthropic-version": "2023-06-01", "Content-Type": "application/json"}


def remote_server():
    return gw.serve_config('[[targets]]\nname = "far"\ntype = "openai_compatible"\n'
                           f'base_url = "http://127.0.0.1:{gw.closed_port()}/v1"\n')


def exchange(g, data):
    return gw.raw_request(g, data, WAIT_S)


def get(path, *headers):
    return b"GET " + path + b" HTTP/1.1\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n"


class RemoteServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = remote_server()

    @classmethod
    def tearDownClass(cls):
        assert cls.gw.stop() == 0, cls.gw.text()

    def assertJsonError(self, answer, status, code, *words):
        got, hdrs, body = answer
        self.assertEqual(got, status, body[:300])
        self.assertTrue(hdrs.get("content-type", "").startswith("application/json"), (hdrs, body[:300]))
        err = json.loads(body)["error"]
        self.assertEqual(err["code"], code, err)
        for w in words:
            self.assertIn(w, err["message"])
        return err


class SizesTest(RemoteServerTest):
    def test_a_long_chunk_extension_reaches_the_route(self):
        # MHD's buffer held 32 KiB: a longer chunk line was its HTML 500. Extensions mean nothing to
        # sipp (RFC 9112 7.1.1 lets a recipient ignore them): the body is read and routed.
        for size in (100000, 300000):
            line = b"%x;ext=%s\r\n" % (len(NOPE), b"a" * size)
            answer = exchange(self.gw, CHAT + b"Transfer-Encoding: chunked\r\n\r\n" + line + NOPE + b"\r\n0\r\n\r\n")
            self.assertJsonError(answer, 404, "model_not_found", "nope")

    def test_headers_over_the_limit_are_a_json_431(self):
        pad = HEADER_MAX - len(get(b"/health", b"Host: localhost", b"X-Pad: ")) - 100
        self.assertEqual(exchange(self.gw, get(b"/health", b"Host: localhost", b"X-Pad: " + b"a" * pad))[0], 200)
        for headers in ([b"X-Big: " + b"a" * 20000], [b"X-Big: " + b"a" * 100000],
                        [b"x:" for _ in range(4096)], [b"X-%d: 1" % i for i in range(3000)]):
            answer = exchange(self.gw, get(b"/health", b"Host: localhost", *headers))
            self.assertEqual(answer[1].get("connection"), "close")
            self.assertJsonError(answer, 431, "headers_too_large", f"over the {HEADER_MAX}", "fewer or shorter")

    def test_a_target_over_the_limit_is_a_json_414(self):
        for size in (TARGET_MAX + 1, 100000):
            answer = exchange(self.gw, get(b"/health?q=" + b"a" * size, b"Host: localhost"))
            self.assertJsonError(answer, 414, "uri_too_long", f"over the {TARGET_MAX}", "in the body")

    def test_a_large_trailer_is_a_json_431(self):
        body = CHAT + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n" % (len(NOPE), NOPE)
        answer = exchange(self.gw, body + b"X-Trailer: " + b"a" * 100000 + b"\r\n\r\n")
        self.assertJsonError(answer, 431, "headers_too_large", "trailer", f"over the {HEADER_MAX}")
        self.assertJsonError(exchange(self.gw, body + b"X-Trailer: small\r\n\r\n"), 404, "model_not_found")


class AbsoluteFormTest(RemoteServerTest):
    def url(self, host, path):
        return b"http://%s%s" % (host.encode(), path)

    def test_an_absolute_target_is_routed_by_its_path(self):
        here = f"127.0.0.1:{self.gw.port}"
        for target in (self.url(here, b"/health"), self.url("localhost", b"/health"),
                       b"HTTPS://localhost/health", self.url(here, b"/health?x=1")):
            status, _, body = exchange(self.gw, get(target, b"Host: localhost"))
            self.assertEqual((status, json.loads(body)), (200, {"status": "ok"}), target)
        status, _, body = exchange(self.gw, get(self.url(here, b"/v1/models"), b"Host: " + here.encode()))
        self.assertEqual(status, 200, body)
        self.assertEqual([m["id"] for m in json.loads(body)["data"]], ["far"])
        # the same answer as the origin form, for a path that is not a route too
        self.assertJsonError(exchange(self.gw, get(self.url(here, b"/v1/nothing"), b"Host: localhost")),
                             404, "route_not_found", "/v1/nothing")
        self.assertEqual(exchange(self.gw, get(self.url(here, b""), b"Host: localhost"))[0],
                         exchange(self.gw, get(b"/", b"Host: localhost"))[0])

    def test_the_authority_is_checked_as_host_is(self):
        # Host names this server, the target another: the target's authority is what counts
        answer = exchange(self.gw, get(self.url("attacker.example", b"/v1/models"), b"Host: localhost"))
        self.assertJsonError(answer, 403, "host_not_allowed", "attacker.example", "allowed_hosts")
        answer = exchange(self.gw, get(self.url("localhost", b"/v1/models"), b"Host: attacker.example"))
        self.assertEqual(answer[0], 200, answer[2])

    def test_an_authority_that_is_not_plain_is_refused(self):
        for target in (b"http://user:pw@localhost/health", b"http://local%68ost/health", b"http:///health"):
            answer = exchange(self.gw, get(target, b"Host: localhost"))
            self.assertJsonError(answer, 400, "bad_request", "absolute URL", "plain host[:port]")


class CountPastContextTest(unittest.TestCase):
    CTX = 256

    @classmethod
    def setUpClass(cls):
        cls.gw = gw.serve_config(gw.local_target("tiny", parallel=1, ctx=cls.CTX))

    @classmethod
    def tearDownClass(cls):
        assert cls.gw.stop() == 0, cls.gw.text()

    def count(self, text):
        body = {"model": "tiny", "messages": [{"role": "user", "content": text}]}
        return self.gw.json("POST", "/v1/messages/count_tokens", body, ANTHROPIC)

    def test_a_prompt_past_the_context_is_counted(self):
        status, _, small = self.count("hello there")
        self.assertEqual(status, 200, small)
        self.assertEqual(set(small), {"input_tokens"})
        words = " ".join(f"word{i}" for i in range(400))
        status, _, big = self.count(words)
        self.assertEqual(status, 200, big)
        self.assertGreater(big["input_tokens"], self.CTX)
        self.assertEqual((big["context_window"], big["exceeds_context_window"]), (self.CTX, True))
        # the count is the prompt's: twice the words, about twice the tokens
        status, _, bigger = self.count(words + " " + words)
        self.assertEqual(status, 200, bigger)
        self.assertGreater(bigger["input_tokens"], 2 * big["input_tokens"] - small["input_tokens"] - 8)
        # a generation of that prompt is still refused, naming the context
        status, _, err = self.gw.json("POST", "/v1/messages", {"model": "tiny", "max_tokens": 4, "messages": [
            {"role": "user", "content": words}]}, ANTHROPIC)
        self.assertEqual(status, 400, err)
        self.assertIn("context", err["error"]["message"])


if __name__ == "__main__":
    unittest.main()
