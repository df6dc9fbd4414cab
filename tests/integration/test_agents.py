"""The real coding agents against `sipp serve`, unchanged: Codex CLI (`codex exec --json`, the
Responses API) and Claude Code (`claude -p --output-format json`, the Messages API) each run one
non-interactive turn on synthetic models with Qwen2.5's real template and a 32k context.

The agents are pinned with their registry integrity in tests/integration/agents/package-lock.json
and installed with `npm ci` into a cache outside the work tree (keyed by the lock's hash; only
Claude Code's own install script runs, which links its platform binary). Without node and npm, or
when the registry cannot be reached, the test is skipped saying why. Each run has its own HOME and
config in a temporary directory.

Two targets: `qwen` is a model that ends every answer at once (sipp-synth --stop-token: its
end-of-turn token wins everywhere), so a turn can finish as with a real model: Codex's stream must
end in turn.completed and Claude Code's result must not be an error. `noise` has random weights,
which never stop by themselves: its target's max_tokens ends every answer, and the agents must then
end on that output cap, never on an API error (a 4xx or 5xx of the gateway).
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_api_fields as fields  # noqa: E402
import test_gateway_support as gw  # noqa: E402
from tests.support.paths import ROOT  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import corpus  # noqa: E402  (the system prompt sipp-demo was trained under)

AGENTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agents")
PINNED = {  # what `npm view PKG@VER dist.integrity` prints; the lock must hold exactly these
    "@openai/codex": ("0.169.0", "sha512-KhzYlkKPxoNssR8CEm45IjqnFWn7UtlF4CiD3tOJPea51xBs7MaHy0UQG9GSbCqk6Lrjn5QdJDV0QD1/FgWlGw=="),
    "@anthropic-ai/claude-code": ("2.1.328",
                                  "sha512-QJTDDUhzx2Wtnoone+TULvhtxqX9KhUpgt4S96Y2eyohtZK41LWXwe7fWXcR1JnT0Ujs3AfpPTk5BZgwCyZ8pw=="),
}
NPM_TIMEOUT_S = 600
AGENT_TIMEOUT_S = 300  # one turn of a 10-20k-token prompt on a tiny CPU model takes well under a minute
CTX = 32768
STOP_CAP = 64
NOISE_CAP = 8
NETWORK_ERRORS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "ENETUNREACH")


def cache_dir():
    with open(os.path.join(AGENTS_DIR, "package-lock.json"), "rb") as f:
        key = hashlib.sha256(f.read()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sipp", f"agents-{key}")


def install_agents(test):
    """The agents' bin directory; skips the test when npm cannot reach the registry."""
    if not (shutil.which("node") and shutil.which("npm")):
        test.skipTest("node and npm are needed to install the coding agents")
    with open(os.path.join(AGENTS_DIR, "package-lock.json")) as f:
        lock = json.load(f)
    for pkg, (version, integrity) in PINNED.items():
        entry = lock["packages"][f"node_modules/{pkg}"]
        test.assertEqual((entry["version"], entry["integrity"]), (version, integrity), pkg)
    root = cache_dir()
    bins = os.path.join(root, "node_modules", ".bin")
    ready = os.path.join(root, "installed")
    if not os.path.exists(ready):
        os.makedirs(root, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(os.path.join(AGENTS_DIR, name), root)
        r = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=root,
                           capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
        if r.returncode != 0 and any(e in r.stdout + r.stderr for e in NETWORK_ERRORS):
            print(f"\nskipping the real agents: npm cannot reach the registry:\n{r.stderr[-800:]}", file=sys.stderr)
            test.skipTest("npm cannot reach the registry to install the pinned agents")
        test.assertEqual(r.returncode, 0, f"npm ci in {root}:\n{r.stdout}\n{r.stderr}")
        # Claude Code's install script only links its platform binary (from the pinned optional package).
        r = subprocess.run(["node", os.path.join("node_modules", "@anthropic-ai", "claude-code", "install.cjs")],
                           cwd=root, capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
        test.assertEqual(r.returncode, 0, r.stderr)
        open(ready, "w").close()
    return bins


class AgentRun(unittest.TestCase):
    """What each agent test has: the gateway its setUpClass starts (cls.gw), the installed agents,
    and a fresh HOME and working directory per test."""

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def setUp(self):
        self.bins = install_agents(self)
        self.home = tempfile.mkdtemp(prefix="sipp-agent-home-", dir=gw.tmpdir())
        self.work = tempfile.mkdtemp(prefix="sipp-agent-work-", dir=gw.tmpdir())
        self.log_from = len(self.gw.text())


class RealAgentsTest(AgentRun):
    @classmethod
    def setUpClass(cls):
        stop = os.path.join(gw.tmpdir(), "agents-real-stop.gguf")
        if not os.path.exists(stop):
            r = subprocess.run([gw.SYNTH, "--out", stop, "--vocab", fields.QWEN_VOCAB, "--chat-template-file",
                                os.path.join(fields.TEMPLATES, "Qwen-Qwen2.5-7B-Instruct.jinja"), "--seed", "1",
                                "--stop-token", "<|im_end|>", *gw.TINY], capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
        noise = fields.make_model(os.path.join(gw.tmpdir(), "agents-qwen25.gguf"), "Qwen-Qwen2.5-7B-Instruct.jinja")
        cfg = (gw.local_target("qwen", path=stop, parallel=1, ctx=CTX,
                               extra=f'max_tokens = {STOP_CAP}\naliases = ["claude-*", "gpt-*"]\n') +
               gw.local_target("noise", path=noise, parallel=1, ctx=CTX, extra=f"max_tokens = {NOISE_CAP}\n"))
        cls.gw = gw.serve_config(cfg)

    def gateway_errors(self):
        """The API requests of this run that the gateway answered with an error (4xx, 5xx)."""
        bad = []
        for ln in self.gw.text()[self.log_from:].splitlines():
            parts = ln.split('"')
            if len(parts) == 3 and ln.startswith("sipp: ") and " /v1/" in parts[1]:
                if parts[2].split()[0][0] in "45":
                    bad.append(ln)
        return bad

    def env(self, **extra):
        return {"PATH": os.environ.get("PATH", ""), "HOME": self.home, "NO_PROXY": "*", "LANG": "C.UTF-8", **extra}

    def codex(self, model):
        os.makedirs(os.path.join(self.home, ".codex"), exist_ok=True)
        with open(os.path.join(self.home, ".codex", "config.toml"), "w") as f:
            f.write(f'model = "{model}"\nmodel_provider = "sipp"\n\n[model_providers.sipp]\nname = "sipp"\n'
                    f'base_url = "{self.gw.base}/v1"\nwire_api = "responses"\n')
        r = subprocess.run([os.path.join(self.bins, "codex"), "exec", "--skip-git-repo-check", "--json", "Say hello"],
                           cwd=self.work, env=self.env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=AGENT_TIMEOUT_S)
        events = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
        self.assertTrue(events, f"codex printed no events:\n{r.stdout}\n{r.stderr}")
        return r, events

    def claude(self, model):
        env = self.env(ANTHROPIC_BASE_URL=self.gw.base, ANTHROPIC_API_KEY="sipp-local", ANTHROPIC_MODEL=model,
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        r = subprocess.run([os.path.join(self.bins, "claude"), "-p", "Say hello", "--output-format", "json"],
                           cwd=self.work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=AGENT_TIMEOUT_S)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        self.assertTrue(lines, f"claude printed no result:\n{r.stdout}\n{r.stderr}")
        return r, json.loads(lines[-1])

    def test_codex_completes_its_turn(self):
        r, events = self.codex("qwen")
        self.assertEqual(events[-1]["type"], "turn.completed", f"{events[-3:]}\n{r.stderr[-2000:]}")
        self.assertEqual(r.returncode, 0)
        self.assertGreater(events[-1]["usage"]["input_tokens"], 1000)
        self.assertEqual(self.gateway_errors(), [])

    def test_codex_under_a_gpt5_alias_completes_its_turn(self):
        # Under a model name it knows, Codex sends what it sends OpenAI's gpt-5 models: text.verbosity
        # and apply_patch as a custom (freeform) tool with a Lark grammar.
        r, events = self.codex("gpt-5.5")
        self.assertEqual(events[-1]["type"], "turn.completed", f"{events[-3:]}\n{r.stderr[-2000:]}")
        self.assertEqual(self.gateway_errors(), [])

    def test_codex_on_a_model_that_never_stops_ends_on_the_cap(self):
        r, events = self.codex("noise")
        self.assertEqual(events[-1]["type"], "turn.failed", events[-3:])
        self.assertIn("max_output_tokens", events[-1]["error"]["message"])
        self.assertEqual(self.gateway_errors(), [])

    def test_claude_code_completes_its_turn(self):
        r, result = self.claude("qwen")
        self.assertFalse(result["is_error"], result)
        self.assertIsNone(result.get("api_error_status"), result)
        self.assertEqual(result.get("terminal_reason"), "completed", result)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(self.gateway_errors(), [])

    def test_claude_code_on_a_model_that_never_stops_ends_on_the_cap(self):
        r, result = self.claude("noise")
        self.assertIsNone(result.get("api_error_status"), result)
        if result["is_error"]:
            self.assertEqual(result.get("api_error"), "max_output_tokens", result)
        self.assertEqual(self.gateway_errors(), [])


class DemoModelAgentTest(AgentRun):
    """One real agent turn on a model that says something: Claude Code with sipp-demo (models/), the
    weather tools served by an MCP server (agents/weather_mcp.mjs), its built-in tools off (`--tools
    ""`) and its system prompt ours (`--system-prompt`), so that its requests fit the model's 2,048
    positions: the agent's full prompt (11k tokens of instructions and tools) is beyond them.
    The model calls mcp__weather__get_weather for the city asked, the agent runs it through the MCP
    server, sends the result back, and the model's answer carries it. CLAUDE_CODE_ATTRIBUTION_HEADER=0
    keeps the agent's billing line (which changes with each build) out of the system prompt."""

    @classmethod
    def setUpClass(cls):
        model = os.path.join(ROOT, "models", "sipp-demo.gguf")
        cls.gw = gw.serve_config(gw.local_target("sipp-demo", path=model, parallel=1, ctx=2048,
                                                 extra=f"max_tokens = {STOP_CAP}\n"))

    def test_claude_code_runs_the_tool_sipp_demo_calls(self):
        calls = os.path.join(self.home, "mcp-calls.jsonl")
        mcp = os.path.join(self.home, "mcp.json")
        with open(mcp, "w") as f:
            json.dump({"mcpServers": {"weather": {"type": "stdio", "command": "node",
                                                  "args": [os.path.join(AGENTS_DIR, "weather_mcp.mjs"), calls]}}}, f)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": self.home, "NO_PROXY": "*", "LANG": "C.UTF-8",
               "ANTHROPIC_BASE_URL": self.gw.base, "ANTHROPIC_API_KEY": "sipp-local", "ANTHROPIC_MODEL": "sipp-demo",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_ATTRIBUTION_HEADER": "0"}
        r = subprocess.run([os.path.join(self.bins, "claude"), "--bare", "-p", "What's the weather in Paris?",
                            "--output-format", "json", "--system-prompt", corpus.SYSTEM, "--tools", "",
                            "--mcp-config", mcp, "--strict-mcp-config",
                            "--allowedTools", "mcp__weather__get_weather", "mcp__weather__get_time"],
                           cwd=self.work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=AGENT_TIMEOUT_S)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        self.assertTrue(lines, f"claude printed no result:\n{r.stdout}\n{r.stderr}")
        result = json.loads(lines[-1])
        self.assertFalse(result["is_error"], result)
        self.assertEqual(r.returncode, 0)
        self.assertTrue(os.path.exists(calls), f"the agent ran no tool; it answered {result.get('result')!r}")
        with open(calls) as f:
            ran = [json.loads(ln) for ln in f]
        self.assertEqual(ran[0], {"name": "get_weather", "arguments": {"city": "Paris"}}, ran)
        self.assertGreaterEqual(result["num_turns"], 2, result)
        answer = result["result"]
        self.assertIn("21", answer, f"the answer does not use the tool's result: {answer!r}")
        self.assertIn("sunny", answer.lower(), f"the answer does not use the tool's result: {answer!r}")


if __name__ == "__main__":
    unittest.main()
