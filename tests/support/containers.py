"""tests/support/containers.py: the container image for the tests that run sipp in podman
(test_container_image.py, test_kube_play.py, test_scale_nginx.py).

Podman runs with the project's own deploy/container/containers.conf (runc, no default ulimits; the
machine's /etc is left alone). `image()` builds localhost/sipp:VERSION-cpu once per test process
with deploy/container/image.sh (make image; it holds a lock, so two shards build it once each, one
after the other, and the second finds the cache). `skip_unless_podman()` skips, with the reason,
only where podman cannot run a container at all; any other failure is a test failure.

Containers and pods the tests start are named sipp-test-*, and each test removes its own.
"""

import json
import os
import re
import shutil
import subprocess
import unittest

from tests.support.paths import BUILD, ROOT

CONF = os.path.join(ROOT, "deploy", "container", "containers.conf")
ENV = dict(os.environ, CONTAINERS_CONF=os.environ.get("CONTAINERS_CONF", CONF))
IMAGE_SH = os.path.join(ROOT, "deploy", "container", "image.sh")
MAKE_BASE = os.path.join(ROOT, "deploy", "container", "make-base.sh")
BUILD_TIMEOUT_S = 900  # the first build debootstraps the base (about a minute here, once)
RUN_TIMEOUT_S = 120
FLAVOR = "cpu"

_state = {}


def version():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        return re.search(r"^SIPP_VERSION := (\S+)", f.read(), re.M).group(1)


def podman(*args, check=True, timeout=RUN_TIMEOUT_S, input=None):
    r = subprocess.run(["podman", *args], capture_output=True, text=True, env=ENV, timeout=timeout, input=input)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return r


def build_image(no_cache=False):
    """Runs image.sh (make image); returns (tag, id, digest, size)."""
    env = dict(ENV, SIPP_IMAGE_NO_CACHE="1") if no_cache else ENV
    r = subprocess.run(["bash", IMAGE_SH, FLAVOR, version(), BUILD], capture_output=True, text=True, env=env,
                       timeout=BUILD_TIMEOUT_S, cwd=ROOT)
    if r.returncode != 0:
        raise AssertionError(f"make image failed: {r.stderr.strip()[-3000:]}")
    tag, image_id, digest, size = r.stdout.split()[-4:]
    return tag, image_id, digest, int(size)


def base():
    """The debootstrapped base (make-base.sh, cached)."""
    if "base" not in _state:
        r = subprocess.run(["bash", MAKE_BASE], capture_output=True, text=True, env=ENV, timeout=BUILD_TIMEOUT_S)
        if r.returncode != 0:
            raise AssertionError(f"make-base.sh failed: {r.stderr.strip()[-3000:]}")
        _state["base"] = r.stdout.split()[-1]
    return _state["base"]


def skip_unless_podman():
    """SkipTest with the reason where podman cannot run a container here; None where it can."""
    if "usable" not in _state:
        if not shutil.which("podman"):
            _state["usable"] = "podman is not installed (scripts/setup-debian.sh installs it)"
        else:
            r = podman("run", "--rm", "--network", "none", base(), "true", check=False)
            _state["usable"] = None if r.returncode == 0 else \
                f"podman cannot run a container here: {r.stderr.strip()[-500:]}"
    if _state["usable"]:
        print(f"\nskipped: {_state['usable']}", flush=True)
        raise unittest.SkipTest(_state["usable"])


def image():
    """The cpu image's tag, built once per process."""
    skip_unless_podman()
    if "image" not in _state:
        _state["image"] = build_image()
    return _state["image"][0]


def inspect(ref):
    return json.loads(podman("image", "inspect", ref).stdout)[0]


def remove(*names):
    for n in names:
        podman("rm", "--force", "--volumes", "--time", "5", n, check=False)
