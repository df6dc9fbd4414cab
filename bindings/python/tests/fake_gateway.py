"""A stand-in for a sipp gateway's OpenAI routes, for testing the bindings' gateway endpoints.

It answers /v1/models, /v1/completions, /v1/chat/completions (both with SSE streaming) and
/v1/embeddings with predictable content, so the tests can check exactly what the client parsed:

    completion text   " w0 w1 ... w{max_tokens-1}" (max_tokens defaults to 8), finish "length"
    chat text         "echo: " + the last message's content, one word per chunk, finish "stop"
    embedding         [len(text), 1, 2, ..., 7] (not normalised, so the client's normalize shows)
    prompt "slow..."  one word every 50 ms up to 2000 words: a stream to cancel
    prompt "fail"     HTTP 500 with an OpenAI-shaped error, code "internal_error"
    prompt "midfail"  one chunk, then an error event in the stream

GET /debug/state tells what it saw: the last request body, the Authorization header, and how many
streams the client closed before the end. The bindings' own tests of the real gateway (`sipp
serve`) are separate and skip while it does not exist.

Run standalone (the Node tests do): python3 fake_gateway.py [--token T] prints "PORT n" and serves.
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fake-model"


class State:
    def __init__(self, token=None):
        self.token = token
        self.lock = threading.Lock()
        self.last_body = None
        self.last_auth = None
        self.disconnects = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-sipp-gateway"

    def log_message(self, *args):  # quiet
        pass

    @property
    def state(self):
        return self.server.state

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, code, message, kind, err_code):
        self.send_json(code, {"error": {"message": message, "type": kind, "code": err_code}})

    def authorized(self):
        auth = self.headers.get("Authorization")
        with self.state.lock:
            self.state.last_auth = auth
        if self.state.token and auth != f"Bearer {self.state.token}":
            self.error(401, "missing or wrong bearer token", "authentication_error", "invalid_token")
            return False
        return True

    def do_GET(self):
        if self.path == "/debug/state":
            with self.state.lock:
                s = self.state
                return self.send_json(200, {"last_body": s.last_body, "last_auth": s.last_auth,
                                            "disconnects": s.disconnects})
        if not self.authorized():
            return
        if self.path == "/v1/models":
            return self.send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        self.error(404, f"no route {self.path}", "invalid_request_error", "not_found")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return self.error(400, "the body is not valid JSON", "invalid_request_error", "invalid_json")
        with self.state.lock:
            self.state.last_body = body
        if not self.authorized():
            return
        if body.get("model") != MODEL:
            return self.error(404, f"model '{body.get('model')}' is not served here", "invalid_request_error",
                              "model_not_found")
        if self.path == "/v1/embeddings":
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else inputs
            data = [{"object": "embedding", "index": i, "embedding": [float(len(t))] + [float(k) for k in range(1, 8)]}
                    for i, t in enumerate(inputs)]
            return self.send_json(200, {"object": "list", "data": data, "model": MODEL,
                                        "usage": {"prompt_tokens": sum(len(t.split()) for t in inputs)}})
        chat = self.path == "/v1/chat/completions"
        if not chat and self.path != "/v1/completions":
            return self.error(404, f"no route {self.path}", "invalid_request_error", "not_found")
        max_tokens = body.get("max_tokens", 8)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return self.error(400, "'max_tokens' must be an integer >= 1", "invalid_request_error", "invalid_field")
        prompt = body["messages"][-1]["content"] if chat else body.get("prompt", "")
        if prompt == "fail":
            return self.error(500, "the engine failed", "server_error", "internal_error")
        delay = 0.0
        if chat:
            words = ["echo:"] + prompt.split()
            pieces = [w if i == 0 else " " + w for i, w in enumerate(words)][:max_tokens]
            finish = "stop" if len(words) <= max_tokens else "length"
        else:
            slow = prompt.startswith("slow")
            n = 2000 if slow else max_tokens
            delay = 0.05 if slow else 0.0
            pieces = [f" w{i}" for i in range(n)]
            finish = "length"
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(pieces),
                 "total_tokens": len(prompt.split()) + len(pieces)}
        stats = {"ttft_ms": 1.0, "backend": "fake"}
        if not body.get("stream"):
            text = "".join(pieces)
            choice = {"index": 0, "finish_reason": finish}
            choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
            return self.send_json(200, {"object": "chat.completion" if chat else "text_completion", "model": MODEL,
                                        "choices": [choice], "usage": usage, "stats": stats})
        self.stream(pieces, chat, finish, usage, stats, delay, prompt == "midfail",
                    (body.get("stream_options") or {}).get("include_usage"))

    def stream(self, pieces, chat, finish, usage, stats, delay, midfail, include_usage):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(obj):
            data = obj if isinstance(obj, str) else json.dumps(obj)
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()

        def chunk(piece, reason=None):
            choice = {"index": 0, "finish_reason": reason}
            choice.update({"delta": {"content": piece}} if chat else {"text": piece})
            return {"object": "chat.completion.chunk" if chat else "text_completion", "model": MODEL,
                    "choices": [choice]}

        try:
            for i, piece in enumerate(pieces):
                event(chunk(piece))
                if midfail:
                    event({"error": {"message": "the engine failed mid-stream", "type": "server_error",
                                     "code": "internal_error"}})
                    return
                if delay:
                    time.sleep(delay)
            event(chunk("", finish))
            if include_usage:
                event({"object": "text_completion", "model": MODEL, "choices": [], "usage": usage, "stats": stats})
            event("[DONE]")
        except (BrokenPipeError, ConnectionResetError):
            with self.state.lock:
                self.state.disconnects += 1


def start(token=None, port=0):
    """Starts a server in a daemon thread; returns it (server.server_port, server.shutdown())."""
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.state = State(token)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--token")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.state = State(args.token)
    print(f"PORT {server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
