#!/usr/bin/env bash
# bench/spec.sh: speculative decoding by prompt lookup (--spec ngram) against plain decoding, on the
# 1B-shaped synthetic model (bench/run.sh writes it), in paired rounds: each round runs the same greedy
# request without and with speculation back to back, and the ratio reported is the median over rounds
# of the per-round ratio of decode tokens/s. The acceptance rate is the model's: a random-weight model
# falls into loops after some tokens, which prompt lookup predicts; how soon depends on the prompt, so
# each prompt is one point of throughput against acceptance.
#
#   bench/spec.sh            BENCH_ROUNDS (default 3), BENCH_THREADS (2), BENCH_TOKENS (128), BENCH_MODEL
#
# On a shared 2-core machine absolute tokens/s are noise; the paired ratios are the result.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${BENCH_THREADS:-2}
ROUNDS=${BENCH_ROUNDS:-3}
TOKENS=${BENCH_TOKENS:-128}
cache=${SIPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sipp}
model=${BENCH_MODEL:-$cache/models/bench-1b-q4_0.gguf} # another model: BENCH_MODEL=PATH
[ -f "$model" ] || { echo "bench/spec.sh: no $model; run bench/run.sh decode once to write it" >&2; exit 1; }
SIPP=build/bin/sipp
PROMPTS=("Hello" "def add(a, b): return a + b
def sub(a, b): return a - b
def add(a, b):" "one two three one two three one two three one two")

one() { # one SPEC PROMPT: prints "decode_tokens_per_s draft accepted"
  "$SIPP" "$model" "$2" --max-tokens "$TOKENS" --temperature 0 --ignore-eos --threads "$THREADS" --spec "$1" \
    --stats json 2>&1 >/dev/null | tail -1 |
    python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(d['decode_tokens_per_s'], d['draft_tokens'], d['accepted_tokens'])"
}

echo "# bench/spec.sh, $(date -u +%Y-%m-%dT%H:%MZ), $(basename "$model"), threads $THREADS, $ROUNDS rounds, $TOKENS tokens, greedy"
echo "| prompt | plain tokens/s | ngram tokens/s | drafted / accepted (last round) | acceptance | ngram / plain (median of rounds) |"
echo "|---|---|---|---|---|---|"
for i in "${!PROMPTS[@]}"; do
  p=${PROMPTS[$i]}
  plain=() spec=() d=0 a=0
  for _ in $(seq "$ROUNDS"); do
    read -r t _ _ < <(one none "$p")
    plain+=("$t")
    read -r t d a < <(one ngram "$p")
    spec+=("$t")
  done
  python3 - "$i" "$d" "$a" "${plain[@]}" -- "${spec[@]}" <<'PY'
import statistics as s, sys
i, d, a = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rest = sys.argv[4:]; k = rest.index('--')
x = [float(v) for v in rest[:k]]; y = [float(v) for v in rest[k + 1:]]
acc = f"{a / d:.0%}" if d else "-"
print(f"| {i} | {s.mean(x):.2f} | {s.mean(y):.2f} | {d} / {a} | {acc} | {s.median(q / p for p, q in zip(x, y)):.3f} |")
PY
done
