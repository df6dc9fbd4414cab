#!/usr/bin/env bash
# tests/run.sh: runs every test suite of sipp and prints one closing line "N passed, N failed".
#
# Suites: the format check (tests/format-check.sh: every C, C++ and header file as .clang-format says),
# the lint and the size check (tests/lint/: banned calls; function length and nesting),
# the C unit tests (Criterion, build/tests/test_*), the same under AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/), the engine stress test under ThreadSanitizer (build-tsan/),
# toml-test, the libFuzzer harnesses of every parser (30 s each), and the integration tests (Python unittest,
# tests/integration, which run the real CLI, gateway and bindings on synthetic models).
# SIPP_TEST_ONLY=format|lint|unit|asan|tsan|toml|fuzz|integration runs one suite; SIPP_TEST_PATTERN filters integration tests.
set -uo pipefail
cd "$(dirname "$0")/.."
export SIPP_BUILD=${SIPP_BUILD:-build}
export PYTHONUNBUFFERED=1
only=${SIPP_TEST_ONLY:-}

passed=0 failed=0
failures=()
count() { # count SUITE PASSED FAILED
  passed=$((passed + $2)); failed=$((failed + $3))
  [ "$3" -eq 0 ] || failures+=("$1")
  echo "== $1: $2 passed, $3 failed"
}

# A sanitizer's report. Criterion counts a test whose worker prints a LeakSanitizer report at exit
# as passing (the test itself passed): the report is looked for in the output instead.
SANITIZER_REPORT='ERROR: [A-Za-z]+Sanitizer|runtime error:'

run_criterion() { # run_criterion DIR LABEL
  local t out p f c
  for t in "$1"/tests/test_*; do
    [ -x "$t" ] || continue
    out=$("$t" --jobs 1 2>&1); rc=$?
    p=$(sed -n 's/.*Passing: \([0-9]*\).*/\1/p' <<<"$out" | tail -1)
    f=$(sed -n 's/.*Failing: \([0-9]*\).*/\1/p' <<<"$out" | tail -1)
    c=$(sed -n 's/.*Crashing: \([0-9]*\).*/\1/p' <<<"$out" | tail -1)
    p=${p:-0}; f=$(( ${f:-0} + ${c:-0} ))
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    if grep -qE "$SANITIZER_REPORT" <<<"$out"; then f=$((f + 1)); echo "$out" | grep -E -A12 "$SANITIZER_REPORT" | head -40; fi
    [ "$f" -eq 0 ] || echo "$out" | grep -v '^\[----\]' | tail -40
    count "$2 $(basename "$t")" "$p" "$f"
  done
}

if [ -z "$only" ] || [ "$only" = format ]; then
  out=$(bash tests/format-check.sh 2>&1)
  p=$(sed -n 's/^format: \([0-9]*\) passed.*/\1/p' <<<"$out"); f=$(sed -n 's/^format: .* \([0-9]*\) failed$/\1/p' <<<"$out")
  p=${p:-0}; f=${f:-1}
  [ "$f" -eq 0 ] || grep -v '^format:' <<<"$out" | head -30
  count format "$p" "$f"
fi

if [ -z "$only" ] || [ "$only" = lint ]; then
  # The lint (tests/lint/banned.py: no strcpy, strcat, sprintf, atoi, ...) and the size check
  # (tests/lint/size.py: no function past its length or nesting limit unless allowlisted).
  for check in banned size; do
    out=$(python3 tests/lint/$check.py 2>&1); rc=$?
    line=$(grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -1)
    p=$(sed -n 's/^[a-z]*: \([0-9]*\) passed.*/\1/p' <<<"$line"); f=$(sed -n 's/.* \([0-9]*\) failed$/\1/p' <<<"$line")
    p=${p:-0}; f=${f:-1}; [ $rc -eq 0 ] || [ "$f" -gt 0 ] || f=1
    [ "$f" -eq 0 ] || grep -vE '^[a-z]+: [0-9]+ passed' <<<"$out" | head -30
    count "lint $check" "$p" "$f"
  done
fi

if [ -z "$only" ] || [ "$only" = unit ]; then
  run_criterion "$SIPP_BUILD" unit
fi

if [ -z "$only" ] || [ "$only" = asan ]; then
  # LeakSanitizer runs with no suppressions: the unit tests leak nothing. lsan_check proves that a
  # leak in this very configuration is reported (a missing suppressions file, say, would hide it).
  asan_flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  asan_options=detect_leaks=1
  if make --no-print-directory BUILD=build-asan CC=clang DEBUG=1 EXTRA_CFLAGS="$asan_flags" \
       LDFLAGS_EXTRA="-fsanitize=address,undefined" unit-bins >build-asan.log 2>&1; then
    ASAN_OPTIONS=$asan_options run_criterion build-asan asan
  else
    tail -30 build-asan.log; count "asan build" 0 1
  fi
  out=$(SIPP_ASAN_OPTIONS=$asan_options SANITIZER_REPORT=$SANITIZER_REPORT \
    bash tests/sanitizer/lsan_check.sh clang "$asan_flags" 2>&1)
  p=$(sed -n 's/^lsan_check: \([0-9]*\) passed.*/\1/p' <<<"$out"); f=$(sed -n 's/.* \([0-9]*\) failed$/\1/p' <<<"$out")
  p=${p:-0}; f=${f:-1}
  [ "$f" -eq 0 ] || echo "$out" | tail -30
  count "asan lsan_check" "$p" "$f"
fi

if [ -z "$only" ] || [ "$only" = tsan ]; then
  # The engine's concurrency test under ThreadSanitizer.
  if make --no-print-directory BUILD=build-tsan CC=clang DEBUG=1 EXTRA_CFLAGS="-fsanitize=thread -O1" \
       LDFLAGS_EXTRA="-fsanitize=thread" build-tsan/tests/engine_stress >build-tsan.log 2>&1 &&
     model=$(python3 -c "import tempfile,sys; sys.path.insert(0,'.'); from tests.integration.common import make_model; print(make_model(tempfile.mkdtemp(), n_embd=128, n_head=4, n_head_kv=2, n_ff=256))"); then
    out=$(TSAN_OPTIONS="halt_on_error=1" build-tsan/tests/engine_stress "$model" 4 6 2>&1); rc=$?
    rm -rf "$(dirname "$model")"
    p=$(sed -n 's/^engine_stress: \([0-9]*\) passed.*/\1/p' <<<"$out"); f=$(sed -n 's/.* \([0-9]*\) failed$/\1/p' <<<"$out")
    p=${p:-0}; f=${f:-1}; [ $rc -eq 0 ] || [ "$f" -gt 0 ] || f=1
    [ "$f" -eq 0 ] || echo "$out" | tail -40
    count "tsan engine_stress" "$p" "$f"
  else
    tail -30 build-tsan.log; count "tsan build" 0 1
  fi
fi

if [ -z "$only" ] || [ "$only" = toml ]; then
  if [ -x tests/toml-test.sh ]; then
    out=$(bash tests/toml-test.sh 2>&1); rc=$?
    line=$(grep -E '^toml-test: [0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -1)
    p=$(sed -n 's/^toml-test: \([0-9]*\) passed.*/\1/p' <<<"$line"); f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
    [ -n "$line" ] || { p=0; f=1; }
    [ $rc -eq 0 ] || [ "${f:-0}" -gt 0 ] || f=1
    [ "$f" -eq 0 ] || echo "$out" | tail -30
    count toml-test "$p" "$f"
  fi
fi

if [ -z "$only" ] || [ "$only" = fuzz ]; then
  # Every parser's libFuzzer harness, briefly, from its seed corpus: a crash or sanitizer report fails.
  if make --no-print-directory fuzz-bins >build-fuzz.log 2>&1; then
    for f in "$SIPP_BUILD"/fuzz/fuzz_*; do
      name=$(basename "$f" | sed 's/^fuzz_//'); work="$SIPP_BUILD/fuzz/corpus-$name"; mkdir -p "$work"
      seeds=(); [ -d "tests/fuzz/corpus/$name" ] && seeds=("tests/fuzz/corpus/$name")
      if [ "$name" = gguf_header ]; then # seeds from the corrupted-model generator, not committed files
        python3 tests/integration/gguf_corrupt.py --fuzz-seeds "$SIPP_BUILD/fuzz/seeds-$name" 64 &&
          seeds+=("$SIPP_BUILD/fuzz/seeds-$name")
      fi
      if "$f" -max_total_time="${SIPP_FUZZ_SECONDS:-30}" -max_len=4096 "$work" "${seeds[@]}" >"$work.log" 2>&1; then
        count "fuzz $name" 1 0
      else
        tail -30 "$work.log"; count "fuzz $name" 0 1
      fi
    done
  else
    tail -30 build-fuzz.log; count "fuzz build" 0 1
  fi
fi

if [ -z "$only" ] || [ "$only" = integration ]; then
  pattern=${SIPP_TEST_PATTERN:-test_*.py}
  out=$(python3 -m unittest discover -s tests/integration -t . -p "$pattern" 2>&1); rc=$?
  echo "$out" | grep -E '^(FAIL|ERROR):|^Traceback|Error' | head -40
  ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p' <<<"$out" | tail -1)
  bad=$(sed -n 's/^FAILED (\(.*\))/\1/p' <<<"$out" | tr ',' '\n' | grep -oE '(failures|errors)=[0-9]+' | cut -d= -f2 | awk '{s+=$1} END {print s+0}')
  skipped=$(grep -oE 'skipped=[0-9]+' <<<"$out" | tail -1 | cut -d= -f2)
  ran=${ran:-0}; bad=${bad:-0}; skipped=${skipped:-0}
  [ $rc -eq 0 ] || [ "$bad" -gt 0 ] || bad=1
  [ "$bad" -eq 0 ] || echo "$out" | tail -60
  count integration $((ran - bad - skipped)) "$bad"
fi

[ ${#failures[@]} -eq 0 ] || echo "failed suites: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
