#!/usr/bin/env bash
# bindings/node/build.sh: builds the Node-API addon build/sipp.node from src/addon.c with plain cc.
#
# Headers: the npm package node-api-headers, pinned in package.json and package-lock.json (with its
# integrity) and installed by `npm ci --ignore-scripts`; when npm cannot reach a registry, the headers
# of the Node.js installation (include/node) are used instead, and the script says so. The addon links
# libsipp.so from the repository's build directory ($SIPP_BUILD, default build/) and finds it at run
# time through an $ORIGIN-relative rpath, so the tree can move. Rebuilds only when an input changed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${SIPP_BUILD:-build}
case $build in /*) ;; *) build=$repo/$build ;; esac
lib=$build/lib/libsipp.so
out=$here/build/sipp.node
CC=${CC:-cc}

die() { echo "bindings/node/build.sh: $*" >&2; exit 1; }
[ -f "$lib" ] || die "$lib is missing; build libsipp first with: make -C $repo -j2 all"

headers=$here/node_modules/node-api-headers/include
if [ ! -f "$headers/node_api.h" ]; then
  if (cd "$here" && npm ci --ignore-scripts --no-audit --no-fund >/dev/null 2>&1); then :; fi
fi
if [ ! -f "$headers/node_api.h" ]; then
  node_inc=$(dirname "$(dirname "$(command -v node)")")/include/node
  [ -f "$node_inc/node_api.h" ] || die "no Node-API headers: npm ci failed and $node_inc has none; run npm ci in $here"
  echo "bindings/node/build.sh: npm ci failed; using the Node.js installation's headers in $node_inc" >&2
  headers=$node_inc
fi

inputs=("$here/src/addon.c" "$repo/include/sipp.h" "$lib" "$here/build.sh")
if [ -f "$out" ]; then
  stale=0
  for f in "${inputs[@]}"; do [ "$f" -nt "$out" ] && stale=1; done
  [ $stale -eq 1 ] || exit 0
fi

mkdir -p "$here/build"
# the rpath from bindings/node/build/ to the library directory, relative so the tree can move
libdir=$(dirname "$lib")
rel=$(python3 -c 'import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$libdir" "$here/build")
$CC -std=c11 -D_GNU_SOURCE -O2 -g -fPIC -shared -pthread -fvisibility=hidden \
  -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wstrict-prototypes \
  -DNODE_GYP_MODULE_NAME=sipp -I"$headers" -I"$repo/include" \
  -o "$out.tmp" "$here/src/addon.c" -L"$libdir" -lsipp -Wl,-rpath,"\$ORIGIN/$rel" -Wl,--no-undefined-version
mv "$out.tmp" "$out"
echo "bindings/node/build.sh: built $out"
