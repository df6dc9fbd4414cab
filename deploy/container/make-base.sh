#!/usr/bin/env bash
# deploy/container/make-base.sh [--print-tag]: makes the Debian 12 base of sipp's runtime image from
# Debian's own packages, for machines that reach Debian's archive but no container registry, and
# prints its tag (localhost/sipp-base:bookworm-KEY).
#
#   debootstrap --variant=minbase bookworm, plus the runtime packages below
#   -> the documentation, caches, logs and ids removed (copyright files kept: the licences)
#   -> one tar with sorted names, fixed owners and mtimes (SIPP_BASE_EPOCH, fixed)
#   -> `podman build --timestamp` of FROM scratch + ADD that tar (import would stamp the time of the
#      import into the image, and every image built on it would differ)
#
# The tar is cached outside the work tree, in $SIPP_CACHE_DIR/container-base/KEY/ (default
# ~/.cache/sipp), KEY being a hash of the suite, the package list and FORMAT: the same KEY is
# the same base, so images built on it from one commit are the same bytes. Users on machines with a
# registry build on debian:12-slim instead (the Containerfile's BASE argument); its runtime stage
# installs the same packages with apt-get when the base lacks them.
#
# Needs root (debootstrap), debootstrap and podman (scripts/setup-debian.sh), and Debian's archive.
# CONTAINERS_CONF may name deploy/container/containers.conf (runc, no default ulimits): the tests do.
set -euo pipefail
die() { echo "sipp base: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
SUITE=bookworm
MIRROR=${SIPP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What sipp's binaries and the pinned llama.cpp libraries link (ldd build/bin/sipp build/artifact/*.so),
# ca-certificates for `sipp pull` over https, libvulkan1 for the vulkan flavor's loader.
# the runtime libraries of sipp's binaries (ldd build/bin/sipp build/lib/libsipp.so): HTTP, JSON,
# downloads, hashes, C++, Vulkan's loader, and speech (flite's voices, FLAC, MP3, Opus in Ogg)
PACKAGES=(libmicrohttpd12 libjansson4 libcurl4 libssl3 libstdc++6 libgcc-s1 ca-certificates libvulkan1
  libflite1 libflac12 libmp3lame0 libopus0 libogg0)
# The base has its own fixed time: it is cached and shared by every commit's image.
EPOCH=${SIPP_BASE_EPOCH:-1700000000}

# Raise FORMAT when the steps below change what the tar holds: the key is what makes a base.
FORMAT=1
key=$(echo "$FORMAT $SUITE ${PACKAGES[*]} $EPOCH" | sha256sum | cut -c1-16)
tag="localhost/sipp-base:$SUITE-$key"
cache=${SIPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sipp}/container-base/$key
tarball=$cache/base.tar

if [ ! -f "$tarball" ]; then
  [ "$(id -u)" -eq 0 ] || die "debootstrap needs root; run it as root once (the result is cached in $cache)"
  command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install -y debootstrap (scripts/setup-debian.sh)"
  mkdir -p "$cache"
  root=$(mktemp -d "$cache/root.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  echo "sipp base: debootstrap --variant=minbase $SUITE (a few minutes, once)" >&2
  include=$(IFS=,; echo "${PACKAGES[*]}")
  debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$MIRROR" >"$cache/debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $cache/debootstrap.log"
  # What varies from run to run or is not needed at run time; the copyright files stay.
  rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/tmp/* \
    "$root"/var/cache/ldconfig/aux-cache "$root"/usr/share/man "$root"/usr/share/info \
    "$root"/usr/share/locale "$root"/usr/share/lintian "$root"/debootstrap
  find "$root/usr/share/doc" -type f ! -name copyright -delete
  find "$root/usr/share/doc" -type l -delete
  : >"$root/etc/machine-id"
  rm -f "$root"/etc/ssh/ssh_host_* "$root"/var/lib/dbus/machine-id
  tar --sort=name --mtime="@$EPOCH" --clamp-mtime --owner=0 --group=0 --numeric-owner \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi

if ! podman image exists "$tag"; then
  ctx=$(mktemp -d)
  cp "$tarball" "$ctx/base.tar"
  printf 'FROM scratch\nADD base.tar /\nCMD ["/bin/bash"]\n' >"$ctx/Containerfile"
  podman build --quiet --format docker --timestamp "$EPOCH" -t "$tag" "$ctx" >/dev/null ||
    { rm -rf "$ctx"; die "podman build of the base failed (with CONTAINERS_CONF=$here/containers.conf?)"; }
  rm -rf "$ctx"
fi
echo "$tag"
