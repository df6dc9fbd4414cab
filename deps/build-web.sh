#!/usr/bin/env bash
# deps/build-web.sh mt|st: the pinned llama.cpp's CPU path compiled to WebAssembly with emscripten.
#
#   mt  pthreads (-pthread): for cross-origin-isolated pages, where SharedArrayBuffer exists
#   st  single thread: for any page
#
# Only the static libraries (libllama.a, libggml*.a) are built; the Makefile's `web` target compiles
# libsipp's engine sources with the same emcc and links them, so sipp's own sources are rebuilt in
# seconds while llama.cpp (about 5 minutes on one core) is built once per key. The key is the
# llama.cpp commit, the emcc version and the variant's flags; the build lives in the cache
# ($SIPP_CACHE_DIR, default ~/.cache/sipp), never in the work tree. Prints the build directory.
# With --if-cached as a second argument it builds nothing: it prints the directory and exits 0 when
# the cache holds a finished build for this key, and exits 1 when it does not (make check links the
# browser runtime only then, so that it stays fast on a machine that never built it).
#
# emscripten 3.1.6's toolchain file reports CMAKE_SYSTEM_PROCESSOR x86 unless told otherwise, which would make ggml fall
# back to its generic (non-SIMD) kernels; wasm32 is set so that ggml-cpu/arch/wasm is compiled.
# 64-bit memory (LLAMA_WASM_MEM64, llama.cpp's default) is off: browsers and this emcc run wasm32.
# WebGPU is not built: ggml-webgpu needs Emscripten >= 4.0.10 with the emdawnwebgpu port.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/llama.lock"
die() { echo "sipp deps: $*" >&2; exit 1; }

variant=${1:-}
if_cached=false
[ "${2:-}" = "--if-cached" ] && if_cached=true
# llama.cpp throws and catches C++ exceptions (its loader, chat template detection): they need
# exception handling, which Emscripten leaves off by default. The single-thread build uses
# WebAssembly's own (-fwasm-exceptions). The pthread build uses Emscripten's JavaScript-based
# exceptions: with 3.1.6, wasm exceptions in a pthread build lose the type of what was thrown, so
# `catch (const std::out_of_range &)` misses and the exception escapes (found here: llama.cpp's
# chat template detection crashed the page).
case "$variant" in
  mt) thread_flags="-pthread -fexceptions" ;;
  st) thread_flags="-fwasm-exceptions" ;;
  *) die "usage: deps/build-web.sh mt|st" ;;
esac
command -v emcmake >/dev/null || die "emscripten is needed for the browser runtime: apt-get install -y emscripten"
command -v ninja >/dev/null || die "ninja is needed for the browser runtime: apt-get install -y ninja-build"

cache=${SIPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sipp}
src="$cache/llama.cpp-$LLAMA_COMMIT"
[ -f "$src/.sipp-ok" ] || die "no checkout at $src; run deps/fetch.sh first (make does)"

emcc_version=$(emcc -dumpversion)
cflags="-msimd128 $thread_flags"
flags=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DEMSCRIPTEN_SYSTEM_PROCESSOR=wasm32
       -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DLLAMA_WASM_MEM64=OFF -DLLAMA_CURL=OFF
       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF
       -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF
       -DLLAMA_BUILD_HTML=OFF "-DCMAKE_C_FLAGS=$cflags" "-DCMAKE_CXX_FLAGS=$cflags")
build="$cache/web-$LLAMA_COMMIT-emcc$emcc_version-$variant"
want="${flags[*]}"
stamp="$build/.sipp-ok"
if $if_cached; then
  [ -f "$stamp" ] && [ -f "$build/sipp-flags" ] && [ "$(cat "$build/sipp-flags")" = "$want" ] || exit 1
  echo "$build"
  exit 0
fi
if [ ! -f "$build/sipp-flags" ] || [ "$(cat "$build/sipp-flags")" != "$want" ] || [ ! -f "$stamp" ]; then
  # A build with other flags is started over; an interrupted one resumes where ninja stopped.
  if [ ! -f "$build/sipp-flags" ] || [ "$(cat "$build/sipp-flags")" != "$want" ]; then
    rm -rf "$build"
    mkdir -p "$build"
    emcmake cmake -S "$src" -B "$build" -G Ninja "${flags[@]}" >"$build.configure.log" 2>&1 ||
      die "emcmake cmake failed; see $build.configure.log"
    grep -q "Wasm detected" "$build.configure.log" ||
      die "ggml did not select its wasm SIMD kernels; see $build.configure.log"
    printf '%s' "$want" >"$build/sipp-flags"
  fi
  echo "sipp deps: building llama.cpp $LLAMA_RELEASE for the browser ($variant, emcc $emcc_version) in $build" >&2
  cmake --build "$build" -j "${SIPP_WEB_JOBS:-2}" --target llama ggml >"$build.build.log" 2>&1 ||
    die "build failed; see $build.build.log"
  touch "$stamp"
fi
echo "$build"
