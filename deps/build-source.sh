#!/usr/bin/env bash
# deps/build-source.sh lib|peer|peer-rpc: build the pinned llama.cpp commit from the bundle's checkout.
#
#   lib   the shared libraries only (GGML_BACKEND_DL=ON, every CPU variant, no server, no examples):
#         what `make LLAMA_FROM_SOURCE=1` puts in an artifact, for hosts the prebuilt set misses.
#   peer  llama-bench, llama-batched-bench and llama-server with their libraries, the peers that
#         bench/ measures sipp against, built from the very same source with the CPU module set of
#         llama.cpp's release binaries and of the prebuilt artifact (GGML_BACKEND_DL, every CPU
#         variant, GGML_NATIVE off): ggml loads the best module this CPU supports at run time, as it
#         does for sipp. bench/ runs sipp on these same libraries and modules, so a ratio measures
#         sipp's own overhead and nothing of compiler flags. (A GGML_NATIVE build compiled the AMX
#         kernels from the build's -march=native and died of SIGILL on its first decode on a Xeon
#         with AMX under a hypervisor; the release modules' sapphirerapids variant runs there.)
#   peer-rpc  the same as peer with GGML_RPC=ON: llama.cpp's own rpc-server and llama-bench (--rpc), the
#         peers bench/rpc_split.sh measures sipp's split across hosts against.
#
# Builds live in the cache ($SIPP_CACHE_DIR, default ~/.cache/sipp), never in the work tree, and are
# reused while their flags are unchanged. Prints the build directory. About 7-15 minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/llama.lock"
die() { echo "sipp deps: $*" >&2; exit 1; }

kind=${1:-lib}
cache=${SIPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sipp}
src="$cache/llama.cpp-$LLAMA_COMMIT"
[ -f "$src/.sipp-ok" ] || die "no checkout at $src; run deps/fetch.sh first (make does)"
command -v cmake >/dev/null || die "cmake is needed for a source build: apt-get install -y cmake ninja-build"
command -v ninja >/dev/null || die "ninja is needed for a source build: apt-get install -y ninja-build"

flags=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DLLAMA_CURL=OFF
       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF
       -DLLAMA_BUILD_HTML=OFF)
case "$kind" in
  lib)  flags+=(-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DGGML_NATIVE=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF
                -DLLAMA_BUILD_COMMON=ON)
        targets=(llama ggml llama-common) ;;
  peer) flags+=(-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DGGML_NATIVE=OFF -DLLAMA_BUILD_TOOLS=ON
                -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_COMMON=ON)
        targets=(llama ggml llama-bench llama-batched-bench llama-server) ;;
  peer-rpc) flags+=(-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DGGML_NATIVE=OFF -DGGML_RPC=ON
                -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_COMMON=ON)
        targets=(llama ggml llama-bench ggml-rpc-server) ;;
  *) die "usage: deps/build-source.sh lib|peer|peer-rpc" ;;
esac

build="$cache/build-$LLAMA_COMMIT-$kind"
want="${flags[*]}"
# Targets can be narrowed (SIPP_PEER_TARGETS="llama-bench") to build only what a benchmark needs.
[ -n "${SIPP_PEER_TARGETS:-}" ] && [ "$kind" = peer ] && read -r -a targets <<<"llama ggml $SIPP_PEER_TARGETS"
stamp="$build/.sipp-ok-$(printf '%s' "${targets[*]}" | tr ' ' '_')"
if [ ! -f "$build/sipp-flags" ] || [ "$(cat "$build/sipp-flags")" != "$want" ] || [ ! -f "$stamp" ]; then
  # A build with other flags is started over; an interrupted one resumes where ninja stopped.
  if [ ! -f "$build/sipp-flags" ] || [ "$(cat "$build/sipp-flags")" != "$want" ]; then
    rm -rf "$build"
    cmake -S "$src" -B "$build" -G Ninja "${flags[@]}" >"$build.configure.log" 2>&1 ||
      die "cmake configure failed; see $build.configure.log"
    printf '%s' "$want" >"$build/sipp-flags"
  fi
  echo "sipp deps: building llama.cpp $LLAMA_RELEASE ($kind: ${targets[*]}) from source in $build" >&2
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$build.build.log" 2>&1 ||
    die "build failed; see $build.build.log"
  touch "$stamp"
fi
echo "$build"
