#!/usr/bin/env python3
"""bundle_web.py OUT_DIR VENDOR_DIR --js PAGE.js... --css PAGE.css...: writes the web page's /app.js and
/style.css into OUT_DIR, each one file, so the page costs two requests beside index.html and the
gateway's route table names the same files as before.

app.js is the libraries deps/fetch-web.sh put in VENDOR_DIR (marked, DOMPurify, highlight.js's core
and languages, uPlot: each a classic script that sets one global) followed by the page's own files in
the order given, inside one function with strict mode, so the page's names stay out of `window`.
highlight.js's core comes as an ES module (`export{X as default}`): it is unwrapped into
`var hljs = ...`, which its language files (classic scripts) register with. style.css is uPlot's CSS
followed by the page's. Source map comments are dropped: nothing is fetched at run time.

A library missing from VENDOR_DIR, or a core whose export is not the expected form, is an error that
names the file: the lock and this script must move together.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LOCK = os.path.join(HERE, "..", "deps", "web.lock")
# (file in VENDOR_DIR, lock variable, licence): in the order they are loaded.
LIBS = [("marked.umd.js", "WEB_PKG_MARKED", "MIT"),
        ("purify.min.js", "WEB_PKG_DOMPURIFY", "MPL-2.0 OR Apache-2.0"),
        ("hljs-core.min.js", "WEB_PKG_HLJS", "BSD-3-Clause"),
        ("uPlot.iife.min.js", "WEB_PKG_UPLOT", "MIT")]
HLJS_EXPORT = re.compile(r"export\s*\{\s*(\w+)\s+as\s+default\s*\}\s*;?\s*$")
SOURCE_MAP = re.compile(r"^//# sourceMappingURL=.*$", re.M)


def die(msg):
    sys.exit(f"bundle_web.py: {msg}")


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        die(f"cannot read {path}: {e.strerror} (run deps/fetch-web.sh, which make runs)")


def lock_packages():
    lock = read(LOCK)
    pins = {m[0]: (m[1], m[2]) for m in re.findall(r'^(WEB_PKG_\w+)="([^|"]+)\|([^|"]+)\|', lock, re.M)}
    langs = re.search(r'^WEB_HLJS_LANGUAGES="([^"]*)"', lock, re.M)
    return pins, (langs.group(1).split() if langs else [])


def library(vendor, name, pin, licence):
    text = SOURCE_MAP.sub("", read(os.path.join(vendor, name))).rstrip() + "\n"
    if name == "hljs-core.min.js":
        m = HLJS_EXPORT.search(text)
        if not m:
            die(f"{name}: no `export{{X as default}}` at its end; highlight.js changed its build")
        text = f"var hljs = (function () {{\n{text[:m.start()]}\nreturn {m.group(1)};\n}})();\n"
    return f"/* ---- {pin[0]} {pin[1]} ({licence}): {name} ---- */\n{text}"


def bundle_js(vendor, pages):
    pins, langs = lock_packages()
    parts = ["/* sipp's web page, written by scripts/bundle_web.py: the libraries of deps/web.lock, then the\n"
             " * page's own code (web/src/). Do not edit; edit those and run make. */\n"]
    for name, var, licence in LIBS:
        if var not in pins:
            die(f"deps/web.lock has no {var}")
        parts.append(library(vendor, name, pins[var], licence))
        if name == "hljs-core.min.js":
            parts += [SOURCE_MAP.sub("", read(os.path.join(vendor, f"hljs-{lang}.min.js"))).rstrip() + "\n"
                      for lang in langs]
    parts.append("(function () {\n'use strict';\n")
    for p in pages:
        parts.append(f"/* ---- {p} ---- */\n{read(p).replace(chr(39) + 'use strict' + chr(39) + ';', '', 1)}")
    parts.append("})();\n")
    return "".join(parts)


def bundle_css(vendor, pages):
    parts = ["/* sipp's web page, written by scripts/bundle_web.py: uPlot's CSS, then the page's. */\n",
             read(os.path.join(vendor, "uPlot.min.css")).rstrip() + "\n"]
    parts += [f"/* ---- {p} ---- */\n{read(p)}" for p in pages]
    return "".join(parts)


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    if len(sys.argv) < 4:
        die("usage: bundle_web.py OUT_DIR VENDOR_DIR --js PAGE.js... --css PAGE.css...")
    out, vendor, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    files = {"--js": [], "--css": []}
    kind = None
    for a in rest:
        if a in files:
            kind = a
        elif kind is None:
            die(f"{a}: name --js or --css before the page's files")
        else:
            files[kind].append(a)
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "app.js"), bundle_js(vendor, files["--js"]))
    write(os.path.join(out, "style.css"), bundle_css(vendor, files["--css"]))


if __name__ == "__main__":
    main()
