"""A real HTTP server on 127.0.0.1 for the download tests (sipp pull) and the gateway's image fetches,
in a thread of the test process.

It serves byte strings registered by path (each with its Content-Type, and optionally a delay before
its answer or no Content-Length: the body then ends where the connection closes) and can misbehave
on purpose:

    mode "normal"   GET with Range support (206, 416, If-Range against the ETag), like a CDN
    mode "norange"  ignores Range and If-Range: always 200 with the whole body, no Accept-Ranges
    mode "404"      every GET is 404
    drop_after=N, drops=K
                    the next K responses send N body bytes and then close the connection, although
                    their Content-Length promised the rest (a dropped transfer)
    chunk_delay=S   sleep S seconds between 64 KiB chunks of a body (a slow link)

It counts the body bytes it sent (`bytes_served`) and records each request's path and Range header,
so a test can prove that a resumed download fetched only the missing part. Everything is bounded:
the server thread stops on `stop()` (also as a context manager), sockets time out, and the server
only listens on loopback.
"""

import hashlib
import http.server
import re
import socket
import threading
import time

from tests.support.ports import closed_port  # noqa: F401 (the download tests import it from here)

CHUNK = 64 * 1024
SOCKET_TIMEOUT_S = 10
POLL_INTERVAL_S = 0.05
JOIN_TIMEOUT_S = 5
RANGE_RE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT_S

    def log_message(self, fmt, *args):  # quiet: tests read the counters instead
        pass

    def do_GET(self):
        fx = self.server.fixture
        with fx.lock:
            fx.active += 1
        try:
            self._get(fx)
        finally:
            with fx.lock:
                fx.active -= 1

    def _get(self, fx):
        path = self.path.split("?", 1)[0]
        rng = self.headers.get("Range")
        with fx.lock:
            fx.requests.append((path, rng))
            mode = fx.mode
            data = fx.files.get(path)
            meta = fx.meta.get(path, {})
            redirect = fx.redirects.get(path)
            drop = fx.drops > 0 and data is not None and mode != "404"
            if drop:
                fx.drops -= 1
        if redirect is not None:
            self._head(302, [("Location", redirect), ("Content-Length", "0")])
            return
        if mode == "404" or data is None:
            body = b"<html><body>404 Not Found</body></html>"
            self._head(404, [("Content-Type", "text/html"), ("Content-Length", str(len(body)))])
            self._send(body)
            return
        if meta.get("delay"):
            time.sleep(meta["delay"])
        etag = '"%s"' % hashlib.sha1(data).hexdigest()
        status, start, end = 200, 0, len(data)
        headers = [("Content-Type", meta.get("content_type", "application/octet-stream")), ("ETag", etag)]
        if not meta.get("length", True):
            self._head(status, headers)
            self._send(data)
            return
        if mode != "norange":
            headers.append(("Accept-Ranges", "bytes"))
            m = RANGE_RE.match(rng or "")
            if_range = self.headers.get("If-Range")
            if m and (if_range is None or if_range == etag):
                start = int(m.group(1))
                if start >= len(data):
                    self._head(416, headers + [("Content-Range", "bytes */%d" % len(data)), ("Content-Length", "0")])
                    return
                if m.group(2):
                    end = min(end, int(m.group(2)) + 1)
                status = 206
                headers.append(("Content-Range", "bytes %d-%d/%d" % (start, end - 1, len(data))))
        body = data[start:end]
        self._head(status, headers + [("Content-Length", str(len(body)))])
        if drop:
            self._send(body[: fx.drop_after])
            self.close_connection = True
            return
        self._send(body)

    def _head(self, status, headers):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _send(self, body):
        fx = self.server.fixture
        try:
            for i in range(0, len(body), CHUNK):
                piece = body[i : i + CHUNK]
                self.wfile.write(piece)
                with fx.lock:
                    fx.bytes_served += len(piece)
                    delay = fx.chunk_delay
                if delay:
                    self.wfile.flush()
                    time.sleep(delay)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            pass  # the client went away; that is its business


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class HTTPFixture:
    def __init__(self):
        self.files = {}
        self.meta = {}
        self.redirects = {}
        self.mode = "normal"
        self.drop_after = 0
        self.drops = 0
        self.chunk_delay = 0
        self.active = 0
        self.bytes_served = 0
        self.requests = []
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fixture = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": POLL_INTERVAL_S}, daemon=True
        )
        self._thread.start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def add(self, path, data, content_type=None, delay=0, length=True):
        """Serves data at path: as content_type (default application/octet-stream), after delay
        seconds, and with length=False without a Content-Length."""
        with self.lock:
            self.files[path] = data
            self.meta[path] = {"delay": delay, "length": length}
            if content_type:
                self.meta[path]["content_type"] = content_type
        return self.url(path)

    def redirect(self, path, to_path):
        """A 302 from path to another path here, or to to_path itself when it is a URL."""
        with self.lock:
            self.redirects[path] = to_path if "://" in to_path else self.url(to_path)
        return self.url(path)

    def set(self, mode=None, drop_after=None, drops=None, chunk_delay=None):
        with self.lock:
            if chunk_delay is not None:
                self.chunk_delay = chunk_delay
            if mode is not None:
                self.mode = mode
            if drop_after is not None:
                self.drop_after = drop_after
            if drops is not None:
                self.drops = drops

    def wait_idle(self, timeout=JOIN_TIMEOUT_S):
        """Waits until no response is being sent (a client that went away leaves its handler writing
        until the socket says so)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.active == 0:
                    return True
            time.sleep(POLL_INTERVAL_S)
        return False

    def reset_counters(self):
        with self.lock:
            self.bytes_served = 0
            self.requests = []

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(JOIN_TIMEOUT_S)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
