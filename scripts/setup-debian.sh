#!/usr/bin/env bash
# Installs the Debian packages sipp needs to build and test. Run as root; as any other user it
# prints the exact apt-get line instead. Idempotent: packages already present are not reinstalled.
set -euo pipefail

PACKAGES=(
  build-essential pkg-config git cmake ninja-build
  libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev libssl-dev
  libcriterion-dev
  libvulkan1 mesa-vulkan-drivers vulkan-tools
  clang libclang-rt-14-dev clang-format valgrind
  patchelf
  python3
  nginx-light iproute2
  # prose for tools/train/corpus.py: the KJV Bible (its `bible` command) and fortunes
  bible-kjv fortunes-min
  # encoders of real FLAC and MP3 clips, decoded by sipp and by libmtmd in tests/integration/test_media_limits.py
  flac lame
)
# Node.js and npm fetch the pinned llama.cpp packages; install them only when absent, so a
# newer Node.js that the machine already has is left alone.
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
# The browser runtime (make web) is compiled with emscripten and tested in headless Chromium.
if [ "${SIPP_SETUP_BROWSER:-1}" = 1 ]; then PACKAGES+=(chromium emscripten); fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "sipp: missing Debian packages: ${missing[*]}" >&2
  echo "sipp: install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "sipp: installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
