"""Ollama's keep_alive, /api/ps and /api/show on models that load on demand (api/ollama.c onto
src/gateway/fleet/residency.c): keep_alive 0 with an empty request unloads without loading, 0 with a
prompt unloads when the request ends, "1s" when its deadline passes, a request without keep_alive
returns the target to its own; /api/ps lists only loaded models with expires_at from the real
deadline and size from the measured memory; /api/show reads an unloaded model's GGUF without loading
it; bad values are refused naming keep_alive. Raw HTTP here, and the official `ollama` npm client
(js/ollama_residency.mjs) where node is installed.
"""

import json
import os
import shutil
import subprocess
import time
import unittest
from datetime import datetime

from tests.integration.test_gateway_agent_clients_js import JS_DIR, NODE_TIMEOUT_S, ensure_clients
from tests.integration.test_gateway_residency import CTX, STATE_TIMEOUT_S, models, state, target
from tests.integration.test_gateway_support import check_build, model, serve_config

POLL_S = 0.05
EXPIRY_SLACK_S = 1.0  # between the reply and reading /api/ps
FOREVER_YEAR = 2300  # Ollama shows "stay loaded" as an expiry centuries away


def ollama(gw, path, body):
    return gw.json("POST", path, body)


def generate(gw, name="a", prompt="hi", **kw):
    return ollama(gw, "/api/generate", {"model": name, "prompt": prompt, "stream": False,
                                        "options": {"num_predict": 2, "temperature": 0}, **kw})


def ps(gw):
    status, _, body = gw.json("GET", "/api/ps")
    assert status == 200, body
    return {m["name"]: m for m in body["models"]}


def iso_to_unix(s):
    return datetime.fromisoformat(s[:26].rstrip("Z") + "+00:00").timestamp()


def idle(gw, name="a"):
    """The target's figures once the last request's use of it has ended (the reply is sent before
    the server is done with the request, which is when its keep_alive is handed over)."""
    deadline = time.monotonic() + STATE_TIMEOUT_S
    while (m := models(gw)[name]["sipp"])["uses"] and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return m


def wait_state(gw, name, want):
    deadline = time.monotonic() + STATE_TIMEOUT_S
    while state(gw, name) != want and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return state(gw, name)


class OllamaKeepAlive(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        check_build()
        cls.path = model("ka", 31)

    def serve(self, extra=""):
        gw = serve_config(target("a", self.path, extra))
        self.addCleanup(gw.stop)
        return gw

    def test_keep_alive_zero_with_an_empty_request_unloads(self):
        gw = self.serve()
        for path, body in (("/api/generate", {"prompt": ""}), ("/api/chat", {"messages": []})):
            status, _, r = ollama(gw, path, {"model": "a", "stream": False, **body})
            self.assertEqual((status, r["done_reason"]), (200, "load"), r)
            self.assertEqual(state(gw, "a"), "loaded")
            status, _, r = ollama(gw, path, {"model": "a:latest", "keep_alive": 0, **body})
            self.assertEqual((status, r["done"], r["done_reason"]), (200, True, "unload"), r)
            self.assertEqual(r["model"], "a:latest")
            self.assertEqual(wait_state(gw, "a", "unloaded"), "unloaded")
            self.assertEqual(ps(gw), {})
        # unloading an unloaded model does not load it first
        status, _, r = ollama(gw, "/api/generate", {"model": "a", "prompt": "", "keep_alive": "0s"})
        self.assertEqual((status, r["done_reason"]), (200, "unload"), r)
        self.assertEqual(models(gw)["a"]["sipp"]["loads"], 2)
        self.assertEqual(state(gw, "a"), "unloaded")

    def test_keep_alive_zero_with_a_prompt_unloads_when_it_ends(self):
        gw = self.serve()
        status, _, r = generate(gw, keep_alive=0)
        self.assertEqual(status, 200, r)
        self.assertEqual(r["eval_count"], 2)
        self.assertEqual(wait_state(gw, "a", "unloaded"), "unloaded")
        self.assertIn("target 'a' unloaded (keep_alive passed)", gw.text())
        status, _, r = ollama(gw, "/api/embed", {"model": "a", "input": "hello", "keep_alive": 0})
        self.assertEqual(status, 200, r)
        self.assertEqual(wait_state(gw, "a", "unloaded"), "unloaded")

    def test_a_duration_unloads_after_its_deadline_and_ps_shows_it(self):
        gw = self.serve()
        t0 = time.time()
        status, _, r = ollama(gw, "/api/chat", {"model": "a", "messages": [{"role": "user", "content": "hi"}],
                                                "stream": False, "keep_alive": "1s", "options": {"num_predict": 2}})
        self.assertEqual(status, 200, r)
        t1 = time.time()
        listed = ps(gw)
        if listed:  # (it may already be gone on a slow machine)
            m = listed["a:latest"]
            self.assertEqual(set(listed), {"a:latest"})
            expires = iso_to_unix(m["expires_at"])
            self.assertGreaterEqual(expires, t0 + 1 - EXPIRY_SLACK_S)
            self.assertLessEqual(expires, t1 + 1 + EXPIRY_SLACK_S)
            sipp = idle(gw)
            if sipp["state"] == "loaded":
                self.assertAlmostEqual(expires, sipp["unload_at"], delta=1e-3)
                self.assertEqual(m["size"], sipp["memory"]["total_bytes"])  # measured, not the file size
                self.assertEqual(m["size_vram"], sum(sipp["memory"]["device_bytes"].values()))
                self.assertEqual(sipp["keep_alive_seconds"], 1)
            self.assertEqual(m["context_length"], CTX)
        self.assertEqual(wait_state(gw, "a", "unloaded"), "unloaded")
        self.assertGreaterEqual(time.time() - t0, 1.0)
        self.assertEqual(ps(gw), {})

    def test_forms_of_keep_alive(self):
        gw = self.serve()
        for ka, seconds in ((-1, -1), ("-5m", -1), (2.5, 2.5), ("1h30m", 5400), ("1.5h", 5400), ("300ms", 0.3),
                            (600, 600), ("10s", 10)):
            status, _, r = generate(gw, keep_alive=ka)
            self.assertEqual(status, 200, (ka, r))
            sipp = idle(gw)
            self.assertEqual(sipp["keep_alive_seconds"], seconds, ka)
            m = ps(gw).get("a:latest")
            if seconds < 0:
                self.assertGreater(datetime.fromisoformat(m["expires_at"][:19]).year, FOREVER_YEAR, m)
            elif sipp["state"] == "loaded":
                self.assertAlmostEqual(iso_to_unix(m["expires_at"]), sipp["last_used"] + seconds, delta=1e-3)
        # a request without keep_alive returns the target to its own (here: forever)
        self.assertEqual(generate(gw)[0], 200)
        self.assertEqual(idle(gw)["keep_alive_seconds"], -1)

    def test_bad_keep_alive_is_refused_naming_it(self):
        gw = self.serve()
        for ka in ("5", "5 minutes", "1d", "", "m", ".s", "1s5", True, {}, [1], "1e9h", 1e300):
            for path in ("/api/generate", "/api/chat", "/api/embed"):
                body = {"model": "a", "keep_alive": ka}
                body.update({"/api/generate": {"prompt": "hi", "stream": False}, "/api/chat": {"messages": []},
                             "/api/embed": {"input": "hi"}}[path])
                status, _, r = ollama(gw, path, body)
                self.assertEqual(status, 400, (path, ka, r))
                self.assertEqual(set(r), {"error"})
                self.assertIn("'keep_alive'", r["error"])
        self.assertEqual(state(gw, "a"), "unloaded")  # none of them loaded it

    def test_show_reads_an_unloaded_model_without_loading_it(self):
        gw = self.serve()
        status, _, unloaded = ollama(gw, "/api/show", {"model": "a"})
        self.assertEqual(status, 200, unloaded)
        self.assertEqual(state(gw, "a"), "unloaded")
        mi = unloaded["model_info"]
        self.assertEqual(mi["general.architecture"], "llama")
        self.assertEqual(mi["llama.embedding_length"], 64)
        self.assertEqual(mi["llama.block_count"], 2)
        self.assertEqual(unloaded["details"]["quantization_level"], "Q8_0")
        _, _, tags = gw.json("GET", "/api/tags")
        self.assertGreater(tags["models"][0]["size"], 0)  # the file's size, from its header
        self.assertEqual(tags["models"][0]["details"]["family"], "llama")
        self.assertEqual(generate(gw)[0], 200)
        status, _, loaded = ollama(gw, "/api/show", {"model": "a"})
        self.assertEqual(status, 200, loaded)
        for k in ("general.architecture", "general.parameter_count", "llama.embedding_length", "llama.block_count",
                  "llama.attention.head_count", "llama.attention.head_count_kv", "llama.context_length"):
            self.assertEqual(loaded["model_info"][k], mi[k], k)
        self.assertEqual(loaded["details"]["parameter_size"], unloaded["details"]["parameter_size"])


@unittest.skipUnless(shutil.which("node") and shutil.which("npm"), "node and npm are needed for the ollama client")
class OllamaClientResidency(unittest.TestCase):
    def test_ollama_client_keep_alive_ps_show(self):
        check_build()
        ensure_clients()
        gw = serve_config(target("tiny", model("ka", 31)))
        self.addCleanup(gw.stop)
        r = subprocess.run(["node", "ollama_residency.mjs", gw.base, "tiny"], cwd=JS_DIR, capture_output=True,
                           text=True, timeout=NODE_TIMEOUT_S)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        self.assertTrue(lines, f"no result from node:\n{r.stdout}\n{r.stderr}")
        result = json.loads(lines[-1])
        self.assertTrue(result["ok"], f"{result.get('error')}\n--- gateway log:\n{gw.text()[-3000:]}")
        self.assertEqual(result["checked"], ["show-unloaded", "load", "unload", "keep-alive-deadline", "forever",
                                             "refused"])


if __name__ == "__main__":
    unittest.main()
