"""Properties of the repository itself, as a new user's bare clone has it."""

import os
import subprocess
import sys
import unittest

from tests.integration.common import ROOT

# Spelled in two halves so that this file does not match itself.
OUTSIDE_DIR = ".." + "/shared"


class BareCloneTest(unittest.TestCase):
    def tracked_files(self):
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        return [f for f in out.decode().split("\0") if f]

    def test_nothing_outside_ci_reads_the_directory_beside_the_clone(self):
        # A user's clone has nothing beside it: the build, the tests and the docs must not need it.
        files = self.tracked_files()
        self.assertTrue(files, "git ls-files listed nothing")
        offenders = []
        for f in files:
            if f.startswith(".ci/"):
                continue
            path = os.path.join(ROOT, f)
            if not os.path.isfile(path):
                continue
            with open(path, "rb") as fh:
                if OUTSIDE_DIR.encode() in fh.read():
                    offenders.append(f)
        self.assertEqual(offenders, [], f"tracked files refer to {OUTSIDE_DIR}: {offenders}")

    def test_toml_test_corpus_is_vendored_with_its_licence(self):
        base = os.path.join(ROOT, "tests", "data", "toml-test")
        for name in ("LICENSE", "SOURCE", "tests/files-toml-1.0.0"):
            self.assertTrue(os.path.isfile(os.path.join(base, name)), name)
        with open(os.path.join(base, "tests", "files-toml-1.0.0")) as fh:
            cases = [line.strip() for line in fh if line.strip()]
        missing = [c for c in cases if not os.path.isfile(os.path.join(base, "tests", c))]
        self.assertEqual(missing, [])


if __name__ == "__main__":
    unittest.main()


class StatusNamesTest(unittest.TestCase):
    """The sipp_status names live once, in include/sipp.h; libsipp's table and the bindings' are
    generated from it (scripts/gen_status_names.py) and must be up to date."""

    def test_tables_are_generated_from_sipp_h(self):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_status_names.py"), "--check"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_every_status_has_a_python_class(self):
        sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
        try:
            from sipp import _errors
        finally:
            sys.path.pop(0)
        self.assertEqual(_errors.STATUS_NAMES[0], "ok")
        self.assertEqual([n for n in _errors.STATUS_NAMES[1:] if n not in _errors.NAME_CLASSES], [])
