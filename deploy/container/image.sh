#!/usr/bin/env bash
# deploy/container/image.sh FLAVOR VERSION [BUILD_DIR]: `make image` (FLAVOR=cpu by default).
#
# Builds localhost/sipp:VERSION-FLAVOR from deploy/container/Containerfile's runtime stage, with the
# release tree staged here as `make dist` stages it (scripts/stage.sh), for the artifact of that
# flavor (cpu: the CPU modules; vulkan: + libggml-vulkan.so; cuda: + libggml-cuda.so, built but
# untested without a GPU). Then it writes, under BUILD_DIR/image/:
#
#   sipp-VERSION-FLAVOR.tar          the image as an OCI archive (podman load -i / skopeo copy)
#   sipp-VERSION-FLAVOR.spdx.json    the artifact's SPDX SBOM, the same file as inside the image
#   sipp-VERSION-FLAVOR.digest       the image id and the manifest digest
#
# Reproducible: SOURCE_DATE_EPOCH (default: the commit's time) stamps the SBOM, the image's created
# time and every file of its layers (podman build --timestamp), and the base is make-base.sh's
# cached one; two builds from one commit give the same image id and manifest digest
# (tests/integration/test_container_image.py records both). BASE=IMAGE builds on another base (e.g.
# debian:12-slim where a registry is reachable); TREE=build compiles inside the build stage instead
# (the full two-stage build that README.md documents for users).
#
# Podman runs with deploy/container/containers.conf (runc, no default ulimits) unless CONTAINERS_CONF
# names another.
set -euo pipefail
die() { echo "sipp image: $*" >&2; exit 1; }

flavor=${1:-cpu} version=${2:?usage: image.sh FLAVOR VERSION [BUILD_DIR]} build=${3:-build}
repo=$(cd "$(dirname "$0")/../.." && pwd)
here=$repo/deploy/container
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
case "$flavor" in
  cpu) backends=(cpu) ;;
  vulkan) backends=(cpu vulkan) ;;
  cuda) backends=(cpu cuda) ;;
  *) die "unknown FLAVOR '$flavor'; use cpu, vulkan or cuda" ;;
esac
command -v podman >/dev/null || die "podman is missing: apt-get install -y podman runc (scripts/setup-debian.sh)"
[ -x "$build/bin/sipp" ] || die "$build/bin/sipp is missing; run make first"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 1700000000)}
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
tag=localhost/sipp:$version-$flavor
name=sipp-$version-$flavor
out=$build/image
mkdir -p "$out"
# One build at a time per tree (the tests of two shards may both ask for the image).
exec 9>"$out/.lock"
flock 9

# The flavor's artifact beside the build's own (deps/fetch.sh is a no-op once it is there).
art_name=$(IFS=+; echo "${backends[*]}")
if [ ! -f "$build/artifacts/$art_name/manifest.json" ]; then
  bash "$repo/deps/fetch.sh" "$build" "${backends[@]}" >/dev/null || die "deps/fetch.sh $build ${backends[*]} failed"
fi
# Its SBOM as `make` writes the build's own (stage.sh writes the staged tree's again).
if [ ! -f "$build/artifacts/$art_name/sbom.spdx.json" ]; then
  SIPP_VERSION=$version python3 "$repo/deps/sbom.py" "$build/artifacts/$art_name" "$build/bin/sipp" \
    "$build/lib/libsipp.so" >/dev/null || die "deps/sbom.py $build/artifacts/$art_name failed"
fi

# stage.sh reads BUILD/artifact, bin/sipp, lib/libsipp.so, the man page and gen/web: a view of this build
# whose artifact is the flavor's.
view=$out/$flavor/view ctx=$out/$flavor/context
rm -rf "$view" "$ctx"
mkdir -p "$view/bin" "$view/lib" "$view/share/man/man1" "$view/gen" "$ctx/deploy/container"
ln -s "$(cd "$build" && pwd)/artifacts/$art_name" "$view/artifact"
ln -s "$(cd "$build" && pwd)/bin/sipp" "$view/bin/sipp"
ln -s "$(cd "$build" && pwd)/lib/libsipp.so" "$view/lib/libsipp.so"
ln -s "$(cd "$build" && pwd)/share/man/man1/sipp.1" "$view/share/man/man1/sipp.1"
ln -s "$(cd "$build" && pwd)/gen/web" "$view/gen/web"
bash "$repo/scripts/stage.sh" "$ctx/dist" "$view" "$version" >/dev/null
cp "$here/Containerfile" "$here/sipp.toml" "$ctx/deploy/container/"

base=${BASE:-$(bash "$here/make-base.sh")}
previous=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
podman build --quiet --format docker --timestamp "$SOURCE_DATE_EPOCH" --target runtime --omit-history ${SIPP_IMAGE_NO_CACHE:+--no-cache} \
  --build-arg BASE="$base" --build-arg TREE="${TREE:-prebuilt}" --build-arg FLAVOR="$flavor" \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  -t "$tag" -f "$ctx/deploy/container/Containerfile" "$ctx" >/dev/null ||
  die "podman build of $tag failed"

built=$(podman image inspect --format '{{.Id}}' "$tag")
python3 "$here/normalize.py" "$tag" >/dev/null || die "normalizing $tag failed"
id=$(podman image inspect --format '{{.Id}}' "$tag")
# What this build replaced, unless it is the same image: nothing else is removed.
for old in "$built" "$previous"; do
  [ -z "$old" ] || [ "$old" = "$id" ] || podman rmi "$old" >/dev/null 2>&1 || true
done
digest=$(podman image inspect --format '{{.Digest}}' "$tag")
rm -f "$out/$name.tar"
podman save --quiet --format oci-archive -o "$out/$name.tar" "$tag"
cp "$ctx/dist/lib/sipp/artifacts/$art_name/sbom.spdx.json" "$out/$name.spdx.json"
printf 'id %s\ndigest %s\n' "$id" "$digest" >"$out/$name.digest"
size=$(podman image inspect --format '{{.Size}}' "$tag")
echo "$tag $id $digest $size"
