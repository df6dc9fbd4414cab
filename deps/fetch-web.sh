#!/usr/bin/env bash
# deps/fetch-web.sh OUT_DIR: the web page's libraries (deps/web.lock), fetched with `npm pack`,
# checked against their integrity and cached outside the work tree (deps/npm.sh), then the files the
# page uses copied into OUT_DIR with each package's licence:
#
#   marked.umd.js        marked (Markdown to HTML)
#   purify.min.js        DOMPurify (the HTML sanitiser every rendered answer goes through)
#   hljs-core.min.js     highlight.js's core (its ES module build; bundle_web.py unwraps the export)
#   hljs-LANG.min.js     one per language of WEB_HLJS_LANGUAGES
#   uPlot.iife.min.js    uPlot (the live charts) and uPlot.min.css
#   LICENSE-NAME         each package's licence
#
# A second run with the same lock does no network work.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=web.lock
. "$here/web.lock"
die() { echo "sipp deps: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: deps/fetch-web.sh OUT_DIR"
out=$1
cache=${SIPP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sipp}
mkdir -p "$cache/npm" "$out"
# shellcheck source=npm.sh
. "$here/npm.sh"

# take PKG_DIR FROM TO: copies one file of a package, naming the package when the file is missing.
take() {
  [ -f "$1/$2" ] || die "$1 has no $2: is deps/web.lock pinned to another version than the script expects?"
  cp "$1/$2" "$out/$3"
}

marked=$(unpack "$(fetch_pkg "$WEB_PKG_MARKED")")
take "$marked" lib/marked.umd.js marked.umd.js
take "$marked" LICENSE LICENSE-marked
purify=$(unpack "$(fetch_pkg "$WEB_PKG_DOMPURIFY")")
take "$purify" dist/purify.min.js purify.min.js
take "$purify" LICENSE LICENSE-dompurify
hljs=$(unpack "$(fetch_pkg "$WEB_PKG_HLJS")")
take "$hljs" es/core.min.js hljs-core.min.js
take "$hljs" LICENSE LICENSE-highlight.js
for lang in $WEB_HLJS_LANGUAGES; do take "$hljs" "languages/$lang.min.js" "hljs-$lang.min.js"; done
uplot=$(unpack "$(fetch_pkg "$WEB_PKG_UPLOT")")
take "$uplot" dist/uPlot.iife.min.js uPlot.iife.min.js
take "$uplot" dist/uPlot.min.css uPlot.min.css
take "$uplot" LICENSE LICENSE-uplot
