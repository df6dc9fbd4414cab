# deps/npm.sh: sourced by deps/fetch.sh and deps/build-whisper.sh. Fetches an npm package of an exact
# version with `npm pack`, refuses it unless its sha512 equals the integrity recorded in a deps/*.lock, and
# caches it outside the work tree in $cache keyed by package and integrity. The caller defines die() and
# cache.

# sri_of FILE: the file's sha512 in the registry's integrity form.
sri_of() { printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$1" | base64 -w0)"; }

# fetch_pkg "name|version|integrity": prints the path of the cached, verified tarball.
fetch_pkg() {
  local name ver want key tgz tmp got
  IFS='|' read -r name ver want <<<"$1"
  key=$(printf '%s' "$want" | openssl dgst -sha256 | awk '{print substr($NF,1,16)}')
  tgz="$cache/npm/$(printf '%s' "$name" | tr '/@' '__')-$ver-$key.tgz"
  if [ ! -f "$tgz" ]; then
    command -v npm >/dev/null || die "npm is needed to fetch $name@$ver; install it with: apt-get install -y npm"
    tmp=$(mktemp -d "$cache/npm/pack.XXXXXX")
    echo "sipp deps: fetching $name@$ver" >&2
    (cd "$tmp" && npm pack --silent "$name@$ver" >/dev/null) ||
      { rm -rf "$tmp"; die "npm pack $name@$ver failed; check that npm can reach its registry"; }
    got=$(sri_of "$tmp"/*.tgz)
    if [ "$got" != "$want" ]; then
      rm -rf "$tmp"
      die "$name@$ver: integrity $got does not match the integrity pinned in deps/ ($want); refusing it"
    fi
    mv "$tmp"/*.tgz "$tgz"
    rm -rf "$tmp"
  fi
  # A cached file is checked again: the cache is outside the tree and anything may have touched it.
  [ "$(sri_of "$tgz")" = "$want" ] || die "cached $tgz is corrupt; delete it and run again"
  printf '%s\n' "$tgz"
}

# unpack TGZ: prints a directory holding the package's contents, extracted once per tarball.
unpack() {
  local dir="${1%.tgz}.d"
  if [ ! -f "$dir/.ok" ]; then
    rm -rf "$dir"; mkdir -p "$dir"
    tar xzf "$1" -C "$dir"
    touch "$dir/.ok"
  fi
  printf '%s\n' "$dir/package"
}

