#!/usr/bin/env python3
"""deploy/container/normalize.py TAG: makes a docker-format image the same bytes at every build.

`podman build --format docker` (the format that keeps HEALTHCHECK) writes the id of its build
container into the image's config ("container"), so two builds of the same layers, config and
--timestamp still differ. This copies the image out of containers-storage (skopeo, dir: transport),
drops that one field, writes the config under its new digest, points the manifest at it, and copies
the image back under the same tag. Everything else is left as podman wrote it. Prints the new
image id."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

VOLATILE = ("container",)  # the build container's id; nothing reads it


def skopeo(*args):
    r = subprocess.run(["skopeo", *args], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"sipp image: skopeo {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: normalize.py TAG")
    tag = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="sipp-image-")
    try:
        skopeo("copy", "--quiet", f"containers-storage:{tag}", f"dir:{tmp}")
        with open(os.path.join(tmp, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        old = manifest["config"]["digest"]
        old_path = os.path.join(tmp, old.split(":", 1)[1])
        with open(old_path, "rb") as f:
            config = json.load(f)
        for key in VOLATILE:
            config.pop(key, None)
        raw = json.dumps(config, separators=(",", ":"), sort_keys=True).encode()
        new = "sha256:" + hashlib.sha256(raw).hexdigest()
        os.remove(old_path)
        with open(os.path.join(tmp, new.split(":", 1)[1]), "wb") as f:
            f.write(raw)
        manifest["config"]["digest"], manifest["config"]["size"] = new, len(raw)
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump(manifest, f, separators=(",", ":"))
        skopeo("copy", "--quiet", f"dir:{tmp}", f"containers-storage:{tag}")
        print(new.split(":", 1)[1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
