#!/usr/bin/env python3
"""tests/lint/size.py: no function of sipp's C sources grows past a length or a nesting depth (curl's
top-length and top-complexity checks are the model).

A function's length is the lines of its body, braces included; its depth is how deeply braces nest
inside the body (an `if` with a braced block inside a `for` with one is depth 2). Past MAX_LINES or
MAX_DEPTH a function fails unless tests/lint/size-allowlist.txt names it (FILE:FUNCTION): the
functions that were already longer when the check came. Split such a function into named phases
and take it off the list; never add one.

Usage: size.py [FILE...]; with no files, every tracked .c and .cpp file under src/ and tools/. Prints
each function over a limit and one closing line "size: N passed, M failed" (one per file); exits 1 when one fails.
Run by tests/run.sh (SIPP_TEST_ONLY=lint) and make check.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csource  # noqa: E402

SOURCES = ('.c', '.cpp')  # the C++ bridge too: csource reads its namespace and extern "C" blocks
MAX_LINES = 100
MAX_DEPTH = 3
ALLOWLIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'size-allowlist.txt')


def allowlist():
    names = set()
    with open(ALLOWLIST) as f:
        for line in f:
            line = line.split('#', 1)[0].strip()
            if line:
                names.add(line)
    return names


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    files = argv[1:]
    if not files:
        os.chdir(root)
        files = [f for f in subprocess.run(['git', 'ls-files', '--', 'src', 'tools'], capture_output=True,
                                           text=True, check=True).stdout.split() if f.endswith(SOURCES)]
    allowed = allowlist()
    seen = set()
    passed = failed = 0
    for path in files:
        with open(path, encoding='utf-8', errors='replace') as f:
            text = f.read()
        bad = 0
        for name, line, lines, depth in csource.functions(text):
            key = f'{path}:{name}'
            over = []
            if lines > MAX_LINES:
                over.append(f'{lines} lines (limit {MAX_LINES})')
            if depth > MAX_DEPTH:
                over.append(f'nesting depth {depth} (limit {MAX_DEPTH})')
            if over and key in allowed:
                seen.add(key)
                over = []
            if over:
                bad += 1
                print(f'{path}:{line}: {name}() is {" and ".join(over)}; split it into named phases')
        if bad:
            failed += 1
        else:
            passed += 1
    if not argv[1:]:
        for key in sorted(allowed - seen):
            print(f'note: {key} is within the limits now (or gone): take it off {os.path.relpath(ALLOWLIST)}')
    print(f'size: {passed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
