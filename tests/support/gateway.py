"""tests/support/gateway.py: starting `sipp serve` and talking to it, for the gateway tests
(test_gateway*.py import it as test_gateway_support, which re-exports it) and anything else that needs
a server.

Each test starts `sipp serve` as a subprocess on 127.0.0.1 with --port 0 (the kernel picks a free
port, which the server prints on stderr as "listening on http://HOST:PORT"), waits for /ready with a
bounded loop, talks real HTTP with the standard library only, and stops the one process it started
(SIGTERM, then SIGKILL after a bound). Models are tiny synthetic GGUF files made with sipp-synth.
Engines always run with threads = 1: the test machines have few cores.
"""

import atexit
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
import urllib.parse

from tests.support.paths import BUILD, SIPP, SYNTH, VOCAB_DIR
from tests.support.ports import closed_port, free_port  # noqa: F401 (re-exported)
from tests.support.wait import wait_until  # noqa: F401 (re-exported)

VOCAB = os.path.join(VOCAB_DIR, "ggml-vocab-llama-bpe.gguf")
LISTENING_RE = re.compile(r"listening on http://\[?([^\]\s]+?)\]?:(\d+)")

START_TIMEOUT_S = 30  # until "listening on" appears
READY_TIMEOUT_S = 90  # until /ready says 200
STOP_TIMEOUT_S = 30  # SIGTERM to exit
HTTP_TIMEOUT_S = 60
POLL_S = 0.05

TINY = ["--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128", "--type", "q8_0"]

_tmp = None
_models = {}


def tmpdir():
    global _tmp
    if _tmp is None:
        _tmp = tempfile.mkdtemp(prefix="sipp-gateway-test-")
        atexit.register(shutil.rmtree, _tmp, True)
    return _tmp


def check_build():
    for path in (SIPP, SYNTH):
        if not os.access(path, os.X_OK):
            raise AssertionError(f"{path} is not built (make all)")
    if not os.path.isfile(VOCAB):
        raise AssertionError(f"{VOCAB} is missing (make deps)")


def model(name="tiny", seed=1):
    """A tiny chatml model, made once per test process."""
    check_build()
    key = (name, seed)
    if key not in _models:
        path = os.path.join(tmpdir(), f"{name}.gguf")
        r = subprocess.run([SYNTH, "--out", path, "--vocab", VOCAB, "--seed", str(seed), *TINY],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"sipp-synth failed: {r.stderr}")
        _models[key] = path
    return _models[key]


def synth_model(name, *flags, vocab=None):
    """A tiny model of sipp-synth's with flags (--rerank, --fim, a template), made once per test
    process under name; vocab a vocabulary file (default llama-bpe's)."""
    check_build()
    path = os.path.join(tmpdir(), name)
    if not os.path.exists(path):
        r = subprocess.run([SYNTH, "--out", path, "--vocab", vocab or VOCAB, *TINY, *flags],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"sipp-synth {' '.join(flags)} failed: {r.stderr}")
    return path


def write(name, text):
    path = os.path.join(tmpdir(), name)
    with open(path, "w") as f:
        f.write(text)
    return path


def listening_address(log_text):
    """(host, port) from the "listening on http://HOST:PORT" line a server started with --port 0
    prints, or None before it has."""
    m = LISTENING_RE.search(log_text)
    return (m.group(1), int(m.group(2))) if m else None


class Gateway:
    """One `sipp serve` process."""

    def __init__(self, args, env=None, wait_ready=True, preexec_fn=None):
        self.log_path = os.path.join(tmpdir(), f"serve-{os.getpid()}-{time.monotonic_ns()}.log")
        self.log = open(self.log_path, "w+")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen([SIPP, "serve", *args], stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=full_env, preexec_fn=preexec_fn)
        self.host, self.port = self._wait_listening()
        if wait_ready:
            self.wait_ready()

    def _wait_listening(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            addr = listening_address(self.text())
            if addr:
                return addr
            if self.proc.poll() is not None:
                raise AssertionError(f"sipp serve exited with {self.proc.returncode}:\n{self.text()}")
            time.sleep(POLL_S)
        self.kill()
        raise AssertionError(f"sipp serve did not start listening within {START_TIMEOUT_S} s:\n{self.text()}")

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.request("GET", "/ready")[0] == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise AssertionError(f"sipp serve exited with {self.proc.returncode}:\n{self.text()}")
            time.sleep(POLL_S * 4)
        raise AssertionError(f"/ready did not answer 200 within {timeout} s:\n{self.text()}")

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    @property
    def base(self):
        return f"http://{self.host}:{self.port}"

    def connect(self, timeout=HTTP_TIMEOUT_S):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=HTTP_TIMEOUT_S):
        """Returns (status, headers as a lower-case dict, body bytes)."""
        conn = self.connect(timeout)
        try:
            data = body
            hdrs = dict(headers or {})
            if body is not None and not isinstance(body, (bytes, str)):
                data = json.dumps(body)
            if body is not None:  # raw bodies too: they are (malformed) JSON as a client sends it
                hdrs.setdefault("Content-Type", "application/json")
            conn.request(method, path, body=data, headers=hdrs)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def json(self, method, path, body=None, headers=None, timeout=HTTP_TIMEOUT_S):
        status, hdrs, data = self.request(method, path, body, headers, timeout)
        return status, hdrs, json.loads(data) if data else None

    def stream(self, path, body, headers=None, timeout=HTTP_TIMEOUT_S):
        """Posts and returns (connection, response) with the body unread, for SSE."""
        conn = self.connect(timeout)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        conn.request("POST", path, body=json.dumps(body), headers=hdrs)
        return conn, conn.getresponse()

    def sse(self, path, body, headers=None, timeout=HTTP_TIMEOUT_S):
        """Posts and reads the whole event stream: (status, Content-Type, [(event, data), ...])."""
        conn, resp = self.stream(path, body, headers, timeout)
        try:
            return resp.status, resp.getheader("Content-Type") or "", list(read_sse(resp))
        finally:
            conn.close()

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        assert status == 200, status
        return parse_metrics(data.decode())

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=STOP_TIMEOUT_S):
        """SIGTERM and wait; returns the exit status (SIGKILL after the bound)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT_S)
        self.log.close()


def raw_request(g, data, timeout=HTTP_TIMEOUT_S):
    """Sends raw bytes on a fresh connection to g and parses the one response: (status, headers as a
    lower-case dict, body bytes)."""
    sock = socket.create_connection((g.host, g.port), timeout=timeout)
    try:
        sock.sendall(data)
        resp = http.client.HTTPResponse(sock, method="GET")
        resp.begin()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        sock.close()


def serve_model(path=None, *flags, env=None, wait_ready=True):
    path = path or model()
    return Gateway([path, "--port", "0", "--threads", "1", *flags], env=env, wait_ready=wait_ready)


def serve_config(text, *flags, env=None, wait_ready=True):
    path = write(f"config-{time.monotonic_ns()}.toml", text)
    return Gateway(["--config", path, "--port", "0", *flags], env=env, wait_ready=wait_ready)


def local_target(name="tiny", path=None, parallel=2, ctx=1024, extra=""):
    return (f'[[targets]]\nname = "{name}"\ntype = "local"\nmodel = "{path or model()}"\n'
            f"threads = 1\nparallel = {parallel}\nctx_size = {ctx}\n{extra}\n")


def read_sse(resp, limit_events=100000):
    """Parses a server-sent event stream as a client would: yields (event, data) per event, event
    None when the server named none. Stops at the end of the body."""
    event, data = None, []
    n = 0
    while n < limit_events:
        raw = resp.readline()
        if not raw:
            break
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                yield event, "\n".join(data)
                n += 1
            event, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[len("event:"):].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:"):].lstrip(" "))


def parse_metrics(text):
    """{(name, frozenset(labels.items())): value}"""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$', line)
        if not m:
            raise AssertionError(f"not a Prometheus sample line: {line!r}")
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(4))
    return out


def metric(metrics, name, **labels):
    return metrics.get((name, frozenset(labels.items())))


def chat_body(model_name="tiny", content="Hello there", **kw):
    body = {"model": model_name, "messages": [{"role": "user", "content": content}], "max_tokens": 8,
            "temperature": 0}
    body.update(kw)
    return body


def url_join(base, path):
    return urllib.parse.urljoin(base + "/", path.lstrip("/"))
