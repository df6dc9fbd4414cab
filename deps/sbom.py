#!/usr/bin/env python3
"""deps/sbom.py ARTIFACT_DIR [BINARY...]: writes ARTIFACT_DIR/sbom.spdx.json, an SPDX 2.3 JSON
document of the artifact, next to its manifest.json.

It lists
  - sipp itself (version and git commit), with the BINARY files given (build/bin/sipp, libsipp.so);
  - the models sipp ships (models/models.json), each with its SHA-256 and how it was trained;
  - every file of the artifact with its SHA-1 and SHA-256 and its origin, taken from the manifest's
    "files" list that deps/fetch.sh wrote as it copied each file: an npm package (name, version,
    registry integrity) or a build from the pinned llama.cpp commit (compiler and flags). A library
    that has no recorded origin is listed as NOASSERTION and reported on stderr, never guessed;
  - the npm packages and the llama.cpp source those files came from;
  - the npm packages bundled into the web page sipp embeds (deps/web.lock);
  - the Debian packages the binaries and the artifact's libraries link against (ldd, then
    dpkg-query for the package owning each system library and its installed version).
Relationships: the document DESCRIBES the artifact and sipp; sipp CONTAINS each shipped model; the
artifact CONTAINS each file; each file is GENERATED_FROM its origin package; sipp DEPENDS_ON the
artifact and each Debian package.

The SBOM names every file's hash, so signing it (with the manifest) signs the whole artifact:
`sipp artifact verify` checks each file against it. Nothing here needs a network.
"""

import base64
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys

SIPP_VERSION_DEFAULT = "0.1.0"
SBOM_NAME = "sbom.spdx.json"
# Files of an artifact that are about the artifact rather than part of it.
META_FILES = ("manifest.json", SBOM_NAME, "signature.json")
HASH_CHUNK = 1 << 20


def die(msg):
    print(f"sipp sbom: {msg}", file=sys.stderr)
    sys.exit(1)


def digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(HASH_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def created_time():
    """The document's creation time: SOURCE_DATE_EPOCH when set (a reproducible build, such as make
    image, stamps the commit's time so that two builds are the same bytes), else now."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch and epoch.isdigit()
            else datetime.datetime.now(datetime.timezone.utc))
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def spdx_id(kind, name):
    return f"SPDXRef-{kind}-" + re.sub(r"[^A-Za-z0-9.-]", "-", name)


def git_commit(root):
    try:
        out = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def sri_hex(integrity):
    """sha512-BASE64 -> hex, for an SPDX SHA512 checksum."""
    algo, _, b64 = integrity.partition("-")
    return algo.upper(), base64.b64decode(b64).hex()


def system_libraries(paths):
    """The system libraries (resolved paths) that the given ELF files load, per ldd."""
    found = set()
    for p in paths:
        try:
            out = subprocess.run(["ldd", p], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for m in re.finditer(r"=>\s+(/\S+)", out):
            lib = os.path.realpath(m.group(1))
            if lib.startswith(("/usr/", "/lib")):
                found.add(lib)
    return sorted(found)


def debian_packages(libs):
    """{package: version} for the Debian packages owning the libraries (dpkg-query)."""
    pkgs = {}
    for lib in libs:
        # dpkg records the path through the /usr merge as installed; try both spellings
        for candidate in (lib, lib.replace("/usr/lib/", "/lib/", 1)):
            r = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True)
            if r.returncode == 0:
                pkgs.setdefault(r.stdout.split(":")[0].strip(), None)
                break
    for name in list(pkgs):
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True)
        pkgs[name] = r.stdout.strip() if r.returncode == 0 else "NOASSERTION"
    return pkgs


MODEL_KEYS = ("name", "file", "sha256", "training")
MINIAUDIO_ID = "SPDXRef-Package-miniaudio"
PHASE_KEYS = ("phase", "corpus_sha256", "seed", "steps", "held_out_loss")


def npm_entry(pid, name, version, integrity, comment):
    """An SPDX package of an npm package of exact version, checked by its registry integrity."""
    algo, value = sri_hex(integrity)
    return {"SPDXID": pid, "name": name, "versionInfo": version, "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False, "checksums": [{"algorithm": algo, "checksumValue": value}],
            "licenseConcluded": "NOASSERTION", "licenseDeclared": "NOASSERTION", "copyrightText": "NOASSERTION",
            "comment": f"npm registry integrity {integrity}; {comment}",
            "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                              "referenceLocator": "pkg:npm/" + name.replace("@", "%40", 1) + "@" + version}]}


WEB_LOCK_RE = re.compile(r'^WEB_PKG_\w+="([^|"]+)\|([^|"]+)\|([^"]+)"', re.M)


def web_packages(root, sipp_id):
    """The web page's libraries (deps/web.lock): bundled into the page the sipp binary embeds."""
    try:
        with open(os.path.join(root, "deps", "web.lock"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return [], []
    packages, relationships = [], []
    for name, version, integrity in WEB_LOCK_RE.findall(text):
        pid = spdx_id("Package", f"npm-{name}-{version}")
        packages.append(npm_entry(pid, name, version, integrity,
                                  "bundled into the web page that sipp serve embeds (deps/web.lock)"))
        relationships.append({"spdxElementId": sipp_id, "relationshipType": "CONTAINS", "relatedSpdxElement": pid})
    return packages, relationships


def read_models(index):
    """models/models.json's "models" list, each entry checked for the fields the SBOM states."""
    try:
        with open(index, encoding="utf-8") as f:
            models = json.load(f)["models"]
        for m in models:
            missing = [k for k in MODEL_KEYS if k not in m] or [k for k in ("command", "phases") if k not in m["training"]]
            for p in [] if missing else m["training"]["phases"]:
                missing += [f"phases[].{k}" for k in PHASE_KEYS if k not in p]
                if len(p.get("held_out_loss", [])) != 2:
                    missing.append("phases[].held_out_loss as [before, after]")
            if missing:
                die(f"{index}: model {m.get('name', '?')!r} lacks {', '.join(missing)}; see docs/training.md")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        die(f"{index} is unreadable or not a {{\"models\": [...]}} object ({e!r}); see docs/training.md")
    return models


def model_packages(root, sipp_id):
    """The models sipp ships (models/models.json: the trained sipp-demo and its draft), each checked
    against its recorded SHA-256: (packages, relationships). A file that differs from its record is an
    error, since the record says how that file was made."""
    index = os.path.join(root, "models", "models.json")
    if not os.path.exists(index):
        return [], []
    models = read_models(index)
    packages, relationships = [], []
    for m in models:
        path = os.path.join(root, "models", m["file"])
        if not os.path.isfile(path):
            die(f"{path}, listed in {index}, is missing (git checkout models/)")
        got = digest(path, "sha256")
        if got != m["sha256"]:
            die(f"{path} has SHA-256 {got}, not the {m['sha256']} {index} records: retrain it with "
                "make demo-model and record the new run there")
        pid = spdx_id("Package", f"model-{m['name']}")
        train = m["training"]
        packages.append({
            "SPDXID": pid, "name": m["name"], "versionInfo": m.get("version", "NOASSERTION"), "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False, "packageFileName": f"models/{m['file']}",
            "checksums": [{"algorithm": "SHA1", "checksumValue": digest(path, "sha1")},
                          {"algorithm": "SHA256", "checksumValue": got}],
            "licenseConcluded": "NOASSERTION", "licenseDeclared": "NOASSERTION", "copyrightText": "NOASSERTION",
            "primaryPackagePurpose": "OTHER",
            "comment": f"a GGUF model trained from scratch by {train['command']}: " + "; ".join(
                f"phase {p['phase']}: corpus sha256 {p['corpus_sha256']}, seed {p['seed']}, {p['steps']} steps, "
                f"held-out loss {p['held_out_loss'][0]} -> {p['held_out_loss'][1]}" for p in train["phases"])
            + "; corpus prose from the Debian packages "
            + ", ".join(f"{k} {v}" for k, v in sorted(train.get("debian_packages", {}).items()))})
        relationships.append({"spdxElementId": sipp_id, "relationshipType": "CONTAINS", "relatedSpdxElement": pid})
    return packages, relationships


def main(argv):
    if len(argv) < 2:
        die("usage: deps/sbom.py ARTIFACT_DIR [BINARY...]")
    art = os.path.abspath(argv[1])
    binaries = [os.path.abspath(b) for b in argv[2:] if os.path.exists(b)]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        with open(os.path.join(art, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        die(f"{art}/manifest.json is missing or not JSON ({e}); make the artifact with make or sipp build")
    origins = {o["file"]: o for o in manifest.get("files", []) if isinstance(o, dict) and "file" in o}
    name = manifest.get("name", os.path.basename(art))
    version = os.environ.get("SIPP_VERSION", SIPP_VERSION_DEFAULT)
    commit = git_commit(root)
    llama_commit = manifest.get("llama_commit", "NOASSERTION")

    art_id = spdx_id("Package", f"artifact-{name}")
    sipp_id = "SPDXRef-Package-sipp"
    llama_id = "SPDXRef-Package-llama.cpp"
    packages = [
        {"SPDXID": sipp_id, "name": "sipp", "versionInfo": version, "downloadLocation": "NOASSERTION",
         "filesAnalyzed": False, "licenseConcluded": "NOASSERTION", "licenseDeclared": "NOASSERTION",
         "copyrightText": "NOASSERTION", "sourceInfo": f"git commit {commit}",
         "comment": "sipp's CLI and libsipp; " + ", ".join(
             f"{os.path.basename(b)} sha256 {digest(b, 'sha256')}" for b in binaries)},
        {"SPDXID": llama_id, "name": "llama.cpp", "versionInfo": manifest.get("llama_release", "NOASSERTION"),
         "downloadLocation": "NOASSERTION", "filesAnalyzed": False, "licenseConcluded": "NOASSERTION",
         "licenseDeclared": "MIT", "copyrightText": "NOASSERTION", "sourceInfo": f"git commit {llama_commit}",
         "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                           "referenceLocator": f"pkg:github/ggml-org/llama.cpp@{llama_commit}"}]},
        {"SPDXID": MINIAUDIO_ID, "name": "miniaudio", "versionInfo": "NOASSERTION", "downloadLocation": "NOASSERTION",
         "filesAnalyzed": False, "licenseConcluded": "NOASSERTION", "licenseDeclared": "MIT-0 OR Unlicense",
         "copyrightText": "NOASSERTION", "sourceInfo": f"llama.cpp git commit {llama_commit}, vendor/miniaudio",
         "comment": "source build: compiled into libsipp from the pinned llama.cpp's vendored copy "
                    "(src/model/miniaudio.c), to decode audio clips as libmtmd's helper does"},
    ]
    relationships = [
        {"spdxElementId": sipp_id, "relationshipType": "STATIC_LINK", "relatedSpdxElement": MINIAUDIO_ID},
        {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES", "relatedSpdxElement": art_id},
        {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES", "relatedSpdxElement": sipp_id},
        {"spdxElementId": sipp_id, "relationshipType": "DEPENDS_ON", "relatedSpdxElement": art_id},
    ]
    shipped, shipped_rels = model_packages(root, sipp_id)
    packages += shipped
    relationships += shipped_rels
    web, web_rels = web_packages(root, sipp_id)
    packages += web
    relationships += web_rels
    npm_ids = {}

    def npm_package(o, what):
        """The SPDX id of the npm package a file came from, added to the document once."""
        key = (o["package"], o["version"])
        if key not in npm_ids:
            pid = spdx_id("Package", f"npm-{o['package']}-{o['version']}")
            npm_ids[key] = pid
            packages.append(npm_entry(pid, o["package"], o["version"], o["integrity"], what))
            if o.get("origin") == "npm":
                relationships.append({"spdxElementId": pid, "relationshipType": "GENERATED_FROM",
                                      "relatedSpdxElement": llama_id})
        return npm_ids[key]

    files = []
    unknown = []
    for entry in sorted(os.listdir(art)):
        path = os.path.join(art, entry)
        if entry in META_FILES or entry.startswith(".") or os.path.islink(path) or not os.path.isfile(path):
            continue
        fid = spdx_id("File", entry)
        o = origins.get(entry)
        f = {"SPDXID": fid, "fileName": f"./{entry}",
             "checksums": [{"algorithm": "SHA1", "checksumValue": digest(path, "sha1")},
                           {"algorithm": "SHA256", "checksumValue": digest(path, "sha256")}],
             "licenseConcluded": "NOASSERTION", "copyrightText": "NOASSERTION"}
        relationships.append({"spdxElementId": art_id, "relationshipType": "CONTAINS", "relatedSpdxElement": fid})
        if o and o.get("origin") == "npm":
            pid = npm_package(o, f"prebuilt llama.cpp {manifest.get('llama_release')} ({llama_commit})")
            f["comment"] = f"from the npm package {o['package']}@{o['version']} ({o.get('path', entry)})"
            relationships.append({"spdxElementId": fid, "relationshipType": "GENERATED_FROM",
                                  "relatedSpdxElement": pid})
        elif o and o.get("origin") == "source" and o.get("package"):
            # a library built here from another pinned source package (libwhisper: whisper.cpp)
            pid = npm_package(o, f"sources of whisper.cpp {o.get('whisper_version', 'NOASSERTION')} "
                                 f"({o.get('source', 'NOASSERTION')}), built here against the pinned ggml")
            f["comment"] = (f"built from {o['package']}@{o['version']} ({o.get('source', '')}) with "
                            f"{o.get('compiler') or 'NOASSERTION'}; flags: {o.get('flags') or 'NOASSERTION'}")
            relationships.append({"spdxElementId": fid, "relationshipType": "GENERATED_FROM",
                                  "relatedSpdxElement": pid})
        elif o and o.get("origin") == "source":
            where = f" ({o['source']})" if o.get("source") else ""
            f["comment"] = (f"built from the pinned llama.cpp commit {o.get('commit', llama_commit)}{where} with "
                            f"{o.get('compiler') or 'NOASSERTION'}; flags: {o.get('flags') or 'NOASSERTION'}")
            relationships.append({"spdxElementId": fid, "relationshipType": "GENERATED_FROM",
                                  "relatedSpdxElement": llama_id})
        else:
            f["comment"] = "origin NOASSERTION: deps/fetch.sh recorded no origin for this file"
            unknown.append(entry)
        files.append(f)
    if unknown:
        print(f"sipp sbom: warning: no recorded origin for {', '.join(unknown)} in {art}/manifest.json "
              "(copy artifact files with put_npm or put_source in deps/fetch.sh)", file=sys.stderr)

    libs = [os.path.join(art, f["fileName"][2:]) for f in files if f["fileName"].endswith(".so")]
    for pkg, ver in sorted(debian_packages(system_libraries(binaries + libs)).items()):
        pid = spdx_id("Package", f"deb-{pkg}")
        packages.append({"SPDXID": pid, "name": pkg, "versionInfo": ver, "downloadLocation": "NOASSERTION",
                         "filesAnalyzed": False, "licenseConcluded": "NOASSERTION",
                         "licenseDeclared": "NOASSERTION", "copyrightText": "NOASSERTION",
                         "supplier": "Organization: Debian",
                         "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                                           "referenceLocator": f"pkg:deb/debian/{pkg}@{ver}"}]})
        relationships.append({"spdxElementId": sipp_id, "relationshipType": "DEPENDS_ON", "relatedSpdxElement": pid})

    # SPDX 2.3 7.9: the package verification code, the SHA-1 of the sorted SHA-1s of its files.
    sha1s = sorted(f["checksums"][0]["checksumValue"] for f in files)
    packages.insert(0, {
        "SPDXID": art_id, "name": f"sipp-artifact-{name}", "versionInfo": version,
        "downloadLocation": "NOASSERTION", "filesAnalyzed": True,
        "packageVerificationCode": {"packageVerificationCodeValue": hashlib.sha1("".join(sha1s).encode()).hexdigest()},
        "hasFiles": [f["SPDXID"] for f in files], "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "NOASSERTION", "licenseInfoFromFiles": ["NOASSERTION"], "copyrightText": "NOASSERTION",
        "comment": f"the llama.cpp libraries with the backends {'+'.join(manifest.get('backends', []))}"})

    manifest_sha = digest(os.path.join(art, "manifest.json"), "sha256")
    doc = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"sipp-artifact-{name}",
        "documentNamespace": f"urn:sipp:artifact:{name}:{manifest_sha}",
        "creationInfo": {
            "created": created_time(),
            "creators": [f"Tool: sipp-{version}"],
        },
        "documentDescribes": [art_id, sipp_id],
        "packages": packages,
        "files": files,
        "relationships": relationships,
    }
    tmp = os.path.join(art, SBOM_NAME + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, os.path.join(art, SBOM_NAME))
    print(os.path.join(art, SBOM_NAME))


if __name__ == "__main__":
    main(sys.argv)
