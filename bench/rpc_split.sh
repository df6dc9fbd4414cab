#!/usr/bin/env bash
# bench/rpc_split.sh: a model split across two hosts with ggml's RPC backend, sipp against llama.cpp's
# own tools on the same split. Prints ratios; BENCHMARKS.md records them with this command.
#
#   bench/rpc_split.sh            (root: two network namespaces joined by a veth pair)
#
# The 1B-shaped synthetic model (as bench/run.sh) is split half and half: layers 0-7 on the client's
# CPU, layers 8-15 and the output on an rpc server in the other namespace. The two sides:
#   llama.cpp   ggml-rpc-server + llama-bench --rpc -ngl 9 -fa off (the last 8 layers + output remote)
#   sipp        sipp rpc-server + sipp bench --backend rpc --tensor-split 1,1 (the same 8 + output)
# Both built from the pinned source (deps/build-source.sh peer-rpc: GGML_RPC=ON, this machine's CPU
# backend) and sipp runs on those very libraries, so a ratio measures sipp's own overhead; sipp on its
# default prebuilt artifact (with the rpc module it builds) is reported too. Flash attention is off on
# both sides (sipp's rpc policy). Rounds alternate sipp / llama.cpp; the ratio is the median of the
# per-round ratios. Namespaces get names with this shell's pid and are deleted on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${BENCH_THREADS:-1}
ROUNDS=${BENCH_ROUNDS:-3}
PP=${BENCH_PP:-128}
TG=${BENCH_TG:-32}
REPS=${BENCH_REPS:-3}
PORT=50061
cache=${SIPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sipp}
out=${BENCH_OUT:-build/bench/rpc}
mkdir -p "$out" "$cache/models"
[ "$(id -u)" -eq 0 ] || { echo "bench/rpc_split.sh: needs root for network namespaces" >&2; exit 1; }

make --no-print-directory all >/dev/null
SIPP=$(realpath build/bin/sipp)
model="$cache/models/bench-1b-q4_0.gguf"
if [ ! -f "$model" ]; then
  echo "bench: writing the 1B-shaped synthetic model to $model" >&2
  build/bin/sipp-synth --out "$model" --vocab build/llama/vocab/ggml-vocab-llama-bpe.gguf --n-embd 2048 \
    --n-layer 16 --n-head 32 --n-head-kv 8 --n-ff 8192 --type q4_0 --seed 1 >/dev/null
fi
peer=$(bash deps/build-source.sh peer-rpc)

# sipp on the peer's libraries (RPC compiled into its libggml), under the names sipp links against.
same="$out/peer-libs"
mkdir -p "$same"
ln -sf "$peer/bin/libllama.so" "$same/libllama.v0.4.0.so"
ln -sf "$peer/bin/libggml.so" "$same/libggml.v0.4.0.so"
ln -sf "$peer/bin/libggml-base.so" "$same/libggml-base.so"
same_env=(env "LD_LIBRARY_PATH=$(realpath "$same"):$peer/bin" "SIPP_ARTIFACT=$(realpath "$same")")
peer_env=(env "LD_LIBRARY_PATH=$peer/bin")

client="sippbench$$c" server="sippbench$$s"
cleanup() {
  [ -n "${srv_pid:-}" ] && kill "$srv_pid" 2>/dev/null && wait "$srv_pid" 2>/dev/null
  ip netns delete "$client" 2>/dev/null || true
  ip netns delete "$server" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$client"
ip netns add "$server"
ip link add "sb$$c" type veth peer name "sb$$s"
ip link set "sb$$c" netns "$client"
ip link set "sb$$s" netns "$server"
ip -n "$client" addr add 10.79.1.1/24 dev "sb$$c"
ip -n "$server" addr add 10.79.1.2/24 dev "sb$$s"
for ns in "$client" "$server"; do ip -n "$ns" link set lo up; done
ip -n "$client" link set "sb$$c" up
ip -n "$server" link set "sb$$s" up
endpoint="10.79.1.2:$PORT"

port_open() { ip netns exec "$client" bash -c "exec 3<>/dev/tcp/10.79.1.2/$PORT" 2>/dev/null; }
start_server() { # start_server sipp|peer|prebuilt: each runs as the very process $! names (ip netns exec execs)
  local log="$out/server-$1.log"
  case "$1" in
    sipp) ip netns exec "$server" "${same_env[@]}" "$SIPP" rpc-server --host 10.79.1.2 --port $PORT --threads "$THREADS" >"$log" 2>&1 & ;;
    prebuilt) ip netns exec "$server" "$SIPP" rpc-server --host 10.79.1.2 --port $PORT --threads "$THREADS" >"$log" 2>&1 & ;;
    peer) ip netns exec "$server" "${peer_env[@]}" "$peer/bin/ggml-rpc-server" -H 10.79.1.2 -p $PORT -t "$THREADS" >"$log" 2>&1 & ;;
  esac
  srv_pid=$!
  for _ in $(seq 300); do
    kill -0 "$srv_pid" 2>/dev/null || break
    port_open && return 0
    sleep 0.1
  done
  echo "bench: the $1 rpc server did not start; see $log" >&2
  exit 1
}
stop_server() {
  kill "$srv_pid" 2>/dev/null; wait "$srv_pid" 2>/dev/null || true; srv_pid=
  for _ in $(seq 100); do port_open || return 0; sleep 0.1; done
  echo "bench: port $PORT still open after the server stopped" >&2; exit 1
}

jq_num() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }
mean() { python3 -c "import sys,statistics as s; v=[float(x) for x in sys.argv[1:]]; print(f'{s.mean(v):.2f}')" "$@"; }
paired() { python3 -c "
import sys,statistics as s
a=sys.argv[1:]; i=a.index('--'); x=[float(v) for v in a[:i]]; y=[float(v) for v in a[i+1:]]
print(f'{s.median([p/q for p,q in zip(x,y)]):.3f}')" "$@"; }

sipp_bench() { # sipp_bench same|prebuilt OUT
  local envs=()
  [ "$1" = same ] && envs=("${same_env[@]}")
  ip netns exec "$client" ${envs[@]+"${envs[@]}"} "$SIPP" bench "$model" -p "$PP" -n "$TG" -r "$REPS" --threads "$THREADS" \
    --backend rpc --rpc "$endpoint" --tensor-split 1,1 -o json >"$2"
}
peer_bench() { # peer_bench OUT
  ip netns exec "$client" "${peer_env[@]}" "$peer/bin/llama-bench" -m "$model" --rpc "$endpoint" -ngl 9 -fa off \
    -t "$THREADS" -p "$PP" -n "$TG" -r "$REPS" -o json >"$1" 2>"$1.log"
}
lb_ts() { jq_num "$1" "[t['avg_ts'] for t in d if t['n_$2'] > 0][0]"; }

s_tg=() s_pp=() p_tg=() p_pp=() b_tg=() b_pp=()
placement=
for r in $(seq "$ROUNDS"); do
  start_server sipp; sipp_bench same "$out/sipp-same-$r.json"
  # Where the layers went, as sipp reports it (once, while a server runs).
  [ -n "$placement" ] || placement=$(ip netns exec "$client" "${same_env[@]}" "$SIPP" "$model" x --backend rpc \
    --rpc "$endpoint" --tensor-split 1,1 --max-tokens 1 --threads "$THREADS" --stats text 2>&1 >/dev/null | grep ' on ')
  stop_server
  start_server peer; peer_bench "$out/llama-bench-$r.json"; stop_server
  start_server prebuilt; sipp_bench prebuilt "$out/sipp-prebuilt-$r.json"; stop_server
  s_tg+=("$(jq_num "$out/sipp-same-$r.json" "d['tg']['mean']")"); s_pp+=("$(jq_num "$out/sipp-same-$r.json" "d['pp']['mean']")")
  b_tg+=("$(jq_num "$out/sipp-prebuilt-$r.json" "d['tg']['mean']")"); b_pp+=("$(jq_num "$out/sipp-prebuilt-$r.json" "d['pp']['mean']")")
  p_tg+=("$(lb_ts "$out/llama-bench-$r.json" gen)"); p_pp+=("$(lb_ts "$out/llama-bench-$r.json" prompt)")
done

report="$out/report.md"
{
  echo "# bench/rpc_split.sh, $(date -u +%Y-%m-%dT%H:%MZ), threads $THREADS per side, $ROUNDS rounds, -r $REPS"
  echo "model: 1B-shaped synthetic Q4_0, split local CPU (layers 0-7) + rpc server in a second namespace"
  echo '```'; echo "$placement"; echo '```'
  echo "| | pp$PP tokens/s | tg$TG tokens/s | pp ratio | tg ratio |"
  echo "|---|---|---|---|---|"
  echo "| llama-bench --rpc + ggml-rpc-server (source build) | $(mean "${p_pp[@]}") | $(mean "${p_tg[@]}") | | |"
  echo "| sipp bench --backend rpc + sipp rpc-server, same libraries | $(mean "${s_pp[@]}") | $(mean "${s_tg[@]}") | $(paired "${s_pp[@]}" -- "${p_pp[@]}") | $(paired "${s_tg[@]}" -- "${p_tg[@]}") |"
  echo "| the same, sipp's prebuilt artifact + its rpc module | $(mean "${b_pp[@]}") | $(mean "${b_tg[@]}") | $(paired "${b_pp[@]}" -- "${p_pp[@]}") | $(paired "${b_tg[@]}" -- "${p_tg[@]}") |"
} | tee "$report"
