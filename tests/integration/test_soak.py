"""The soak in `make test` (issue 21): 4 streams for 60 s against `sipp serve`, zero failures, flat RSS.

bench/soak.py does the work (the 5-minute version is `bench/soak.py --seconds 300`). RSS is judged
after a warm-up: the last quarter's median against the second quarter's, within 16 MiB.
SIPP_SOAK_SECONDS shortens or lengthens it.
"""

import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import soak  # noqa: E402

SECONDS = float(os.environ.get("SIPP_SOAK_SECONDS", "60"))
STREAMS = 4


class SoakTest(unittest.TestCase):
    def test_four_streams_flat_rss_no_failures(self):
        r = soak.soak(SECONDS, STREAMS, max_tokens=32)
        self.assertTrue(r["server_alive"], r)
        self.assertGreater(r["requests"], STREAMS, r)
        self.assertEqual(r["failures"], 0, r)
        self.assertTrue(r["flat"], f"RSS grew {r['rss_growth_mib']} MiB after the warm-up: {r}")


if __name__ == "__main__":
    unittest.main()
