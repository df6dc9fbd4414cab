#!/usr/bin/env bash
# deploy/container/sign.sh FINGERPRINT TAG OUT: signs a built image (make image) with a GPG key
# (containers' "simple signing", Debian's skopeo and gpg) and writes, beside each other:
#
#   OUT/               the image with its signature (skopeo's dir: layout: manifest, blobs, signature-1)
#   OUT.pub.gpg        the public key that signature verifies with
#   OUT.policy.json    a containers policy (deploy/container/policy.json filled in) that accepts that
#                      key's signature of TAG and nothing else: no other key, no unsigned image, and
#                      no image whose manifest changed after signing
#
#   podman run --signature-policy OUT.policy.json dir:OUT version      # runs
#   skopeo copy --policy OUT.policy.json dir:OTHER ...                 # refused unless signed by it
#
# For a registry: push with `skopeo copy --sign-by FINGERPRINT`, publish the signatures where
# registries.d's lookaside names, and install the policy with the docker entry's repository set to
# where the image lives. GNUPGHOME selects the keyring (the tests make a throwaway one).
set -euo pipefail
die() { echo "sipp sign: $*" >&2; exit 1; }
[ $# -eq 3 ] || die "usage: sign.sh FINGERPRINT TAG OUT"
fpr=$1 tag=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
command -v skopeo >/dev/null || die "skopeo is missing: apt-get install -y skopeo (scripts/setup-debian.sh)"
gpg --batch --list-secret-keys "$fpr" >/dev/null 2>&1 || die "no secret key $fpr in the keyring (GNUPGHOME=${GNUPGHOME:-~/.gnupg})"
rm -rf "$out"
skopeo copy --quiet --remove-signatures --sign-by "$fpr" --sign-identity "$tag" "containers-storage:$tag" "dir:$out" ||
  die "signing $tag failed"
gpg --batch --export "$fpr" >"$out.pub.gpg"
key=$(cd "$(dirname "$out")" && pwd)/$(basename "$out").pub.gpg
sed -e "s|@KEY@|$key|g" -e "s|@IDENTITY@|$tag|g" -e "s|@REPOSITORY@|${tag%:*}|g" "$here/policy.json" >"$out.policy.json"
echo "$out"
