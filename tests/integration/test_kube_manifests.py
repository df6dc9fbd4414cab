"""deploy/kubernetes/ checked without a cluster (issue 48); test_kube_play.py runs it.

- Every document validates against the Kubernetes API's JSON schemas (the npm packages
  kubernetes-models and @kubernetes-models/gateway-api, pinned with their integrity in
  tests/integration/k8s/package-lock.json), and a broken copy fails, so the validator does validate.
  InferencePool has no published schema there: it is checked by hand below.
- kustomization.yaml lists every manifest beside it.
- What the issue asks of the Deployment: probes on /health and /ready, non-root with a read-only
  root and no capabilities, the init container's `sipp pull` with --sha256, and a memory request at
  least sipp's own estimate (`sipp models info --json`) of the ConfigMap's target plus the process.
- The endpoint picker is pointed at gauge names sipp's /metrics exports (src/gateway/metrics.c).
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import yaml

from tests.support import npm
from tests.support.paths import ROOT, SIPP

KUBE = os.path.join(ROOT, "deploy", "kubernetes")
GATEWAY = os.path.join(KUBE, "inference-gateway")
VALIDATOR_DIR = os.path.join(ROOT, "tests", "integration", "k8s")
NODE_TIMEOUT_S = 120
PROCESS_MIB = 64  # what the request adds to the estimate (deployment.yaml says so)
MIB = 1 << 20


def ensure_validator():
    npm.ensure(VALIDATOR_DIR, "kubernetes-models", "yaml")


def validate(*files):
    r = subprocess.run(["node", "validate.mjs", *files], cwd=VALIDATOR_DIR, capture_output=True, text=True,
                       timeout=NODE_TIMEOUT_S)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise AssertionError(f"no result from validate.mjs:\n{r.stdout}\n{r.stderr}")
    return r.returncode, json.loads(lines[-1])


def manifests(d):
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".yaml") and f != "kustomization.yaml")


def docs_of(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def quantity_bytes(q):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", str(q))
    assert m, f"a memory quantity this test reads: {q}"
    return int(m.group(1)) * units.get(m.group(2), 1)


@unittest.skipUnless(shutil.which("node") and shutil.which("npm"), "node and npm are needed for the schema validator")
class SchemaTest(unittest.TestCase):
    def test_every_manifest_validates(self):
        ensure_validator()
        files = manifests(KUBE) + manifests(GATEWAY)
        rc, out = validate(*files)
        self.assertEqual((rc, out["errors"]), (0, []), out)
        unknown = {kind for _, _, kind in out["unknown"]}
        self.assertEqual(unknown, {"InferencePool"}, out["unknown"])
        kinds = {kind for _, kind, _ in out["checked"]}
        for k in ("ConfigMap", "Secret", "PersistentVolumeClaim", "Deployment", "Service", "PodDisruptionBudget",
                  "HTTPRoute"):
            self.assertIn(k, kinds)

    def test_a_broken_manifest_fails(self):
        ensure_validator()
        doc = docs_of(os.path.join(KUBE, "deployment.yaml"))[0]
        doc["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "eighty"
        doc["spec"]["replicas"] = "one"
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump(doc, f)
        try:
            rc, out = validate(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(rc, 1)
        self.assertIn("containerPort must be integer", out["errors"][0][3])


class ManifestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = {}
        for path in manifests(KUBE):
            for d in docs_of(path):
                cls.docs[(d["kind"], d["metadata"]["name"])] = d
        cls.pod = cls.docs[("Deployment", "sipp")]["spec"]["template"]["spec"]

    def test_kustomization_lists_every_manifest(self):
        for d in (KUBE, GATEWAY):
            with open(os.path.join(d, "kustomization.yaml"), encoding="utf-8") as f:
                listed = sorted(os.path.join(d, r) for r in yaml.safe_load(f)["resources"])
            self.assertEqual(listed, manifests(d))

    def test_probes(self):
        c = self.pod["containers"][0]
        self.assertEqual(c["startupProbe"]["httpGet"]["path"], "/ready")
        self.assertEqual(c["readinessProbe"]["httpGet"]["path"], "/ready")
        self.assertEqual(c["livenessProbe"]["httpGet"]["path"], "/health")

    def test_security_context(self):
        self.assertTrue(self.pod["securityContext"]["runAsNonRoot"])
        self.assertEqual(self.pod["securityContext"]["runAsUser"], 10001)
        for c in self.pod["containers"] + self.pod["initContainers"]:
            sc = c["securityContext"]
            self.assertTrue(sc["readOnlyRootFilesystem"], c["name"])
            self.assertFalse(sc["allowPrivilegeEscalation"], c["name"])
            self.assertEqual(sc["capabilities"]["drop"], ["ALL"], c["name"])

    def test_init_container_pulls_with_a_checksum(self):
        init = self.pod["initContainers"][0]
        self.assertIn("sipp pull", " ".join(init["command"]))
        self.assertIn("--sha256", " ".join(init["command"]))
        model = self.docs[("ConfigMap", "sipp-model")]["data"]
        self.assertRegex(model["sha256"], "^[0-9a-f]{64}$")
        self.assertEqual(self.pod["volumes"][0]["persistentVolumeClaim"]["claimName"], "sipp-models")

    def test_memory_is_sized_from_sipps_estimate(self):
        toml = self.docs[("ConfigMap", "sipp-config")]["data"]["sipp.toml"]
        ctx = re.search(r"ctx_size = (\d+)", toml).group(1)
        parallel = re.search(r"parallel = (\d+)", toml).group(1)
        model = os.path.join(ROOT, "models", self.docs[("ConfigMap", "sipp-model")]["data"]["name"] + ".gguf")
        r = subprocess.run([SIPP, "models", "info", model, "--json", "--no-hash", "--backend", "cpu", "--ctx-size",
                            ctx, "--parallel", parallel], capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        estimate = json.loads(r.stdout)["memory_estimate"]["total_bytes"]
        res = self.pod["containers"][0]["resources"]
        request, limit = quantity_bytes(res["requests"]["memory"]), quantity_bytes(res["limits"]["memory"])
        self.assertGreaterEqual(request, estimate + PROCESS_MIB * MIB, (estimate, request))
        self.assertLess(request, estimate + 2 * PROCESS_MIB * MIB, "the request is far above the estimate")
        self.assertGreaterEqual(limit, 2 * request - MIB)

    def test_allowed_hosts_name_the_service(self):
        toml = self.docs[("ConfigMap", "sipp-config")]["data"]["sipp.toml"]
        self.assertIn('"sipp.default.svc.cluster.local"', toml)
        self.assertIn(("Service", "sipp"), self.docs)

    def test_endpoint_picker_reads_names_sipp_exports(self):
        with open(os.path.join(ROOT, "src", "gateway", "metrics.c"), encoding="utf-8") as f:
            source = f.read()
        epp = [d for d in docs_of(os.path.join(GATEWAY, "endpoint-picker.yaml")) if d["kind"] == "Deployment"][0]
        args = dict(a.split("=", 1) for a in epp["spec"]["template"]["spec"]["containers"][0]["args"])
        for flag in ("--total-queued-requests-metric", "--total-running-requests-metric",
                     "--kv-cache-usage-percentage-metric", "--lora-info-metric"):
            self.assertIn(f'"{args[flag]}"', source, flag)
        pool = docs_of(os.path.join(GATEWAY, "inferencepool.yaml"))[0]
        self.assertEqual(pool["spec"]["selector"]["matchLabels"], {"app.kubernetes.io/name": "sipp"})
        self.assertEqual(pool["spec"]["targetPorts"], [{"number": 8080}])
        self.assertEqual(pool["spec"]["endpointPickerRef"]["name"], epp["metadata"]["name"])


if __name__ == "__main__":
    unittest.main()
