#!/usr/bin/env bash
# tests/format-check.sh: every tracked C, C++ and header file is formatted as .clang-format says.
# Prints "format: N passed, M failed" (one per file) and the files that differ, with the fix:
# `make format`. Run by tests/run.sh (SIPP_TEST_ONLY=format).
set -uo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format: clang-format not found (apt-get install -y clang-format)"; echo "format: 0 passed, 1 failed"; exit 1; }
passed=0 failed=0 bad=()
# one clang-format per file, as many at once as there are cores; each prints "ok FILE" or "bad FILE"
while read -r verdict f; do
  if [ "$verdict" = ok ]; then passed=$((passed + 1)); else failed=$((failed + 1)); bad+=("$f"); fi
done < <(git ls-files -z -- '*.c' '*.h' '*.cpp' |
  xargs -0 -r -n 8 -P "$(nproc)" sh -c 'for f; do
    if clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then echo "ok $f"; else echo "bad $f"; fi; done' sh)
for f in "${bad[@]+"${bad[@]}"}"; do echo "not formatted: $f (make format fixes it)"; done
echo "format: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
