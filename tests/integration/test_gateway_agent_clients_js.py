"""The official npm clients of the APIs agents speak, against `sipp serve`: `openai` (responses.create
plain, streamed, with tools, with previous_response_id), `@anthropic-ai/sdk` (messages.create plain and
streamed, tools with tool_choice tool, countTokens, errors) and `ollama` (list, show, ps, chat plain and streamed, generate, embed,
pull from a loopback HTTP server), through tests/integration/js/agent_clients.mjs.

The clients are pinned to exact versions with their registry integrity in js/package-lock.json; the
test installs them with `npm ci --ignore-scripts` when one is missing from js/node_modules (which is
not committed). Without node and npm the test is skipped, saying so.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import httpfixture  # noqa: E402
import test_gateway_support as gw  # noqa: E402
from tests.support import npm  # noqa: E402

JS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
PACKAGES = ("openai", os.path.join("@anthropic-ai", "sdk"), "ollama")
NPM_TIMEOUT_S = 300
NODE_TIMEOUT_S = 180
TOKEN_ENV = "SIPP_GW_AGENT_JS_TOKEN"
TOKEN = "agent-js-secret-0001"  # secrets are at least 16 bytes (config.c)
VOCABS = os.path.dirname(gw.VOCAB)
QWEN_VOCAB = os.path.join(VOCABS, "ggml-vocab-qwen2.gguf")
QWEN_TEMPLATE = os.path.join(VOCABS, "..", "source", "models", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
CHECKED = ["responses", "responses-stream", "responses-previous", "responses-tools", "messages", "count-tokens",
           "messages-stream", "messages-tools", "messages-errors", "ollama-list", "ollama-show", "ollama-ps", "ollama-chat",
           "ollama-chat-stream", "ollama-generate", "ollama-embed", "ollama-pull"]
CHECKED_REMOTE = ["responses", "responses-stream", "responses-tools", "messages", "messages-stream", "messages-tools",
                  "messages-errors", "ollama-chat", "ollama-chat-stream"]


def ensure_clients():
    npm.ensure(JS_DIR, *PACKAGES)


@unittest.skipUnless(shutil.which("node") and shutil.which("npm"), "node and npm are needed for the agent client tests")
class AgentClientsTest(unittest.TestCase):
    def test_agent_npm_clients(self):
        ensure_clients()
        store = tempfile.mkdtemp(prefix="sipp-agent-js-store-", dir=gw.tmpdir())
        tool_model = os.path.join(gw.tmpdir(), "agent-js-qwen.gguf")
        r = subprocess.run([gw.SYNTH, "--out", tool_model, "--vocab", QWEN_VOCAB, "--chat-template-file", QWEN_TEMPLATE,
                            "--seed", "1", *gw.TINY], capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        # /api/pull needs the admin scope, and the loopback fixture needs allow_private_sources
        cfg = (f'[[tokens]]\nenv = "{TOKEN_ENV}"\nadmin = true\n\n[store]\nallow_private_sources = true\n\n' +
               gw.local_target("tiny", parallel=2, ctx=2048) +
               gw.local_target("qwen", path=tool_model, parallel=2, ctx=4096))
        with httpfixture.HTTPFixture() as http:
            with open(gw.model("tiny"), "rb") as f:
                url = http.add("/models/agent-pulled.gguf", f.read())
            g = gw.serve_config(cfg, env={TOKEN_ENV: TOKEN, "SIPP_MODELS_DIR": store, "NO_PROXY": "*"})
            try:
                r = subprocess.run(["node", "agent_clients.mjs", g.base, "tiny", TOKEN, url, "qwen"], cwd=JS_DIR,
                                   capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
                lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
                self.assertTrue(lines, f"no result from node:\n{r.stdout}\n{r.stderr}")
                result = json.loads(lines[-1])
                self.assertTrue(result["ok"], f"{result.get('error')}\n--- gateway log:\n{g.text()[-3000:]}")
                self.assertEqual(r.returncode, 0)
                self.assertEqual(result["checked"], CHECKED)
                self.assertTrue(os.path.isfile(os.path.join(store, "agent-pulled.gguf")))
            finally:
                self.assertEqual(g.stop(), 0)

    def test_agent_npm_clients_through_a_remote_target(self):
        """The same clients, plain and streamed, with a second sipp as the remote (openai_compatible)
        upstream of both targets: the gateway translates to chat completions and relays the
        upstream's stream as it comes."""
        ensure_clients()
        tool_model = os.path.join(gw.tmpdir(), "agent-js-remote-qwen.gguf")
        r = subprocess.run([gw.SYNTH, "--out", tool_model, "--vocab", QWEN_VOCAB, "--chat-template-file", QWEN_TEMPLATE,
                            "--seed", "1", *gw.TINY], capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        up = gw.serve_config(gw.local_target("tiny", parallel=2, ctx=2048) +
                             gw.local_target("qwen", path=tool_model, parallel=2, ctx=4096))
        try:
            remote = "".join(f'[[targets]]\nname = "{n}"\ntype = "openai_compatible"\n'
                             f'base_url = "{up.base}/v1"\nmodel = "{n}"\n\n' for n in ("tiny", "qwen"))
            g = gw.serve_config(f'[[tokens]]\nenv = "{TOKEN_ENV}"\n\n' + remote, env={TOKEN_ENV: TOKEN, "NO_PROXY": "*"})
            try:
                r = subprocess.run(["node", "agent_clients.mjs", g.base, "tiny", TOKEN, "-", "qwen", "remote"],
                                   cwd=JS_DIR, capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
                lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
                self.assertTrue(lines, f"no result from node:\n{r.stdout}\n{r.stderr}")
                result = json.loads(lines[-1])
                self.assertTrue(result["ok"], f"{result.get('error')}\n--- gateway log:\n{g.text()[-3000:]}")
                self.assertEqual(r.returncode, 0)
                self.assertEqual(result["checked"], CHECKED_REMOTE)
            finally:
                self.assertEqual(g.stop(), 0)
        finally:
            self.assertEqual(up.stop(), 0)


if __name__ == "__main__":
    unittest.main()
