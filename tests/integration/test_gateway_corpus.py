"""The gateway corpus: recorded requests over every route and API, and the bytes each answer must be.

Each file of tests/fixtures/gateway-corpus/ is one request (method, path, headers, a JSON, raw or
multipart body) and the answer it got when it was recorded: the status, the headers that matter and
the body, with what changes from run to run masked by one function, `mask` (below). The files run in
the order of their names against one gateway (CorpusServer: the trained sipp-demo model, tiny
synthetic ones with a reasoning template, an image projector and an audio projector, a remote
target that is a second sipp, a supervised target served by a child over ggml's RPC backend), every
answer greedy (temperature 0 or a fixed seed), so a run gives the same bytes as the last. Every local
target has one slot (but demo-n2, for n = 2, which one entry uses), so requests never share a batch.

The corpus is the safety net of a restructuring (issue 45): the same bytes before and after. A
change of behaviour that is meant re-records the files in its own commit:

    SIPP_CORPUS_RECORD=1 python3 -m unittest tests.integration.test_gateway_corpus

rewrites every file's "response" from what the gateway answers now (the requests stay as written);
`git diff tests/fixtures/gateway-corpus` then shows exactly what changed. To add an entry, write a
file with a "request" (and an "about" line) and record.

Placeholders in a request, expanded when it is sent: "{{png:W:H:SHADE}}" a PNG data: URL
(tests/support/images.py), "{{png64:W:H:SHADE}}" its bare base64, "{{wav:SECONDS}}" a WAV clip's
bytes (in a form's file) or its base64 (in JSON), "{{var:NAME}}" a value an earlier entry captured
("capture": {"NAME": "key"} takes the JSON answer's top-level key). "auth" is "user" (the
default), "admin", "none" or "wrong".

The answers are recorded on the CPU backend (every local target says backend = "cpu"), on an Intel
Xeon with AMX. CPU kernels of another instruction set round differently: floats (embeddings,
logprobs) are masked for that reason, and the answers are short greedy ones, most of them from the
trained model, whose choices have wide margins. A machine where an answer still differs re-records
before a restructuring and compares after.
"""

import base64
import difflib
import json
import os
import re
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support.audio import wav  # noqa: E402
from tests.support.images import png  # noqa: E402
from tests.support.models import make_projector  # noqa: E402
from tests.support.paths import ROOT  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

CORPUS = os.path.join(ROOT, "tests", "fixtures", "gateway-corpus")
RECORD = os.environ.get("SIPP_CORPUS_RECORD") == "1"
DEMO = os.path.join(ROOT, "models", "sipp-demo.gguf")
# the pinned llama.cpp's chat templates, laid out once in build/ (like the vocabularies) for every build
TEMPLATES = os.path.join(os.path.dirname(gw.VOCAB_DIR), "source", "models", "templates")
USER_TOKEN = "corpus-user-token-0123456789"
ADMIN_TOKEN = "corpus-admin-token-0123456789"
TOKENS = {"user": USER_TOKEN, "admin": ADMIN_TOKEN, "wrong": "not-a-token-of-this-gateway", "none": None}
BOUNDARY = "sipp-corpus-boundary"
RPC_WAIT_S = 60
HTTP_TIMEOUT_S = 120

# ---- masking --------------------------------------------------------------------------------------
#
# mask(path, text) is the one place that says what may differ between two runs. It works on the text,
# so every other byte is compared as it was sent (key order, spacing, escapes, number formatting):
#   1. the value of a JSON key named in MASKED_KEYS (any route) or ROUTE_KEYS[path] (that route's
#      answers), whole (an object or array too), becomes "<KEY>": times, durations, speeds, ids, pids,
#      measured memory, on /v1/backends what depends on the machine (its CPU, devices, modules), and
#      the prompt tokens found in a slot's cache (whether an idle slot still holds a prefix when the
#      next request comes can depend on when the engine thread gave it back);
#   2. what belongs to this run (the models' temporary directory, the checkout, the ports of the
#      upstream, the rpc-server and the supervised child) becomes <tmp>, <root> and <port>;
#   3. clock times (2026-12-07T02:30:21.08Z) become <time>, floats with five or more decimals <float>
#      (embeddings and logprobs: the last digits depend on the CPU's kernels), ids made of random hex
#      (chatcmpl-..., resp_..., a request id) <hex>, random tool call ids (call_..., toolu_...)
#      call_<id>, and base64 of 64 or more characters (an embedding as base64) <base64>;
#   4. /metrics keeps its lines with every sample's value masked (the counters depend on timing of
#      the keeper thread and the memory on the machine);
#   5. a stream (SSE or NDJSON) has its adjacent pieces of text joined: two events that differ only
#      in the text of one delta key (DELTA) become one event holding both texts, since how many
#      tokens one event carries depends on when the server's reader ran, not on what it sent
#      (sequence_number, which counts events, is masked for the same reason).
MASKED_KEYS = (
    "created", "created_at", "completed_at", "modified_at", "expires_at", "last_used", "unload_at",
    "last_load_ms", "ttft_ms", "prefill_tokens_per_s", "decode_tokens_per_s", "queue_ms", "total_ms",
    "total_duration", "load_duration", "prompt_eval_duration", "eval_duration", "duration_ms",
    "host_bytes", "device_bytes", "total_bytes", "weights_bytes", "kv_bytes", "compute_bytes",
    "system_fingerprint", "uptime_s", "sequence_number", "pid", "cached_tokens", "cache_read_input_tokens",
)
ROUTE_KEYS = {
    "/v1/backends": ("cpu_module", "backends", "devices", "reason", "placement", "gpu_layers", "artifact",
                     "sbom", "signed"),
    "/api/ps": ("size", "size_vram"),
    "/v1/messages": ("input_tokens",),  # Anthropic's counts the prompt tokens the cache did not hold
}
HEX_ID = re.compile(r"(?<![0-9A-Za-z])(?=[0-9]*[a-f])[0-9a-f]{16,}(?![0-9A-Za-z])")
LOOPBACK_PORT = re.compile(r"(127\.0\.0\.1|localhost|\[::1\]):\d+")
CALL_ID = re.compile(r"\b(call|toolu)_[A-Za-z0-9]{16,}\b")
CLOCK = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
FLOAT = re.compile(r"(?<![\w.])-?\d+(?:\.\d{5,}(?:[eE][-+]?\d+)?|(?:\.\d+)?[eE][-+]?\d+)(?![\w.])")
BASE64 = re.compile(r"(?<=\")[A-Za-z0-9+/]{64,}={0,2}(?=\")")
METRIC_VALUE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) \S+$", re.M)
SCALAR_END = re.compile(r"[^,}\]\s]*")  # a number or a literal runs to one of these
DELTA = re.compile(r'"(content|reasoning_content|text|delta|arguments|partial_json|thinking|response)":"')
STREAM_TYPES = ("text/event-stream", "application/x-ndjson")
# The headers an answer is compared on: all but these, which change with the run or the transport.
UNCOMPARED_HEADERS = ("date", "content-length", "transfer-encoding", "connection", "keep-alive")


def skip_json_value(text, i):
    """The index just past the JSON value that starts at text[i] (a string, a number, a literal, or a
    whole object or array)."""
    if text[i] == '"':
        i += 1
        while text[i] != '"':
            i += 2 if text[i] == "\\" else 1
        return i + 1
    if text[i] in "{[":
        depth = 0
        while True:
            c = text[i]
            if c == '"':
                i = skip_json_value(text, i)
                continue
            depth += 1 if c in "{[" else -1 if c in "}]" else 0
            i += 1
            if depth == 0:
                return i
    return SCALAR_END.match(text, i).end()


def mask_keys(text, keys):
    pattern = re.compile(r'(?<=[{,])"(' + "|".join(map(re.escape, keys)) + r')":\s*')
    out, pos = [], 0
    for m in pattern.finditer(text):
        if m.start() < pos:  # inside a value masked already
            continue
        end = skip_json_value(text, m.end())
        out.append(text[pos:m.end()] + f'"<{m.group(1)}>"')
        pos = end
    return "".join(out) + text[pos:]


def split_delta(event):
    """(head, text, tail) of an event around its delta key's string value, or None without one."""
    m = DELTA.search(event)
    if not m:
        return None
    end = skip_json_value(event, m.end() - 1)
    return event[:m.end()], event[m.end():end - 1], event[end - 1:]


def join_stream(text):
    """A stream's events (SSE: separated by a blank line; NDJSON: one a line) with adjacent pieces of
    one delta joined (rule 5)."""
    sep = "\n\n" if text.startswith(("data:", "event:")) else "\n"
    out = []
    for event in text.split(sep):
        prev = split_delta(out[-1]) if out else None
        cur = split_delta(event)
        if prev and cur and prev[0] == cur[0] and prev[2] == cur[2]:
            out[-1] = prev[0] + prev[1] + cur[1] + prev[2]
        else:
            out.append(event)
    return sep.join(out)


def mask(path, text, run=None, stream=False):
    """The text of an answer (body or header) with what varies between runs masked (the rules above);
    run maps this run's own strings (its temporary directory) to their names, and
    stream says the text is an event stream."""
    route = path.split("?")[0]
    if route == "/metrics":
        text = METRIC_VALUE.sub(r"\1 <value>", text)
    text = mask_keys(text, MASKED_KEYS + ROUTE_KEYS.get(route, ()))
    for literal, name in (run or {}).items():
        text = text.replace(literal, name)
    text = text.replace(ROOT, "<root>")
    text = LOOPBACK_PORT.sub(r"\1:<port>", text)
    text = CLOCK.sub("<time>", text)
    text = FLOAT.sub("<float>", text)
    text = HEX_ID.sub("<hex>", text)
    text = CALL_ID.sub(r"\1_<id>", text)
    text = BASE64.sub("<base64>", text)
    return join_stream(text) if stream else text


# ---- requests ------------------------------------------------------------------------------------

PLACEHOLDER = re.compile(r"\{\{(png|png64|wav|var):([^}]*)\}\}")


def expand(value, variables, binary=False):
    """A request's string with its placeholders replaced; bytes for a form's file (binary)."""
    if not isinstance(value, str):
        return value

    def one(kind, arg):
        if kind in ("png", "png64"):
            w, h, shade = (int(x) for x in arg.split(":"))
            data = base64.b64encode(png(w, h, shade))
            return b"data:image/png;base64," + data if kind == "png" else data
        if kind == "wav":
            data = wav(float(arg))
            return data if binary else base64.b64encode(data)
        return variables[arg].encode()

    m = PLACEHOLDER.fullmatch(value)
    if m and binary:
        return one(*m.groups())
    return PLACEHOLDER.sub(lambda m: one(*m.groups()).decode(), value)


def expand_json(value, variables):
    if isinstance(value, dict):
        return {k: expand_json(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_json(v, variables) for v in value]
    return expand(value, variables)


def form_body(form, variables):
    """A multipart/form-data body: form["fields"] [[name, text]], form["files"] [[name, filename, data]]."""
    out = b""
    for name, text in form.get("fields", []):
        out += f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{text}\r\n'.encode()
    for name, filename, data in form.get("files", []):
        out += (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n").encode()
        out += expand(data, variables, binary=True) + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


def build_request(req, variables):
    """(method, path, body bytes or None, headers) of an entry's request."""
    headers = dict(req.get("headers", {}))
    token = TOKENS[req.get("auth", "user")]
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = None
    if "json" in req:
        body = json.dumps(expand_json(req["json"], variables)).encode()
        headers.setdefault("Content-Type", "application/json")
    elif "raw" in req:
        body = req["raw"].encode()
    elif "form" in req:
        body = form_body(req["form"], variables)
        headers.setdefault("Content-Type", f"multipart/form-data; boundary={BOUNDARY}")
    return req["method"], expand(req["path"], variables), body, headers


# ---- the server ----------------------------------------------------------------------------------


def synth(name, template):
    path = os.path.join(gw.tmpdir(), f"{name}.gguf")
    args = [gw.SYNTH, "--out", path, "--vocab", gw.VOCAB, "--seed", "1", *gw.TINY,
            "--chat-template-file", os.path.join(TEMPLATES, template)]
    subprocess.run(args, check=True, capture_output=True, timeout=120)
    return path


class RpcServer:
    """`sipp rpc-server` on loopback, for the supervised target."""

    def __init__(self):
        self.port = free_port("127.0.0.1")
        self.proc = subprocess.Popen([gw.SIPP, "rpc-server", "--host", "127.0.0.1", "--port", str(self.port),
                                      "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        gw.wait_until(self.listening, RPC_WAIT_S, "rpc-server to listen")

    def listening(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def cpu_target(name, path, parallel=1, ctx=2048, extra=""):
    return gw.local_target(name, path, parallel=parallel, ctx=ctx, extra='backend = "cpu"\n' + extra)


class CorpusServer:
    """The gateway every entry is sent to, and what it needs: an upstream sipp and an rpc-server."""

    def __init__(self):
        d = gw.tmpdir()
        tiny = gw.model()
        r1 = synth("corpus-r1", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja")
        audio, vision = make_projector(d, "qwen2a"), make_projector(d, "llava")
        media = 'mmproj_offload = false\nmax_tokens = 8\nmmproj = '
        env = {"SIPP_CORPUS_USER": USER_TOKEN, "SIPP_CORPUS_ADMIN": ADMIN_TOKEN,
               "SIPP_MODELS_DIR": os.path.join(d, "corpus-store")}
        self.upstream = gw.serve_config(cpu_target("tiny", tiny, ctx=1024))
        self.rpc = RpcServer()
        config = (
            '[[tokens]]\nenv = "SIPP_CORPUS_USER"\ncaller = "user"\n\n'
            '[[tokens]]\nenv = "SIPP_CORPUS_ADMIN"\ncaller = "ops"\nadmin = true\n\n' +
            cpu_target("demo", DEMO, ctx=4096, extra='aliases = ["gpt-*", "claude-*"]') +
            cpu_target("demo-n2", DEMO, parallel=2, ctx=1024) +
            cpu_target("r1", r1, ctx=2048) +
            cpu_target("eyes", tiny, extra=media + f'"{vision}"') +
            cpu_target("ears", tiny, extra=media + f'"{audio}"') +
            cpu_target("lazy", tiny, ctx=1024, extra='load = "on_demand"') +
            gw.local_target("split", tiny, parallel=1, ctx=1024,
                            extra=f'backend = "rpc"\nrpc = ["127.0.0.1:{self.rpc.port}"]') +
            f'[[targets]]\nname = "remote"\ntype = "openai_compatible"\nbase_url = "{self.upstream.base}/v1"\n'
            'model = "tiny"\ntimeout_seconds = 60\n')
        try:
            self.gw = gw.serve_config(config, env=env)
        except BaseException:
            self.stop_helpers()
            raise
        self.run = {d: "<tmp>"}

    def stop_helpers(self):
        self.upstream.stop()
        self.rpc.stop()

    def stop(self):
        self.gw.stop()
        self.stop_helpers()

    def send(self, req, variables):
        method, path, body, headers = build_request(req, variables)
        conn = self.gw.connect(HTTP_TIMEOUT_S)
        try:
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            return r.status, [(k.lower(), v) for k, v in r.getheaders()], r.read()
        finally:
            conn.close()


# ---- entries -------------------------------------------------------------------------------------


def entries():
    return sorted(f for f in os.listdir(CORPUS) if f.endswith(".json"))


def load(name):
    with open(os.path.join(CORPUS, name), encoding="utf-8") as f:
        return json.load(f)


def save(name, entry):
    with open(os.path.join(CORPUS, name), "w", encoding="utf-8") as f:
        json.dump(entry, f, indent=1, ensure_ascii=False)
        f.write("\n")


def answer(path, status, headers, body, run):
    """The recorded form of an answer: status, compared headers and body, masked."""
    kept = {}
    for k, v in headers:
        if k not in UNCOMPARED_HEADERS:
            kept[k] = mask(path, v, run)
    stream = kept.get("content-type", "").startswith(STREAM_TYPES)
    return {"status": status, "headers": kept, "body": mask(path, body.decode("utf-8", "replace"), run, stream)}


def difference(expected, got):
    """'' when the answers are equal; else what differs, as a short unified diff."""
    if expected == got:
        return ""
    def lines(answer):  # a line per JSON member too, so that the diff points at the member
        text = json.dumps(answer, indent=1, ensure_ascii=False)
        return text.replace("\\n", "\n").replace(',\\"', ',\n\\"').splitlines()

    a, b = lines(expected), lines(got)
    diff = list(difflib.unified_diff(a, b, "recorded", "now", n=1, lineterm=""))
    return "\n".join(line[:400] for line in diff[:40])


def capture(entry, body, variables):
    for var, key in entry.get("capture", {}).items():
        variables[var] = json.loads(body)[key]


class GatewayCorpusTest(unittest.TestCase):
    """Every entry of the corpus, in order, against one gateway."""

    @classmethod
    def setUpClass(cls):
        gw.check_build()
        cls.server = CorpusServer()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_every_entry_answers_as_recorded(self):
        names = entries()
        self.assertGreaterEqual(len(names), 100, "the corpus holds at least 100 requests (issue 45)")
        variables, failed = {}, []
        for name in names:
            entry = load(name)
            req = entry["request"]
            status, headers, body = self.server.send(req, variables)
            got = answer(req["path"], status, headers, body, self.server.run)
            if status < 300:
                capture(entry, body, variables)
            if RECORD:
                entry["response"] = got
                save(name, entry)
                continue
            diff = difference(entry.get("response"), got)
            if diff:
                failed.append(f"{name}: {req['method']} {req['path']}\n{diff}")
        if failed:
            self.fail(f"{len(failed)} of {len(names)} entries answer otherwise than recorded (a meant change: "
                      "SIPP_CORPUS_RECORD=1, then review git diff):\n\n" + "\n\n".join(failed[:10]))


C_PATH = "/v1/chat/completions"


class MaskTest(unittest.TestCase):
    """The masking rules, and that a comparison sees one changed byte."""

    def test_masks_what_varies_and_keeps_the_rest(self):
        text = ('{"id":"chatcmpl-0123456789abcdef0123","created":1796610621,"usage":{"sipp":{"ttft_ms":11.02,'
                '"queue_ms":7}},"x":{"created":{"a":[1,"}"]}},"data":[0.0123456,-1.5e-07],"n":0.5,"t":'
                '"2026-12-07T02:30:21.082993745Z","content":"\\"created\\":1"}')
        self.assertEqual(mask("/v1/chat/completions", text),
                         '{"id":"chatcmpl-<hex>","created":"<created>","usage":{"sipp":{"ttft_ms":"<ttft_ms>",'
                         '"queue_ms":"<queue_ms>"}},"x":{"created":"<created>"},"data":[<float>,<float>],"n":0.5,'
                         '"t":"<time>","content":"\\"created\\":1"}')

    def test_route_keys_apply_to_their_route_only(self):
        self.assertEqual(mask("/api/ps", '{"size":12}'), '{"size":"<size>"}')
        self.assertEqual(mask("/api/tags", '{"size":12}'), '{"size":12}')
        self.assertEqual(mask("/metrics", "a_total{x=\"1\"} 3\n# HELP a b\n"), "a_total{x=\"1\"} <value>\n# HELP a b\n")

    def test_pieces_of_a_stream_are_joined(self):
        one = 'data: {"delta":{"content":"Hello!"},"n":null}\n\ndata: {"delta":{},"n":"stop"}\n\ndata: [DONE]\n\n'
        two = ('data: {"delta":{"content":"Hel"},"n":null}\n\ndata: {"delta":{"content":"lo!"},"n":null}\n\n'
               'data: {"delta":{},"n":"stop"}\n\ndata: [DONE]\n\n')
        self.assertEqual(mask(C_PATH, two, stream=True), one)
        self.assertEqual(mask(C_PATH, one, stream=True), one)
        lines = '{"message":{"content":"a\\"b"},"done":false}\n{"message":{"content":"c"},"done":false}\n'
        self.assertEqual(mask("/api/chat", lines, stream=True), '{"message":{"content":"a\\"bc"},"done":false}\n')
        other = 'data: {"reasoning_content":"x"}\n\ndata: {"content":"y"}\n\n'
        self.assertEqual(mask(C_PATH, other, stream=True), other)

    def test_one_changed_byte_is_a_difference(self):
        recorded = {"status": 200, "headers": {}, "body": '{"content":"Hello! How can I help you today?"}'}
        changed = dict(recorded, body=recorded["body"].replace("today?", "today!"))
        self.assertEqual(difference(recorded, dict(recorded)), "")
        self.assertIn('+ "body": "{\\"content\\":\\"Hello! How can I help you today!\\"}"',
                      difference(recorded, changed))


if __name__ == "__main__":
    unittest.main()
