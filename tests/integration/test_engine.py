"""The engine under real concurrency: tests/tools/engine_stress.c drives one engine from many
threads (submit, cancel, deadlines, callback stop), checks that every request ends exactly once,
that batched greedy output equals single-request output, that no slot leaks, that a repeated prompt
reuses its prefix and that a full queue refuses at once. The same program runs under
ThreadSanitizer in tests/run.sh (suite tsan). An idle engine holds no core: ggml's worker threads spin
between graphs, and an engine with nothing to do must let them sleep."""

import os
import subprocess
import tempfile
import time
import unittest

from tests.integration.common import BUILD, make_model
from tests.support import gateway as gw

IDLE_WINDOW_S = 0.5
IDLE_CPU_MAX_S = 0.04  # spinning workers took 0.13 s of this window on an AMD EPYC


class EngineStress(unittest.TestCase):
    def test_stress(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = make_model(tmp, n_embd=128, n_head=4, n_head_kv=2, n_ff=256)
            p = subprocess.run([os.path.join(BUILD, "tests", "engine_stress"), model, "6", "10"],
                               capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn(", 0 failed", p.stdout)


def cpu_seconds(pid):
    """User plus system time of every thread of pid so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class IdleEngine(unittest.TestCase):
    def test_an_idle_engine_lets_its_threads_sleep(self):
        g = gw.serve_config(f'[[targets]]\nname = "tiny"\ntype = "local"\nmodel = "{gw.model()}"\nthreads = 2\n')
        try:
            for _ in range(2):
                status, _, body = g.json("POST", "/v1/completions",
                                         {"model": "tiny", "prompt": "Hello", "max_tokens": 16,
                                          "ignore_eos": True, "temperature": 0})
                self.assertEqual(status, 200, body)
            before = cpu_seconds(g.proc.pid)
            time.sleep(IDLE_WINDOW_S)
            used = cpu_seconds(g.proc.pid) - before
            self.assertLess(used, IDLE_CPU_MAX_S,
                            f"sipp serve used {used:.2f} s of CPU in the {IDLE_WINDOW_S} s after its last request")
        finally:
            g.stop()


if __name__ == "__main__":
    unittest.main()
