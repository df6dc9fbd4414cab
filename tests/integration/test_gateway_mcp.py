"""MCP tools run by the gateway (docs/gateway.md, "MCP"): [[mcp]] servers, GET /v1/mcp/tools, and the
Responses API's {"type": "mcp"} tools, against real MCP servers: tests/fixtures/mcp/server.js over stdio
(a child of the gateway) and over streamable HTTP (JSON and event-stream answers).

The model is a random-weight one with a real vocabulary and template (Qwen 2.5), forced to call the tool
with tool_choice: its arguments are whatever the grammar let it write, so the test checks the server's
real answer to them (add's sum, echo's text). A server that hangs, crashes or prints junk ends the call
with an error item within its timeout, and the next call starts it again.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from test_gateway_openai_js import JS_DIR, ensure_client  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER_JS = os.path.join(ROOT, "tests", "fixtures", "mcp", "server.js")
QWEN_TEMPLATE = os.path.join(os.path.dirname(gw.VOCAB), "..", "source", "models", "templates",
                             "Qwen-Qwen2.5-7B-Instruct.jinja")
QWEN_VOCAB = os.path.join(os.path.dirname(gw.VOCAB), "ggml-vocab-qwen2.gguf")
TARGET = "qwen"
TOKEN_ENV = "SIPP_MCP_TOKEN"
TOKEN = "mcp-test-secret-0001"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SLOW_TIMEOUT_S = 2  # the "slow" server's timeout_seconds: hang must end within it
GREETING = "hello from the env"


def start_http_server(*flags):
    """node server.js --http 0 [flags]: (process, port)."""
    p = subprocess.Popen(["node", SERVER_JS, "--http", "0", *flags], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line.startswith("listening on "), line
    return p, int(line.split()[-1])


def mcp_tool(label, *names, approval="never"):
    t = {"type": "mcp", "server_label": label, "require_approval": approval}
    if names:
        t["allowed_tools"] = list(names)
    return t


class McpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        gw.check_build()
        cls.path = os.path.join(gw.tmpdir(), "qwen-mcp.gguf")
        r = subprocess.run([gw.SYNTH, "--out", cls.path, "--vocab", QWEN_VOCAB, "--chat-template-file", QWEN_TEMPLATE,
                            "--seed", "1", *gw.TINY], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        cls.http, port = start_http_server()
        cls.sse_http, sse_port = start_http_server("--sse")
        cls.linger_http, linger_port = start_http_server("--sse", "--linger")
        cfg = (f'[[tokens]]\nenv = "{TOKEN_ENV}"\n\n' + gw.local_target(TARGET, path=cls.path, parallel=2, ctx=4096) +
               '[[targets]]\nname = "far"\ntype = "openai_compatible"\nbase_url = "http://127.0.0.1:9/v1"\n' +
               f'\n[[mcp]]\nname = "calc"\ncommand = ["node", "{SERVER_JS}"]\nenv = {{ MCP_TEST_GREETING = "{GREETING}" }}\n'
               f'\n[[mcp]]\nname = "limited"\ncommand = ["node", "{SERVER_JS}"]\nallowed_tools = ["echo"]\n'
               f'\n[[mcp]]\nname = "slow"\ncommand = ["node", "{SERVER_JS}"]\ntimeout_seconds = {SLOW_TIMEOUT_S}\n'
               f'\n[[mcp]]\nname = "web"\nurl = "http://127.0.0.1:{port}/mcp"\n'
               f'\n[[mcp]]\nname = "web-sse"\nurl = "http://127.0.0.1:{sse_port}/mcp"\n'
               f'\n[[mcp]]\nname = "web-linger"\nurl = "http://127.0.0.1:{linger_port}/mcp"\ntimeout_seconds = 30\n')
        cls.gw = gw.serve_config(cfg, env={TOKEN_ENV: TOKEN})

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        for p in (cls.http, cls.sse_http, cls.linger_http):
            p.terminate()
            p.wait(10)
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    def post(self, body):
        return self.gw.json("POST", "/v1/responses", body, AUTH)

    def body(self, label, tool, approval="never", **kw):
        return {"model": TARGET, "input": f"Use the {tool} tool.", "max_output_tokens": 60, "temperature": 0,
                "tools": [mcp_tool(label, tool, approval=approval)],
                "tool_choice": {"type": "mcp", "server_label": label, "name": tool}, **kw}

    def call_of(self, r, kind="mcp_call"):
        calls = [o for o in r["output"] if o["type"] == kind]
        self.assertTrue(calls, r["output"])
        return calls[0]

    def assert_sum(self, call):
        args = json.loads(call["arguments"])
        self.assertEqual(call["output"], str(args["a"] + args["b"]), call)
        self.assertEqual(call["status"], "completed")
        self.assertIsNone(call["error"])

    # ---- GET /v1/mcp/tools ----

    def test_list_route(self):
        status, _, r = self.gw.json("GET", "/v1/mcp/tools", None, AUTH)
        self.assertEqual(status, 200, r)
        by = {s["name"]: s for s in r["data"]}
        self.assertEqual(list(by), ["calc", "limited", "slow", "web", "web-sse", "web-linger"])
        names = [t["name"] for t in by["calc"]["tools"]]
        self.assertIn("add", names)
        add = next(t for t in by["calc"]["tools"] if t["name"] == "add")
        self.assertEqual(add["description"], "Adds two numbers and returns the sum.")
        self.assertEqual(add["input_schema"]["required"], ["a", "b"])
        self.assertEqual([t["name"] for t in by["limited"]["tools"]], ["echo"])
        self.assertEqual(by["web"]["transport"], "http")
        self.assertIsNone(by["web"]["error"])
        self.assertEqual(by["calc"]["command"], ["node", SERVER_JS])

    def test_list_route_needs_a_token(self):
        status, _, r = self.gw.json("GET", "/v1/mcp/tools")
        self.assertEqual(status, 401, r)

    # ---- calls ----

    def test_max_output_tokens_bounds_every_turn_together(self):
        """OpenAI's max_output_tokens bounds the response, not each model turn between MCP calls: the
        turn after a call makes only what the first left, and the usage adds up within the bound."""
        for limit in (60, 80):  # room for the call's arguments (about 40 tokens) and some after
            for stream in (False, True):
                with self.subTest(limit=limit, stream=stream):
                    body = self.body("calc", "add", max_output_tokens=limit)
                    if not stream:
                        status, _, r = self.post(body)
                        self.assertEqual(status, 200, r)
                    else:
                        status, _, events = self.gw.sse("/v1/responses", {**body, "stream": True}, AUTH)
                        self.assertEqual(status, 200, events)
                        r = json.loads(events[-1][1])["response"]
                    self.assert_sum(self.call_of(r))
                    self.assertLessEqual(r["usage"]["output_tokens"], limit, r["usage"])

    def test_add_over_stdio(self):
        status, _, r = self.post(self.body("calc", "add"))
        self.assertEqual(status, 200, r)
        first = r["output"][0]
        self.assertEqual(first["type"], "mcp_list_tools")
        self.assertEqual(first["server_label"], "calc")
        self.assertEqual([t["name"] for t in first["tools"]], ["add"])
        call = self.call_of(r)
        self.assertEqual((call["server_label"], call["name"]), ("calc", "add"))
        self.assertTrue(call["id"].startswith("mcp_"), call)
        self.assert_sum(call)
        # The model's turn after the call: random weights write until max_output_tokens.
        self.assertIn(r["status"], ("completed", "incomplete"))
        self.assertEqual(r["output"][-1]["type"], "message", r["output"])
        self.assertGreater(r["usage"]["output_tokens"], 0)

    def test_env_reaches_the_child(self):
        status, _, r = self.post(self.body("calc", "greeting"))
        self.assertEqual(status, 200, r)
        self.assertEqual(self.call_of(r)["output"], GREETING)

    def test_echo_over_http(self):
        for label in ("web", "web-sse", "web-linger"):
            t0 = time.monotonic()
            status, _, r = self.post(self.body(label, "echo"))
            # web-linger keeps its event stream open: the reply, not its 30 s timeout, ends the call.
            self.assertLess(time.monotonic() - t0, 20, label)
            self.assertEqual(status, 200, r)
            call = self.call_of(r)
            self.assertEqual(call["output"], json.loads(call["arguments"])["text"], call)
            self.assertEqual(call["server_label"], label)

    def test_cut_off_call_does_not_run(self):
        # A limit that ends the turn inside the call's arguments (where exactly depends on the model).
        cut = []
        for limit in (10, 13, 16, 19, 22):
            status, _, r = self.post(self.body("calc", "add", max_output_tokens=limit))
            self.assertEqual(status, 200, r)
            calls = [o for o in r["output"] if o["type"] == "mcp_call"]
            if calls and r["status"] == "incomplete":
                cut.append(calls[0])
        self.assertTrue(cut, "no limit ended the turn inside the call")
        for call in cut:
            self.assertEqual(call["status"], "incomplete", call)
            self.assertIsNone(call["output"])
            self.assertIn("max_output_tokens", call["error"])

    def test_tool_error(self):
        status, _, r = self.post(self.body("calc", "fail"))
        self.assertEqual(status, 200, r)
        call = self.call_of(r)
        self.assertEqual(call["status"], "failed")
        self.assertEqual(call["error"], "this tool always fails")

    def test_streamed(self):
        status, _, events = self.gw.sse("/v1/responses", self.body("calc", "add", stream=True), AUTH)
        self.assertEqual(status, 200, events)
        data = [json.loads(d) for _, d in events]
        types = [d["type"] for d in data]
        want = ["response.created", "response.in_progress", "response.output_item.added",
                "response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
                "response.output_item.done", "response.output_item.added", "response.mcp_call_arguments.delta"]
        self.assertEqual(types[:len(want)], want)
        i = types.index("response.mcp_call_arguments.done")
        self.assertEqual(types[i + 1:i + 4], ["response.mcp_call.in_progress", "response.mcp_call.completed",
                                              "response.output_item.done"])
        self.assertIn(types[-1], ("response.completed", "response.incomplete"))
        self.assertEqual([d["sequence_number"] for d in data], list(range(len(data))))
        final = data[-1]["response"]
        call = self.call_of(final)
        self.assert_sum(call)
        args = "".join(d["delta"] for d in data if d["type"] == "response.mcp_call_arguments.delta")
        self.assertEqual(args, call["arguments"])
        done = data[i + 3]["item"]
        self.assertEqual(done, call)

    # ---- approval ----

    def test_approval_flow(self):
        status, _, r = self.post(self.body("calc", "add", approval="always"))
        self.assertEqual(status, 200, r)
        req = self.call_of(r, "mcp_approval_request")
        self.assertTrue(req["id"].startswith("mcpr_"), req)
        self.assertEqual((req["server_label"], req["name"]), ("calc", "add"))
        self.assertFalse([o for o in r["output"] if o["type"] == "mcp_call"])
        yes = {"type": "mcp_approval_response", "approval_request_id": req["id"], "approve": True}
        status, _, r2 = self.post(self.body("calc", "add", approval="always", input=[yes], previous_response_id=r["id"],
                                            tool_choice="none", max_output_tokens=8))
        self.assertEqual(status, 200, r2)
        call = self.call_of(r2)
        self.assertEqual(call["approval_request_id"], req["id"])
        self.assertEqual(call["arguments"], req["arguments"])
        self.assert_sum(call)
        # Denied: nothing runs, the model goes on.
        no = dict(yes, approve=False)
        status, _, r3 = self.post(self.body("calc", "add", approval="always", input=[no], previous_response_id=r["id"],
                                            tool_choice="none", max_output_tokens=8))
        self.assertEqual(status, 200, r3)
        self.assertFalse([o for o in r3["output"] if o["type"] == "mcp_call"], r3["output"])
        # Without the store: the request item in the input.
        items = [{"role": "user", "content": "Use the add tool."}, req, yes]
        status, _, r4 = self.post(self.body("calc", "add", approval="always", input=items, store=False,
                                            tool_choice="none", max_output_tokens=8))
        self.assertEqual(status, 200, r4)
        self.assert_sum(self.call_of(r4))

    def test_approval_request_streamed(self):
        status, _, events = self.gw.sse("/v1/responses", self.body("calc", "add", approval="always", stream=True),
                                        AUTH)
        self.assertEqual(status, 200, events)
        data = [json.loads(d) for _, d in events]
        added = [d["item"] for d in data if d["type"] == "response.output_item.added"]
        done = [d["item"] for d in data if d["type"] == "response.output_item.done"]
        self.assertEqual([i["type"] for i in added], ["mcp_list_tools", "mcp_approval_request"])
        self.assertEqual([i["type"] for i in done], ["mcp_list_tools", "mcp_approval_request"])
        self.assertFalse([d for d in data if d["type"].startswith("response.mcp_call")])
        final = data[-1]["response"]
        self.assertEqual(final["output"], done)
        json.loads(done[1]["arguments"])  # whole, with the item

    def test_max_tool_calls_bounds_the_calls(self):
        reqs = [{"type": "mcp_approval_request", "id": f"mcpr_call{k}", "server_label": "calc", "name": "add",
                 "arguments": json.dumps({"a": k, "b": 10})} for k in (1, 2)]
        yes = [{"type": "mcp_approval_response", "approval_request_id": r["id"], "approve": True} for r in reqs]
        items = [{"role": "user", "content": "Add twice."}, *reqs, *yes]
        status, _, r = self.post(self.body("calc", "add", approval="always", input=items, store=False,
                                           tool_choice="none", max_output_tokens=4, max_tool_calls=1))
        self.assertEqual(status, 200, r)
        calls = [o for o in r["output"] if o["type"] == "mcp_call"]
        self.assertEqual([c["approval_request_id"] for c in calls], ["mcpr_call1", "mcpr_call2"])
        self.assertEqual(calls[0]["output"], "11")
        self.assertEqual(calls[1]["status"], "failed")
        self.assertIn("max_tool_calls", calls[1]["error"])

    def test_per_tool_approval(self):
        rule = {"never": {"tool_names": ["add"]}}
        body = self.body("calc", "add")
        body["tools"][0]["require_approval"] = rule
        status, _, r = self.post(body)
        self.assertEqual(status, 200, r)
        self.assert_sum(self.call_of(r))
        body = self.body("calc", "echo")
        body["tools"][0]["require_approval"] = rule
        status, _, r = self.post(body)
        self.assertEqual(status, 200, r)
        self.call_of(r, "mcp_approval_request")

    # ---- servers that misbehave ----

    def test_hang_ends_within_the_timeout(self):
        t0 = time.monotonic()
        status, _, r = self.post(self.body("slow", "hang"))
        took = time.monotonic() - t0
        self.assertEqual(status, 200, r)
        call = self.call_of(r)
        self.assertEqual(call["status"], "failed")
        self.assertIn("did not answer within 2 s", call["error"])
        self.assertLess(took, SLOW_TIMEOUT_S + 20)
        self.assert_restarts("slow")

    def test_crash_and_junk(self):
        for tool, words in (("crash", "exited with status 3"), ("junk", "not JSON")):
            status, _, r = self.post(self.body("slow", tool))
            self.assertEqual(status, 200, r)
            call = self.call_of(r)
            self.assertEqual(call["status"], "failed")
            self.assertIn(words, call["error"])
            self.assertIn("MCP server 'slow'", call["error"])
            self.assert_restarts("slow")

    def test_http_server_misbehaves(self):
        for tool, words in (("junk", "not JSON"), ("crash", "MCP server 'web'")):
            status, _, r = self.post(self.body("web", tool))
            self.assertEqual(status, 200, r)
            call = self.call_of(r)
            self.assertEqual(call["status"], "failed", call)
            self.assertIn(words, call["error"])
        status, _, r = self.post(self.body("web", "echo"))
        self.assertEqual(self.call_of(r)["status"], "completed", r)

    def assert_restarts(self, label):
        status, _, h = self.gw.json("GET", "/health")
        self.assertEqual(status, 200, h)
        status, _, r = self.post(self.body(label, "add"))
        self.assertEqual(status, 200, r)
        self.assert_sum(self.call_of(r))

    # ---- the official openai npm client ----

    @unittest.skipUnless(shutil.which("node") and shutil.which("npm"), "node and npm run the openai client")
    def test_openai_npm_client(self):
        ensure_client()
        r = subprocess.run(["node", "openai_mcp.mjs", f"{self.gw.base}/v1", TARGET, TOKEN], cwd=JS_DIR,
                           capture_output=True, text=True, timeout=300)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        self.assertTrue(lines, f"no result from node:\n{r.stdout}\n{r.stderr}")
        result = json.loads(lines[-1])
        self.assertTrue(result["ok"], f"{result.get('error')}\n--- gateway log:\n{self.gw.text()[-3000:]}")
        self.assertEqual(result["checked"], ["mcp_call", "mcp_call-stream", "approval"])

    # ---- refusals ----

    def test_refusals(self):
        cases = [
            ({"tools": [mcp_tool("nope")]}, "'tools[0].server_label' is 'nope'"),
            ({"tools": [dict(mcp_tool("calc"), server_url="http://example.com/mcp")]}, "'tools[0].server_url'"),
            ({"tools": [dict(mcp_tool("calc"), connector_id="x")]}, "'tools[0].connector_id'"),
            ({"tools": [mcp_tool("calc", "add")], "tool_choice": {"type": "mcp", "server_label": "calc", "name": "echo"}},
             "'tool_choice'"),
            ({"tools": [mcp_tool("calc", "add"), {"type": "function", "name": "x"}, mcp_tool("web")]}, "'tools[2]'"),
            ({"tools": [mcp_tool("calc", "add")],
              "input": [{"type": "mcp_approval_response", "approval_request_id": "mcpr_x", "approve": True}]},
             "'input[0].approval_request_id'"),
            ({"tools": [mcp_tool("calc", "add")], "max_tool_calls": 0}, "'max_tool_calls'"),
        ]
        cases.append(({"model": "far", "tools": [mcp_tool("calc", "add")]}, "target 'far' is served by another"))
        for extra, words in cases:
            body = {"model": TARGET, "input": "hi", "max_output_tokens": 2, **extra}
            status, _, r = self.post(body)
            self.assertEqual(status, 400, (extra, r))
            self.assertIn(words, r["error"]["message"])


def children(pid):
    """The pids whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


class McpLifecycleTest(unittest.TestCase):
    def test_child_starts_on_first_use_and_ends_with_the_gateway(self):
        cfg = gw.local_target() + f'\n[[mcp]]\nname = "calc"\ncommand = ["node", "{SERVER_JS}"]\n'
        g = gw.serve_config(cfg)
        try:
            self.assertEqual(children(g.proc.pid), [], "no server before its first use")
            status, _, r = g.json("GET", "/v1/mcp/tools")
            self.assertEqual(status, 200, r)
            kids = children(g.proc.pid)
            self.assertEqual(len(kids), 1, kids)
            with open(f"/proc/{kids[0]}/cmdline") as f:
                self.assertIn("server.js", f.read())
        finally:
            self.assertEqual(g.stop(), 0)
        self.assertFalse(os.path.exists(f"/proc/{kids[0]}"), "the MCP server outlived the gateway")


class McpConfigTest(unittest.TestCase):
    def check(self, text):
        path = gw.write(f"mcp-{time.monotonic_ns()}.toml", gw.local_target() + text)
        r = subprocess.run([gw.SIPP, "serve", "--check", "--config", path], capture_output=True, text=True, timeout=60)
        return r.returncode, r.stderr + r.stdout

    def test_good(self):
        rc, out = self.check(f'[[mcp]]\nname = "calc"\ncommand = ["node", "{SERVER_JS}"]\ntimeout_seconds = 5\n'
                             '[[mcp]]\nname = "web"\nurl = "http://127.0.0.1:9/mcp"\nallowed_tools = ["echo"]\n')
        self.assertEqual(rc, 0, out)

    def test_bad(self):
        cases = [
            ('[[mcp]]\nname = "x"\n', "give exactly one of 'command'"),
            ('[[mcp]]\nname = "x"\ncommand = ["node"]\nurl = "http://127.0.0.1/"\n', "give exactly one of 'command'"),
            ('[[mcp]]\nname = "x"\nurl = "http://10.1.2.3/mcp"\n', "mcp_allowed_hosts"),
            ('[[mcp]]\nname = "x"\nurl = "ftp://127.0.0.1/"\n', "is not an http:// or https:// URL"),
            ('[[mcp]]\nname = "x"\ncommand = ["no-such-program-sipp"]\n', "program 'no-such-program-sipp' is not found"),
            ('[[mcp]]\nname = "x"\ncommand = ["node"]\ncolour = 1\n', "unknown key 'colour'"),
            ('[[mcp]]\nname = "x"\ncommand = ["node"]\n[[mcp]]\nname = "x"\ncommand = ["node"]\n', "duplicate [[mcp]]"),
            ('[[mcp]]\nname = "x"\ncommand = ["node"]\ntimeout_seconds = 0\n', "timeout_seconds"),
        ]
        for text, words in cases:
            rc, out = self.check(text)
            self.assertNotEqual(rc, 0, text)
            self.assertIn(words, out, text)

    def test_allowed_host(self):
        rc, out = self.check('[server]\nmcp_allowed_hosts = ["mcp.internal"]\n'
                             '[[mcp]]\nname = "x"\nurl = "https://mcp.internal/mcp"\n')
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
