"""The web page as people use it (issue 50), in Debian's Chromium: conversations kept across a
reload, answers rendered as Markdown and code, the XSS cases a model's answer could carry, reasoning
and tool calls, the Models view (load, unload, pull with progress, delete), the live charts, axe-core
on every view, every request going to the gateway only, first paint, and screenshots at three sizes
checked for overlapping boxes (build/test-artifacts/web-app-*.png).

One `sipp serve` on loopback has two targets: `tiny`, a synthetic local model, and `scripted`, a
remote (openai_compatible) target whose upstream is a small OpenAI-shaped server in this process. The
page under test is real and so is the gateway's relay; the upstream only lets the test choose the
exact text of an answer (a random model cannot be made to write `<img onerror>`). Its answers are
keyed by the user's last message (ANSWERS). A second loopback server (httpfixture) holds a GGUF file
that the page pulls into a temporary store ([store] allow_private_sources). A third target, `ears`,
takes audio (a synthetic qwen2a projector): Hold to talk records Chromium's fake microphone (a WAV
file this test writes) and the page's WAV reaches /v1/audio/transcriptions and the transcript the
message box. A fourth, `qwen`, is a random-weight model with Qwen 2.5's vocabulary and template:
with "Use tool servers (MCP)" on and Tool choice "required" the page's request goes to
/v1/responses, the model must call one of the `calc` tool server's tools (add, echo:
tests/fixtures/mcp/server.js, run by the gateway), and the answer shows that call with the
server's real output.

tests/integration/web/app.test.js drives the page and prints one ok / not ok line per check. npm
installs playwright-core and axe-core (`npm ci --ignore-scripts`) when web/node_modules lacks them.
Without /usr/bin/chromium or Node.js the test is skipped.
"""

import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support import npm  # noqa: E402
from httpfixture import HTTPFixture  # noqa: E402
from tests.support.audio import wav  # noqa: E402
from tests.support.models import make_projector  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WEB_TESTS = os.path.join(HERE, "web")
ARTIFACTS = os.path.join(ROOT, "build", "test-artifacts")
MCP_SERVER_JS = os.path.join(ROOT, "tests", "fixtures", "mcp", "server.js")
QWEN_VOCAB = os.path.join(gw.VOCAB_DIR, "ggml-vocab-qwen2.gguf")
QWEN_TEMPLATE = os.path.join(gw.VOCAB_DIR, "..", "source", "models", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
CHROMIUM = os.environ.get("SIPP_CHROMIUM", "/usr/bin/chromium")
NPM_TIMEOUT_S = 180
NODE_TIMEOUT_S = 240  # the script cuts itself off earlier (RUN_TIMEOUT_MS); this is the backstop
CATALOG_NAME = "catalog-tiny"  # the one entry of the test's catalog
PULL_CHUNK_DELAY_S = 0.004  # per 64 KiB: the pull of the tiny model takes about a second
VOICE_CLIP_S = 1.0  # the WAV Chromium's fake microphone plays (in a loop): a tone, then quiet
VOICE_QUIET_S = 2.0  # longer than the page's hands-free SILENCE_MS, which ends a turn

MARKDOWN = ("# Brewing notes\n\nTea wants **hot** water and `patience`.\n\n"
            "```python\ndef steep(minutes):\n    return minutes * 60\n```\n\n"
            "| tea | minutes |\n|---|---|\n| green | 2 |\n\n- one\n- two\n\n[docs](https://example.invalid/tea)\n")
# Each tries to run script (setting window.__xss) or to make the page fetch something elsewhere.
XSS = ("<script>window.__xss = 'script'</script>\n\n"
       "<img src=x onerror=\"window.__xss = 'img'\">\n\n"
       "[click me](javascript:window.__xss='link')\n\n"
       "<a href=\"javascript:window.__xss='a'\">raw link</a>\n\n"
       "<svg onload=\"window.__xss='svg'\"><script>window.__xss='svg-script'</script></svg>\n\n"
       "<svg><a xlink:href=\"javascript:window.__xss='svg-a'\"><text>x</text></a></svg>\n\n"
       "![pic](http://127.0.0.2:9/evil.png) ![js](javascript:window.__xss='image')\n\n"
       "<iframe src=\"javascript:window.__xss='iframe'\"></iframe>\n\n"
       "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)\n\n"
       "<math><mi xlink:href=\"javascript:window.__xss='math'\">m</mi></math>\n\n"
       "<details open ontoggle=\"window.__xss='details'\"><summary>s</summary></details>\n\n"
       "```html\n<script>window.__xss='code'</script>\n```\n")
ANSWERS = {
    "markdown please": {"content": MARKDOWN},
    "xss please": {"content": XSS},
    "think please": {"reasoning": "First, the kettle. Then the leaves.", "content": "Use water at 80 °C.",
                     "tool": {"name": "get_weather", "arguments": "{\"city\": \"Kyoto\"}"}},
}
PIECE = 7  # characters per streamed chunk


def text(b):
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def chunk(delta, finish=None, usage=None):
    c = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
         "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        c["usage"] = usage
    return f"data: {json.dumps(c)}\n\n".encode()


def scripted_chunks(answer):
    """The stream of one scripted answer: reasoning, content, a tool call, finish, usage."""
    out = [chunk({"role": "assistant", "content": ""})]
    for key, field in (("reasoning", "reasoning_content"), ("content", "content")):
        s = answer.get(key, "")
        out += [chunk({field: s[i:i + PIECE]}) for i in range(0, len(s), PIECE)]
    if "tool" in answer:
        t = answer["tool"]
        out.append(chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                          "function": {"name": t["name"], "arguments": ""}}]}))
        out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": t["arguments"]}}]}))
    out.append(chunk({}, finish="tool_calls" if "tool" in answer else "stop"))
    n = len(out)
    out.append(chunk(None, usage={"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5}))
    out.append(b"data: [DONE]\n\n")
    return out


class _Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10

    def log_message(self, fmt, *args):
        pass

    def _json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._json(200, {"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "test"}]})

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        last = next((m for m in reversed(req.get("messages", [])) if m.get("role") == "user"), {})
        content = last.get("content")
        words = content if isinstance(content, str) else ""
        answer = ANSWERS.get(words.strip().lower(), {"content": f"You said: {words}"})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for c in scripted_chunks(answer):
            self.wfile.write(c)
            self.wfile.flush()
        self.close_connection = True


class Upstream:
    def __init__(self):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()



class WebAppTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = [what for what, ok in (("Chromium at " + CHROMIUM, os.access(CHROMIUM, os.X_OK)),
                                         ("node", shutil.which("node")), ("npm", shutil.which("npm"))) if not ok]
        if missing:
            raise unittest.SkipTest(f"{', '.join(missing)} not installed (make setup installs them)")
        npm.ensure(WEB_TESTS, "playwright-core", "axe-core")
        cls.upstream = Upstream()
        cls.files = HTTPFixture()
        cls.g = None
        try:
            model = gw.model("tiny")
            with open(model, "rb") as f:
                cls.pull_url = cls.files.add("/files/pulled-tiny.gguf", f.read())
            cls.files.set(chunk_delay=PULL_CHUNK_DELAY_S)
            d = gw.tmpdir()
            cls.store = os.path.join(d, "models")
            os.makedirs(cls.store)
            # "ears" takes audio (a qwen2a projector): /v1/audio/transcriptions on it is llama-server's
            # way, a chat with the clip; the page's Hold to talk uses it when no whisper target exists.
            ears = gw.local_target("ears", model, parallel=1, ctx=2048,
                                   extra=f'mmproj = "{make_projector(d, "qwen2a")}"\nmmproj_offload = false\n'
                                         "max_tokens = 8")
            cls.voice_wav = os.path.join(d, "voice.wav")
            with open(cls.voice_wav, "wb") as f:
                f.write(wav(VOICE_CLIP_S, silence_after=VOICE_QUIET_S))
            voice = cls.voice_targets(d)
            # An [[mcp]] tool server (the MCP tests' stdio fixture), for the Models view's tool list and
            # the chat's "Use tool servers": add and echo only, the tools that answer at once.
            mcp = (f'[[mcp]]\nname = "calc"\ncommand = ["node", "{MCP_SERVER_JS}"]\n'
                   'allowed_tools = ["add", "echo"]\n\n')
            qwen = gw.synth_model("qwen-tools.gguf", "--chat-template-file", QWEN_TEMPLATE, "--seed", "1",
                                  vocab=QWEN_VOCAB)
            config = ("[store]\nallow_private_sources = true\n\n" + mcp + gw.local_target("tiny", model, parallel=2) +
                      gw.local_target("qwen", qwen, parallel=1, ctx=2048) +
                      ears + "".join(voice.values()) +
                      f'\n[[targets]]\nname = "scripted"\ntype = "openai_compatible"\n'
                      f'base_url = "{cls.upstream.base}"\n')
            # A catalog of one entry, the same file by URL with its sha256: the Models view lists it and
            # pulls it by name (GET /v1/catalog, POST /api/pull).
            catalog = os.path.join(d, "catalog.json")
            with open(model, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            with open(catalog, "w") as f:
                json.dump({"version": 1, "models": [{"name": CATALOG_NAME, "url": cls.pull_url, "sha256": digest,
                                                     "description": "a model the test pulls by name",
                                                     "labels": ["chat"]}]}, f)
            cls.g = gw.serve_config(config, env={"SIPP_MODELS_DIR": cls.store, "SIPP_CATALOG": catalog})
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def voice_targets(cls, d):
        """The speech targets this build serves, by role: "whisper" (a synthetic whisper.cpp model,
        recipe whispercpp) transcribes, "speaker" (recipe flite) speaks. A build without a kind has no
        such target (`sipp serve --check` refuses its config), and the page is checked without it."""
        cls.roles = {}
        whisper = os.path.join(d, "ggml-test-whisper.bin")
        r = subprocess.run([gw.SYNTH, "--whisper", "test", "--out", whisper, "--vocab",
                            os.path.join(gw.BUILD, "llama", "vocab", "ggml-vocab-gpt-2.gguf")],
                           capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
        candidates = {"whisper": f'[[targets]]\nname = "whisper"\nmodel = "{whisper}"\nbackend = "cpu"\n\n',
                      "speaker": '[[targets]]\nname = "speaker"\nrecipe = "flite"\n\n'}
        if r.returncode != 0:
            del candidates["whisper"]
        found = {}
        for role, text in candidates.items():
            cfg = os.path.join(d, f"check-{role}.toml")
            with open(cfg, "w") as f:
                f.write(text)
            c = subprocess.run([gw.SIPP, "serve", "--check", "--config", cfg], capture_output=True, text=True,
                               timeout=NPM_TIMEOUT_S)
            if c.returncode == 0:
                found[role] = text
                cls.roles[role] = role
            else:
                print(f"\n(this build has no {role} target: {c.stderr.strip()[-200:]})", file=sys.stderr)
        return found

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "g", None):
            cls.g.stop()  # only the process this test started
        for s in ("files", "upstream"):
            if getattr(cls, s, None):
                getattr(cls, s).stop()

    def test_the_page_in_chromium(self):
        os.makedirs(ARTIFACTS, exist_ok=True)
        cmd = ["node", os.path.join(WEB_TESTS, "app.test.js"), "--base", self.g.base, "--local", "tiny",
               "--scripted", "scripted", "--qwen", "qwen", "--pull-url", self.pull_url, "--catalog-name", CATALOG_NAME,
               "--artifacts", ARTIFACTS,
               "--ears", "ears", "--voice-wav", self.voice_wav]
        for role, name in self.roles.items():
            cmd += [f"--{role}", name]
        env = dict(os.environ, SIPP_CHROMIUM=CHROMIUM)
        try:
            r = subprocess.run(cmd, cwd=WEB_TESTS, capture_output=True, text=True, timeout=NODE_TIMEOUT_S,
                               stdin=subprocess.DEVNULL, env=env)
            out, rc = r.stdout + r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = f"{text(e.stdout)}{text(e.stderr)}\nnode was killed after {NODE_TIMEOUT_S} s", -1
        counts = [line for line in out.splitlines() if line.startswith("web-app: ")]
        print(f"\n{counts[-1] if counts else 'web-app: no result line'} (screenshots in {ARTIFACTS})",
              file=sys.stderr)
        if os.environ.get("SIPP_WEB_VERBOSE"):
            print(out, file=sys.stderr)
        if rc != 0:
            self.fail(f"the browser test failed (exit {rc}):\n{out}\n--- gateway log ---\n{self.g.text()[-3000:]}")


if __name__ == "__main__":
    unittest.main()
