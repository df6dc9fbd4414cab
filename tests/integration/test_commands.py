"""The documented command forms, run as written (issue 22): `sipp build TARGET --backend ...`,
`sipp backends --target`, `sipp doctor --target` and its exit codes, `sipp run llama TOOL`.

The Node and Python packages are run in fresh processes after `sipp build node|python` to show that
they pick up the artifact the build recorded (build/targets/TARGET.json). Each test that records an
artifact for a target puts the previous record back afterwards, so the rest of the suite sees the
tree as it was. Vulkan runs on lavapipe, which ggml uses only when GGML_VK_VISIBLE_DEVICES names it;
cuda has no driver here, so its commands must fail with the honest "not compiled / no device" error.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.integration.common import BUILD, ROOT, make_model, run_sipp

VK = {"GGML_VK_VISIBLE_DEVICES": "0"}
NODE_PKG = os.path.join(ROOT, "bindings", "node")
PY_PKG = os.path.join(ROOT, "bindings", "python")
TARGETS = os.path.join(ROOT, "build", "targets")
PROBE_TIMEOUT_S = 180

NODE_PROBE = r"""
const sipp = require('.');
(async () => {
  const out = { selection: sipp.backendSelection() };
  if (process.argv[1]) {
    const c = new sipp.SippClient();
    const ep = await c.add('m', { kind: 'local', model: process.argv[1], options: { threads: 1, parallel: 1, ctxSize: 128 } });
    const r = await c.query('Hello', { maxTokens: 2, temperature: 0 }).response;
    Object.assign(out, { backend: ep.backend.backend, finish: r.finishReason, runtime: await sipp.runtimeInfo() });
    await c.close();
  }
  console.log('RESULT ' + JSON.stringify(out));
})().catch((e) => { console.error(e.code, e.message); process.exit(1); });
"""

PY_PROBE = r"""
import json, sys, sipp
out = {"selection": sipp.backend_selection()}
if len(sys.argv) > 1:
    with sipp.Client() as c:
        ep = c.add("m", sipp.local(sys.argv[1], threads=1, parallel=1, ctx_size=128))
        r = c.query("Hello", max_tokens=2, temperature=0)
        out.update(backend=ep.backend["backend"], finish=r.finish_reason, runtime=sipp.runtime_info())
print("RESULT " + json.dumps(out))
"""


def result(p):
    lines = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        raise AssertionError(f"probe exited {p.returncode}: {p.stderr[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def clean_env(extra=None):
    env = dict(os.environ)
    for k in ("SIPP_ARTIFACT", "SIPP_NODE_BACKEND", "SIPP_PYTHON_BACKEND", "GGML_VK_VISIBLE_DEVICES"):
        env.pop(k, None)
    env["SIPP_BUILD"] = os.path.join(ROOT, "build")
    env.update(extra or {})
    return env


def node_probe(env=None, model=None):
    args = ["node", "-e", NODE_PROBE] + ([model] if model else [])
    return subprocess.run(args, cwd=NODE_PKG, env=clean_env(env), capture_output=True, text=True,
                          timeout=PROBE_TIMEOUT_S)


def python_probe(env=None, model=None):
    e = clean_env(env)
    e["PYTHONPATH"] = PY_PKG
    args = [sys.executable, "-c", PY_PROBE] + ([model] if model else [])
    return subprocess.run(args, env=e, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)


def vulkan_loader():
    return any(os.path.exists(os.path.join(d, "libvulkan.so.1"))
               for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"))


class TargetRecord:
    """Keeps build/targets/TARGET.json as it was before a test recorded an artifact there."""

    def __init__(self, target):
        self.path = os.path.join(TARGETS, f"{target}.json")

    def __enter__(self):
        self.saved = None
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                self.saved = f.read()
        return self

    def read(self):
        with open(self.path) as f:
            return json.load(f)

    def __exit__(self, *exc):
        if self.saved is None:
            if os.path.exists(self.path):
                os.remove(self.path)
        else:
            with open(self.path, "wb") as f:
                f.write(self.saved)


class BuildTargetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sipp-cmds-")
        cls.model = make_model(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_cuda_is_refused_with_what_to_install(self):
        for args in (["build", "cli", "--backend", "cuda"], ["build", "node", "--backend", "cuda"]):
            p = run_sipp(args)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("cuda needs the NVIDIA driver", p.stderr)
            self.assertIn("libcuda.so.1", p.stderr)

    def test_web_is_not_built_yet(self):
        if os.path.exists(os.path.join(ROOT, "bindings", "web", "build.sh")):
            self.skipTest("this tree has a browser runtime (bindings/web/build.sh)")
        p = run_sipp(["build", "web"])
        self.assertEqual(p.returncode, 1)
        self.assertIn("the browser runtime is not built yet", p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)

    def test_bad_targets_and_options(self):
        p = run_sipp(["build", "java", "--backend", "cpu"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("'java' is not a target; the targets are cli, node, python, web, all", p.stderr)
        p = run_sipp(["build", "node"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("name the backends", p.stderr)
        p = run_sipp(["build", "--backend", "opencl"])
        self.assertEqual(p.returncode, 2)

    def test_backend_all_says_what_it_leaves_out(self):
        out = os.path.join(self.tmp, "all")
        with TargetRecord("cli"):
            p = run_sipp(["build", "--backend", "all", "--out", out])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "manifest.json")) as f:
            backends = json.load(f)["backends"]
        self.assertIn("cpu", backends)
        self.assertNotIn("cuda", backends)  # no NVIDIA driver here
        self.assertIn("leaves out cuda: cuda needs the NVIDIA driver", p.stderr)
        self.assertIn("leaves out metal: Metal is macOS only", p.stderr)
        self.assertEqual("vulkan" in backends, vulkan_loader())

    def test_node_picks_up_what_sipp_build_node_made(self):
        if not shutil.which("node"):
            self.skipTest("node is not installed")
        out = os.path.join(self.tmp, "node-cpu")
        with TargetRecord("node") as rec:
            p = run_sipp(["build", "node", "--backend", "cpu", "--out", out])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("SIPP_NODE_BACKEND=cpu selects it", p.stdout)
            self.assertEqual(rec.read()["artifact"], os.path.realpath(out))
            self.assertTrue(os.path.exists(os.path.join(NODE_PKG, "build", "sipp.node")))
            got = result(node_probe(model=self.model))
            self.assertEqual(got["selection"]["artifact"], os.path.realpath(out))
            self.assertEqual(got["selection"]["source"], "sipp build node")
            self.assertEqual(os.path.realpath(got["runtime"]["artifact"]), os.path.realpath(out))
            self.assertEqual(got["backend"], "cpu")
            self.assertEqual(got["finish"], "length")
            # vulkan is not in that artifact: the package falls back to one that has it
            if vulkan_loader():
                got = result(node_probe({"SIPP_NODE_BACKEND": "vulkan", **VK}))
                self.assertNotEqual(got["selection"]["artifact"], os.path.realpath(out))
                self.assertIn("vulkan", got["selection"]["backends"])
            # what sipp backends --target node says it selects is what the package selected
            b = json.loads(run_sipp(["backends", "--target", "node", "--json"], check=True).stdout)
            self.assertEqual(b["record"], os.path.realpath(out))
            self.assertEqual(b["select"]["auto"]["artifact"], os.path.realpath(out))
            self.assertEqual(b["select"]["cpu"]["source"], "sipp build node")
            d = run_sipp(["doctor", "--target", "node", "--json"])
            self.assertEqual(d.returncode, 0, d.stderr)
            self.assertEqual(json.loads(d.stdout)["target"]["artifact"], os.path.realpath(out))
        got = result(node_probe())
        self.assertNotEqual(got["selection"]["artifact"], os.path.realpath(out))

    def test_python_picks_up_what_sipp_build_python_made(self):
        out = os.path.join(self.tmp, "py-cpu")
        with TargetRecord("python") as rec:
            p = run_sipp(["build", "python", "--backend", "cpu", "--out", out])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(rec.read()["backends"], ["cpu"])
            got = result(python_probe(model=self.model))
            self.assertEqual(got["selection"]["artifact"], os.path.realpath(out))
            self.assertEqual(got["selection"]["source"], "sipp build python")
            self.assertEqual(os.path.realpath(got["runtime"]["artifact"]), os.path.realpath(out))
            self.assertEqual(got["backend"], "cpu")
            b = json.loads(run_sipp(["backends", "--target", "python", "--json"], check=True).stdout)
            self.assertEqual(b["select"]["auto"]["artifact"], os.path.realpath(out))
        got = result(python_probe())
        self.assertNotEqual(got["selection"]["artifact"], os.path.realpath(out))

    def test_vulkan_build_for_node_is_selected_on_lavapipe(self):
        if not vulkan_loader() or not shutil.which("node"):
            self.skipTest("needs the Vulkan loader and node")
        with TargetRecord("node") as rec:
            p = run_sipp(["build", "node", "--backend", "vulkan"])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(rec.read()["backends"], ["cpu", "vulkan"])
            got = result(node_probe({"SIPP_NODE_BACKEND": "vulkan", **VK}))
            self.assertEqual(got["selection"]["source"], "sipp build node")
            self.assertEqual(got["selection"]["decision"]["backend"], "vulkan")
            d = run_sipp(["doctor", "--target", "node", "--backend", "vulkan"], env=VK)
            self.assertEqual(d.returncode, 0, d.stdout + d.stderr)
            self.assertIn("target    node: usable", d.stdout)


    def test_cli_takes_a_backend_its_default_lacks_from_sipp_build_cli(self):
        """The CLI keeps its default artifact, except for an explicit backend that artifact lacks, which
        comes from the artifact `sipp build cli` recorded. No backend is buildable here that the default
        artifact lacks, so the recorded artifact's manifest claims cuda (a stand-in for a CUDA host's
        build): the CLI must load that artifact, whose modules then honestly say cuda is not compiled."""
        out = os.path.join(self.tmp, "cli-cpu")
        with TargetRecord("cli"):
            p = run_sipp(["build", "cli", "--backend", "cpu", "--out", out])
            self.assertEqual(p.returncode, 0, p.stderr)
            manifest = os.path.join(out, "manifest.json")
            with open(manifest) as f:
                m = json.load(f)
            m["backends"] = ["cpu", "cuda"]
            with open(manifest, "w") as f:
                json.dump(m, f)
            d = run_sipp(["doctor", "--target", "cli", "--backend", "cuda", "--json"])
            self.assertEqual(d.returncode, 1)
            t = json.loads(d.stdout)["target"]
            self.assertEqual((t["artifact"], t["source"]), (os.path.realpath(out), "sipp build cli"))
            p = run_sipp([self.model, "Hi", "--max-tokens", "2", "--backend", "cuda"])
            self.assertEqual(p.returncode, 1)
            self.assertIn("'cuda' is not compiled into this build (compiled: cpu)", p.stderr)  # not cpu, vulkan
            d = json.loads(run_sipp(["doctor", "--backend", "cpu", "--json"], check=True).stdout)
            self.assertNotEqual(d["artifact"]["dir"], os.path.realpath(out))  # a working command line is unchanged
            b = json.loads(run_sipp(["backends", "--target", "cli", "--json"], check=True).stdout)
            self.assertEqual(b["select"]["cuda"]["artifact"], os.path.realpath(out))
            self.assertIn(os.path.realpath(out), [a["dir"] for a in b["artifacts"] if a["record"]])


class DoctorTargetTest(unittest.TestCase):
    def doctor(self, *args, env=None):
        p = run_sipp(["doctor", *args, "--json"], env=env)
        return p, (json.loads(p.stdout) if p.stdout.strip() else None)

    def test_cpu_is_usable_for_every_native_target(self):
        for target in ("cli", "node", "python"):
            p, r = self.doctor("--target", target, "--backend", "cpu")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(r["target"]["usable"])
            self.assertIn("cpu", r["target"]["backends"])
            self.assertEqual(r["target"]["artifact"], r["artifact"]["dir"])

    def test_cuda_is_unusable_with_the_exact_fix(self):
        for target in ("cli", "node", "python"):
            p, r = self.doctor("--target", target, "--backend", "cuda")
            self.assertEqual(p.returncode, 1)
            self.assertFalse(r["target"]["usable"])
            self.assertTrue(r["target"]["fix"].startswith(f"sipp build {target} --backend cuda"), r["target"])
            self.assertIn("not compiled", p.stderr)

    def test_vulkan_needs_the_visible_device(self):
        if not vulkan_loader():
            self.skipTest("no Vulkan loader")
        p, r = self.doctor("--target", "node", "--backend", "vulkan")
        self.assertEqual(p.returncode, 1)
        self.assertIn("GGML_VK_VISIBLE_DEVICES", r["target"]["problem"])
        p, r = self.doctor("--target", "python", "--backend", "vulkan", env=VK)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(r["target"]["usable"])

    def test_the_package_variable_is_the_default_request(self):
        p, r = self.doctor("--target", "python", env={"SIPP_PYTHON_BACKEND": "cuda"})
        self.assertEqual(p.returncode, 1)
        self.assertEqual(r["target"]["requested"], "cuda")
        p, r = self.doctor("--target", "node", env={"SIPP_NODE_BACKEND": "cpu"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(r["target"]["requested"], "cpu")

    def test_web_and_bad_targets(self):
        p = run_sipp(["doctor", "--target", "web"])
        self.assertEqual(p.returncode, 1)
        self.assertIn("target    web: UNUSABLE", p.stdout)
        p = run_sipp(["doctor", "--target", "ios"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("not one of cli, node, python, web", p.stderr)
        p = run_sipp(["backends", "--target", "ios"])
        self.assertEqual(p.returncode, 2)


class RunLlamaTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sipp-run-llama-")
        cls.model = make_model(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_unknown_tool_lists_the_available_ones(self):
        p = run_sipp(["run", "llama", "perplexity"], threads=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown tool 'perplexity'; the available ones are backend-ops, bench", p.stderr)
        p = run_sipp(["run", "llama"], threads=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("backend-ops, bench", p.stderr)
        p = run_sipp(["run", "ollama", "bench"], threads=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("sipp run llama TOOL", p.stderr)

    def test_backend_ops_spelling_has_the_same_flags(self):
        p = run_sipp(["run", "llama", "backend-ops", "--backend", "cuda", "--mode", "perf", "--op", "MUL_MAT"],
                     threads=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("not compiled", p.stderr)
        p = run_sipp(["run", "llama", "backend-ops", "--backend", "cpu", "--mode", "fast"], threads=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not one of test, perf, support", p.stderr)
        p = run_sipp(["run", "llama", "backend-ops", "--help"], threads=False)
        self.assertEqual(p.returncode, 0)
        self.assertIn("sipp run llama backend-ops", p.stdout)

    @unittest.skipUnless(os.environ.get("SIPP_TEST_BACKEND_OPS") == "1",
                         "set SIPP_TEST_BACKEND_OPS=1: the first run compiles test-backend-ops (minutes)")
    def test_backend_ops_support_on_vulkan(self):
        p = run_sipp(["run", "llama", "backend-ops", "--backend", "vulkan", "--mode", "support", "--op", "ADD"],
                     env=VK, threads=False, timeout=1200)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertIn("-b Vulkan0", p.stdout)

    def bench(self, backend, env=None):
        p = run_sipp(["run", "llama", "bench", "--backend", backend, "-m", self.model, "-p", "8", "-n", "2", "-t",
                      "1", "-r", "1", "-o", "json"], env=env, threads=False, timeout=900)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        rows = json.loads(p.stdout[p.stdout.index("["):])
        self.assertEqual(len(rows), 2)  # one prompt test, one generation test
        self.assertEqual({r["n_prompt"] for r in rows}, {8, 0})
        self.assertTrue(all(r["avg_ts"] > 0 for r in rows))
        return rows

    def test_bench_on_cpu_uses_no_device(self):
        rows = self.bench("cpu")
        self.assertEqual({r["devices"] for r in rows}, {"none"})
        self.assertEqual({r["n_gpu_layers"] for r in rows}, {0})

    def test_bench_on_vulkan_through_lavapipe(self):
        if not vulkan_loader():
            self.skipTest("no Vulkan loader")
        rows = self.bench("vulkan", env=VK)
        self.assertEqual({r["devices"] for r in rows}, {"Vulkan0"})

    def test_bench_refuses_what_it_cannot_honour(self):
        p = run_sipp(["run", "llama", "bench", "--backend", "cuda", "-m", self.model], threads=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("not compiled", p.stderr)
        p = run_sipp(["run", "llama", "bench", "--backend", "cpu", "-dev", "none", "-m", self.model], threads=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not both", p.stderr)


class HelpTest(unittest.TestCase):
    def test_help_shows_the_forms(self):
        h = run_sipp(["--help"], check=True).stdout
        for form in ("build", "doctor", "run", "backend-ops", "backends"):
            self.assertIn(f"  {form} ", h)
        b = run_sipp(["build", "--help"], check=True).stdout
        self.assertIn("sipp build [TARGET]", b)
        for t in ("cli", "node", "python", "web", "all"):
            self.assertIn(f"  {t} ", b)
        self.assertIn("--target cli|node|python|web", run_sipp(["doctor", "--help"], check=True).stdout)
        self.assertIn("--target cli|node|python|web", run_sipp(["backends", "--help"], check=True).stdout)


if __name__ == "__main__":
    unittest.main()
