#!/usr/bin/env bash
# deps/fetch.sh: obtain the pinned llama.cpp (deps/llama.lock) and lay it out under the build tree.
#
#   deps/fetch.sh OUT_DIR [BACKEND...]          e.g. deps/fetch.sh build cpu vulkan
#
# What it produces, under OUT_DIR:
#   llama/include/     llama.h, ggml*.h, gguf.h, mtmd.h, mtmd-helper.h from the git bundle at the pinned commit
#   llama/vocab/       the bundle's models/ggml-vocab-*.gguf real tokenizers and their test vectors
#   llama/source       a symbolic link to the bundle's checkout in the cache (for source builds)
#   artifacts/NAME/    NAME = the backends joined by '+' (with -src for a source build, LLAMA_FROM_SOURCE=1):
#                      the core libraries plus exactly the chosen backend modules, libmtmd.so (llama.cpp's
#                      multimodal library, always), and manifest.json saying what they are and where they
#                      came from
#
# Packages come from npm with `npm pack`, exact versions, and are refused unless their sha512 equals the
# integrity recorded in deps/llama.lock. Downloads and the checkout are cached outside the work tree in
# $SIPP_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/sipp), keyed by package and integrity, so a second
# run does no network work.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=llama.lock
. "$here/llama.lock"

die() { echo "sipp deps: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: deps/fetch.sh OUT_DIR [cpu] [vulkan] [cuda] [rpc]"
out=$1; shift
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(cpu)

cache=${SIPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sipp}
mkdir -p "$cache/npm" "$out"

# sri_of, fetch_pkg and unpack: npm packages fetched, checked against their integrity, cached.
# shellcheck source=npm.sh
. "$here/npm.sh"

# --- the source: headers, vocab files and the checkout for source builds ---------------------------
src_pkg=$(unpack "$(fetch_pkg "$PKG_SOURCE")")
bundle="$src_pkg/llama/gitRelease.bundle"
[ -f "$bundle" ] || die "node-llama-cpp has no llama/gitRelease.bundle"
got=$(sha256sum "$bundle" | awk '{print $1}')
[ "$got" = "$LLAMA_BUNDLE_SHA256" ] || die "git bundle sha256 $got differs from deps/llama.lock"

checkout="$cache/llama.cpp-$LLAMA_COMMIT"
if [ ! -f "$checkout/.sipp-ok" ]; then
  rm -rf "$checkout"
  git clone -q --no-checkout "$bundle" "$checkout"
  git -C "$checkout" -c advice.detachedHead=false checkout -q "$LLAMA_COMMIT"
  touch "$checkout/.sipp-ok"
fi
head=$(git -C "$checkout" rev-parse HEAD)
[ "$head" = "$LLAMA_COMMIT" ] || die "bundle checkout is at $head, expected $LLAMA_COMMIT"

# copy_changed FILE... DIR: copies each file into DIR unless DIR holds the same bytes already. An
# unchanged header keeps its time, so running this script again (`sipp build` does, and tests run
# that while others run the CLI) does not make every object out of date and relink build/bin/sipp.
copy_changed() {
  local dir=${!#} f
  for f in "${@:1:$#-1}"; do
    cmp -s "$f" "$dir/$(basename "$f")" || cp "$f" "$dir/"
  done
}
mkdir -p "$out/llama/include" "$out/llama/vocab"
copy_changed "$checkout"/include/llama.h "$checkout"/ggml/include/*.h "$checkout"/tools/mtmd/mtmd.h \
  "$checkout"/tools/mtmd/mtmd-helper.h "$out/llama/include"
copy_changed "$checkout"/models/ggml-vocab-* "$out/llama/vocab"
ln -sfn "$checkout" "$out/llama/source"

# build_rpc_module ART_DIR: puts libggml-rpc.so, ggml's RPC backend module, into ART_DIR, compiled from
# the checkout's ggml/src/ggml-rpc against ART_DIR's libggml-base.so. No package ships it and it takes
# seconds, so it is built here, once per commit, compiler and base library, in the cache. RPC_ORIGIN
# receives the manifest's record of it.
build_rpc_module() {
  local base=$1 cxx=${CXX:-c++} key dir tmp flags
  command -v "$cxx" >/dev/null || die "a C++ compiler ($cxx) is needed for the rpc module: apt-get install -y g++"
  flags="-O2 -fPIC -shared -std=c++17 -DNDEBUG -DGGML_BACKEND_DL -DGGML_BACKEND_BUILD -DGGML_BACKEND_SHARED"
  RPC_COMPILER=$("$cxx" --version | head -1)
  key=$(printf '%s|%s|%s|%s' "$LLAMA_COMMIT" "$RPC_COMPILER" "$flags" "$(sha256sum "$base/libggml-base.so" | cut -c1-16)" |
        openssl dgst -sha256 | awk '{print substr($NF,1,16)}')
  dir="$cache/rpc-$LLAMA_COMMIT-$key"
  if [ ! -f "$dir/libggml-rpc.so" ]; then
    echo "sipp deps: building the rpc backend module from the pinned source" >&2
    tmp=$(mktemp -d "$cache/rpc.XXXXXX")
    # shellcheck disable=SC2086
    "$cxx" $flags -I"$checkout/ggml/include" -I"$checkout/ggml/src" \
      "$checkout/ggml/src/ggml-rpc/ggml-rpc.cpp" "$checkout/ggml/src/ggml-rpc/transport.cpp" \
      -o "$tmp/libggml-rpc.so" -L"$base" -lggml-base -Wl,-rpath,'$ORIGIN' -pthread 2>"$tmp/build.log" ||
      { cat "$tmp/build.log" >&2; rm -rf "$tmp"; die "the rpc module did not build (see above)"; }
    rm -rf "$dir"; mv "$tmp" "$dir"
  fi
  RPC_FLAGS=$flags
  RPC_ORIGIN="{\"module\": \"libggml-rpc.so\", \"origin\": \"source build\", \"source\": \"ggml/src/ggml-rpc\", \"llama_commit\": \"$LLAMA_COMMIT\", \"compiler\": \"$RPC_COMPILER\", \"flags\": \"$flags\"}"
  cp "$dir/libggml-rpc.so" "$base/"
}

# build_mtmd_library ART_DIR: puts libmtmd.so, llama.cpp's multimodal library (images and audio through
# a projector, tools/mtmd), into ART_DIR, compiled from the checkout against ART_DIR's libllama and
# libggml. No package ships it, so it is built here, once per commit, compiler, flags and base
# libraries, in the cache (a minute or two on two cores). The sources are the ones the checkout's
# CMakeLists.txt lists for the mtmd target, plus the vendored hashes it links (hidden, so that they
# cannot clash with another library's copy). MTMD_VIDEO stays off: no ffmpeg subprocesses in a server.
# MTMD_ORIGIN receives the manifest's record of it.
build_mtmd_library() {
  local base=$1 cxx=${CXX:-c++} cc=${CC:-cc} key dir tmp flags srcs f obj mtmd hash jobs
  command -v "$cxx" >/dev/null || die "a C++ compiler ($cxx) is needed for libmtmd: apt-get install -y g++"
  mtmd="$checkout/tools/mtmd" hash="$checkout/vendor/hash"
  flags="-O2 -fPIC -std=c++17 -DNDEBUG -DLLAMA_SHARED -DLLAMA_BUILD -Wno-cast-qual"
  MTMD_COMPILER=$("$cxx" --version | head -1)
  key=$(printf '%s|%s|%s|%s' "$LLAMA_COMMIT" "$MTMD_COMPILER" "$flags" \
          "$(cat "$base"/libllama.so "$base"/libggml.so "$base"/libggml-base.so | sha256sum | cut -c1-16)" |
        openssl dgst -sha256 | awk '{print substr($NF,1,16)}')
  dir="$cache/mtmd-$LLAMA_COMMIT-$key"
  if [ ! -f "$dir/libmtmd.so" ]; then
    srcs=$(sed -n '/^add_library(mtmd$/,/)/p' "$mtmd/CMakeLists.txt" | awk '$1 ~ /\.cpp$/ {print $1}')
    [ -n "$srcs" ] || die "$mtmd/CMakeLists.txt lists no sources for the mtmd target"
    echo "sipp deps: building libmtmd from the pinned source" >&2
    tmp=$(mktemp -d "$cache/mtmd.XXXXXX")
    jobs=$(nproc 2>/dev/null || echo 2)
    # one compiler command a line, run $jobs at a time; a failure stops the build with its log
    {
      for f in $srcs; do
        obj=$(printf '%s' "$f" | tr '/' '_'); obj=${obj%.cpp}.o
        echo "$cxx $flags -I$checkout/include -I$checkout/ggml/include -I$mtmd -I$checkout/vendor -c $mtmd/$f -o $tmp/$obj"
      done
      echo "$cxx $flags -fvisibility=hidden -I$checkout/vendor -c $hash/hash.cpp -o $tmp/vendor_hash.o"
      echo "$cc -O2 -fPIC -w -fvisibility=hidden -I$hash -c $hash/xxhash/xxhash.c -o $tmp/vendor_xxhash.o"
      echo "$cc -O2 -fPIC -w -fvisibility=hidden -I$hash -c $hash/sha256/sha256.c -o $tmp/vendor_sha256.o"
      echo "$cxx -O2 -fPIC -w -fvisibility=hidden -x c++ -I$hash -c $hash/sha1/sha1.c -o $tmp/vendor_sha1.o"
    } >"$tmp/commands"
    xargs -P "$jobs" -I{} sh -c '{}' <"$tmp/commands" 2>"$tmp/build.log" &&
      "$cxx" -shared -o "$tmp/libmtmd.so" "$tmp"/*.o -L"$base" -lllama -lggml -lggml-base \
        -Wl,-soname,libmtmd.so -Wl,-rpath,'$ORIGIN' -pthread 2>>"$tmp/build.log" ||
      { tail -40 "$tmp/build.log" >&2; rm -rf "$tmp"; die "libmtmd did not build (see above)"; }
    rm -f "$tmp"/*.o "$tmp/commands"
    rm -rf "$dir"; mv "$tmp" "$dir"
  fi
  MTMD_FLAGS=$flags
  MTMD_ORIGIN="{\"module\": \"libmtmd.so\", \"origin\": \"source build\", \"source\": \"tools/mtmd\", \"llama_commit\": \"$LLAMA_COMMIT\", \"compiler\": \"$MTMD_COMPILER\", \"flags\": \"$flags\"}"
  cp "$dir/libmtmd.so" "$base/"
}

# --- the artifact: core libraries plus the chosen backend modules ---------------------------------
artifact_name=$(IFS=+; echo "${backends[*]}")
# A source build is a different artifact from the prebuilt one with the same backends.
[ "${LLAMA_FROM_SOURCE:-0}" = 1 ] && artifact_name="$artifact_name-src"
# SIPP_ARTIFACT_OUT (sipp build --out DIR) puts the artifact elsewhere than OUT_DIR/artifacts/NAME.
art="${SIPP_ARTIFACT_OUT:-$out/artifacts/$artifact_name}"
rm -rf "$art.tmp"; mkdir -p "$art.tmp"

# Where every file came from is recorded as it is copied, one JSON object a line in $origins, and
# becomes the manifest's "files": the SBOM (deps/sbom.py) takes each library's origin from there, so
# whatever a future change copies into an artifact must come through put_npm or put_source.
#   put_npm PKG_SPEC FILE...     files of an npm package of deps/llama.lock (PKG_SPEC: name|version|integrity)
#   put_source BUILD_DIR FILE... files built from the pinned commit in BUILD_DIR (a CMake tree with
#                                sipp-flags): the compiler and the flags are recorded. Links are copied as
#                                links and not recorded: they name a recorded file.
origins="$art.tmp/.origins"
: >"$origins"
json_escape() { sed 's/\\/\\\\/g; s/"/\\"/g' <<<"$1"; }
put_npm() {
  local spec=$1 name ver integrity f; shift
  IFS='|' read -r name ver integrity <<<"$spec"
  for f in "$@"; do
    cp "$f" "$art.tmp/"
    printf '{"file":"%s","origin":"npm","package":"%s","version":"%s","integrity":"%s","path":"%s"}\n' \
      "$(basename "$f")" "$name" "$ver" "$integrity" "${f#*/package/}" >>"$origins"
  done
}
put_source() {
  local dir=$1 cxx compiler flags f; shift
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt" 2>/dev/null)
  compiler=$(json_escape "$("${cxx:-c++}" --version 2>/dev/null | head -1)")
  flags=$(json_escape "$(cat "$dir/sipp-flags" 2>/dev/null)")
  for f in "$@"; do
    cp -P "$f" "$art.tmp/"
    [ -L "$f" ] && continue
    printf '{"file":"%s","origin":"source","commit":"%s","compiler":"%s","flags":"%s"}\n' \
      "$(basename "$f")" "$LLAMA_COMMIT" "$compiler" "$flags" >>"$origins"
  done
}

if [ "${LLAMA_FROM_SOURCE:-0}" = 1 ]; then
  # The core and the CPU modules from a source build of the same commit (deps/build-source.sh).
  for b in "${backends[@]}"; do
    [ "$b" = cpu ] || [ "$b" = rpc ] && continue
    [ "$b" = vulkan ] && die "the vulkan module does not build from source on Debian 12 (Vulkan headers too old); drop LLAMA_FROM_SOURCE=1 to use the prebuilt one"
    die "backend '$b' has no source build here yet; build with BACKENDS=cpu"
  done
  build=$("$here/build-source.sh" lib)
  put_source "$build" "$build"/bin/libllama.so* "$build"/bin/libggml.so* "$build"/bin/libggml-base.so* \
    "$build"/bin/libllama-common.so* "$build"/bin/libggml-cpu*.so
  origin="source build of $LLAMA_COMMIT ($(cat "$build/sipp-flags"))"
  integrities='[]'
else
  cpu_pkg=$(unpack "$(fetch_pkg "$PKG_CPU")")/bins/linux-x64
  put_npm "$PKG_CPU" "$cpu_pkg"/libllama.v0.4.0.so "$cpu_pkg"/libggml.v0.4.0.so "$cpu_pkg"/libggml-base.so
  # llama.cpp's common (chat templates, tool-call parsers, schema grammars for src/chat; llama-bench
  # links it too): always the CPU package's copy, whatever the backends (the Vulkan package's links a
  # Vulkan-suffixed libllama).
  put_npm "$PKG_CPU" "$cpu_pkg"/libllama-common.so
  # Names the linker can find; the libraries keep their own sonames.
  ln -sf libllama.v0.4.0.so "$art.tmp/libllama.so"
  ln -sf libggml.v0.4.0.so "$art.tmp/libggml.so"
  origin="prebuilt $LLAMA_RELEASE"
  integrities="[\"${PKG_CPU%%|*}@$(echo "$PKG_CPU" | cut -d'|' -f2) $(echo "$PKG_CPU" | cut -d'|' -f3)\""
  for b in "${backends[@]}"; do
    case "$b" in
      cpu) put_npm "$PKG_CPU" "$cpu_pkg"/libggml-cpu-*.so ;;
      vulkan)
        vk_pkg=$(unpack "$(fetch_pkg "$PKG_VULKAN")")/bins/linux-x64-vulkan
        put_npm "$PKG_VULKAN" "$vk_pkg"/libggml-vulkan.so
        integrities+=",\"${PKG_VULKAN%%|*}@$(echo "$PKG_VULKAN" | cut -d'|' -f2) $(echo "$PKG_VULKAN" | cut -d'|' -f3)\""
        ;;
      cuda)
        cu_pkg=$(unpack "$(fetch_pkg "$PKG_CUDA")")/bins/linux-x64-cuda
        put_npm "$PKG_CUDA" "$cu_pkg"/libggml-cuda.so
        integrities+=",\"${PKG_CUDA%%|*}@$(echo "$PKG_CUDA" | cut -d'|' -f2) $(echo "$PKG_CUDA" | cut -d'|' -f3)\""
        ;;
      rpc) ;; # built from source below, for prebuilt and source artifacts alike
      *) die "unknown backend '$b' for an artifact (known: cpu vulkan cuda rpc)" ;;
    esac
  done
  integrities+="]"
fi
# Every artifact has the CPU backend: ggml needs a CPU device to hold what no other device takes.
case " ${backends[*]} " in
  *" cpu "*) ;;
  *) if [ -n "${cpu_pkg:-}" ]; then put_npm "$PKG_CPU" "$cpu_pkg"/libggml-cpu-*.so
     else put_source "$build" "$build"/bin/libggml-cpu*.so; fi ;;
esac

# Modules compiled here rather than taken from a package, each with its origin (the SBOM reads this).
# record_source_build FILE SOURCE COMPILER FLAGS: the origin line of a library compiled here.
record_source_build() {
  printf '{"file":"%s","origin":"source","commit":"%s","source":"%s","compiler":"%s","flags":"%s"}\n' \
    "$1" "$LLAMA_COMMIT" "$2" "$(json_escape "$3")" "$(json_escape "$4")" >>"$origins"
}
build_mtmd_library "$art.tmp"
record_source_build libmtmd.so tools/mtmd "$MTMD_COMPILER" "$MTMD_FLAGS"
source_builds="[$MTMD_ORIGIN]"
case " ${backends[*]} " in *" rpc "*)
  build_rpc_module "$art.tmp"
  record_source_build libggml-rpc.so ggml/src/ggml-rpc "$RPC_COMPILER" "$RPC_FLAGS"
  source_builds="${source_builds%]}, $RPC_ORIGIN]" ;;
esac

# libwhisper (speech to text, src/speech): whisper.cpp of deps/whisper.lock built against this artifact's
# ggml by deps/build-whisper.sh, cached like libmtmd. Its origin names the npm package it came from.
. "$here/whisper.lock"
whisper_build=$("$here/build-whisper.sh" lib "$art.tmp")
cp "$(readlink -f "$whisper_build/bin/libwhisper.so")" "$art.tmp/libwhisper.so"
mkdir -p "$out/whisper/include"
copy_changed "$(cat "$whisper_build/sipp-source")/include/whisper.h" "$out/whisper/include"
IFS='|' read -r w_name w_ver w_integrity <<<"$PKG_WHISPER"
w_compiler=$(json_escape "$(cat "$whisper_build/sipp-compiler")")
w_flags=$(json_escape "$(cat "$whisper_build/sipp-flags")")
printf '{"file":"libwhisper.so","origin":"source","package":"%s","version":"%s","integrity":"%s","whisper_version":"%s","source":"cpp/whisper.cpp","compiler":"%s","flags":"%s"}\n' \
  "$w_name" "$w_ver" "$w_integrity" "$WHISPER_VERSION" "$w_compiler" "$w_flags" >>"$origins"
source_builds="${source_builds%]}, {\"module\": \"libwhisper.so\", \"origin\": \"source build\", \"package\": \"$w_name@$w_ver\", \"integrity\": \"$w_integrity\", \"whisper_version\": \"$WHISPER_VERSION\", \"compiler\": \"$w_compiler\", \"flags\": \"$w_flags\"}]"

json_list=$(printf '"%s",' "${backends[@]}"); json_list="[${json_list%,}]"
cat >"$art.tmp/manifest.json" <<EOF
{
  "name": "$artifact_name",
  "backends": $json_list,
  "llama_release": "$LLAMA_RELEASE",
  "llama_commit": "$LLAMA_COMMIT",
  "origin": "$origin",
  "packages": $integrities,
  "source_builds": $source_builds,
  "files": [
    $(sed '$!s/$/,/; 2,$s/^/    /' "$origins")
  ]
}
EOF
rm -f "$origins"
python3 -m json.tool "$art.tmp/manifest.json" >/dev/null || die "the manifest of $artifact_name is not valid JSON"
rm -rf "$art"; mv "$art.tmp" "$art"
echo "$art"
