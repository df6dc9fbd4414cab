"""The web page's "run in this browser" mode and the model file route it downloads from.

A gateway on loopback with [web] serve_model_files = true and two bearer tokens (one for every
target, one limited to another target) serves a tiny F16 synthetic model (F16: WebAssembly's and
AVX2's kernels then sum the same products, so greedy output is equal token for token; see
test_browser_runtime.py). A second gateway runs without [web], the default.

  - GET /v1/models/{name}/file by raw HTTP: the whole file with its sha256 (ETag,
    X-Sipp-Model-Sha256), HEAD, one Range (206 and Content-Range), 416 for a range past the end, a
    malformed one and several at once, a unit other than bytes ignored, If-Range and If-None-Match;
    401 without a token, 404 for a target the token may not see, 404 naming the setting when it is
    off; /v1/models advertises browser_file only when it is on.
  - /browser/ serves the browser package and make web's runtime, the page and they cross-origin
    isolated (COOP/COEP), and nothing but the runtime's five files from its directory.
  - In headless Chromium (tests/integration/web/browser_mode.test.js): the page with the token turns
    the mode on, downloads and loads the model, shows `browser (wasm, N threads)`, and its greedy
    answer equals the gateway's own answer to the same chat; a second visit with the file route
    blocked loads the model from the browser's cache. Screenshot: build/test-artifacts/web-browser-mode.png.
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
from tests.integration.common import BUILD, ROOT, make_model  # noqa: E402

WEB_TESTS = os.path.join(ROOT, "tests", "integration", "web")
ARTIFACTS = os.path.join(ROOT, "build", "test-artifacts")
CHROMIUM = os.environ.get("SIPP_CHROMIUM", "/usr/bin/chromium")
RUNTIME_FILES = ("sipp-mt.js", "sipp-mt.worker.js", "sipp-mt.wasm", "sipp-st.js", "sipp-st.wasm")
TOKEN_ENV, TOKEN = "SIPP_BROWSER_MODE_TOKEN", "browser-mode-secret-51c2"
OTHER_ENV, OTHER_TOKEN = "SIPP_BROWSER_MODE_OTHER", "browser-mode-other-9d04"
PROMPT = "Hello there, browser"
MAX_TOKENS = 24
NODE_TIMEOUT_S = 300  # the script cuts itself off earlier (RUN_TIMEOUT_MS); this is the backstop



class ModelFileRouteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sipp-browser-mode-")
        cls.model = make_model(cls.tmp, "tiny.gguf", n_embd=64, n_layer=2, type="f16", chat_template="chatml")
        with open(cls.model, "rb") as f:
            cls.bytes = f.read()
        cls.sha256 = hashlib.sha256(cls.bytes).hexdigest()
        cls.etag = f'"{cls.sha256}"'
        # The file's hash is cached in the store's hash cache: a store of this test's own.
        env = {TOKEN_ENV: TOKEN, OTHER_ENV: OTHER_TOKEN, "SIPP_MODELS_DIR": os.path.join(cls.tmp, "store")}
        tokens = (f'[[tokens]]\nenv = "{TOKEN_ENV}"\ncaller = "page"\n\n'
                  f'[[tokens]]\nenv = "{OTHER_ENV}"\ncaller = "other"\ntargets = ["other"]\n\n')
        targets = gw.local_target("tiny", cls.model, parallel=1, ctx=512) + gw.local_target("other", parallel=1, ctx=512)
        cls.servers = []
        try:
            cls.on = gw.serve_config("[web]\nserve_model_files = true\n\n" + tokens + targets, env=env)
            cls.servers.append(cls.on)
            cls.off = gw.serve_config(gw.local_target("tiny", cls.model, parallel=1, ctx=512), env=env)
            cls.servers.append(cls.off)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for s in getattr(cls, "servers", []):
            s.stop()  # only the processes this test started
        shutil.rmtree(getattr(cls, "tmp", ""), ignore_errors=True)

    def get(self, path, token=TOKEN, method="GET", server=None, **headers):
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return (server or self.on).request(method, path, headers=headers)

    def error(self, body):
        return json.loads(body)["error"]

    # ---- the whole file ------------------------------------------------------------------------

    def test_the_whole_file_with_its_sha256(self):
        status, h, body = self.get("/v1/models/tiny/file")
        self.assertEqual(status, 200)
        self.assertEqual(hashlib.sha256(body).hexdigest(), self.sha256)
        self.assertEqual(int(h["content-length"]), len(self.bytes))
        self.assertEqual(h["etag"], self.etag)
        self.assertEqual(h["x-sipp-model-sha256"], self.sha256)
        self.assertEqual(h["accept-ranges"], "bytes")
        self.assertEqual(h["content-type"], "application/octet-stream")

    def test_head_has_the_headers_and_no_body(self):
        status, h, body = self.get("/v1/models/tiny/file", method="HEAD")
        self.assertEqual(status, 200)
        self.assertEqual(body, b"")
        self.assertEqual(int(h["content-length"]), len(self.bytes))
        self.assertEqual(h["x-sipp-model-sha256"], self.sha256)

    def test_models_list_advertises_the_file(self):
        status, _, body = self.get("/v1/models")
        self.assertEqual(status, 200)
        entry = {m["id"]: m for m in json.loads(body)["data"]}["tiny"]
        self.assertEqual(entry["browser_file"], {"url": "/v1/models/tiny/file", "sha256": self.sha256,
                                                 "bytes": len(self.bytes), "ctx_size": 512})

    # ---- ranges --------------------------------------------------------------------------------

    def check_range(self, spec, first, last):
        status, h, body = self.get("/v1/models/tiny/file", Range=spec)
        self.assertEqual(status, 206, spec)
        self.assertEqual(h["content-range"], f"bytes {first}-{last}/{len(self.bytes)}", spec)
        self.assertEqual(body, self.bytes[first:last + 1], spec)
        self.assertEqual(h["etag"], self.etag)

    def test_one_range(self):
        n = len(self.bytes)
        self.check_range("bytes=0-9", 0, 9)
        self.check_range("bytes=100-", 100, n - 1)
        self.check_range("bytes=-16", n - 16, n - 1)
        self.check_range(f"bytes=10-{n + 1000}", 10, n - 1)  # a last byte past the end is the end

    def check_416(self, spec, words):
        status, h, body = self.get("/v1/models/tiny/file", Range=spec)
        self.assertEqual(status, 416, spec)
        self.assertEqual(h["content-range"], f"bytes */{len(self.bytes)}")
        err = self.error(body)
        self.assertEqual(err["code"], "range_not_satisfiable")
        self.assertIn("Range", err["message"])
        self.assertIn(words, err["message"])

    def test_bad_ranges_are_416(self):
        n = len(self.bytes)
        self.check_416(f"bytes={n}-", "past the end")
        self.check_416("bytes=-0", "past the end")
        self.check_416("bytes=9-2", "not a byte range")
        self.check_416("bytes=abc", "not a byte range")
        self.check_416("bytes=99999999999999999999999-", "not a byte range")
        self.check_416("bytes=0-1,4-5", "several ranges")

    def test_other_units_if_range_and_if_none_match(self):
        status, _, body = self.get("/v1/models/tiny/file", Range="items=0-1")
        self.assertEqual((status, len(body)), (200, len(self.bytes)))  # RFC 9110: an unknown unit is ignored
        status, _, body = self.get("/v1/models/tiny/file", Range="bytes=0-1", **{"If-Range": '"another"'})
        self.assertEqual((status, len(body)), (200, len(self.bytes)))  # changed since: the whole file
        status, _, body = self.get("/v1/models/tiny/file", Range="bytes=0-1", **{"If-Range": self.etag})
        self.assertEqual((status, body), (206, self.bytes[:2]))
        status, h, body = self.get("/v1/models/tiny/file", **{"If-None-Match": self.etag})
        self.assertEqual((status, body), (304, b""))
        self.assertEqual(h["etag"], self.etag)

    # ---- auth and the setting ------------------------------------------------------------------

    def test_auth_applies(self):
        status, _, body = self.get("/v1/models/tiny/file", token=None)
        self.assertEqual(status, 401, body)
        status, _, body = self.get("/v1/models/tiny/file", token="not-the-secret-at-all")
        self.assertEqual(status, 401, body)
        status, _, body = self.get("/v1/models/tiny/file", token=OTHER_TOKEN)  # limited to "other"
        self.assertEqual(status, 404, body)
        self.assertIn("does not exist", self.error(body)["message"])
        status, _, body = self.get("/v1/models/other/file", token=OTHER_TOKEN, method="HEAD")
        self.assertEqual(status, 200)

    def test_unknown_target_is_404(self):
        status, _, body = self.get("/v1/models/nope/file")
        self.assertEqual(status, 404)
        self.assertIn("'nope'", self.error(body)["message"])

    def test_off_by_default_names_the_setting(self):
        status, _, body = self.get("/v1/models/tiny/file", token=None, server=self.off)
        self.assertEqual(status, 404)
        self.assertIn("serve_model_files = true", self.error(body)["message"])
        self.assertIn("[web]", self.error(body)["message"])
        status, _, body = self.get("/v1/models", token=None, server=self.off)
        self.assertNotIn("browser_file", json.loads(body)["data"][0])

    # ---- the browser runtime's files -----------------------------------------------------------

    def check_isolated(self, h, path):
        self.assertEqual(h.get("cross-origin-opener-policy"), "same-origin", path)
        self.assertEqual(h.get("cross-origin-embedder-policy"), "require-corp", path)

    def test_page_and_runtime_are_cross_origin_isolated(self):
        status, h, _ = self.get("/", token=None)
        self.assertEqual(status, 200)
        self.check_isolated(h, "/")
        self.assertNotIn("wasm-unsafe-eval", h["content-security-policy"])
        for path in ("/browser/index.js", "/browser/worker.js", "/browser/cache.js"):
            status, h, body = self.get(path, token=None)
            self.assertEqual(status, 200, path)
            self.assertTrue(h["content-type"].startswith("text/javascript"), path)
            self.check_isolated(h, path)
            with open(os.path.join(ROOT, "bindings", "web", os.path.basename(path)), "rb") as f:
                self.assertEqual(body, f.read(), f"{path} is not bindings/web's file")

    def test_runtime_files_come_from_make_web(self):
        absent = [f for f in RUNTIME_FILES if not os.path.isfile(os.path.join(BUILD, "web", f))]
        if absent:
            self.fail(f"the browser runtime is not built ({', '.join(absent)}); run make web")
        status, h, body = self.get("/browser/runtime/sipp-mt.wasm", token=None, method="HEAD")
        self.assertEqual(status, 200)
        self.assertEqual(h["content-type"], "application/wasm")
        self.assertEqual(int(h["content-length"]), os.path.getsize(os.path.join(BUILD, "web", "sipp-mt.wasm")))
        self.check_isolated(h, "sipp-mt.wasm")
        self.assertIn("'wasm-unsafe-eval'", h["content-security-policy"])
        for bad in ("/browser/runtime/llama-mt.dir", "/browser/runtime/..%2f..%2fbin%2fsipp", "/browser/nope.js"):
            status, _, body = self.get(bad, token=None)
            self.assertEqual(status, 404, bad)


class RuntimeDirTest(unittest.TestCase):
    """[web] runtime_dir: /browser/runtime/ serves that directory's files (a path relative to the
    config file's directory), not make web's; a file missing there is a 404 naming the path and the
    setting; a value that is not a string is refused by serve --check naming the key."""

    @classmethod
    def setUpClass(cls):
        cls.dir_name = f"runtime-{os.getpid()}"
        cls.dir = os.path.join(gw.tmpdir(), cls.dir_name)  # the config file's directory too
        os.makedirs(cls.dir, exist_ok=True)
        cls.wasm = b"\0asm\1\0\0\0 not make web's runtime"
        with open(os.path.join(cls.dir, "sipp-mt.wasm"), "wb") as f:
            f.write(cls.wasm)
        cls.gw = gw.serve_config(f'[web]\nruntime_dir = "{cls.dir_name}"\n\n' + gw.local_target("tiny", parallel=1))

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()  # only the process this test started

    def test_files_come_from_runtime_dir(self):
        status, h, body = self.gw.request("GET", "/browser/runtime/sipp-mt.wasm")
        self.assertEqual(status, 200)
        self.assertEqual(body, self.wasm)
        self.assertEqual(h["content-type"], "application/wasm")

    def test_a_file_missing_there_names_the_path_and_the_setting(self):
        status, _, body = self.gw.request("GET", "/browser/runtime/sipp-st.wasm")
        self.assertEqual(status, 404)
        message = json.loads(body)["error"]["message"]
        self.assertIn(os.path.join(self.dir, "sipp-st.wasm"), message)
        self.assertIn("runtime_dir", message)

    def test_not_a_string_is_refused(self):
        path = gw.write(f"runtime-bad-{os.getpid()}.toml", "[web]\nruntime_dir = 5\n\n" + gw.local_target("tiny"))
        r = subprocess.run([gw.SIPP, "serve", "--check", "--config", path], capture_output=True, text=True,
                           timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("runtime_dir", r.stderr)


class BrowserModeTest(unittest.TestCase):
    """The page itself, in headless Chromium (shares ModelFileRouteTest's gateway set-up)."""

    def test_page_runs_the_model_in_the_browser(self):
        missing = [what for what, ok in (("Chromium at " + CHROMIUM, os.access(CHROMIUM, os.X_OK)),
                                         ("node", shutil.which("node")), ("npm", shutil.which("npm"))) if not ok]
        if missing:
            self.skipTest(f"{', '.join(missing)} not installed (make setup installs them)")
        npm.ensure(WEB_TESTS, "playwright-core")
        ModelFileRouteTest.setUpClass()
        self.addCleanup(ModelFileRouteTest.tearDownClass)
        g = ModelFileRouteTest.on
        os.makedirs(ARTIFACTS, exist_ok=True)
        cmd = ["node", os.path.join(WEB_TESTS, "browser_mode.test.js"), "--base", g.base, "--target", "tiny",
               "--token", TOKEN, "--prompt", PROMPT, "--max-tokens", str(MAX_TOKENS), "--artifacts", ARTIFACTS]
        r = subprocess.run(cmd, cwd=WEB_TESTS, capture_output=True, text=True, timeout=NODE_TIMEOUT_S,
                           stdin=subprocess.DEVNULL, env=dict(os.environ, SIPP_CHROMIUM=CHROMIUM))
        lines = r.stdout.strip().splitlines()
        seen = json.loads(lines[-1]) if lines else {"error": "no output"}
        self.assertEqual(r.returncode, 0, f"{seen.get('error')}\n{r.stderr[-3000:]}\n--- gateway ---\n{g.text()[-3000:]}")

        # The gateway's own greedy answer to the same conversation.
        status, _, body = g.request("POST", "/v1/chat/completions", body={
            "model": "tiny", "messages": [{"role": "user", "content": PROMPT}], "temperature": 0,
            "max_tokens": MAX_TOKENS}, headers={"Authorization": f"Bearer {TOKEN}"})
        self.assertEqual(status, 200, body)
        native = json.loads(body)["choices"][0]["message"]["content"]

        self.assertTrue(seen["isolated"], "the page is not cross-origin isolated")
        self.assertRegex(seen["backend"], r"^browser \(wasm, \d+ threads?\)$")
        self.assertEqual(seen["statsBackend"], seen["backend"])
        self.assertIn("pthreads", seen["device"])
        self.assertIn("downloaded", seen["info"])
        self.assertEqual(seen["fileRequests"], ["Bearer TOKEN"], "the model was not fetched once with the token")
        self.assertTrue(native, "the gateway answered nothing")
        self.assertEqual(seen["answer"], native, "the browser's greedy answer differs from the gateway's")
        self.assertRegex(seen["speed"], r"tok/s · \d+ tokens")
        self.assertIn("model cache", seen["secondInfo"])
        self.assertEqual(seen["secondBlocked"], [], "the second visit fetched the model again")
        # Before the token is typed, the page's first calls get the 401s that make it ask for one.
        self.assertEqual([m for m in seen["console"] if "status of 401" not in m], [])


if __name__ == "__main__":
    unittest.main()
