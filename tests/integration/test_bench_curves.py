"""bench/curves.py --quick and bench/plot.py on a tiny synthetic model: the scaling curves (TTFT against
prompt length, decode against streams at parallel = streams, memory against ctx_size x parallel) must
come out whole for sipp and, where the pinned llama.cpp peer build is in the cache
(deps/build-source.sh peer), for llama-bench/llama-batched-bench in the same run; the plot script
must draw every point and refuse a file with a point missing. Speeds are not judged (a shared machine),
only that every point was measured and is a positive number.
"""

import copy
import csv
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CURVES = os.path.join(ROOT, "bench", "curves.py")
PLOT = os.path.join(ROOT, "bench", "plot.py")
RUN_TIMEOUT_S = 600
CACHE = os.environ.get("SIPP_CACHE_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sipp")
# bench/curves.py's quick sizes
LENGTHS, LEVELS, CTX_PER_SLOT = [16, 64], [1, 2, 4], 64


def peer_bin():
    for d in sorted(glob.glob(os.path.join(CACHE, "build-*-peer", "bin"))):
        if os.path.exists(os.path.join(d, "llama-batched-bench")) and os.path.exists(os.path.join(d, "llama-bench")):
            return d
    return None


def run(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def svg_series(path):
    """{label: number of points} of a figure's lines."""
    ns = {"s": "http://www.w3.org/2000/svg"}
    root = ET.parse(path).getroot()
    return {p.get("data-label"): len(p.get("points").split()) for p in root.iterfind(".//s:polyline", ns)}


class BenchCurvesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sipp-curves-")
        cls.peer = peer_bin()
        args = [CURVES, "--sipp", gw.SIPP, "--model", gw.model("tiny"), "--threads", "1", "--quick", "--out",
                cls.tmp]
        if cls.peer:
            args += ["--peer-bin", cls.peer]
        p = run(*args)
        if p.returncode != 0:
            raise AssertionError(f"curves.py failed: {p.stderr}")
        with open(os.path.join(cls.tmp, "curves.json")) as f:
            cls.d = json.load(f)
        cls.sides = ["sipp"] + (["llama.cpp"] if cls.peer else [])

    def test_every_point_of_every_curve(self):
        self.assertEqual(sorted(self.d["ttft"]["sides"]), sorted(self.sides))
        for side in self.sides:
            ttft = self.d["ttft"]["sides"][side]
            self.assertEqual([p["prompt_tokens"] for p in ttft], LENGTHS, side)
            for p in ttft:
                self.assertGreater(p["ttft_ms"], 0, (side, p))
                self.assertGreater(p["prefill_tokens_per_s"], 0, (side, p))
            levels = self.d["concurrency"]["sides"][side]
            self.assertEqual([p["concurrency"] for p in levels], LEVELS, side)
            for p in levels:
                self.assertEqual(p["ctx_size"], CTX_PER_SLOT * p["concurrency"], (side, p))
                for f in ("aggregate_tokens_per_s", "per_stream_tokens_per_s", "ttft_ms", "peak_rss_mb", "kv_mb",
                          "compute_mb"):
                    self.assertGreater(p[f], 0, (side, f, p))
            # The KV cache holds ctx_size cells: it cannot shrink as ctx_size x parallel grows.
            kv = [p["kv_mb"] for p in levels]
            self.assertEqual(kv, sorted(kv), side)
        meta = self.d["meta"]
        self.assertEqual((meta["size"], meta["threads"], meta["rounds"]), ("quick", 1, 1))
        self.assertEqual(len(meta["load_average_before"]), 3)
        self.assertEqual(meta["peer"] is not None, self.peer is not None)

    def test_csv_has_a_row_per_point_and_metric(self):
        with open(os.path.join(self.tmp, "curves.csv")) as f:
            rows = list(csv.DictReader(f))
        per_side = len(LENGTHS) * 2 + len(LEVELS) * 7  # (ttft, rate) per length; 7 metrics per level
        self.assertEqual(len(rows), per_side * len(self.sides))
        self.assertEqual({r["side"] for r in rows}, set(self.sides))

    def test_plot_draws_every_point(self):
        out = os.path.join(self.tmp, "fig")
        p = run(PLOT, os.path.join(self.tmp, "curves.json"), out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(svg_series(os.path.join(out, "ttft.svg")), {s: len(LENGTHS) for s in self.sides})
        decode = {f"{s} {k}": len(LEVELS) for s in self.sides for k in ("aggregate", "per stream")}
        self.assertEqual(svg_series(os.path.join(out, "decode.svg")), decode)
        memory = {f"{s} {k}": len(LEVELS) for s in self.sides for k in ("peak RSS", "KV+compute")}
        self.assertEqual(svg_series(os.path.join(out, "memory.svg")), memory)

    def plot_broken(self, name, mend):
        d = copy.deepcopy(self.d)
        mend(d)
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            json.dump(d, f)
        p = run(PLOT, path, os.path.join(self.tmp, name + "-fig"))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, name + "-fig", "decode.svg")))
        return p.stderr

    def test_plot_refuses_a_missing_point(self):
        side = self.sides[-1]
        err = self.plot_broken("missing.json", lambda d: d["concurrency"]["sides"][side].pop(1))
        self.assertIn(f"concurrency: {side} has no point at concurrency 2", err)
        err = self.plot_broken("no-ttft.json", lambda d: d["ttft"]["sides"]["sipp"].pop())
        self.assertIn("ttft: sipp has no point at prompt_tokens 64", err)

    def test_plot_refuses_a_value_that_is_not_a_measurement(self):
        def zero(d):
            d["concurrency"]["sides"]["sipp"][0]["peak_rss_mb"] = 0

        err = self.plot_broken("zero.json", zero)
        self.assertIn("sipp at concurrency 1: peak_rss_mb is 0, not a positive number", err)
        err = self.plot_broken("no-sipp.json", lambda d: d["ttft"]["sides"].pop("sipp"))
        self.assertIn("ttft: no sipp side", err)

    def test_curves_names_the_failed_command(self):
        bad = os.path.join(self.tmp, "not-a-model.gguf")
        with open(bad, "w") as f:
            f.write("not a gguf file")
        p = run(CURVES, "--sipp", gw.SIPP, "--model", bad, "--threads", "1", "--quick", "--out",
                os.path.join(self.tmp, "bad"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("curves: exit", p.stderr)
        self.assertIn("bench " + bad, p.stderr)
        p = run(CURVES, "--sipp", gw.SIPP, "--model", bad + ".none", "--quick")
        self.assertIn("--model " + bad + ".none: no such file", p.stderr)

    def test_bench_refuses_a_bad_prompt_length(self):
        p = subprocess.run([gw.SIPP, "bench", gw.model("tiny"), "--prompt-lengths", "16,x"], capture_output=True,
                           text=True, timeout=RUN_TIMEOUT_S)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--prompt-lengths 'x' is not a whole number", p.stderr)
        p = subprocess.run([gw.SIPP, "bench", gw.model("tiny"), "--concurrency", "0,2"], capture_output=True, text=True,
                           timeout=RUN_TIMEOUT_S)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--concurrency 0 means no levels; it cannot be one of several", p.stderr)

    def test_bench_without_levels(self):
        p = subprocess.run([gw.SIPP, "bench", gw.model("tiny"), "-p", "8", "-n", "4", "-r", "1", "--threads", "1",
                            "--concurrency", "0", "-o", "json"], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        self.assertEqual(p.returncode, 0, p.stderr)
        d = json.loads(p.stdout)
        self.assertEqual((d["levels"], d["prompt_curve"]), ([], []))
        self.assertGreater(d["tg"]["mean"], 0)


if __name__ == "__main__":
    unittest.main()
