"""Images fetched by http(s) URL (issue 30): [media] in the gateway's config, off by default.

  FetchTest           fetch = true with fetch_allow_private = true (the test's HTTP server is on
                      loopback): a PNG it serves answers on chat completions, /v1/chat, Responses and
                      Anthropic's Messages (and count_tokens) with the same prompt tokens as the same
                      image inline, after a redirect too; a 404, a page that is no image, a body over
                      fetch_max_bytes (by its Content-Length, and one without it), a server slower than
                      fetch_timeout_ms, a redirect to file: and a redirect loop are 400s that name the
                      URL (its query hidden) and the problem; a slow fetch holds up no other request.
  PrivateAddressTest  fetch = true, fetch_allow_private left false: a loopback URL, by address and by
                      name, is refused naming the address it resolved to, before the model loads, and
                      the server is never asked.
  FetchOffTest        the default: an http(s) URL is refused on each route naming [media] fetch, and
                      nothing is fetched.
  FetchConfigTest     `sipp serve --check` takes the [media] keys and names wrong ones.

Everything talks to loopback; only processes and servers started here are stopped.
"""

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpfixture  # noqa: E402
import test_gateway_support as gw  # noqa: E402
from test_gateway_images import (ANTHROPIC, chat_image, messages_image, projector_model,  # noqa: E402
                                 responses_image)

from tests.support.images import png  # noqa: E402

VISION = "seeing"
MAX_BYTES = 65536  # [media] fetch_max_bytes here
TIMEOUT_MS = 3000  # [media] fetch_timeout_ms here
HUGE_HEADER_WAIT_S = 30  # the huge-header server's patience
SLOW_S = 5  # the slow endpoint's delay: past TIMEOUT_MS, within the test's patience
CHECK_TIMEOUT_S = 60
IMAGE = png(24, 24, shade=3)
IMAGE_B64 = base64.b64encode(IMAGE).decode()
INLINE = "data:image/png;base64," + IMAGE_B64


def media(fetch=True, allow_private=None, extra=""):
    text = f"[media]\nfetch = {'true' if fetch else 'false'}\n"
    if allow_private is not None:
        text += f"fetch_allow_private = {'true' if allow_private else 'false'}\n"
    return text + extra + "\n"


def native_image(model, url):
    return {**chat_image(model, url), "stream": False}


def url_source(url):
    return {"type": "url", "url": url}


def prompt_tokens(path, body):
    """The prompt's tokens as each route counts them (Anthropic's: evaluated plus reused)."""
    if path == "/v1/messages/count_tokens":
        return body["input_tokens"]
    u = body["usage"]
    if path == "/v1/messages":
        return u["input_tokens"] + u["cache_read_input_tokens"]
    if path == "/v1/responses":
        return u["input_tokens"]
    return u["prompt_tokens"]


# (route, body with an image at a URL, extra headers): every route that takes an image URL
def url_routes(url):
    count = messages_image(VISION, url_source(url))
    del count["max_tokens"], count["temperature"]
    return [
        ("/v1/chat/completions", chat_image(VISION, url), None),
        ("/v1/chat", native_image(VISION, url), None),
        ("/v1/responses", responses_image(VISION, url), None),
        ("/v1/messages", messages_image(VISION, url_source(url)), ANTHROPIC),
        ("/v1/messages/count_tokens", count, ANTHROPIC),
    ]


def inline_routes():
    count = messages_image(VISION, {"type": "base64", "media_type": "image/png", "data": IMAGE_B64})
    del count["max_tokens"], count["temperature"]
    source = {"type": "base64", "media_type": "image/png", "data": IMAGE_B64}
    return [
        ("/v1/chat/completions", chat_image(VISION, INLINE), None),
        ("/v1/chat", native_image(VISION, INLINE), None),
        ("/v1/responses", responses_image(VISION, INLINE), None),
        ("/v1/messages", messages_image(VISION, source), ANTHROPIC),
        ("/v1/messages/count_tokens", count, ANTHROPIC),
    ]


def stand_in_target():
    """A target with a projector that is never loaded here: every request below is refused first."""
    mmproj = gw.write("fetch-stand-in-mmproj.gguf", "not read before a load")
    return gw.local_target(VISION, parallel=1, extra=f'load = "on_demand"\nmmproj = "{mmproj}"')


class FetchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.http = httpfixture.HTTPFixture()
        model = projector_model("fetch")
        cls.gw = gw.serve_config(
            media(True, True, f"fetch_max_bytes = {MAX_BYTES}\nfetch_timeout_ms = {TIMEOUT_MS}\n") +
            gw.local_target(VISION, path=model, parallel=1, ctx=2048,
                            extra='mmproj = "auto"\nmmproj_offload = false'))
        cls.image_url = cls.http.add("/cat.png", IMAGE, "image/png")

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.http.stop()

    def post(self, path, body, headers=None, timeout=gw.HTTP_TIMEOUT_S):
        status, _, b = self.gw.json("POST", path, body, headers, timeout=timeout)
        return status, b

    def refused(self, url, *wanted):
        status, body = self.post("/v1/chat/completions", chat_image(VISION, url))
        self.assertEqual(status, 400, body)
        msg = body["error"]["message"]
        for w in wanted:
            self.assertIn(w, msg)
        return msg

    def test_each_route_answers_a_fetched_image_as_it_would_inline(self):
        inline = {path: (body, headers) for path, body, headers in inline_routes()}
        for path, body, headers in url_routes(self.image_url):
            with self.subTest(route=path):
                self.http.reset_counters()
                status, got = self.post(path, body, headers)
                self.assertEqual(status, 200, got)
                self.assertIn(("/cat.png", None), self.http.requests, "the gateway did not fetch the image")
                status, want = self.post(path, *inline[path])
                self.assertEqual(status, 200, want)
                self.assertEqual(prompt_tokens(path, got), prompt_tokens(path, want))

    def test_the_image_counts_in_the_prompt(self):
        text = {"model": VISION, "max_tokens": 1, "temperature": 0, "stream": False,
                "messages": [{"role": "user", "content": "What is this?"}]}
        _, plain = self.post("/v1/chat", text)
        status, seen = self.post("/v1/chat", native_image(VISION, self.image_url))
        self.assertEqual(status, 200, seen)
        self.assertGreater(seen["usage"]["media_tokens"], 0)
        self.assertGreater(seen["usage"]["prompt_tokens"], plain["usage"]["prompt_tokens"])

    def test_a_redirect_is_followed(self):
        url = self.http.redirect("/moved.png", "/cat.png")
        self.http.reset_counters()
        status, body = self.post("/v1/chat/completions", chat_image(VISION, url))
        self.assertEqual(status, 200, body)
        self.assertEqual([p for p, _ in self.http.requests], ["/moved.png", "/cat.png"])

    def test_a_404_is_named_with_the_query_hidden(self):
        url = self.http.url("/missing.png?token=s3cret#part")
        msg = self.refused(url, "HTTP status 404", self.http.url("/missing.png?..."))
        self.assertNotIn("s3cret", msg)
        self.assertIn("data:image/png;base64", msg, "the refusal says what to do instead")

    def test_a_page_is_not_an_image(self):
        url = self.http.add("/page.html", b"<html><body>not a cat</body></html>", "text/html")
        self.refused(url, url, "not an image", "text/html")

    def test_audio_is_not_an_image(self):
        wav = b"RIFF" + (36).to_bytes(4, "little") + b"WAVEfmt " + bytes(28)
        url = self.http.add("/clip.png", wav, "image/png")
        self.refused(url, url, "not an image", "WAV")

    def test_a_body_over_fetch_max_bytes_is_refused(self):
        big = IMAGE + bytes(MAX_BYTES)
        url = self.http.add("/big.png", big, "image/png")
        self.refused(url, url, f"{len(big)} bytes (its Content-Length)", f"limit of {MAX_BYTES} bytes",
                     "[media] fetch_max_bytes")
        url = self.http.add("/big-unannounced.png", big, "image/png", length=False)
        self.refused(url, url, "was stopped at", f"limit of {MAX_BYTES} bytes", "[media] fetch_max_bytes")

    def test_a_slow_server_times_out(self):
        url = self.http.add("/slow.png", IMAGE, "image/png", delay=SLOW_S)
        t0 = time.monotonic()
        self.refused(url, url, f"after {TIMEOUT_MS} ms", "[media] fetch_timeout_ms")
        took = time.monotonic() - t0
        self.assertGreaterEqual(took, TIMEOUT_MS / 1000 - 0.2)
        self.assertLess(took, SLOW_S, "the fetch waited for the slow server")

    def test_a_slow_fetch_holds_up_no_other_request(self):
        url = self.http.add("/slower.png", IMAGE, "image/png", delay=SLOW_S)
        result = {}

        def slow():
            result["slow"] = self.post("/v1/chat/completions", chat_image(VISION, url))

        t = threading.Thread(target=slow)
        t.start()
        try:
            deadline = time.monotonic() + TIMEOUT_MS / 1000
            while ("/slower.png", None) not in self.http.requests and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertIn(("/slower.png", None), self.http.requests, "the slow fetch did not start")
            status, body = self.post("/v1/chat/completions", chat_image(VISION, self.image_url))
            self.assertEqual(status, 200, body)
            self.assertTrue(t.is_alive(), "the other request finished only after the slow fetch")
        finally:
            t.join(TIMEOUT_MS / 1000 + 30)
        self.assertEqual(result["slow"][0], 400, result["slow"][1])

    def test_a_redirect_to_another_scheme_is_refused(self):
        url = self.http.redirect("/to-file.png", "file:///etc/passwd")
        self.refused(url, url, "not http or https")

    def test_a_redirect_loop_stops(self):
        url = self.http.redirect("/loop.png", "/loop.png")
        self.refused(url, url, "redirects more than")

    def test_other_schemes_are_refused_by_name(self):
        status, body = self.post("/v1/chat/completions", chat_image(VISION, "file:///etc/passwd"))
        self.assertEqual(status, 400, body)
        self.assertIn("'messages[0].content[1].image_url.url'", body["error"]["message"])
        self.assertIn("http(s) URL", body["error"]["message"])


class PrivateAddressTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.http = httpfixture.HTTPFixture()
        cls.url = cls.http.add("/cat.png", IMAGE, "image/png")
        cls.gw = gw.serve_config(media(True) + stand_in_target())

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.http.stop()

    def test_a_loopback_url_is_refused_naming_the_address(self):
        named = f"http://localhost:{self.http.port}/cat.png"
        for url, address in ((self.url, "127.0.0.1"), (named, None)):
            with self.subTest(url=url):
                status, _, body = self.gw.json("POST", "/v1/chat/completions", chat_image(VISION, url))
                self.assertEqual(status, 400, body)
                msg = body["error"]["message"]
                self.assertIn(url, msg)
                self.assertIn("not a public address", msg)
                self.assertIn("fetch_allow_private", msg)
                self.assertIn(address or "", msg)
                self.assertTrue("127.0.0.1" in msg or "::1" in msg, msg)
        self.assertEqual(self.http.requests, [], "a private address was reached")
        _, _, model = self.gw.json("GET", f"/v1/models/{VISION}")
        self.assertEqual(model["state"], "unloaded", "a refused image loaded the model")

    def test_each_route_refuses_it(self):
        for path, body, headers in url_routes(self.url):
            with self.subTest(route=path):
                status, _, b = self.gw.json("POST", path, body, headers)
                self.assertEqual(status, 400, b)
                self.assertIn("127.0.0.1", json.dumps(b))
        self.assertEqual(self.http.requests, [])


class HugeHeaderServer:
    """A raw HTTP server on loopback whose one answer starts with a header line of `size` bytes, sent
    while the client reads (the gateway's fetch stops reading at its own limit)."""

    def __init__(self, size):
        self.size = size
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(HUGE_HEADER_WAIT_S)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/huge.png"
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            try:
                conn.settimeout(HUGE_HEADER_WAIT_S)
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nX-Huge: ")
                chunk = b"a" * 65536
                for _ in range(self.size // len(chunk)):
                    conn.sendall(chunk)
                conn.sendall(b"\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass  # the client stopped reading: what is expected

    def stop(self):
        self.sock.close()
        self.thread.join(HUGE_HEADER_WAIT_S)


class HugeHeaderTest(unittest.TestCase):
    """An image server whose answer has a 10 MB header line: the refusal says so, not "out of memory"."""

    @classmethod
    def setUpClass(cls):
        cls.gw = gw.serve_config(media(True, True) + stand_in_target())

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def test_a_huge_upstream_header_is_named(self):
        server = HugeHeaderServer(10 << 20)
        try:
            status, _, body = self.gw.json("POST", "/v1/chat/completions", chat_image(VISION, server.url))
        finally:
            server.stop()
        self.assertEqual(status, 400, body)
        msg = body["error"]["message"]
        self.assertNotIn("memory", msg.lower())
        for words in (server.url, "header line larger than", "102400 bytes"):
            self.assertIn(words, msg)
        self.assertEqual(self.gw.request("GET", "/health")[0], 200)


class FetchOffTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.http = httpfixture.HTTPFixture()
        cls.url = cls.http.add("/cat.png", IMAGE, "image/png")
        cls.gw = gw.serve_config(stand_in_target())

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.http.stop()

    def test_each_route_refuses_naming_the_setting(self):
        for path, body, headers in url_routes(self.url):
            with self.subTest(route=path):
                status, _, b = self.gw.json("POST", path, body, headers)
                self.assertEqual(status, 400, b)
                msg = json.dumps(b)
                self.assertIn("fetching remote images is off", msg)
                self.assertIn("[media] fetch = true", msg)
        self.assertEqual(self.http.requests, [], "fetching is off, yet the server was asked")


class FetchConfigTest(unittest.TestCase):
    def check(self, text, name):
        path = gw.write(name, text + gw.local_target(VISION))
        return subprocess.run([gw.SIPP, "serve", "--check", "--config", path], capture_output=True, text=True,
                              timeout=CHECK_TIMEOUT_S)

    def test_the_media_keys(self):
        r = self.check(media(True, True, "fetch_max_bytes = 1048576\nfetch_timeout_ms = 500\n"), "media-ok.toml")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.check('[media]\nfetch = "yes"\nfetch_max_bytes = 0\nfetch_timeout_ms = -1\nfetch_proxy = "x"\n',
                       "media-bad.toml")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        for key in ("fetch", "fetch_max_bytes", "fetch_timeout_ms", "fetch_proxy"):
            self.assertIn(key, r.stderr)


if __name__ == "__main__":
    unittest.main()
