"""tests/support/runner.py: runs integration test files with unittest, timed, in shards.

    python3 -m tests.support.runner --report FILE [--pattern 'test_*.py'] [--shard I/N] [--times FILE]
    python3 -m tests.support.runner --merge FILE... [--times FILE] [--slowest 10]

A run discovers the files of tests/integration matching the pattern (globs separated by commas), keeps those of shard I of N, runs
them one file after another with one unittest result (module and class fixtures behave as under
`python3 -m unittest`), prints unittest's usual output, and writes a JSON report: the counts, the
seconds of every test and of every file (its setUpClass and setUpModule included). Shards are
balanced by the files' seconds in the last run (--times, written by --merge), longest first onto the
least loaded shard; a file never timed counts as DEFAULT_FILE_S. Without a last run (a fresh clone),
the seconds come from BASELINE_TIMES, a run's file kept in the tree, so the first run is balanced too.

--merge reads the shards' reports, prints one line "integration: ran R, failed F, skipped S", the
slowest tests, and writes the files' seconds for the next run's balance. tests/run.sh drives both.
"""

import argparse
import fnmatch
import json
import os
import sys
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START_DIR = os.path.join(ROOT, "tests", "integration")
DEFAULT_FILE_S = 60.0
BASELINE_TIMES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test-times.json")


class TimedResult(unittest.TextTestResult):
    """unittest's text result that also records how long each test took."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seconds = {}
        self._t0 = None

    def startTest(self, test):
        self._t0 = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        if self._t0 is not None:
            self.seconds[test.id()] = time.monotonic() - self._t0
            self._t0 = None


def discover(pattern):
    """The test files matching the pattern: a glob, or several separated by commas."""
    globs = [p.strip() for p in pattern.split(",") if p.strip()]
    names = sorted(f for f in os.listdir(START_DIR) if any(fnmatch.fnmatch(f, g) for g in globs) and f.endswith(".py"))
    return [n for n in names if n.startswith("test_")]


def shard_of(files, index, count, times):
    """The files of shard index (0-based) of count: longest first onto the least loaded shard."""
    if count <= 1:
        return files
    load = [0.0] * count
    mine = []
    for f in sorted(files, key=lambda f: (-times.get(f, DEFAULT_FILE_S), f)):
        k = min(range(count), key=lambda i: (load[i], i))
        load[k] += times.get(f, DEFAULT_FILE_S)
        if k == index:
            mine.append(f)
    return sorted(mine)


def load_times(path):
    for p in (path, BASELINE_TIMES):
        try:
            with open(p) as f:
                return {k: float(v) for k, v in json.load(f).items()}
        except (OSError, ValueError, AttributeError):
            continue
    return {}


def run(args):
    times = load_times(args.times) if args.times else {}
    index, count = 0, 1
    if args.shard:
        i, n = args.shard.split("/")
        index, count = int(i) - 1, int(n)
    files = shard_of(discover(args.pattern), index, count, times)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    stream = unittest.runner._WritelnDecorator(sys.stderr)
    result = TimedResult(stream, True, 1)
    result.failfast = False
    file_seconds = {}
    t_start = time.monotonic()
    unittest.installHandler()
    loader = unittest.TestLoader()
    for f in files:
        t0 = time.monotonic()
        module = "tests.integration." + f[:-3]
        try:
            suite = loader.loadTestsFromName(module)
        except Exception as e:  # an import error is a failed test, as unittest's discovery makes it
            suite = unittest.TestSuite([unittest.FunctionTestCase(_raiser(module, e), description=module)])
        suite.run(result)
        file_seconds[f] = time.monotonic() - t0
    elapsed = time.monotonic() - t_start
    result.printErrors()
    stream.writeln(result.separator2)
    ran = result.testsRun
    stream.writeln(f"Ran {ran} test{'s' if ran != 1 else ''} in {elapsed:.3f}s")
    stream.writeln()
    info = []
    for label, n in (("failures", len(result.failures)), ("errors", len(result.errors)),
                     ("skipped", len(result.skipped)), ("unexpected successes", len(result.unexpectedSuccesses))):
        if n:
            info.append(f"{label}={n}")
    ok = result.wasSuccessful()
    stream.writeln(("OK" if ok else "FAILED") + (f" ({', '.join(info)})" if info else ""))
    report = {
        "files": files,
        "ran": ran,
        "failed": len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses),
        "skipped": len(result.skipped),
        "seconds": elapsed,
        "file_seconds": file_seconds,
        "test_seconds": result.seconds,
    }
    if args.report:
        with open(args.report, "w") as out:
            json.dump(report, out, indent=1)
    return 0 if ok else 1


def _raiser(module, error):
    def failing():
        raise ImportError(f"cannot import {module}: {error!r}")

    return failing


def merge(args):
    ran = failed = skipped = 0
    tests, files = {}, {}
    missing = []
    for path in args.merge:
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            missing.append(path)
            continue
        ran += r["ran"]
        failed += r["failed"]
        skipped += r["skipped"]
        tests.update(r["test_seconds"])
        files.update(r["file_seconds"])
    if missing:  # a shard that wrote no report crashed: count it as one failure
        failed += len(missing)
        print(f"integration: no report from {', '.join(missing)} (the shard crashed)")
    if args.slowest and tests:
        print(f"the {min(args.slowest, len(tests))} slowest integration tests:")
        for name, s in sorted(tests.items(), key=lambda kv: -kv[1])[:args.slowest]:
            print(f"  {s:8.1f} s  {name}")
    if args.times and files and not missing:
        known = load_times(args.times)
        known.update(files)
        with open(args.times, "w") as out:
            json.dump(known, out, indent=1, sort_keys=True)
    print(f"integration: ran {ran}, failed {failed}, skipped {skipped}")
    return 0 if failed == 0 else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pattern", default="test_*.py")
    ap.add_argument("--shard", help="I/N: the I-th (1-based) of N shards")
    ap.add_argument("--times", help="JSON file of each file's seconds in the last run")
    ap.add_argument("--report", help="where to write this run's JSON report")
    ap.add_argument("--merge", nargs="+", help="reports to merge")
    ap.add_argument("--slowest", type=int, default=10)
    args = ap.parse_args(argv)
    return merge(args) if args.merge else run(args)


if __name__ == "__main__":
    sys.exit(main())
