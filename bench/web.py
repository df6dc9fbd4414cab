#!/usr/bin/env python3
"""bench/web.py: the browser runtime's decode speed against native sipp and against @wllama/wllama.

    python3 bench/web.py [--threads 2] [--tokens 64] [--reps 3] [--shape small|1b] [--model PATH]

One synthetic model (or --model), the same thread count and greedy decoding everywhere:

  native   sipp bench MODEL -n TOKENS --threads T --backend cpu  (tg, as llama-bench defines it)
  browser  sipp's browser runtime (make web, the pthread build on a cross-origin-isolated page)
  wllama   @wllama/wllama@3.8.1 (pinned in tests/integration/web/package.json) in the same page
  native, 128-bit SIMD   the same `sipp bench` on a copy of the artifact whose only CPU modules are
           ggml's sse42 and x64 builds: SIMD as wide as WebAssembly's (128 bits), no AVX2 and no
           repacked Q4_0 kernels, which separates what the vector width costs from what the
           browser runtime itself costs

Both browser runtimes run in one headless Chromium session (tests/integration/web/drive.mjs) on a
loopback server; the pinned npm packages it needs are installed (npm ci) when missing. Prints one JSON object with the figures, the ratios (browser / native and
browser / wllama) and the runtime's download size (wasm + js, gzip), which BENCHMARKS.md records.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tests.integration.common import BUILD, SIPP, make_model  # noqa: E402
from tests.integration.web_server import WebServer  # noqa: E402

SHAPES = {
    "small": dict(n_embd=512, n_layer=8, n_head=8, n_head_kv=4, n_ff=1408, type="q4_0"),
    "1b": dict(n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, n_ff=8192, type="q4_0"),
}
PROMPT = "Once upon a time, in a land far away, there lived"
DRIVE_TIMEOUT_S = 1800
RUNTIME_FILES = ["sipp-mt.js", "sipp-mt.wasm", "sipp-mt.worker.js", "sipp-st.js", "sipp-st.wasm"]
PACKAGE_FILES = ["index.js", "client.js", "local.js", "worker.js", "query.js", "options.js", "errors.js", "gateway.js", "cache.js",
                 "sha256.js"]


def gzip_size(path):
    with open(path, "rb") as f:
        return len(gzip.compress(f.read(), compresslevel=9))


def download_size():
    web = os.path.join(BUILD, "web")
    pkg = os.path.join(ROOT, "bindings", "web")
    sizes = {f: gzip_size(os.path.join(web, f)) for f in RUNTIME_FILES}
    js = sum(gzip_size(os.path.join(pkg, f)) for f in PACKAGE_FILES)
    mt = sizes["sipp-mt.js"] + sizes["sipp-mt.wasm"] + sizes["sipp-mt.worker.js"] + js
    st = sizes["sipp-st.js"] + sizes["sipp-st.wasm"] + js
    return {"pthreads_gzip_bytes": mt, "single_gzip_bytes": st, "files_gzip_bytes": sizes, "package_js_gzip_bytes": js}


WEB_TESTS = os.path.join(ROOT, "tests", "integration", "web")
NARROW_CPU_MODULES = ("libggml-cpu-sse42.so", "libggml-cpu-x64.so")


def ensure_web_deps():
    """playwright-core and @wllama/wllama, from the pinned package-lock.json, when missing."""
    mods = os.path.join(WEB_TESTS, "node_modules")
    if all(os.path.isdir(os.path.join(mods, *m.split("/"))) for m in ("playwright-core", "@wllama/wllama")):
        return
    r = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=WEB_TESTS,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench/web.py: npm ci in {WEB_TESTS} failed ({r.returncode}):\n{r.stderr[-2000:]}")


def narrow_artifact(tmp):
    """A copy of the default cpu artifact without its AVX/AVX2/AVX-512 CPU modules, or None when it has
    no 128-bit module to keep."""
    src = os.path.join(BUILD, "artifacts", "cpu")
    if not os.path.exists(os.path.join(src, NARROW_CPU_MODULES[0])):
        return None
    dst = os.path.join(tmp, "artifact-128bit")
    os.makedirs(dst)
    for name in os.listdir(src):
        if name.startswith("libggml-cpu-") and name not in NARROW_CPU_MODULES:
            continue
        shutil.copy2(os.path.join(src, name), dst, follow_symlinks=False)
    return dst


def native_tg(model, threads, tokens, reps, artifact=None):
    extra = ["--artifact", artifact] if artifact else []
    p = subprocess.run([SIPP, "bench", model, "-p", "16", "-n", str(tokens), "-r", str(reps), "--threads",
                        str(threads), "--backend", "cpu", "--concurrency", "0", "-o", "json", *extra],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)["tg"]["mean"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="small")
    ap.add_argument("--model")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sipp-bench-web-")
    model = a.model or make_model(tmp, f"bench-{a.shape}.gguf", **SHAPES[a.shape])
    ensure_web_deps()
    native = native_tg(model, a.threads, a.tokens, a.reps)
    narrow = narrow_artifact(tmp)
    native_128 = native_tg(model, a.threads, a.tokens, a.reps, narrow) if narrow else None
    with WebServer(isolated=True) as srv:
        url = srv.add_model(os.path.basename(model), model)
        plan = {"userDataDir": os.path.join(tmp, "profile"), "timeoutMs": DRIVE_TIMEOUT_S * 1000, "steps": [
            {"url": f"{srv.base}/bench/web/bench.html", "scenario": "bench",
             "args": {"model": url, "prompt": PROMPT, "tokens": a.tokens, "reps": a.reps, "threads": a.threads}}]}
        plan_path = os.path.join(tmp, "plan.json")
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "integration", "web", "drive.mjs"), plan_path],
                           capture_output=True, text=True, timeout=DRIVE_TIMEOUT_S)
    step = json.loads(r.stdout)[0]
    if step["error"]:
        sys.exit(f"bench/web.py: the browser run failed: {step['error']}\n{step['console']}")
    res = step["result"]
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    browser = mean(res["sipp"]["decodeTokensPerS"])
    out = {"model": os.path.basename(model), "shape": a.shape if not a.model else None, "threads": a.threads,
           "tokens": a.tokens, "native_tg": native, "browser_tg": browser, "browser_runs": res["sipp"]["decodeTokensPerS"],
           "browser_build": res["sipp"]["build"], "browser_vs_native": browser / native if native else None,
           "native_128bit_tg": native_128,
           "browser_vs_native_128bit": browser / native_128 if native_128 else None}
    w = res.get("wllama", {})
    if "error" in w:
        out["wllama_error"] = w["error"]
    else:
        out["wllama_tg"] = mean(w["decodeTokensPerS"])
        out["wllama_runs"] = w["decodeTokensPerS"]
        out["browser_vs_wllama"] = browser / out["wllama_tg"] if out["wllama_tg"] else None
    out["download"] = download_size()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
