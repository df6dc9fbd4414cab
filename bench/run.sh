#!/usr/bin/env bash
# bench/run.sh: sipp side by side with llama.cpp's own tools, built from the same pinned source, in
# one run, on the 1B-shaped synthetic model (n_embd 2048, 16 layers, 32 heads, 8 KV heads, n_ff 8192,
# Q4_0, llama-bpe vocab). Prints ratios; BENCHMARKS.md records them with this command.
#
#   bench/run.sh [decode|batched|prefill|gateway|curves|all]...      (default all)
#   BENCH_AB_SIPP=OTHER/build/bin/sipp bench/run.sh gateway-ab
#
# gateway-ab: this build's gateway against another build's (a checkout of an older commit, built
# there with make all), each on its own prebuilt artifact, in paired rounds: the gateway section's
# two load levels, new / old. Not part of all.
#
# curves: bench/curves.py's scaling curves (TTFT against prompt length, decode against streams, memory
# against ctx_size x parallel) for sipp on the peer's libraries and for llama-bench/llama-batched-bench,
# drawn by bench/plot.py into $BENCH_OUT/curves/ (BENCH_CURVES=--full for 8192-token prompts and
# 2048 tokens per slot; --quick for the tests' sizes).
#
# Fairness: sipp's `auto` (also when it falls back to the CPU) takes llama.cpp's flash attention default
# (auto), so the peers run at their default too (BENCH_PEER_FA=auto; -fa off is reported beside it
# for decode and prefill, the figure an explicit `--backend cpu` compares with). The peers are built from the bundle's source for this machine (deps/build-source.sh peer),
# and sipp runs twice: on those very libraries (so a ratio measures sipp's own overhead) and on its
# default prebuilt artifact (what users get). Runs alternate sipp / peer / sipp / peer so that drift
# on a shared machine hits both sides alike. Absolute numbers on a 2-core shared machine are noise;
# the ratios are the result.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${*:-all}
# wants SECTION: whether SECTION was asked for (several may be: bench/run.sh decode prefill gateway)
wants() { [[ " $what " == *" all "* || " $what " == *" $1 "* ]]; }
THREADS=${BENCH_THREADS:-2}
PEER_FA=${BENCH_PEER_FA:-auto} # the peers' flash attention where one setting is compared
ROUNDS=${BENCH_ROUNDS:-3}
REPS=${BENCH_REPS:-3} # repetitions inside one sipp bench / llama-bench run (their -r)
cache=${SIPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sipp}
out=${BENCH_OUT:-build/bench}
mkdir -p "$out" "$cache/models"

make --no-print-directory all >/dev/null
SIPP=build/bin/sipp
model="$cache/models/bench-1b-q4_0.gguf"
if [ ! -f "$model" ]; then
  echo "bench: writing the 1B-shaped synthetic model to $model" >&2
  build/bin/sipp-synth --out "$model" --vocab build/llama/vocab/ggml-vocab-llama-bpe.gguf --n-embd 2048 \
    --n-layer 16 --n-head 32 --n-head-kv 8 --n-ff 8192 --type q4_0 --seed 1 >/dev/null
fi

peer_targets="llama-bench llama-batched-bench"
wants gateway && peer_targets="$peer_targets llama-server"
peer=$(SIPP_PEER_TARGETS="$peer_targets" bash deps/build-source.sh peer)

# sipp on the peer's libraries: the same libllama/libggml files under the names sipp links against,
# and the same CPU modules (the peer is a GGML_BACKEND_DL build: ggml picks the module at run time).
same="$out/peer-libs"
mkdir -p "$same"
ln -sf "$peer/bin/libllama.so" "$same/libllama.v0.4.0.so"
ln -sf "$peer/bin/libggml.so" "$same/libggml.v0.4.0.so"
ln -sf "$peer/bin/libggml-base.so" "$same/libggml-base.so"
for m in "$peer"/bin/libggml-cpu-*.so; do ln -sf "$m" "$same/$(basename "$m")"; done
sipp_same() { LD_LIBRARY_PATH="$(realpath "$same"):$peer/bin" SIPP_ARTIFACT="$same" "$SIPP" "$@"; }
peer_run() { LD_LIBRARY_PATH="$peer/bin" "$@"; }
# The CPU module each side runs: sipp's doctor names it; the peer's ggml logs the one it loaded.
sipp_module() { "$@" doctor --json | python3 -c "import json,sys; print(json.load(sys.stdin)['cpu']['ggml_cpu_module'])"; }
peer_module=$(peer_run "$peer/bin/llama-bench" --list-devices 2>&1 |
  sed -n 's/.*loaded CPU backend from .*\(libggml-cpu-[a-z0-9_]*\.so\).*/\1/p' | head -1)

jq_num() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }
mean() { python3 -c "import sys,statistics as s; v=[float(x) for x in sys.argv[1:]]; print(f'{s.mean(v):.2f}')" "$@"; }
# paired A... -- B...: the median over rounds of A[i]/B[i]; a round's two runs share its machine state.
paired() { python3 -c "
import sys,statistics as s
a=sys.argv[1:]; i=a.index('--'); x=[float(v) for v in a[:i]]; y=[float(v) for v in a[i+1:]]
print(f'{s.median([p/q for p,q in zip(x,y)]):.3f}')" "$@"; }

report="$out/report.md"
: >"$report"
say() { echo "$*" | tee -a "$report"; }

say "# bench/run.sh $what, $(date -u +%Y-%m-%dT%H:%MZ), threads $THREADS, $ROUNDS rounds of -r $REPS, load average $(cut -d" " -f1-3 /proc/loadavg)"
say "model: 1B-shaped synthetic Q4_0 ($(du -h "$model" | cut -f1)), cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)$(grep -q amx_tile /proc/cpuinfo && echo ' (AMX)')"
say "CPU modules: sipp (prebuilt artifact) $(sipp_module "$SIPP"), sipp on the peer's libraries $(sipp_module sipp_same), peer ${peer_module:-unknown}"

# llama-bench -o json prints a list of tests; avg_ts is the mean tokens/s.
lb_ts() { jq_num "$1" "[t['avg_ts'] for t in d if t['n_$2'] > 0][0]"; }

# One llama-bench run: tg (or pp) tokens/s, with -fa FA: auto (llama-bench's default) is what sipp's
# auto does; off is what an explicit --backend cpu does.
lb_run() { # lb_run OUTFILE FA P N
  peer_run "$peer/bin/llama-bench" -m "$model" -t "$THREADS" -p "$3" -n "$4" -r "$REPS" -fa "$2" -o json >"$1" 2>/dev/null
}

bench_pair() { # bench_pair P N LABEL: one section of paired rounds
  local P=$1 N=$2 label=$3
  local s_same=() s_pre=() l_off=() l_auto=() sp_same=() sp_pre=() lp_off=() lp_auto=()
  for r in $(seq "$ROUNDS"); do
    sipp_same bench "$model" -p "$P" -n "$N" -r "$REPS" --concurrency 0 --threads "$THREADS" -o json >"$out/$label-sipp-same-$r.json"
    lb_run "$out/$label-llama-bench-off-$r.json" off "$P" "$N"
    "$SIPP" bench "$model" -p "$P" -n "$N" -r "$REPS" --concurrency 0 --threads "$THREADS" -o json >"$out/$label-sipp-prebuilt-$r.json"
    lb_run "$out/$label-llama-bench-auto-$r.json" auto "$P" "$N"
    if [ "$N" -gt 0 ]; then
      s_same+=("$(jq_num "$out/$label-sipp-same-$r.json" "d['tg']['mean']")")
      s_pre+=("$(jq_num "$out/$label-sipp-prebuilt-$r.json" "d['tg']['mean']")")
      l_off+=("$(lb_ts "$out/$label-llama-bench-off-$r.json" gen)")
      l_auto+=("$(lb_ts "$out/$label-llama-bench-auto-$r.json" gen)")
    fi
    if [ "$P" -gt 0 ]; then
      sp_same+=("$(jq_num "$out/$label-sipp-same-$r.json" "d['pp']['mean']")")
      sp_pre+=("$(jq_num "$out/$label-sipp-prebuilt-$r.json" "d['pp']['mean']")")
      lp_off+=("$(lb_ts "$out/$label-llama-bench-off-$r.json" prompt)")
      lp_auto+=("$(lb_ts "$out/$label-llama-bench-auto-$r.json" prompt)")
    fi
  done
  if [ "$N" -gt 0 ]; then
    say ""
    say "## decode: tg$N tokens/s (sipp bench vs llama-bench), $ROUNDS paired rounds"
    say "| | tokens/s (mean) | sipp / llama-bench -fa off (median of rounds) | sipp / llama-bench default (-fa auto) |"
    say "|---|---|---|---|"
    say "| llama-bench -fa off (source build) | $(mean "${l_off[@]}") | | |"
    say "| llama-bench -fa auto (source build) | $(mean "${l_auto[@]}") | | |"
    say "| sipp, same libraries | $(mean "${s_same[@]}") | $(paired "${s_same[@]}" -- "${l_off[@]}") | $(paired "${s_same[@]}" -- "${l_auto[@]}") |"
    say "| sipp, prebuilt artifact | $(mean "${s_pre[@]}") | $(paired "${s_pre[@]}" -- "${l_off[@]}") | $(paired "${s_pre[@]}" -- "${l_auto[@]}") |"
  fi
  if [ "$P" -gt 0 ]; then
    say ""
    say "## prefill: pp$P tokens/s, $ROUNDS paired rounds"
    say "| | tokens/s (mean) | sipp / llama-bench -fa off | sipp / llama-bench -fa auto |"
    say "|---|---|---|---|"
    say "| llama-bench -fa off (source build) | $(mean "${lp_off[@]}") | | |"
    say "| llama-bench -fa auto (source build) | $(mean "${lp_auto[@]}") | | |"
    say "| sipp, same libraries | $(mean "${sp_same[@]}") | $(paired "${sp_same[@]}" -- "${lp_off[@]}") | $(paired "${sp_same[@]}" -- "${lp_auto[@]}") |"
    say "| sipp, prebuilt artifact | $(mean "${sp_pre[@]}") | $(paired "${sp_pre[@]}" -- "${lp_off[@]}") | $(paired "${sp_pre[@]}" -- "${lp_auto[@]}") |"
  fi
}

# decode: issue 2's figure, tg64 after a one-token prompt. prefill: pp512, llama-bench's default prompt
# (BENCH_PREFILL_TG=128 adds llama-bench's default tg128 to the same runs).
if wants decode; then bench_pair 0 64 decode; fi
if wants prefill; then bench_pair 512 "${BENCH_PREFILL_TG:-0}" prefill; fi

if wants batched; then
  PL=16 TG=32
  a1=() a4=() b1=() b4=()
  for r in $(seq "$ROUNDS"); do
    sipp_same bench "$model" -p $PL -n $TG -r 1 --concurrency 1,4 --threads "$THREADS" -o json >"$out/sipp-batched-$r.json"
    peer_run "$peer/bin/llama-batched-bench" -m "$model" -c 2048 -b 512 -ub 512 -npp $PL -ntg $TG -npl 1,4 \
      -t "$THREADS" -fa "$PEER_FA" --output-format jsonl >"$out/batched-bench-$r.jsonl" 2>/dev/null
    a1+=("$(jq_num "$out/sipp-batched-$r.json" "d['levels'][0]['aggregate_tokens_per_s']")")
    a4+=("$(jq_num "$out/sipp-batched-$r.json" "d['levels'][1]['aggregate_tokens_per_s']")")
    # pl x tg / t: generated tokens over the whole time of that row, as sipp's aggregate is defined.
    read -r v1 v4 < <(python3 -c "
import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith('{')]
get=lambda pl:[r for r in rows if r['pl']==pl][0]
print(*[f\"{get(pl)['pl']*get(pl)['tg']/get(pl)['t']:.3f}\" for pl in (1,4)])" "$out/batched-bench-$r.jsonl")
    b1+=("$v1"); b4+=("$v4")
  done
  say ""
  say "## concurrency: aggregate generated tokens/s, $PL-token prompts, $TG generated (sipp bench vs llama-batched-bench -fa $PEER_FA)"
  say "| sequences | llama-batched-bench (pl x tg / t) | sipp (same libraries) | ratio |"
  say "|---|---|---|---|"
  say "| 1 | $(mean "${b1[@]}") | $(mean "${a1[@]}") | $(paired "${a1[@]}" -- "${b1[@]}") |"
  say "| 4 | $(mean "${b4[@]}") | $(mean "${a4[@]}") | $(paired "${a4[@]}" -- "${b4[@]}") |"
fi
free_port() { python3 -c 'from tests.support.ports import free_port; print(free_port())'; }
wait_http() { # wait_http URL: a bounded wait for a 200
  python3 - "$1" <<'PY'
import sys, time, urllib.request
for _ in range(600):
    try:
        if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200: sys.exit(0)
    except Exception: pass
    time.sleep(0.5)
sys.exit(1)
PY
}
# The load's prompts: "... began when (S)", one suffix per request. llama-server ends some of this
# random-weight model's streams with a 500 ("does not match the expected Content-only format", its
# chat-output parser choking on random text) and so generates less; these suffixes are ones it
# completes. load.py counts an error event or a short stream as an error, never as tokens, so a
# server that fails shows up in the report's error column instead of in its speed. Flash attention
# changes the numerics and so the text: each setting has its own sets (found by sending suffixes
# 0-47 one by one to llama-server at that setting and keeping those it completed).
if [ "$PEER_FA" = off ]; then
  C1_SUFFIXES=0,3,7,8,9,10,11            # warm-up + 6 requests
  C4_SUFFIXES=12,14,15,17,20,21,22,24,25 # warm-up + 4 clients x 2 requests
else
  C1_SUFFIXES=0,2,3,4,12,13,15
  C4_SUFFIXES=21,22,23,27,28,31,32,33,37
fi
# serve_and_load NAME PORT CMD...: starts a server, runs the two load levels, stops it by its pid.
serve_and_load() {
  local name=$1 port=$2; shift 2
  "$@" >"$out/$name-server.log" 2>&1 &
  local pid=$!
  local ready=/health; [ "$name" != llama-server ] && ready=/ready
  wait_http "http://127.0.0.1:$port$ready" || { kill "$pid"; echo "bench: $name did not come up" >&2; return 1; }
  python3 bench/load.py "http://127.0.0.1:$port" bench --clients 1 --requests 6 --max-tokens 64 \
    --suffixes "$C1_SUFFIXES" >"$out/$name-c1-$r.json"
  python3 bench/load.py "http://127.0.0.1:$port" bench --clients 4 --requests 2 --max-tokens 64 \
    --suffixes "$C4_SUFFIXES" >"$out/$name-c4-$r.json"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
}
sipp_serve() { # sipp_serve NAME [ENV...]: sipp serve with the bench target, under the given environment
  local name=$1; shift
  sipp_serve_with "$name" "$SIPP" "$@"
}
sipp_serve_with() { # sipp_serve_with NAME SIPP-BINARY [ENV...]
  local name=$1 bin=$2; shift 2
  local p; p=$(free_port)
  printf '[server]\nlisten = "127.0.0.1:%s"\n[[targets]]\nname = "bench"\ntype = "local"\nmodel = "%s"\nparallel = 4\nctx_size = 2048\nthreads = %s\n' \
    "$p" "$model" "$THREADS" >"$out/$name.toml"
  serve_and_load "$name" "$p" env "$@" "$bin" serve --config "$out/$name.toml"
}

# collect_load NAME ROUND: the two load levels' figures of one server in one round, appended to the
# caller's c1 c4 t1 t4 (tokens/s and TTFT at 1 and 4 clients) and errs.
collect_load() {
  local n=$1 r=$2
  c1[$n]+=" $(jq_num "$out/$n-c1-$r.json" "d['aggregate_tokens_per_s']")"
  c4[$n]+=" $(jq_num "$out/$n-c4-$r.json" "d['aggregate_tokens_per_s']")"
  t1[$n]+=" $(jq_num "$out/$n-c1-$r.json" "d['ttft_ms_p50']")"
  t4[$n]+=" $(jq_num "$out/$n-c4-$r.json" "d['ttft_ms_p50']")"
  errs[$n]=$(( ${errs[$n]:-0} + $(jq_num "$out/$n-c1-$r.json" "d['n_errors']") + $(jq_num "$out/$n-c4-$r.json" "d['n_errors']") ))
}
if wants gateway; then
  names="sipp-same sipp-prebuilt llama-server"
  declare -A c1 c4 t1 t4 errs
  g4=() lb=()
  for r in $(seq "$ROUNDS"); do
    sipp_serve sipp-same LD_LIBRARY_PATH="$(realpath "$same"):$peer/bin" SIPP_ARTIFACT="$same"
    p=$(free_port)
    serve_and_load llama-server "$p" env LD_LIBRARY_PATH="$peer/bin" "$peer/bin/llama-server" -m "$model" --host 127.0.0.1 \
      --port "$p" -t "$THREADS" -np 4 -c 2048 -fa "$PEER_FA" --no-webui -a bench
    sipp_serve sipp-prebuilt
    peer_run "$peer/bin/llama-batched-bench" -m "$model" -c 2048 -b 512 -ub 512 -npp 16 -ntg 64 -npl 4 -t "$THREADS" \
      -fa "$PEER_FA" --output-format jsonl >"$out/batched-bench-g-$r.jsonl" 2>/dev/null
    lb_run "$out/gateway-llama-bench-$r.json" "$PEER_FA" 0 64
    for n in $names; do collect_load "$n" "$r"; done
    g4+=("$(python3 -c "import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')][0]['speed_tg'])" "$out/batched-bench-g-$r.jsonl")")
    lb+=("$(lb_ts "$out/gateway-llama-bench-$r.json" gen)")
  done
  # shellcheck disable=SC2086 # the lists are space-separated numbers
  row() { # row LABEL NAME
    say "| $1 | $(mean ${c1[$2]}) | $(paired ${c1[$2]} -- ${c1[llama-server]}) | $(mean ${t1[$2]}) | $(mean ${c4[$2]}) | $(paired ${c4[$2]} -- ${c4[llama-server]}) | $(paired ${c4[$2]} -- "${g4[@]}") | $(mean ${t4[$2]}) | ${errs[$2]} |"
  }
  say ""
  say "## gateway: streaming /v1/completions, 64 tokens, ignore_eos, 4 slots, $ROUNDS paired rounds"
  say "| server | 1 client tokens/s | / llama-server | TTFT p50 ms | 4 clients tokens/s | / llama-server | / batched-bench S_TG | TTFT p50 ms | failed requests |"
  say "|---|---|---|---|---|---|---|---|---|"
  row "llama-server -fa $PEER_FA" llama-server
  row "sipp serve, same libraries" sipp-same
  row "sipp serve, prebuilt artifact" sipp-prebuilt
  say ""
  say "Kernel ceilings in the same rounds: llama-bench tg64 -fa $PEER_FA $(mean "${lb[@]}") tokens/s (one stream);"
  say "llama-batched-bench S_TG at 4 sequences (16+64) $(mean "${g4[@]}") tokens/s."
  say "1 client against llama-bench tg64: llama-server $(paired ${c1[llama-server]} -- "${lb[@]}"), sipp same libraries $(paired ${c1[sipp-same]} -- "${lb[@]}"), prebuilt $(paired ${c1[sipp-prebuilt]} -- "${lb[@]}")."
fi
if [[ " $what " == *" gateway-ab "* ]]; then
  old=${BENCH_AB_SIPP:?gateway-ab compares with another build: BENCH_AB_SIPP=PATH/build/bin/sipp}
  declare -A c1 c4 t1 t4 errs
  for r in $(seq "$ROUNDS"); do
    if (( r % 2 )); then # each build goes first in every other round, so the order cancels too
      sipp_serve_with sipp-old "$old"
      sipp_serve_with sipp-new "$SIPP"
    else
      sipp_serve_with sipp-new "$SIPP"
      sipp_serve_with sipp-old "$old"
    fi
    for n in sipp-old sipp-new; do collect_load "$n" "$r"; done
  done
  say ""
  rev() { git -C "$(dirname "$1")/../.." log -1 --format=%h 2>/dev/null || echo "?"; }
  say "## gateway-ab: this build ($(rev "$SIPP")) against $old ($(rev "$old")), $ROUNDS paired rounds"
  say "| build | 1 client tokens/s | TTFT p50 ms | 4 clients tokens/s | TTFT p50 ms | failed requests |"
  say "|---|---|---|---|---|---|"
  # shellcheck disable=SC2086 # the lists are space-separated numbers
  for n in sipp-old sipp-new; do
    say "| $n | $(mean ${c1[$n]}) | $(mean ${t1[$n]}) | $(mean ${c4[$n]}) | $(mean ${t4[$n]}) | ${errs[$n]} |"
  done
  # shellcheck disable=SC2086
  say "new / old, median of per-round ratios: 1 client $(paired ${c1[sipp-new]} -- ${c1[sipp-old]}), 4 clients $(paired ${c4[sipp-new]} -- ${c4[sipp-old]}); TTFT 1 client $(paired ${t1[sipp-new]} -- ${t1[sipp-old]}), 4 clients $(paired ${t4[sipp-new]} -- ${t4[sipp-old]})"
fi
if wants curves; then
  # shellcheck disable=SC2086 # BENCH_CURVES is a list of flags
  python3 bench/curves.py --sipp "$SIPP" --model "$model" --peer-bin "$peer/bin" --sipp-lib "$same" \
    --threads "$THREADS" --rounds "$ROUNDS" --peer-fa "$PEER_FA" ${BENCH_CURVES:-} --out "$out/curves"
  python3 bench/plot.py "$out/curves/curves.json" "$out/curves"
  say ""
  say "## curves: $out/curves/curves.json (.csv), figures $out/curves/{ttft,decode,memory}.svg"
fi
echo "bench: report in $report, raw results in $out" >&2
