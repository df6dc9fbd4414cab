"""Builds the Node.js binding's addon and runs its own tests (bindings/node/test, `node --test`).

The addon is built by bindings/node/build.sh (cc against the pinned node-api-headers, linking
build/lib/libsipp.so); a build failure fails this test with the compiler's output. The tests run
with the TAP reporter, whose closing "# tests / # pass / # fail / # skipped" lines give the counts
printed here. This wrapper fails when any of them fails.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import unittest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PACKAGE = os.path.join(REPO, "bindings", "node")
BUILD_TIMEOUT_S = 300
TEST_TIMEOUT_S = 300


def tap_counts(output):
    counts = {}
    for key in ("tests", "pass", "fail", "cancelled", "skipped", "todo"):
        found = re.findall(rf"^# {key} (\d+)$", output, re.M)
        counts[key] = int(found[-1]) if found else 0
    return counts


class NodeBindingTest(unittest.TestCase):
    def test_node_binding_suite(self):
        node = shutil.which("node")
        if not node:
            self.skipTest("node is not installed (Node.js 20.19 or later runs the Node binding's tests)")
        env = dict(os.environ)
        env.pop("SIPP_NODE_BACKEND", None)  # the suite sets it per case
        env["SIPP_BUILD"] = os.path.join(REPO, os.environ.get("SIPP_BUILD") or "build")
        build = subprocess.run(["bash", os.path.join(PACKAGE, "build.sh")], cwd=PACKAGE, capture_output=True,
                               text=True, timeout=BUILD_TIMEOUT_S, env=env)
        if build.returncode != 0:
            self.fail(f"bindings/node/build.sh failed (exit {build.returncode}):\n{build.stdout}{build.stderr}")
        files = sorted(glob.glob(os.path.join(PACKAGE, "test", "*.test.js")))
        self.assertTrue(files, "no test files in bindings/node/test")
        r = subprocess.run([node, "--test", "--test-concurrency=1", "--test-reporter=tap", *files], cwd=PACKAGE,
                           capture_output=True, text=True, timeout=TEST_TIMEOUT_S, env=env)
        out = r.stdout + r.stderr
        c = tap_counts(out)
        print(f"\nbindings/node: {c['tests']} tests, {c['pass']} passed, {c['fail']} failed, "
              f"{c['cancelled']} cancelled, {c['skipped']} skipped", file=sys.stderr)
        for name, reason in re.findall(r"^\s*ok \d+ - (.*?) # SKIP (.*)$", out, re.M):
            print(f"  skipped {name}: {reason}", file=sys.stderr)
        if r.returncode != 0 or c["fail"] or c["cancelled"] or not c["tests"]:
            failing = "\n".join(m for m in re.findall(r"^\s*not ok .*$", out, re.M))
            self.fail(f"the Node binding tests failed (exit {r.returncode}):\n{failing}\n{out[-6000:]}")


if __name__ == "__main__":
    unittest.main()
