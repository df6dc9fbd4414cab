"""SIPP_PYTHON_BACKEND and SIPP_ARTIFACT choose the artifact and backend when the package is imported.

Each case runs in a fresh interpreter, since the choice is made once per process. Vulkan runs on
lavapipe, Mesa's software device, which ggml uses only when GGML_VK_VISIBLE_DEVICES names it; its
first use compiles shaders, so there is exactly one Vulkan generation here.
"""

import glob
import json
import os
import unittest

import _support
from sipp import _native

PROBE = r"""
import json, sys, sipp
out = {"selection": sipp.backend_selection()}
if len(sys.argv) > 1 or %(load)r:
    with sipp.Client() as c:
        ep = c.add("m", sipp.local(%(model)r, threads=1, parallel=1, ctx_size=256))
        r = c.query("Hello", max_tokens=4, temperature=0)
        out.update(backend=ep.backend, text=r.text, finish=r.finish_reason, stats_backend=r.stats["backend"],
                   runtime=sipp.runtime_info())
print("RESULT " + json.dumps(out))
"""


def artifacts_with(backend):
    found = []
    for manifest in glob.glob(os.path.join(_support.BUILD, "artifacts", "*", "manifest.json")):
        with open(manifest) as f:
            if backend in json.load(f).get("backends", []):
                found.append(os.path.dirname(manifest))
    return found


class BackendEnvTest(unittest.TestCase):
    def probe(self, env, load=True):
        code = PROBE % {"model": _support.model(), "load": load}
        return _support.run_python(code, env=env, timeout=120)

    def result(self, r):
        self.assertEqual(r.returncode, 0, r.stderr)
        line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")][-1]
        return json.loads(line[len("RESULT "):])

    def test_cpu(self):
        out = self.result(self.probe({"SIPP_PYTHON_BACKEND": "cpu", "SIPP_ARTIFACT": None}))
        self.assertEqual(out["selection"]["backend"], "cpu")
        self.assertIn("cpu", out["selection"]["backends"])
        self.assertEqual(out["backend"]["backend"], "cpu")
        self.assertEqual(out["backend"]["devices"], "CPU")
        self.assertEqual(out["stats_backend"], "cpu")
        self.assertEqual(out["finish"], "length")

    def test_auto_is_the_default(self):
        out = self.result(self.probe({"SIPP_PYTHON_BACKEND": None, "SIPP_ARTIFACT": None}, load=False))
        self.assertEqual(out["selection"]["backend"], "auto")
        self.assertEqual(out["selection"]["artifact"], os.path.realpath(os.path.join(_support.BUILD, "artifact")))

    def test_vulkan_through_lavapipe(self):
        if not artifacts_with("vulkan"):
            self.skipTest("no artifact with the vulkan backend (make BACKENDS=\"cpu vulkan\")")
        # lavapipe is software: a private lease directory keeps other sipp processes on this machine
        # (other test suites) from holding "the GPU" while this runs
        lease_dir = os.path.join(_support.tmpdir(), "leases")
        r = self.probe({"SIPP_PYTHON_BACKEND": "vulkan", "GGML_VK_VISIBLE_DEVICES": "0", "SIPP_ARTIFACT": None,
                        "SIPP_LEASE_DIR": lease_dir})
        if r.returncode != 0 and "not available" in r.stderr:
            self.skipTest(f"no Vulkan device even with GGML_VK_VISIBLE_DEVICES=0 (install mesa-vulkan-drivers): "
                          f"{r.stderr.strip().splitlines()[-1]}")
        out = self.result(r)
        self.assertEqual(out["selection"]["backend"], "vulkan")
        self.assertEqual(out["backend"]["backend"], "vulkan")
        self.assertIn("Vulkan", out["backend"]["devices"])
        self.assertGreater(out["backend"]["gpu_layers"], 0)
        self.assertEqual(out["finish"], "length")
        self.assertIn(os.path.realpath(out["runtime"]["artifact"]), [os.path.realpath(a) for a in artifacts_with("vulkan")])

    def test_vulkan_without_a_visible_device_fails_at_import(self):
        if not artifacts_with("vulkan"):
            self.skipTest("no artifact with the vulkan backend")
        r = self.probe({"SIPP_PYTHON_BACKEND": "vulkan", "GGML_VK_VISIBLE_DEVICES": None, "SIPP_ARTIFACT": None},
                       load=False)
        if r.returncode == 0:
            self.skipTest("this machine has a real Vulkan device; the failure cannot be shown")
        self.assertIn("BackendError", r.stderr)
        self.assertIn("GGML_VK_VISIBLE_DEVICES", r.stderr)  # libsipp's next step
        self.assertIn("usable here: auto, cpu", r.stderr)

    def test_unknown_name_lists_the_usable_ones(self):
        r = self.probe({"SIPP_PYTHON_BACKEND": "quantum"}, load=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("BackendError", r.stderr)
        self.assertIn("'quantum'", r.stderr)
        self.assertIn("usable here: auto, cpu", r.stderr)

    def test_backend_no_artifact_has(self):
        missing = [b for b in ("cuda", "metal") if not artifacts_with(b)]
        if not missing:
            self.skipTest("every backend has an artifact here")
        r = self.probe({"SIPP_PYTHON_BACKEND": missing[0], "SIPP_ARTIFACT": None}, load=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(f"no artifact has the {missing[0]} backend", r.stderr)
        self.assertIn(f'make BACKENDS="cpu {missing[0]}"', r.stderr)

    def test_sipp_artifact_overrides(self):
        cpu_only = [a for a in artifacts_with("cpu") if not artifacts_with("vulkan") or a not in artifacts_with("vulkan")]
        if not cpu_only:
            self.skipTest("no cpu-only artifact (make BACKENDS=cpu)")
        out = self.result(self.probe({"SIPP_PYTHON_BACKEND": "cpu", "SIPP_ARTIFACT": cpu_only[0]}))
        self.assertEqual(os.path.realpath(out["runtime"]["artifact"]), os.path.realpath(cpu_only[0]))
        r = self.probe({"SIPP_PYTHON_BACKEND": "vulkan", "SIPP_ARTIFACT": cpu_only[0]}, load=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("has only cpu", r.stderr)

    def test_selection_logic(self):
        # the decision without a subprocess: names are case-insensitive, blanks mean auto
        self.assertEqual(_native.select_backend({"SIPP_PYTHON_BACKEND": " CPU "}).backend, "cpu")
        self.assertEqual(_native.select_backend({"SIPP_PYTHON_BACKEND": ""}).backend, "auto")
        self.assertEqual(_native.select_backend({}).backend, "auto")


if __name__ == "__main__":
    unittest.main()
