#!/usr/bin/env bash
# tests/run.sh: runs every test suite of sipp and prints one closing line "N passed, N failed".
#
# Suites: the format check (tests/format-check.sh: every C, C++ and header file as .clang-format says),
# the lint, the size check and the layer rules (tests/lint/: banned calls; function length and nesting;
# includes and calls only down the layers),
# the C unit tests (Criterion, build/tests/test_*), the same under AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/; also the gateway's smoke and main tests against sipp built
# there), the engine stress test under ThreadSanitizer (build-tsan/),
# toml-test, the libFuzzer harnesses of every parser (30 s each), and the integration tests (Python unittest,
# tests/integration, which run the real CLI, gateway and bindings on synthetic models).
# SIPP_TEST_ONLY=format|lint|unit|asan|tsan|toml|fuzz|integration runs one suite (a comma-separated list
# runs several); SIPP_TEST_PATTERN filters integration test files (globs separated by commas).
#
# The whole run is three streams at once: the quick suites and then the integration tests in
# SIPP_TEST_SHARDS processes (2 by default; tests/support/runner.py balances the files by their seconds
# in the last run), beside the sanitizer and fuzz builds and runs, which are another stream. Each suite
# writes its own log (build/test-logs/); they are printed in a fixed order once all are done, then the
# ten slowest integration tests, then the closing line.
set -uo pipefail
cd "$(dirname "$0")/.."
export SIPP_BUILD=${SIPP_BUILD:-build}
export PYTHONUNBUFFERED=1
only=${SIPP_TEST_ONLY:-}
shards=${SIPP_TEST_SHARDS:-2}
logs=$SIPP_BUILD/test-logs
rm -rf "$logs" && mkdir -p "$logs"

# Whether a suite is part of this run.
wanted() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

# Every suite reports with count, one line per part; the closing line sums these lines of every log.
count() { # count SUITE PASSED FAILED
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

suite_format() {
  out=$(bash tests/format-check.sh 2>&1)
  p=$(sed -n 's/^format: \([0-9]*\) passed.*/\1/p' <<<"$out"); f=$(sed -n 's/^format: .* \([0-9]*\) failed$/\1/p' <<<"$out")
  p=${p:-0}; f=${f:-1}
  [ "$f" -eq 0 ] || grep -v '^format:' <<<"$out" | head -30
  count format "$p" "$f"
}

suite_lint() {
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
  # The layer rules (tests/lint/test_layers.py, test_gateway_layers.py): includes and calls through
  # sipp.h go down the layers only, no module cycle, each gateway and verify header its module's own.
  # And docs/gateway.md's key reference is what the key tables print (test_config_keys.py).
  out=$(python3 -m unittest tests.lint.test_layers tests.lint.test_gateway_layers tests.lint.test_config_keys 2>&1); rc=$?
  p=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' <<<"$out"); p=${p:-0}
  f=$(grep -oE '(failures|errors)=[0-9]+' <<<"$out" | awk -F= '{ n += $2 } END { print n + 0 }')
  [ $rc -eq 0 ] || [ "$f" -gt 0 ] || f=1
  [ "$f" -eq 0 ] || echo "$out" | tail -30
  count "lint layers" "$((p - f))" "$f"
}

suite_unit() {
  run_criterion "$SIPP_BUILD" unit
}

suite_asan() {
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
  asan_gateway "$asan_flags"
}

# The gateway under ASan and UBSan: sipp itself built in build-asan (with the debug checks), and the
# smoke test (every route), the gateway's main tests and the audio route's (its form parser faces the
# network) run against it. A server that a sanitizer stops fails its test; a report at exit (a leak
# when it shuts down) is looked for in the reports' directory, and fails the suite with its text.
ASAN_GATEWAY_TESTS=${SIPP_ASAN_GATEWAY_TESTS:-test_smoke.py,test_gateway.py,test_gateway_audio.py}
asan_gateway() { # asan_gateway FLAGS
  local reports=$logs/asan-gateway rc p f
  mkdir -p "$reports"
  if ! make --no-print-directory BUILD=build-asan CC=clang DEBUG=1 EXTRA_CFLAGS="$1" \
       LDFLAGS_EXTRA="-fsanitize=address,undefined" build-asan/bin/sipp build-asan/bin/sipp-synth >>build-asan.log 2>&1; then
    tail -30 build-asan.log; count "asan gateway build" 0 1; return
  fi
  SIPP_BUILD=build-asan ASAN_OPTIONS=detect_leaks=1:log_path=$reports/asan \
    UBSAN_OPTIONS=print_stacktrace=1:log_path=$reports/ubsan \
    python3 -m tests.support.runner --pattern "$ASAN_GATEWAY_TESTS" --report "$reports/report.json" \
    >"$reports/out.txt" 2>&1; rc=$?
  read -r p f < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["ran"]-r["failed"]-r["skipped"], r["failed"])' \
    "$reports/report.json" 2>/dev/null || echo "0 1")
  [ $rc -eq 0 ] || [ "$f" -gt 0 ] || f=1
  if compgen -G "$reports/[au]*san.*" >/dev/null; then
    f=$((f + 1)); head -60 "$reports"/[au]*san.*
  fi
  [ "$f" -eq 0 ] || tail -60 "$reports/out.txt"
  count "asan gateway" "$p" "$f"
}

suite_tsan() {
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
}

suite_toml() {
  if [ -x tests/toml-test.sh ]; then
    out=$(bash tests/toml-test.sh 2>&1); rc=$?
    line=$(grep -E '^toml-test: [0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -1)
    p=$(sed -n 's/^toml-test: \([0-9]*\) passed.*/\1/p' <<<"$line"); f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
    [ -n "$line" ] || { p=0; f=1; }
    [ $rc -eq 0 ] || [ "${f:-0}" -gt 0 ] || f=1
    [ "$f" -eq 0 ] || echo "$out" | tail -30
    count toml-test "$p" "$f"
  fi
}

suite_fuzz() {
  # Every parser's libFuzzer harness, briefly, from its seed corpus: a crash or sanitizer report fails.
  if [ "$(cat "$logs/fuzz-build.rc" 2>/dev/null)" = 0 ]; then # built before the streams (below)
    for f in "$SIPP_BUILD"/fuzz/fuzz_*; do
      name=$(basename "$f" | sed 's/^fuzz_//'); work="$SIPP_BUILD/fuzz/corpus-$name"; mkdir -p "$work"
      seeds=(); [ -d "tests/fuzz/corpus/$name" ] && seeds=("tests/fuzz/corpus/$name")
      if [ "$name" = gguf_header ]; then # seeds from the corrupted-model generator, not committed files
        python3 tests/integration/gguf_corrupt.py --fuzz-seeds "$SIPP_BUILD/fuzz/seeds-$name" 64 &&
          seeds+=("$SIPP_BUILD/fuzz/seeds-$name")
      fi
      # -timeout: an input that hangs fails the run with its bytes saved, instead of holding it for ever
      if "$f" -max_total_time="${SIPP_FUZZ_SECONDS:-30}" -max_len=4096 -timeout=60 "$work" "${seeds[@]}" \
        >"$work.log" 2>&1; then
        count "fuzz $name" 1 0
      else
        tail -30 "$work.log"; count "fuzz $name" 0 1
      fi
    done
  else
    tail -30 build-fuzz.log; count "fuzz build" 0 1
  fi
}

# One shard of the integration tests (tests/support/runner.py): its unittest output in its own log and
# its counts and test times in a JSON report that suite_integration merges.
integration_shard() { # integration_shard I N
  python3 -m tests.support.runner --pattern "${SIPP_TEST_PATTERN:-test_*.py}" --shard "$1/$2" \
    --times "$SIPP_BUILD/test-times.json" --report "$logs/integration-$1.json" >"$logs/integration-$1.out" 2>&1
  echo $? >"$logs/integration-$1.rc"
}

suite_integration() {
  local i pids=() reports=() rc=0 out ran bad skipped
  for ((i = 1; i <= shards; i++)); do
    integration_shard "$i" "$shards" & pids+=($!)
    reports+=("$logs/integration-$i.json")
  done
  for i in "${pids[@]}"; do wait "$i"; done
  for ((i = 1; i <= shards; i++)); do
    [ "$(cat "$logs/integration-$i.rc" 2>/dev/null)" = 0 ] && continue
    rc=1
    echo "-- integration shard $i of $shards:"
    grep -E '^(FAIL|ERROR):|^Traceback|Error' "$logs/integration-$i.out" | head -40
    tail -60 "$logs/integration-$i.out"
  done
  # the ten slowest tests and the counts; the files' seconds balance the next run's shards
  out=$(python3 -m tests.support.runner --merge "${reports[@]}" --times "$SIPP_BUILD/test-times.json" --slowest 10)
  grep -v '^integration: ran' <<<"$out" >"$logs/slowest.txt"
  ran=$(sed -n 's/^integration: ran \([0-9]*\),.*/\1/p' <<<"$out"); bad=$(sed -n 's/.*, failed \([0-9]*\),.*/\1/p' <<<"$out")
  skipped=$(sed -n 's/.*, skipped \([0-9]*\)$/\1/p' <<<"$out")
  ran=${ran:-0}; bad=${bad:-1}; skipped=${skipped:-0}
  [ $rc -eq 0 ] || [ "$bad" -gt 0 ] || bad=1
  count integration $((ran - bad - skipped)) "$bad"
}

# ---- the run -------------------------------------------------------------------------------------

# run_suites LOG NAME...: each wanted suite in turn, its output in $logs/NAME.log.
run_suites() {
  local n
  for n in "$@"; do
    wanted "$n" || continue
    echo "-- $n started $(date +%T)" >&2
    "suite_$n" >"$logs/$n.log" 2>&1
  done
}

t0=$(date +%s)
# The fuzz harnesses link build/lib and may relink libsipp.so: built here, before the streams, since
# a relink while the integration tests run it fails them ("libsipp.so: file too short").
if wanted fuzz; then
  make --no-print-directory fuzz-bins >build-fuzz.log 2>&1; echo $? >"$logs/fuzz-build.rc"
fi
# the sanitizer and fuzz stream (builds of their own trees, then runs) beside the rest
run_suites asan tsan toml fuzz & sanitizers=$!
run_suites format lint unit integration
wait "$sanitizers"

passed=0 failed=0 failures=()
for n in format lint unit asan tsan toml fuzz integration; do
  [ -f "$logs/$n.log" ] || continue
  cat "$logs/$n.log"
  while IFS='|' read -r label p f; do
    passed=$((passed + p)); failed=$((failed + f))
    [ "$f" -eq 0 ] || failures+=("$label")
  done < <(sed -nE 's/^== (.*): ([0-9]+) passed, ([0-9]+) failed$/\1|\2|\3/p' "$logs/$n.log")
done
[ -s "$logs/slowest.txt" ] && cat "$logs/slowest.txt"
echo "wall time: $(($(date +%s) - t0)) s (load average $(cut -d' ' -f1-3 /proc/loadavg))"
[ ${#failures[@]} -eq 0 ] || echo "failed suites: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
