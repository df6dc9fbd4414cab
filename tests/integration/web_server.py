"""A static HTTP server on 127.0.0.1 for the browser tests: the repository's browser files and test
models, in a thread of the test process.

    /bindings/web/*, /build/web/*, /tests/integration/web/*, /web/*, /bench/web/*
                        files of the repository (the package, the runtime make web built, the harness)
    /models/NAME        a registered model file (no-store: a second load cannot come from the HTTP cache)
    /models/corrupt/NAME  the same bytes with one flipped in the middle (a corrupted download)

With isolated=True every response carries Cross-Origin-Opener-Policy: same-origin and
Cross-Origin-Embedder-Policy: require-corp, so pages are cross-origin isolated and get the pthread
build; without, they get the single-thread build. It counts the requests per path.
"""

import collections
import http.server
import os
import threading

from tests.integration.common import ROOT

SERVED_PREFIXES = ("/bindings/web/", "/build/web/", "/tests/integration/web/", "/web/", "/bench/web/")
TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".html": "text/html",
         ".css": "text/css", ".json": "application/json", ".gguf": "application/octet-stream"}
JOIN_TIMEOUT_S = 5


class WebServer:
    def __init__(self, isolated):
        self.isolated = isolated
        self.models = {}
        self.counts = collections.Counter()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.split("?")[0]
                outer.counts[path] += 1
                body = outer._body(path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", TYPES.get(os.path.splitext(path)[1], "application/octet-stream"))
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                if outer.isolated:
                    self.send_header("Cross-Origin-Opener-Policy", "same-origin")
                    self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def add_model(self, name, path):
        with open(path, "rb") as f:
            self.models[name] = f.read()
        return f"{self.base}/models/{name}"

    def _body(self, path):
        if path.startswith("/models/corrupt/"):
            data = self.models.get(path[len("/models/corrupt/"):])
            if data is None:
                return None
            mid = len(data) // 2
            return data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:]
        if path.startswith("/models/"):
            return self.models.get(path[len("/models/"):])
        if not path.startswith(SERVED_PREFIXES) or ".." in path:
            return None
        full = os.path.join(ROOT, path.lstrip("/"))
        if not os.path.isfile(full):
            return None
        with open(full, "rb") as f:
            return f.read()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(JOIN_TIMEOUT_S)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
