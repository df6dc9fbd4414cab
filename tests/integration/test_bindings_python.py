"""Runs the Python binding's own tests (bindings/python/tests) as part of the integration suite.

The binding's tests are a unittest suite of their own, run in a child interpreter so that its
import-time backend choice (SIPP_PYTHON_BACKEND) and its loaded libsipp stay out of this process.
This wrapper fails when any of them fails or errors, and prints their counts either way.
"""

import os
import re
import subprocess
import sys
import unittest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PACKAGE = os.path.join(REPO, "bindings", "python")
TIMEOUT_S = 300


def summarize(output):
    """'Ran N tests ... OK (skipped=k)' -> counts, and the skip reasons."""
    ran = re.findall(r"^Ran (\d+) tests?", output, re.M)
    result = re.findall(r"^(OK|FAILED)(?: \((.*)\))?$", output, re.M)
    counts = {"ran": int(ran[-1]) if ran else 0, "failures": 0, "errors": 0, "skipped": 0}
    if result:
        for part in (result[-1][1] or "").split(","):
            if "=" in part:
                k, v = part.strip().split("=")
                counts[k] = int(v)
    skips = re.findall(r"^(\S+ \(.*?\)) \.\.\. skipped '(.*)'$", output, re.M)
    return counts, skips


class PythonBindingTest(unittest.TestCase):
    def test_python_binding_suite(self):
        env = dict(os.environ)
        env.pop("SIPP_PYTHON_BACKEND", None)  # the suite sets it per case
        env["SIPP_BUILD"] = os.path.join(REPO, os.environ.get("SIPP_BUILD") or "build")  # the suite runs elsewhere
        r = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "tests", "-v"],
                           cwd=PACKAGE, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        out = r.stdout + r.stderr
        counts, skips = summarize(out)
        passed = counts["ran"] - counts["failures"] - counts["errors"] - counts["skipped"]
        print(f"\nbindings/python: {counts['ran']} tests, {passed} passed, {counts['failures']} failed, "
              f"{counts['errors']} errors, {counts['skipped']} skipped", file=sys.stderr)
        for name, reason in skips:
            print(f"  skipped {name}: {reason}", file=sys.stderr)
        if r.returncode != 0 or counts["ran"] == 0:
            self.fail(f"the Python binding tests failed (exit {r.returncode}):\n{out[-6000:]}")


if __name__ == "__main__":
    unittest.main()
