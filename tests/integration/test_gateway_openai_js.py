"""The official `openai` npm client against `sipp serve`: models, chat (plain and streamed),
completions (plain and streamed), embeddings and errors, through tests/integration/js/openai_client.mjs.

The client is pinned to an exact version with its registry integrity in js/package-lock.json; the
test installs it with `npm ci --ignore-scripts` when js/node_modules is missing (node_modules is not
committed). Without node and npm the test is skipped, saying so.
"""

import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support import npm  # noqa: E402

JS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
NODE_TIMEOUT_S = 120
TOKEN_ENV = "SIPP_GW_JS_TOKEN"
TOKEN = "js-client-secret"


def ensure_client():
    npm.ensure(JS_DIR, "openai", "@anthropic-ai/sdk", "ollama")


@unittest.skipUnless(shutil.which("node") and shutil.which("npm"), "node and npm are needed for the openai client test")
class OpenAIClientTest(unittest.TestCase):
    def test_openai_npm_client(self):
        ensure_client()
        cfg = f'[[tokens]]\nenv = "{TOKEN_ENV}"\n\n' + gw.local_target("tiny")
        g = gw.serve_config(cfg, env={TOKEN_ENV: TOKEN})
        try:
            r = subprocess.run(["node", "openai_client.mjs", f"{g.base}/v1", "tiny", TOKEN], cwd=JS_DIR,
                               capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
            self.assertTrue(lines, f"no result from node:\n{r.stdout}\n{r.stderr}")
            result = json.loads(lines[-1])
            self.assertTrue(result["ok"], f"{result.get('error')}\n--- gateway log:\n{g.text()[-3000:]}")
            self.assertEqual(r.returncode, 0)
            self.assertEqual(result["checked"], ["models", "chat", "chat-stream", "completions", "embeddings", "errors"])
        finally:
            self.assertEqual(g.stop(), 0)


    def test_openai_npm_client_tools(self):
        ensure_client()
        path = os.path.join(gw.tmpdir(), "qwen25-js.gguf")
        r = subprocess.run([gw.SYNTH, "--out", path, "--vocab", os.path.join(gw.BUILD, "llama", "vocab", "ggml-vocab-qwen2.gguf"),
                            "--chat-template-file",
                            os.path.join(gw.BUILD, "llama", "source", "models", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja"),
                            *gw.TINY], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gw.serve_config(gw.local_target("qwen", path, parallel=2, ctx=4096))
        try:
            r = subprocess.run(["node", "openai_tools.mjs", f"{g.base}/v1", "qwen"], cwd=JS_DIR,
                               capture_output=True, text=True, timeout=NODE_TIMEOUT_S * 3)
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
            self.assertTrue(lines, f"no result from node:\n{r.stdout}\n{r.stderr}")
            result = json.loads(lines[-1])
            self.assertTrue(result["ok"], f"{result.get('error')}\n--- gateway log:\n{g.text()[-3000:]}")
            self.assertEqual(result["checked"], ["tools", "tools-stream", "tools-history", "json_schema", "logprobs"])
        finally:
            self.assertEqual(g.stop(), 0)


if __name__ == "__main__":
    unittest.main()
