#!/usr/bin/env bash
# install.sh [--prefix DIR]: installs this sipp tree (the release tarball's contents, or what
# `make install` staged) into DESTDIR/PREFIX (PREFIX default /usr/local). Nothing is compiled: the
# binaries find their libraries relative to themselves. The Debian packages sipp needs at run time
# are listed in lib/sipp/artifact/sbom.spdx.json; a missing one is named with the apt-get line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=/usr/local
die() { echo "sipp install: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    -h|--help) echo "usage: install.sh [--prefix DIR] (default /usr/local); DESTDIR=DIR stages into DIR/PREFIX"; exit 0 ;;
    *) die "unknown argument '$1' (install.sh --help)" ;;
  esac
done
case $prefix in /*) ;; *) die "--prefix '$prefix' must be an absolute path" ;; esac
dest="${DESTDIR:-}$prefix"

mkdir -p "$dest"
for d in bin lib include share; do
  mkdir -p "$dest/$d"
  cp -a "$here/$d/." "$dest/$d/"
done
sed "s|@PREFIX@|$prefix|" "$here/lib/pkgconfig/sipp.pc" >"$dest/lib/pkgconfig/sipp.pc"

# The run-time libraries the system must provide (the artifact's own are in lib/sipp/artifact).
missing=$(ldd "$dest/bin/sipp" 2>/dev/null | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
if [ -n "$missing" ]; then
  echo "sipp install: installed in $dest, but these libraries are missing: $missing" >&2
  echo "sipp install: on Debian 12: apt-get install -y libjansson4 libssl3 libcurl4 libmicrohttpd12 libstdc++6 libflite1 libflac12 libmp3lame0 libopus0 libogg0 libvulkan1" >&2
  exit 1
fi
echo "sipp installed in $dest: run $prefix/bin/sipp --help (man page: $prefix/share/man/man1/sipp.1)"
