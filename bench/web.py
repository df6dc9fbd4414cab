#!/usr/bin/env python3
"""bench/web.py: the browser runtime's decode speed against native sipp and against @wllama/wllama.

    python3 bench/web.py [--threads 2] [--tokens 64] [--reps 3] [--shape small|1b] [--model PATH]

One synthetic model (or --model), the same thread count and greedy decoding everywhere:

  native   sipp bench MODEL -n TOKENS --threads T --backend cpu  (tg, as llama-bench defines it)
  browser  sipp's browser runtime (make web, the pthread build on a cross-origin-isolated page)
  wllama   @wllama/wllama@3.8.1 (pinned in tests/integration/web/package.json) in the same page

Both browser runtimes run in one headless Chromium session (tests/integration/web/drive.mjs) on a
loopback server. Prints one JSON object with the figures, the ratios (browser / native and
browser / wllama) and the runtime's download size (wasm + js, gzip), which BENCHMARKS.md records.
"""
import argparse
import gzip
import json
import os
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
PACKAGE_FILES = ["index.js", "local.js", "worker.js", "query.js", "options.js", "errors.js", "gateway.js", "cache.js",
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


def native_tg(model, threads, tokens, reps):
    p = subprocess.run([SIPP, "bench", model, "-p", "16", "-n", str(tokens), "-r", str(reps), "--threads",
                        str(threads), "--backend", "cpu", "-o", "json"], capture_output=True, text=True, check=True)
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
    native = native_tg(model, a.threads, a.tokens, a.reps)
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
           "browser_build": res["sipp"]["build"], "browser_vs_native": browser / native if native else None}
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
