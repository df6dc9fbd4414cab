"""The engine under real concurrency: tests/tools/engine_stress.c drives one engine from many
threads (submit, cancel, deadlines, callback stop), checks that every request ends exactly once,
that batched greedy output equals single-request output, that no slot leaks, that a repeated prompt
reuses its prefix and that a full queue refuses at once. The same program runs under
ThreadSanitizer in tests/run.sh (suite tsan)."""

import os
import subprocess
import tempfile
import unittest

from tests.integration.common import BUILD, make_model


class EngineStress(unittest.TestCase):
    def test_stress(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = make_model(tmp, n_embd=128, n_head=4, n_head_kv=2, n_ff=256)
            p = subprocess.run([os.path.join(BUILD, "tests", "engine_stress"), model, "6", "10"],
                               capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn(", 0 failed", p.stdout)


if __name__ == "__main__":
    unittest.main()
