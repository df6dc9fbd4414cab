#!/usr/bin/env bash
# tests/sanitizer/lsan_check.sh CC "SANITIZER FLAGS": proves that LeakSanitizer reports leaks in the
# configuration the ASan unit tests run in. Builds tests/sanitizer/leak.c with those flags and runs
# it with the ASAN_OPTIONS tests/run.sh gives (and, like it, no LSAN_OPTIONS): the leaking run must fail with
# LeakSanitizer's report naming the leaked size; the freeing run must pass with no report. Then the
# same for a Criterion test that passes and leaks (tests/sanitizer/leak_test.c): Criterion calls it
# passing, so its output must carry the report that tests/run.sh looks for ($SANITIZER_REPORT).
# Prints "lsan_check: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
cc=${1:?usage: lsan_check.sh CC FLAGS}
flags=${2:?usage: lsan_check.sh CC FLAGS}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
check() { # check DESCRIPTION CONDITION...
  local what=$1; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "lsan_check: FAIL: $what"; fi
}
# shellcheck disable=SC2086
if ! "$cc" $flags -g tests/sanitizer/leak.c -o "$tmp/leak" 2>"$tmp/build.log"; then
  cat "$tmp/build.log"; echo "lsan_check: 0 passed, 1 failed"; exit 1
fi
export ASAN_OPTIONS=${SIPP_ASAN_OPTIONS:-detect_leaks=1}
unset LSAN_OPTIONS
"$tmp/leak" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "a leak exits non-zero (rc $rc)" test "$rc" -ne 0
check "a leak prints LeakSanitizer's report" grep -q "ERROR: LeakSanitizer: detected memory leaks" "$tmp/err"
check "the report names the leaked allocation" grep -q "4242 byte(s) leaked" "$tmp/err"
check "no complaint about a suppressions file" bash -c "! grep -qi 'suppressions' '$tmp/err'"
"$tmp/leak" free >"$tmp/out" 2>"$tmp/err"; rc=$?
check "no leak exits 0 (rc $rc)" test "$rc" -eq 0
check "no leak prints no report" bash -c "! grep -q LeakSanitizer '$tmp/err'"
# shellcheck disable=SC2086
if "$cc" $flags -g tests/sanitizer/leak_test.c -o "$tmp/leak_test" -lcriterion 2>"$tmp/build.log"; then
  out=$("$tmp/leak_test" --jobs 1 2>&1)
  check "a leaking Criterion test prints LeakSanitizer's report" grep -q "4243 byte(s) leaked" <<<"$out"
  check "run.sh's pattern finds the report" grep -qE "${SANITIZER_REPORT:-ERROR: [A-Za-z]+Sanitizer}" <<<"$out"
else
  cat "$tmp/build.log"; failed=$((failed + 1))
fi
[ "$failed" -eq 0 ] || sed -n 1,20p "$tmp/err"
echo "lsan_check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
