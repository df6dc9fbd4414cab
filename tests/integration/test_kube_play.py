"""deploy/kubernetes/ run for real with `podman kube play` (issue 48).

The resources kustomization.yaml lists that podman runs (the ConfigMaps, the Secret, the claim, the
Deployment) are played from the committed files with the overrides a test on one host needs, made the
way an overlay would:
- the model's URL points at a file server on 127.0.0.1 (the checked-in sipp-demo.gguf), and the pod
  shares the host's network (hostNetwork), so that sipp listens on 127.0.0.1 and probes reach it;
- the token is made here.
And two for podman 4.3 (Debian 12), which Kubernetes does not need: the Secret is given to podman as
a podman secret in the JSON it reads (its kube play stores a Secret's YAML and then cannot read it),
and restartPolicy is OnFailure (with Always, podman restarts the init container while removing it).

Then: the init container pulls the model and checks its SHA-256, the pod serves from the image as
user 10001 on a read-only root, the official openai npm client gets the host's greedy "Hello!"
answer (plain and streamed), the process comes back after it is killed (SIGKILL), and a model whose
SHA-256 does not match never starts serving.

Skipped, with the reason, only where podman cannot run containers at all (or node and npm are
missing, for the client).
"""

import base64
import functools
import hashlib
import http.server
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

import yaml

from tests.support import containers as ct
from tests.support import npm
from tests.support.paths import ROOT, SIPP
from tests.support.ports import free_port
from tests.support.wait import wait_until

KUBE = os.path.join(ROOT, "deploy", "kubernetes")
JS_DIR = os.path.join(ROOT, "tests", "integration", "js")
DEMO = os.path.join(ROOT, "models", "sipp-demo.gguf")
PLAYED = ("ConfigMap", "Secret", "PersistentVolumeClaim", "Deployment")  # what podman kube play runs
CONTAINER = "sipp-pod-0-sipp"  # podman's name: the Deployment's pod, then the container
READY_TIMEOUT_S = 120
NODE_TIMEOUT_S = 120


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        self.server.requests.append(self.path)


def serve_dir(path):
    """A file server on 127.0.0.1 in a thread; returns (server, port)."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=path))
    srv.requests = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


def ensure_client():
    npm.ensure(JS_DIR, "openai")


def kustomized_docs():
    """The documents of the resources kustomization.yaml lists, with its image tag applied."""
    with open(os.path.join(KUBE, "kustomization.yaml"), encoding="utf-8") as f:
        kust = yaml.safe_load(f)
    tags = {i["name"]: i["newTag"] for i in kust.get("images", [])}
    docs = []
    for res in kust["resources"]:
        with open(os.path.join(KUBE, res), encoding="utf-8") as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        if d["kind"] != "Deployment":
            continue
        spec = d["spec"]["template"]["spec"]
        for c in spec.get("initContainers", []) + spec["containers"]:
            name = c["image"].rsplit(":", 1)[0]
            if name in tags:
                c["image"] = f"{name}:{tags[name]}"
    return docs


def play_docs(url, sha256, port):
    """The kustomized documents podman runs, with this test's overrides (the module's docstring)."""
    docs = [d for d in kustomized_docs() if d["kind"] in PLAYED]
    for d in docs:
        name = d["metadata"]["name"]
        if d["kind"] == "ConfigMap" and name == "sipp-model":
            d["data"].update(url=url, sha256=sha256)
        elif d["kind"] == "ConfigMap" and name == "sipp-config":
            toml = d["data"]["sipp.toml"]
            assert 'listen = "0.0.0.0:8080"' in toml, toml
            d["data"]["sipp.toml"] = toml.replace('listen = "0.0.0.0:8080"', f'listen = "127.0.0.1:{port}"')
        elif d["kind"] == "Deployment":
            spec = d["spec"]["template"]["spec"]
            spec["hostNetwork"] = True
            spec["restartPolicy"] = "OnFailure"
            c = spec["containers"][0]
            c.pop("ports")  # podman refuses port mappings on the host's network
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                c[probe]["httpGet"]["port"] = port
    return docs


class Pod:
    """One `podman kube play` of the manifests, and everything it made, removed by down()."""

    def __init__(self, url, sha256, token):
        self.dir = tempfile.mkdtemp(prefix="sipp-kube-")
        self.port = free_port()
        self.down()  # what an interrupted run may have left
        self.volumes = set(self.anonymous_volumes())
        docs = play_docs(url, sha256, self.port)
        secret = next(d for d in docs if d["kind"] == "Secret")
        docs.remove(secret)
        data = {k: base64.b64encode(v.encode()).decode() for k, v in secret["stringData"].items()}
        data["token"] = base64.b64encode(token.encode()).decode()
        with open(os.path.join(self.dir, "secret.json"), "w", encoding="utf-8") as f:
            json.dump(data, f)
        ct.podman("secret", "create", secret["metadata"]["name"], os.path.join(self.dir, "secret.json"))
        self.play = os.path.join(self.dir, "play.yaml")
        with open(self.play, "w", encoding="utf-8") as f:
            yaml.safe_dump_all(docs, f)
        self.result = ct.podman("kube", "play", self.play, check=False, timeout=ct.BUILD_TIMEOUT_S)
        self.url = f"http://127.0.0.1:{self.port}"

    def ready(self):
        try:
            with urllib.request.urlopen(self.url + "/ready", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def down(self):
        # the containers first, with their anonymous volumes (the image's /etc/sipp in the init one)
        ids = ct.podman("ps", "-a", "-q", "--filter", "pod=sipp-pod-0", check=False).stdout.split()
        ct.remove(*ids)
        ct.podman("pod", "rm", "--force", "sipp-pod-0", check=False)
        ct.podman("secret", "rm", "sipp-token", check=False)
        ct.podman("volume", "rm", "--force", "sipp-models", "sipp-config", check=False)

    @staticmethod
    def anonymous_volumes():
        return ct.podman("volume", "ls", "-q", "--filter", "dangling=true", check=False).stdout.split()

    def close(self):
        self.down()
        # podman removes a finished init container itself, leaving the image's /etc/sipp volume
        new = [v for v in self.anonymous_volumes() if v not in self.volumes and len(v) == 64]
        if new:
            ct.podman("volume", "rm", *new, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


class KubePlayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tag = ct.image()
        cls.models = tempfile.mkdtemp(prefix="sipp-kube-models-")
        shutil.copy(DEMO, cls.models)
        cls.files, fport = serve_dir(cls.models)
        with open(DEMO, "rb") as f:
            cls.sha = hashlib.sha256(f.read()).hexdigest()
        cls.token = secrets.token_hex(16)
        cls.pod = Pod(f"http://127.0.0.1:{fport}/sipp-demo.gguf", cls.sha, cls.token)
        try:
            if cls.pod.result.returncode != 0:
                raise AssertionError(f"podman kube play failed: {cls.pod.result.stderr[-3000:]}")
            wait_until(cls.pod.ready, READY_TIMEOUT_S, "the pod's /ready")
        except AssertionError:
            print(ct.podman("logs", CONTAINER, check=False).stderr[-3000:])
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.pod.close()
        cls.files.shutdown()
        cls.files.server_close()
        shutil.rmtree(cls.models, ignore_errors=True)

    def test_init_container_pulled_the_checked_model(self):
        self.assertIn("/sipp-demo.gguf", self.files.requests)
        r = ct.podman("exec", CONTAINER, "sh", "-c", "ls /models; cat /models/sipp-demo.json")
        self.assertIn("sipp-demo.gguf", r.stdout)
        self.assertIn(self.sha, r.stdout)

    def test_runs_as_the_manifest_says(self):
        self.assertEqual(ct.podman("exec", CONTAINER, "id", "-u").stdout.strip(), "10001")
        info = json.loads(ct.podman("inspect", CONTAINER).stdout)[0]
        self.assertTrue(info["HostConfig"]["ReadonlyRootfs"])
        self.assertEqual(info["ImageName"], self.tag)
        r = ct.podman("exec", CONTAINER, "touch", "/opt/sipp/x", check=False)
        self.assertIn("Read-only file system", r.stderr)
        ct.podman("exec", CONTAINER, "touch", "/tmp/x")  # the emptyDir

    def test_the_token_is_required(self):
        req = urllib.request.Request(self.pod.url + "/v1/models")
        with self.assertRaises(urllib.error.HTTPError) as cm:
            urllib.request.urlopen(req, timeout=10)
        self.assertEqual(cm.exception.code, 401)

    @unittest.skipUnless(shutil.which("node") and shutil.which("npm"), "node and npm are needed for the openai client")
    def test_openai_client_gets_the_hosts_greedy_answer(self):
        ensure_client()
        host = subprocess.run([SIPP, DEMO, "Hello!", "--chat", "--temperature", "0", "--max-tokens", "16",
                               "--threads", "1"], capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
        self.assertEqual(host.returncode, 0, host.stderr)
        r = subprocess.run(["node", "openai_hello.mjs", self.pod.url + "/v1", "sipp-demo", self.token], cwd=JS_DIR,
                           capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
        result = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertTrue(result["ok"], result)
        self.assertEqual(result["content"], host.stdout.strip())
        self.assertEqual(result["streamed"], host.stdout.strip())

    def test_zz_restarts_after_its_process_is_killed(self):
        info = json.loads(ct.podman("inspect", CONTAINER).stdout)[0]
        before, pid = info["RestartCount"], info["State"]["Pid"]
        os.kill(pid, 9)

        def restarted():
            i = json.loads(ct.podman("inspect", CONTAINER).stdout)[0]
            return i["RestartCount"] > before and i["State"]["Status"] == "running"

        wait_until(restarted, READY_TIMEOUT_S, "the killed container coming back")
        wait_until(self.pod.ready, READY_TIMEOUT_S, "/ready after the restart")


class KubePlayBadChecksumTest(unittest.TestCase):
    def test_a_model_that_fails_its_sha256_never_serves(self):
        ct.image()
        models = tempfile.mkdtemp(prefix="sipp-kube-models-")
        shutil.copy(DEMO, models)
        files, fport = serve_dir(models)
        pod = Pod(f"http://127.0.0.1:{fport}/sipp-demo.gguf", "0" * 64, secrets.token_hex(16))
        try:
            # podman 4.3 reports the failed init container as a failed play; either way nothing serves
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline:
                self.assertFalse(pod.ready(), "a pod whose model failed its SHA-256 is serving")
                time.sleep(0.5)
            self.assertIn("/sipp-demo.gguf", files.requests)
            logs = ct.podman("logs", "sipp-pod-0-pull", check=False)
            text = pod.result.stderr + logs.stdout + logs.stderr
            self.assertRegex(text, "(?i)sha-?256")
        finally:
            pod.close()
            files.shutdown()
            files.server_close()
            shutil.rmtree(models, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
