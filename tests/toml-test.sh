#!/usr/bin/env bash
# Runs the TOML 1.0 cases of the toml-test corpus against the toml_decode tool.
#
#   valid/X.toml    must decode, and match valid/X.json semantically (toml_decode --expect)
#   invalid/X.toml  must be rejected: exit status 1 with a message (a crash or sanitizer report is not a
#                   rejection)
#
# Prints "toml-test: N passed, M failed" and exits non-zero if anything failed.
#
# Environment:
#   TOML_TEST_DIR  the toml-test checkout (holding tests/files-toml-1.0.0); default the TOML 1.0 cases
#                  vendored in tests/data/toml-test (see its SOURCE)
#   TOML_DECODE    the decoder to run; default $SIPP_BUILD/tests/toml_decode (SIPP_BUILD, else BUILD, else
#                  build) when it is newer than its sources, else one compiled into a temporary directory
#   VERBOSE=1      also print each failure's decoder output
set -u

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data=${TOML_TEST_DIR:-$root/tests/data/toml-test}
list=$data/tests/files-toml-1.0.0
if [[ ! -f $list ]]; then
    echo "toml-test: corpus not found: $list (set TOML_TEST_DIR)" >&2
    exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

decoder=${TOML_DECODE:-}
if [[ -z $decoder ]]; then
    decoder=$root/${SIPP_BUILD:-${BUILD:-build}}/tests/toml_decode
    # a stale build would test yesterday's parser, so rebuild privately rather than trust it
    if [[ ! -x $decoder || $decoder -ot $root/src/util/toml.c ||
        $decoder -ot $root/tests/tools/toml_decode.c ]]; then
        decoder=$tmp/toml_decode
        ${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -g -I"$root/src" -o "$decoder" \
            "$root/tests/tools/toml_decode.c" "$root/src/util/toml.c" -ljansson -lm || exit 2
    fi
fi

passed=0
failed=0
failures=()
while IFS= read -r case || [[ -n $case ]]; do
    [[ $case == *.toml ]] || continue
    input=$data/tests/$case
    case $case in
    valid/*)
        "$decoder" --expect "$data/tests/${case%.toml}.json" <"$input" >"$tmp/out" 2>&1
        rc=$?
        ok=$((rc == 0))
        ;;
    invalid/*)
        "$decoder" <"$input" >"$tmp/out" 2>&1
        rc=$?
        ok=$((rc == 1))
        ;;
    *) continue ;;
    esac
    if ((ok)); then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures+=("$case (exit $rc)")
        if [[ ${VERBOSE:-0} == 1 ]]; then
            echo "--- $case (exit $rc)"
            head -c 2000 "$tmp/out"
        fi
    fi
done <"$list"

for f in "${failures[@]+"${failures[@]}"}"; do
    echo "FAIL $f"
done
echo "toml-test: $passed passed, $failed failed"
((failed == 0))
