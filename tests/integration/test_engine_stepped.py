"""The stepped engine (sipp_engine_new_stepped / sipp_engine_step, what the browser runtime runs):
tests/tools/engine_stepped.c checks it against a threaded engine on the same model (same greedy
text alone and batched), that waiting and reading run its steps, that a cancel between steps ends
the request at the next one, and that freeing it ends what is left as closed."""

import os
import subprocess
import tempfile
import unittest

from tests.integration.common import BUILD, make_model


class EngineStepped(unittest.TestCase):
    def test_stepped_engine(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = make_model(tmp, n_embd=128, n_head=4, n_head_kv=2, n_ff=256)
            p = subprocess.run([os.path.join(BUILD, "tests", "engine_stepped"), model],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn(", 0 failed", p.stdout)


if __name__ == "__main__":
    unittest.main()
