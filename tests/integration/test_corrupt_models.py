"""Corrupted models never crash sipp (issue 21, item 1).

gguf_corrupt.py writes corrupted copies of a good tiny model, one per seed, over the header's fields
(hyperparameters first). Each runs through `sipp MODEL PROMPT` and `sipp models info`: the exit is 0
(the corruption was harmless) or 1 with a one-line message, never a signal. The mutations that made
llama.cpp assert (block_count 0, 1000, 2^32-1; the RMS epsilon NaN; general.alignment 1) must be
refused with a message naming the key. In the gateway, such a model is a failed target (503 naming
the key) while the good target beside it keeps serving.

SIPP_CORRUPT_SEEDS sets how many seeds run (default 40).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import SIPP, make_model, run_sipp  # noqa: E402
import gguf_corrupt  # noqa: E402
import test_gateway_support as gw  # noqa: E402

SEEDS = int(os.environ.get("SIPP_CORRUPT_SEEDS", "40"))
GEN_TIMEOUT_S = 120

# What the message of each known abort must name.
KNOWN = {
    "block_count_0": "llama.block_count",
    "block_count_1000": "llama.block_count",
    "block_count_max": "llama.block_count",
    "rms_eps_nan": "llama.attention.layer_norm_rms_epsilon",
    "head_count_0": "llama.attention.head_count",
    "embedding_length_0": "llama.embedding_length",
    "alignment_1": "general.alignment",
    "block_count_string": "llama.block_count",
    "tokenizer_none": "tokenizer.ggml.model",
}


class CorruptModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sipp-corrupt-")
        cls.model = make_model(cls.tmp)
        with open(cls.model, "rb") as f:
            cls.data = f.read()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def write(self, name, blob):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(blob)
        return path

    def assertNoCrash(self, proc, what):
        self.assertGreaterEqual(proc.returncode, 0, f"{what}: killed by signal {-proc.returncode}: {proc.stderr[-400:]}")
        self.assertIn(proc.returncode, (0, 1), f"{what}: {proc.stderr[-400:]}")
        if proc.returncode == 1:
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            self.assertEqual(len(lines), 1, f"{what}: one line of error expected: {proc.stderr[-600:]}")
            self.assertTrue(lines[0].startswith("sipp: "), f"{what}: {lines[0]}")

    def test_known_aborts_are_refused_naming_the_key(self):
        for name, blob in gguf_corrupt.named_corruptions(self.data):
            with self.subTest(name=name):
                path = self.write(f"{name}.gguf", blob)
                proc = run_sipp([path, "hi", "--max-tokens", "2"], timeout=GEN_TIMEOUT_S)
                self.assertNoCrash(proc, name)
                self.assertEqual(proc.returncode, 1, f"{name}: {proc.stdout[-200:]} {proc.stderr[-200:]}")
                self.assertIn(KNOWN[name], proc.stderr)
                self.assertIn(path, proc.stderr)
                # models info reads the same header without the loader: it must not crash either
                self.assertNoCrash(run_sipp(["models", "info", path], threads=False), f"{name}: models info")
                os.unlink(path)

    def test_seeded_corruptions_never_crash(self):
        refused = 0
        for seed in range(SEEDS):
            blob, what = gguf_corrupt.corrupt(self.data, seed)
            path = self.write(f"corrupt-{seed}.gguf", blob)
            with self.subTest(seed=seed, mutation=what):
                proc = run_sipp([path, "hi", "--max-tokens", "2"], timeout=GEN_TIMEOUT_S)
                self.assertNoCrash(proc, f"seed {seed} ({what}): sipp MODEL PROMPT")
                refused += proc.returncode == 1
                info = run_sipp(["models", "info", path], timeout=GEN_TIMEOUT_S, threads=False)
                self.assertNoCrash(info, f"seed {seed} ({what}): sipp models info")
            os.unlink(path)
        self.assertGreater(refused, SEEDS // 10, "the corpus should mostly reach the checks")


class CorruptTargetGatewayTest(unittest.TestCase):
    """Two corrupt targets beside a good one: the gateway stays up and the good one serves."""

    def test_check_refuses_a_corrupt_model(self):
        with open(gw.model(), "rb") as f:
            blob = dict(gguf_corrupt.named_corruptions(f.read()))["block_count_0"]
        bad = os.path.join(gw.tmpdir(), "check-block_count_0.gguf")
        with open(bad, "wb") as f:
            f.write(blob)
        config = gw.write("check-corrupt.toml", gw.local_target("good") + gw.local_target("broken", path=bad))
        r = subprocess.run([SIPP, "serve", "--check", "--config", config], capture_output=True, text=True,
                           timeout=GEN_TIMEOUT_S)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("target 'broken'", r.stderr)
        self.assertIn("llama.block_count", r.stderr)
        self.assertNotIn("'good'", r.stderr)

    def test_corrupt_targets_fail_alone(self):
        with open(gw.model(), "rb") as f:
            data = f.read()
        blobs = dict(gguf_corrupt.named_corruptions(data))
        paths = {}
        for name in ("block_count_0", "rms_eps_nan"):
            paths[name] = os.path.join(gw.tmpdir(), f"{name}.gguf")
            with open(paths[name], "wb") as f:
                f.write(blobs[name])
        config = gw.local_target("good") + "".join(gw.local_target(n, path=p) for n, p in paths.items())
        g = gw.serve_config(config, wait_ready=False)
        try:
            def settled():
                s, _, b = g.json("GET", "/ready")
                states = {t["name"]: t["state"] for t in b["targets"]}
                want = {"good": "ready", "block_count_0": "failed", "rms_eps_nan": "failed"}
                return (s, b) if states == want else None

            status, body = gw.wait_until(settled, gw.READY_TIMEOUT_S, "the targets settling")
            self.assertEqual(status, 503)
            for name, key in (("block_count_0", "llama.block_count"),
                              ("rms_eps_nan", "llama.attention.layer_norm_rms_epsilon")):
                status, _, out = g.json("POST", "/v1/chat/completions", gw.chat_body(name, max_tokens=2))
                self.assertEqual(status, 503, out)
                self.assertIn(key, out["error"]["message"])
                self.assertIn(name, out["error"]["message"])
            for _ in range(2):
                status, _, out = g.json("POST", "/v1/chat/completions", gw.chat_body("good", max_tokens=2))
                self.assertEqual(status, 200, out)
        finally:
            self.assertEqual(g.stop(), 0)


if __name__ == "__main__":
    unittest.main()
