"""The browser runtime (make web, bindings/web) in headless Chromium, against native sipp.

Two static servers on loopback serve the repository's browser files and a tiny synthetic model: one
cross-origin isolated (COOP/COEP: the pthread build) and one not (the single-thread build). One run
of tests/integration/web/drive.mjs (Debian's Chromium through playwright-core; no browser is
downloaded) goes through the scenarios of web/harness.js in a single browser profile, and the tests
below check its results:

  - greedy output equals native `sipp --backend cpu` token for token, in both builds, for a query
    and a chat; the response names the backend (cpu) and the WebAssembly threads
  - streaming arrives piece by piece; an abort ends the request within one token, and the next
    request works
  - embeddings equal native ones (the Python binding on the same model) within the CPU tolerance
  - a model fetched by URL is cached in OPFS by its SHA-256: a second load with the network blocked
    makes no request; a corrupted download is refused and leaves nothing in the cache
  - backend 'webgpu' fails naming the missing half; 'auto' falls back to cpu with libsipp's reason
  - bad options get the Node binding's errors; a gateway endpoint answers the same calls over HTTP

Screenshots go to build/test-artifacts/browser-*.png.
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
import test_gateway_support as gw  # noqa: E402
from tests.support import npm  # noqa: E402
from tests.integration.common import BUILD, ROOT, make_model, run_sipp  # noqa: E402
from tests.integration.web_server import WebServer  # noqa: E402
from tests.support.paths import SIPP  # noqa: E402
from tests.support.wait import run_progressing  # noqa: E402

WEB_TESTS = os.path.join(ROOT, "tests", "integration", "web")
ARTIFACTS = os.path.join(ROOT, "build", "test-artifacts")
CHROMIUM = os.environ.get("SIPP_CHROMIUM", "/usr/bin/chromium")
RUNTIME_FILES = [os.path.join(BUILD, "web", f) for f in ("sipp-mt.js", "sipp-mt.wasm", "sipp-st.js", "sipp-st.wasm")]
PROMPT = "Hello there, browser"
MAX_TOKENS = 24
ABORT_AFTER = 3
EMBED_TEXTS = ["the quick brown fox", "a second, longer text to embed"]
EMBED_TOLERANCE = 1e-3  # per component of unit vectors: wasm SIMD and AVX2 sum in different orders
# drive.mjs is bounded by progress: it writes a line on stderr per step and every few seconds while a
# step progresses, and cuts a step after 5 minutes without progress. These bound the run the same way:
# no line for DRIVE_STALL_S, or a safety stop that no progressing run reaches.
DRIVE_STALL_S = 600
DRIVE_SAFETY_S = 4 * 3600
NATIVE_EMBED = """
import json, sys
sys.path.insert(0, sys.argv[1])
import sipp
client = sipp.Client()
ep = client.add("e", sipp.local(sys.argv[2], backend="cpu", threads=1, ctx_size=512))
print(json.dumps(client.embed(json.loads(sys.argv[3]))))
client.close()
"""


def have_playwright():
    return os.path.isfile(os.path.join(WEB_TESTS, "node_modules", "playwright-core", "package.json"))


def native_text(model, prompt, chat=False):
    args = [model, prompt, "--max-tokens", str(MAX_TOKENS), "--temperature", "0", "--backend", "cpu",
            "--ctx-size", "512", "--stats", "json"]
    p = run_sipp(args + (["--chat"] if chat else []), check=True)
    stats = json.loads(p.stderr.strip().splitlines()[-1])
    return p.stdout[:-1] if p.stdout.endswith("\n") else p.stdout, stats


class BrowserRuntimeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = [what for what, ok in (("Chromium at " + CHROMIUM, os.access(CHROMIUM, os.X_OK)),
                                         ("node", shutil.which("node")), ("npm", shutil.which("npm"))) if not ok]
        if missing:
            raise unittest.SkipTest(f"{', '.join(missing)} not installed (make setup installs them)")
        absent = [f for f in RUNTIME_FILES if not os.path.isfile(f)]
        if absent:
            raise AssertionError(f"the browser runtime is not built ({', '.join(absent)}); run make web")
        npm.ensure(WEB_TESTS, "playwright-core")
        cls.tmp = tempfile.mkdtemp(prefix="sipp-browser-test-")
        # F16 weights: WebAssembly's and AVX2's Q8_0 kernels round differently, enough for a random-weight
        # model's greedy path to split at a near tie after ~10 tokens (sipp verify measures that drift);
        # with F16 both sum the same products and the outputs are equal token for token.
        cls.model = make_model(cls.tmp, "tiny.gguf", n_embd=64, n_layer=2, type="f16", chat_template="chatml")
        with open(cls.model, "rb") as f:
            cls.sha256 = hashlib.sha256(f.read()).hexdigest()
        cls.native, cls.native_stats = native_text(cls.model, PROMPT)
        cls.native_chat, _ = native_text(cls.model, PROMPT, chat=True)
        cls.servers = []
        try:
            cls.run_browser()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def run_browser(cls):
        iso = WebServer(isolated=True)
        plain = WebServer(isolated=False)
        cls.servers += [iso, plain]
        cls.gateway = gw.serve_config(
            f'[server]\nallowed_origins = ["{plain.base}"]\n\n' + gw.local_target("tiny", cls.model, parallel=1, ctx=512))
        cls.servers.append(cls.gateway)
        url = iso.add_model("tiny.gguf", cls.model)
        plain_url = plain.add_model("tiny.gguf", cls.model)
        cls.iso = iso
        page = f"{iso.base}/tests/integration/web/harness.html"
        plain_page = f"{plain.base}/tests/integration/web/harness.html"
        base = {"model": url, "prompt": PROMPT, "maxTokens": MAX_TOKENS}
        steps = [
            ("runtime_mt", page, "runtime", {}, None),
            ("greedy_mt", page, "greedy", base, "browser-greedy-pthreads"),
            ("greedy_st_forced", page, "greedy", {**base, "build": "single"}, None),
            ("abort", page, "abort", {**base, "abortAfter": ABORT_AFTER}, None),
            ("embed", page, "embed", {**base, "texts": EMBED_TEXTS}, None),
            ("webgpu", page, "webgpu", base, None),
            ("bad_options", page, "badOptions", base, None),
            ("cache_first", page, "cacheLoad", {**base, "sha256": cls.sha256, "clear": True}, None),
            ("cache_second", page, "cacheLoad", {**base}, None, ["**/models/**"]),
            ("cache_corrupt", page, "cacheCorrupt", {"model": f"{iso.base}/models/corrupt/tiny.gguf",
                                                     "sha256": cls.sha256}, None),
            ("cache_manage_fill", page, "cacheLoad", {**base, "sha256": cls.sha256}, None),
            ("cache_manage", page, "cacheManage", {}, None),
            ("runtime_st", plain_page, "runtime", {}, None),
            ("greedy_st", plain_page, "greedy", {**base, "model": plain_url}, "browser-greedy-single"),
            ("gateway", plain_page, "gateway", {"baseUrl": cls.gateway.base, "target": "tiny", "prompt": PROMPT,
                                                "maxTokens": MAX_TOKENS}, None),
        ]
        os.makedirs(ARTIFACTS, exist_ok=True)
        plan = {"userDataDir": os.path.join(cls.tmp, "profile"), "screenshotDir": ARTIFACTS, "webgpu": True,
                "steps": []}
        cls.names = []
        for step in steps:
            name, url_, scenario, args, shot = step[:5]
            cls.names.append(name)
            plan["steps"].append({"url": url_, "scenario": scenario, "args": args, "screenshot": shot,
                                  "block": step[5] if len(step) > 5 else []})
        plan_path = os.path.join(cls.tmp, "plan.json")
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        r = run_progressing(["node", os.path.join(WEB_TESTS, "drive.mjs"), plan_path], DRIVE_STALL_S, DRIVE_SAFETY_S,
                            cwd=WEB_TESTS, env=dict(os.environ, CHROMIUM=CHROMIUM))
        if r.returncode != 0:
            raise AssertionError(f"drive.mjs failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        cls.results = dict(zip(cls.names, json.loads(r.stdout)))
        print("browser steps (ms): " + ", ".join(f"{n} {s['ms']}" for n, s in cls.results.items()), file=sys.stderr)
        cls.model_requests = dict(iso.counts)

    @classmethod
    def tearDownClass(cls):
        for s in getattr(cls, "servers", []):
            s.stop()
        shutil.rmtree(getattr(cls, "tmp", ""), ignore_errors=True)

    def result(self, name):
        step = self.results[name]
        self.assertIsNone(step["error"], f"{name}: {step['error']}\nconsole: {step['console']}")
        return step["result"]

    # ---- the builds ----------------------------------------------------------------------------

    def test_isolated_page_runs_the_pthread_build(self):
        rt = self.result("runtime_mt")
        self.assertTrue(rt["crossOriginIsolated"])
        self.assertEqual(rt["build"], "pthreads")
        self.assertTrue(rt["pthreads"])
        self.assertIn("cross-origin isolated", rt["reason"])
        self.assertEqual(rt["llamaCommit"], "80fb11ac73e66d89eae2c6a91d8a77428fa733ed")

    def test_page_without_coop_coep_runs_the_single_thread_build(self):
        rt = self.result("runtime_st")
        self.assertFalse(rt["crossOriginIsolated"])
        self.assertEqual(rt["build"], "single")
        self.assertFalse(rt["pthreads"])
        self.assertEqual(rt["threads"], 1)
        self.assertIn("not cross-origin isolated", rt["reason"])

    # ---- greedy output equals native sipp ------------------------------------------------------

    def check_greedy(self, name, build):
        r = self.result(name)
        self.assertEqual(r["text"], self.native, f"{name}: browser and native sipp differ")
        self.assertEqual(r["chatText"], self.native_chat, f"{name}: chat differs from native sipp --chat")
        resp = r["response"]
        self.assertEqual(resp["backend"], "cpu")
        self.assertEqual(resp["build"], build)
        self.assertEqual(resp["usage"]["completionTokens"], self.native_stats["generated_tokens"])
        self.assertEqual(resp["usage"]["promptTokens"], self.native_stats["prompt_tokens"])
        self.assertIn(resp["finishReason"], ("length", "stop"))
        self.assertGreater(resp["timings"]["decodeTokensPerS"], 0)
        return resp

    def test_greedy_pthreads_equals_native(self):
        resp = self.check_greedy("greedy_mt", "pthreads")
        self.assertGreaterEqual(resp["threads"], 1)
        self.assertEqual(resp["threads"], self.result("runtime_mt")["threads"])

    def test_greedy_single_thread_equals_native(self):
        self.assertEqual(self.check_greedy("greedy_st", "single")["threads"], 1)
        self.assertEqual(self.check_greedy("greedy_st_forced", "single")["threads"], 1)

    def test_streaming_arrives_piece_by_piece(self):
        r = self.result("greedy_mt")
        self.assertGreater(len(r["pieces"]), MAX_TOKENS // 2, "the text came in too few pieces")
        self.assertEqual("".join(r["pieces"]), r["text"])
        self.assertLess(r["pieces"].count(""), 1)
        times = r["times"]
        self.assertGreater(len(set(times)), len(times) // 2, "the pieces all arrived at once")

    def test_abort_stops_within_one_token_and_the_next_request_works(self):
        r = self.result("abort")
        self.assertEqual(r["finishReason"], "cancelled")
        # Pieces already posted when the page aborted still arrive; what the runtime owes is that once
        # the cancel reaches the worker, at most one more token is produced (the step under way).
        self.assertLessEqual(r["piecesAfterCancel"], 1)
        self.assertGreaterEqual(r["generated"], ABORT_AFTER)
        self.assertLess(r["generated"], 200, "the request ran to its limit: the abort did nothing")
        self.assertEqual(r["next"]["finishReason"], "length")
        self.assertEqual(r["next"]["usage"]["completionTokens"], 8)

    # ---- embeddings --------------------------------------------------------------------------

    def test_embeddings_match_native(self):
        vectors = self.result("embed")["vectors"]
        p = subprocess.run([sys.executable, "-c", NATIVE_EMBED, os.path.join(ROOT, "bindings", "python"), self.model,
                            json.dumps(EMBED_TEXTS)], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, SIPP_BUILD=BUILD, SIPP_PYTHON_BACKEND="cpu"))
        self.assertEqual(p.returncode, 0, p.stderr)
        native = json.loads(p.stdout)
        self.assertEqual(len(vectors), len(native))
        for b, n in zip(vectors, native):
            self.assertEqual(len(b), len(n))
            worst = max(abs(x - y) for x, y in zip(b, n))
            self.assertLess(worst, EMBED_TOLERANCE, f"browser and native embeddings differ by {worst}")

    # ---- the model cache ---------------------------------------------------------------------

    def test_second_load_comes_from_opfs_without_a_request(self):
        first = self.result("cache_first")
        self.assertFalse(first["source"]["fromCache"])
        self.assertEqual(first["source"]["cacheKey"], self.sha256)
        self.assertGreater(len(first["progress"]), 0)
        self.assertEqual(first["progress"][-1], os.path.getsize(self.model))
        self.assertEqual([e["key"] for e in first["list"]], [self.sha256])
        second = self.result("cache_second")
        self.assertTrue(second["source"]["fromCache"])
        self.assertEqual(second["progress"], [])
        self.assertEqual(self.results["cache_second"]["blocked"], [], "the second load tried the network")
        self.assertEqual(second["text"], first["text"])

    def test_corrupted_download_is_refused_and_not_cached(self):
        r = self.result("cache_corrupt")
        self.assertIsNotNone(r["error"], "a corrupted download was accepted")
        self.assertEqual(r["error"]["code"], "model_error")
        self.assertIn(self.sha256, r["error"]["message"])
        self.assertIn("nothing was cached", r["error"]["message"])
        self.assertEqual(r["list"], [])
        self.assertEqual([f for f in r["files"] if not f.endswith("index.json")], [], "the download left files")

    def test_cache_list_delete_clear(self):
        r = self.result("cache_manage")
        self.assertEqual([e["key"] for e in r["before"]], [self.sha256])
        self.assertTrue(r["deleted"])
        self.assertEqual(r["after"], [])
        self.assertEqual(r["badKey"]["code"], "invalid_argument")
        self.assertEqual(r["cleared"], [])

    # ---- backends ----------------------------------------------------------------------------

    def test_webgpu_is_refused_honestly_and_auto_falls_back_to_cpu(self):
        r = self.result("webgpu")
        err = r["error"]
        self.assertIsNotNone(err, "backend 'webgpu' was accepted by a runtime without it")
        self.assertEqual(err["code"], "backend_error")
        self.assertIn("not compiled into this browser runtime", err["message"])
        self.assertIn("Emscripten >= 4.0.10", err["message"])
        self.assertIn("shader-f16", err["message"])
        self.assertIn("adapter", err["webgpu"])
        self.assertEqual(r["auto"]["backend"], "cpu")
        self.assertIn("webgpu: not compiled", r["auto"]["reason"])
        names = {b["name"]: b for b in r["backends"]["backends"]}
        self.assertTrue(names["cpu"]["available"])
        self.assertFalse(names["webgpu"]["compiled"])
        self.assertEqual(r["backends"]["auto"]["backend"], "cpu")

    # ---- errors and the gateway kind ---------------------------------------------------------

    def test_bad_options_are_refused_with_the_node_bindings_messages(self):
        r = self.result("bad_options")
        self.assertIn("did you mean maxTokens", r["snake"]["message"])
        self.assertEqual(r["topP"]["code"], "invalid_argument")
        self.assertIn("top_p", r["topP"]["message"])
        self.assertIn("not a browser backend", r["backend"]["message"])
        self.assertEqual(r["missing"]["code"], "not_found")
        self.assertEqual(r["notGguf"]["code"], "model_error")
        self.assertIn("GGUF", r["notGguf"]["message"])
        self.assertIn("threads", r["threads"]["message"])
        self.assertEqual(r["closed"]["code"], "closed")

    def test_what_needs_the_chat_library_is_refused_by_name(self):
        r = self.result("bad_options")
        self.assertFalse(r["chat"]["library"], "the runtime claims llama.cpp's chat library")
        self.assertFalse(r["chat"]["tools"])
        self.assertIn("built-in", r["chat"]["templates"])
        for key, wire in (("tools", "tools"), ("responseFormat", "response_format"), ("grammar", "grammar")):
            self.assertIsNotNone(r[key], f"{key} was accepted by a runtime without the chat library")
            self.assertEqual(r[key]["code"], "invalid_argument")
            self.assertIn(f"{key} ({wire})", r[key]["message"])
            self.assertIn("chat library", r[key]["message"])
        for key in ("toolMessage", "toolCalls"):  # tool messages too: the built-in templates would drop their fields
            self.assertIsNotNone(r[key], f"{key} was accepted by a runtime without the chat library")
            self.assertEqual(r[key]["code"], "invalid_argument")
            self.assertIn("messages[1] is a tool message or carries tool_calls", r[key]["message"])
            self.assertIn("chat library", r[key]["message"])
        self.assertEqual(r["afterRefusals"], 4, "the endpoint did not answer after the refusals")
        gw_tools = self.result("gateway")["tools"]
        self.assertIsNotNone(gw_tools, "the gateway endpoint dropped tools silently")
        self.assertIn("tools (tools)", gw_tools["message"])

    def test_gateway_endpoint_uses_the_same_calls(self):
        r = self.result("gateway")
        self.assertEqual(r["kind"], "gateway")
        self.assertEqual(r["text"], self.native)
        self.assertGreater(r["pieces"], 1)
        self.assertEqual(r["response"]["backend"], "gateway")


class VerifyBrowserTest(unittest.TestCase):
    """`sipp verify --backends cpu,browser`: the browser runtime compared with native cpu, in the manifest."""

    def test_verify_records_the_browser_runtime(self):
        for what, ok in (("Chromium at " + CHROMIUM, os.access(CHROMIUM, os.X_OK)), ("node", shutil.which("node"))):
            if not ok:
                self.skipTest(f"{what} not installed (make setup installs it)")
        if not os.path.isfile(RUNTIME_FILES[0]) or not have_playwright():
            self.skipTest("the browser runtime or playwright-core is missing (make web; BrowserRuntimeTest installs it)")
        with tempfile.TemporaryDirectory() as tmp:
            # F16: see BrowserRuntimeTest; on Q8_0 the browser's top-1 agreement is 99.3% (BENCHMARKS.md).
            model = make_model(tmp, "tiny.gguf", n_embd=64, n_layer=2, type="f16")
            manifest = os.path.join(tmp, "manifest.json")
            # sipp verify runs drive.mjs, whose progress lines reach its stderr
            p = run_progressing([SIPP, "verify", model, "--backends", "cpu,browser", "--greedy-tokens", "8",
                                 "--manifest", manifest, "--min-top1", "1", "--min-greedy", "1", "--threads", "1"],
                                DRIVE_STALL_S, DRIVE_SAFETY_S,
                                env={k: v for k, v in os.environ.items() if k != "GGML_VK_VISIBLE_DEVICES"})
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(manifest) as f:
                m = json.load(f)
            b = m["backends"]["browser"]
            self.assertEqual(b["vs_ref"]["top1_agreement"], 1.0)
            self.assertLess(b["vs_ref"]["kl_mean"], 1e-3)
            self.assertEqual(b["device"]["name"], "wasm")
            self.assertEqual(b["device"]["runtime"]["build"], "pthreads")
            cpu = m["backends"]["cpu"]
            self.assertEqual([g["sha256"] for g in b["greedy"]], [g["sha256"] for g in cpu["greedy"]])


if __name__ == "__main__":
    unittest.main()
