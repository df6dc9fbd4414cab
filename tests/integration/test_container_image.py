"""sipp's container image (issue 48): `make image` builds it, and it runs as it should.

- Two builds from one commit are the same image (id and manifest digest, recorded in the log); its
  runtime cpu flavor is at most 200 MB without models.
- It carries the OCI labels, a HEALTHCHECK that is sipp itself, a non-root user, the two volumes,
  `sipp` as its entry point, and the artifact's SPDX SBOM, the same file as beside its archive.
- Its `sipp serve` answers sipp-demo's "Hello!" with the same greedy text as the host's
  `build/bin/sipp models/sipp-demo.gguf "Hello!" --chat --temperature 0 --max-tokens 16`, from a
  read-only root; the health check passes; SIGTERM drains and exits 0.

Skipped, with the reason, only where podman cannot run containers at all.
"""

import json
import os
import subprocess
import time
import unittest
import urllib.request

from tests.support import containers as ct
from tests.support.paths import BUILD, ROOT, SIPP
from tests.support.ports import free_port
from tests.support.wait import wait_until

DEMO = os.path.join(ROOT, "models", "sipp-demo.gguf")
MAX_IMAGE_BYTES = 200 * 1000 * 1000
READY_TIMEOUT_S = 60
HTTP_TIMEOUT_S = 60


def http_json(url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as r:
        return r.status, json.loads(r.read())


def ready(url):
    try:
        return http_json(url + "/ready")[0] == 200
    except OSError:
        return False


class ImageBuildTest(unittest.TestCase):
    def test_two_builds_are_the_same_bytes(self):
        ct.skip_unless_podman()
        first = ct.build_image(no_cache=True)
        second = ct.build_image(no_cache=True)
        print(f"\nimage {first[0]}: id {first[1]}, digest {first[2]} (twice: {second[1]}, {second[2]})", flush=True)
        self.assertEqual(first[1:3], second[1:3], "two builds from one commit differ")
        self.assertLessEqual(first[3], MAX_IMAGE_BYTES, f"the cpu image is {first[3]} bytes")
        with open(os.path.join(BUILD, "image", f"sipp-{ct.version()}-cpu.digest"), encoding="utf-8") as f:
            self.assertEqual(f.read().split(), ["id", first[1], "digest", first[2]])


class ImageContentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tag = ct.image()
        cls.info = ct.inspect(cls.tag)

    def test_metadata(self):
        cfg = self.info["Config"]
        labels = cfg["Labels"]
        self.assertEqual(labels["org.opencontainers.image.version"], ct.version())
        revision = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        self.assertEqual(labels["org.opencontainers.image.revision"], revision)
        for key in ("org.opencontainers.image.source", "org.opencontainers.image.licenses", "io.sipp.sbom"):
            self.assertIn(key, labels)
        self.assertEqual(labels["io.sipp.flavor"], "cpu")
        self.assertEqual(cfg["User"], "10001:10001")
        self.assertEqual(cfg["Entrypoint"], ["sipp"])
        self.assertEqual(cfg["Cmd"][:3], ["serve", "--config", "/etc/sipp/sipp.toml"])
        self.assertEqual(sorted(cfg["Volumes"]), ["/etc/sipp", "/models"])
        self.assertEqual(self.info["Healthcheck"]["Test"], ["CMD", "sipp", "health"])

    def test_sbom_inside_is_the_one_beside_the_archive(self):
        r = ct.podman("run", "--rm", "--network", "none", "--entrypoint", "cat", self.tag,
                      "/opt/sipp/lib/sipp/artifact/sbom.spdx.json")
        beside = os.path.join(BUILD, "image", f"sipp-{ct.version()}-cpu.spdx.json")
        with open(beside, encoding="utf-8") as f:
            self.assertEqual(r.stdout, f.read())
        doc = json.loads(r.stdout)
        self.assertEqual(doc["spdxVersion"], "SPDX-2.3")
        self.assertTrue(os.path.getsize(os.path.join(BUILD, "image", f"sipp-{ct.version()}-cpu.tar")) > 0)

    def test_the_default_config_wants_a_token(self):
        r = ct.podman("run", "--rm", "--network", "none", self.tag, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("SIPP_API_TOKEN", r.stderr)


class ImageServesTest(unittest.TestCase):
    NAME = "sipp-test-image-serve"

    @classmethod
    def setUpClass(cls):
        cls.tag = ct.image()
        ct.remove(cls.NAME)
        cls.port = free_port()
        ct.podman("run", "-d", "--name", cls.NAME, "--read-only", "-p", f"127.0.0.1:{cls.port}:8080",
                  "-v", f"{os.path.dirname(DEMO)}:/models:ro", cls.tag, "serve", "/models/sipp-demo.gguf",
                  "--host", "0.0.0.0", "--port", "8080", "--no-auth", "--threads", "1")
        cls.url = f"http://127.0.0.1:{cls.port}"
        try:
            wait_until(lambda: ready(cls.url), READY_TIMEOUT_S, "the container's /ready")
        except AssertionError:
            print(ct.podman("logs", cls.NAME, check=False).stderr[-3000:])
            ct.remove(cls.NAME)
            raise

    @classmethod
    def tearDownClass(cls):
        ct.remove(cls.NAME)

    def test_hello_is_the_hosts_greedy_text(self):
        host = subprocess.run([SIPP, DEMO, "Hello!", "--chat", "--temperature", "0", "--max-tokens", "16",
                               "--threads", "1"], capture_output=True, text=True, timeout=HTTP_TIMEOUT_S)
        self.assertEqual(host.returncode, 0, host.stderr)
        status, body = http_json(self.url + "/v1/chat/completions", {
            "model": "sipp-demo", "messages": [{"role": "user", "content": "Hello!"}], "temperature": 0,
            "max_tokens": 16})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["choices"][0]["message"]["content"], host.stdout.strip())

    def test_non_root_read_only_and_healthy(self):
        self.assertEqual(ct.podman("exec", self.NAME, "id", "-u").stdout.strip(), "10001")
        r = ct.podman("exec", self.NAME, "touch", "/opt/sipp/x", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Read-only file system", r.stderr)
        self.assertEqual(ct.podman("healthcheck", "run", self.NAME, check=False).returncode, 0)

    def test_zz_sigterm_drains_and_exits_0(self):
        # the last test of the class (unittest runs them by name): it stops the container
        ct.podman("stop", "--time", "30", self.NAME)
        state = ct.podman("inspect", self.NAME, "--format", "{{.State.ExitCode}}").stdout.strip()
        self.assertEqual(state, "0")
        self.assertIn("shutting down", ct.podman("logs", self.NAME).stderr)


if __name__ == "__main__":
    unittest.main()
