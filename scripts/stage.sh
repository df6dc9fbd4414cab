#!/usr/bin/env bash
# scripts/stage.sh STAGE_DIR BUILD_DIR VERSION: lays out an installable sipp tree in STAGE_DIR, the
# contents of the release tarball (make dist) and what make install copies (through the same
# install.sh). Relocatable: the binaries find their libraries through $ORIGIN-relative run paths,
# so the tree works wherever install.sh puts it, with no compiler on the target machine.
#
#   bin/sipp                          the CLI (run path: ../lib/sipp/artifact, ../lib)
#   lib/libsipp.so                    the library (run path: sipp/artifact)
#   lib/sipp/artifacts/NAME/          the default artifact, with manifest.json and sbom.spdx.json
#   lib/sipp/artifact -> artifacts/NAME
#   lib/pkgconfig/sipp.pc             (prefix filled in by install.sh)
#   include/sipp.h
#   share/man/man1/sipp.1             generated from the same table as sipp --help
#   share/sipp/web/                   the web page (also embedded in bin/sipp, served by sipp serve)
#   share/doc/sipp/README.md
#   install.sh                        install.sh [--prefix DIR], honours DESTDIR
# SIPP_SIGN_KEY=KEY.pem (make dist SIGN=KEY.pem) signs the staged artifact.
set -euo pipefail
die() { echo "sipp stage: $*" >&2; exit 1; }
[ $# -eq 3 ] || die "usage: scripts/stage.sh STAGE_DIR BUILD_DIR VERSION"
stage=$1 build=$2 version=$3
repo=$(cd "$(dirname "$0")/.." && pwd)
command -v patchelf >/dev/null || die "patchelf is needed to make the tree relocatable: apt-get install -y patchelf"
art=$(readlink -f "$build/artifact") || die "$build/artifact is missing; run make first"
[ -f "$art/sbom.spdx.json" ] || die "$art has no sbom.spdx.json; run make first"
for f in "$build/bin/sipp" "$build/lib/libsipp.so" "$build/share/man/man1/sipp.1" "$build/gen/web/app.js"; do
  [ -f "$f" ] || die "$f is missing; run make first"
done

rm -rf "$stage"
mkdir -p "$stage"/{bin,lib/sipp/artifacts,lib/pkgconfig,include,share/man/man1,share/sipp/web,share/doc/sipp}
name=$(basename "$art")
cp -a "$art" "$stage/lib/sipp/artifacts/$name"
ln -s "artifacts/$name" "$stage/lib/sipp/artifact"
cp "$build/bin/sipp" "$stage/bin/sipp"
cp "$build/lib/libsipp.so" "$stage/lib/libsipp.so"
patchelf --set-rpath '$ORIGIN/../lib/sipp/artifact:$ORIGIN/../lib' "$stage/bin/sipp"
patchelf --set-rpath '$ORIGIN/sipp/artifact' "$stage/lib/libsipp.so"
# The SBOM names sipp's binaries by hash: these ones, with their run paths set. A signature of the
# build tree's artifact would no longer match it, so the staged one is signed again or not at all.
rm -f "$stage/lib/sipp/artifacts/$name/signature.json"
SIPP_VERSION=$version python3 "$repo/deps/sbom.py" "$stage/lib/sipp/artifacts/$name" "$stage/bin/sipp" \
  "$stage/lib/libsipp.so" >/dev/null
if [ -n "${SIPP_SIGN_KEY:-}" ]; then
  "$stage/bin/sipp" artifact sign "$stage/lib/sipp/artifacts/$name" --key "$SIPP_SIGN_KEY" >/dev/null
fi
cp "$repo/include/sipp.h" "$stage/include/"
cp "$build/share/man/man1/sipp.1" "$stage/share/man/man1/"
# The page as the binary serves it: index.html and the favicon, and the bundles make wrote.
cp "$repo"/web/*.html "$repo"/web/*.svg "$build/gen/web/app.js" "$build/gen/web/style.css" "$stage/share/sipp/web/"
cp "$repo/README.md" "$stage/share/doc/sipp/"
cat >"$stage/lib/pkgconfig/sipp.pc" <<EOF
prefix=@PREFIX@
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: sipp
Description: local inference runtime on the pinned llama.cpp
Version: $version
Libs: -L\${libdir} -lsipp -Wl,-rpath,\${libdir}
Cflags: -I\${includedir}
EOF
cp "$repo/scripts/install.sh" "$stage/install.sh"
chmod +x "$stage/install.sh"
echo "$stage"
