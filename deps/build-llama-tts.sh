#!/usr/bin/env bash
# deps/build-llama-tts.sh: llama.cpp's own text-to-speech program, llama-tts (tools/tts/tts.cpp at the
# pinned commit), the reference sipp's speech pipeline is checked against.
#
#   deps/build-llama-tts.sh BUILD_DIR      prints the path of the llama-tts binary
#
# Run it from BUILD_DIR/artifact: ggml, built with loadable backends, finds its CPU module in the
# working directory (llama-tts does not call ggml_backend_load_all_from_path as sipp does).
#
# It is compiled from the pinned checkout (BUILD_DIR/llama/source) against BUILD_DIR/artifact's
# libraries: libllama-common.so (argument parsing, the sampler), libmtmd.so (the audio generation
# helper) and libllama/libggml, exactly the code sipp runs. The binary is cached outside the work tree
# in $SIPP_CACHE_DIR, keyed by the commit, the compiler and the artifact it runs on (its run path), and
# never committed; a second run only
# prints its path.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=llama.lock
. "$here/llama.lock"
die() { echo "sipp deps: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: deps/build-llama-tts.sh BUILD_DIR"
build=$(cd "$1" && pwd)
src="$build/llama/source"
art=$(cd "$build/artifact" && pwd -P)
[ -f "$src/tools/tts/tts.cpp" ] || die "$src/tools/tts/tts.cpp is missing: run make first"
[ -f "$art/libmtmd.so" ] || die "$art has no libmtmd.so: run make first"

cxx=${CXX:-g++}
cache=${SIPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sipp}
key=$( { "$cxx" --version | head -1; echo "$LLAMA_COMMIT $art"; } | sha256sum | cut -c1-16)
dir="$cache/llama-tts-$LLAMA_COMMIT-$key"
if [ ! -x "$dir/llama-tts" ]; then
  echo "sipp deps: building llama-tts from the pinned source" >&2
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/llama-tts.XXXXXX")
  "$cxx" -std=c++17 -O2 -pthread -I"$src/include" -I"$src/ggml/include" -I"$src/common" -I"$src/tools/mtmd" \
    -I"$src/vendor" "$src/tools/tts/tts.cpp" -o "$tmp/llama-tts" -L"$art" -lllama-common -lmtmd -lllama -lggml \
    -lggml-base -Wl,-rpath,"$art" 2>"$tmp/build.log" ||
    { tail -30 "$tmp/build.log" >&2; rm -rf "$tmp"; die "llama-tts did not build (see above)"; }
  rm -rf "$dir"
  mv "$tmp" "$dir"
fi
echo "$dir/llama-tts"
