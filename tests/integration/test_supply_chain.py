"""The supply chain (issue 20): the SPDX SBOM of every artifact, Ed25519 signatures, SIPP_REQUIRE_SIGNED,
the release tarball and make install, and the man page made from the --help table.

The SBOM is checked against the real default artifact: its required SPDX 2.3 fields, that every
relationship names an element of the document, and that every file's SHA-1 and SHA-256 match the
file on disk. Signing uses keys the test makes with openssl. The tarball is installed into a fresh
directory and the demo-sized model runs from the installed tree with PATH limited to it and an
otherwise empty environment.
"""

import base64
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.integration import test_gateway_support as gw
from tests.integration.common import BUILD, ROOT, SIPP, make_model, run_sipp
from tests.integration.test_commands import TargetRecord

ART = os.path.realpath(os.path.join(ROOT, "build", "artifact"))
META = ("manifest.json", "sbom.spdx.json", "signature.json")
MAKE_TIMEOUT_S = 600


def sha(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def lock(name="llama.lock"):
    """A deps/*.lock's packages: {name: (version, integrity)}."""
    out = {}
    with open(os.path.join(ROOT, "deps", name)) as f:
        for m in re.finditer(r'^(?:WEB_)?PKG_\w+="([^|]+)\|([^|]+)\|([^"]+)"', f.read(), re.M):
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


def keypair(directory, name):
    key, pub = os.path.join(directory, f"{name}.pem"), os.path.join(directory, f"{name}.pub.pem")
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out", pub], check=True, capture_output=True)
    return key, pub


def libraries(art):
    return sorted(f for f in os.listdir(art) if f.endswith(".so") and not os.path.islink(os.path.join(art, f)))


def flip_byte(path, offset=4096):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


class SbomTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(ART, "sbom.spdx.json")) as f:
            cls.doc = json.load(f)
        with open(os.path.join(ART, "manifest.json")) as f:
            cls.manifest = json.load(f)

    def test_required_spdx_fields(self):
        d = self.doc
        self.assertEqual(d["spdxVersion"], "SPDX-2.3")
        self.assertEqual(d["dataLicense"], "CC0-1.0")
        self.assertEqual(d["SPDXID"], "SPDXRef-DOCUMENT")
        self.assertTrue(d["name"])
        self.assertRegex(d["documentNamespace"], r"^[a-z]+:\S+$")
        self.assertRegex(d["creationInfo"]["created"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertTrue(d["creationInfo"]["creators"][0].startswith("Tool: sipp-"))
        for p in d["packages"]:
            for key in ("SPDXID", "name", "downloadLocation", "copyrightText"):
                self.assertIn(key, p, p["name"])
            self.assertTrue(p["SPDXID"].startswith("SPDXRef-"))
        for f in d["files"]:
            algos = {c["algorithm"] for c in f["checksums"]}
            self.assertIn("SHA1", algos)  # SPDX 2.3 requires a SHA1 for every file
            self.assertIn("SHA256", algos)
        ids = [x["SPDXID"] for x in d["packages"] + d["files"]] + ["SPDXRef-DOCUMENT"]
        self.assertEqual(len(ids), len(set(ids)), "SPDXIDs are unique")
        for r in d["relationships"]:
            self.assertIn(r["spdxElementId"], ids)
            self.assertIn(r["relatedSpdxElement"], ids)
        for ref in d["documentDescribes"]:
            self.assertIn(ref, ids)

    def test_every_file_with_its_hashes(self):
        files = {f["fileName"][2:]: f for f in self.doc["files"]}
        on_disk = [n for n in os.listdir(ART) if n not in META and not os.path.islink(os.path.join(ART, n))]
        self.assertEqual(sorted(files), sorted(on_disk))
        self.assertIn("libggml-base.so", files)
        for name, f in files.items():
            sums = {c["algorithm"]: c["checksumValue"] for c in f["checksums"]}
            self.assertEqual(sums["SHA256"], sha(os.path.join(ART, name), "sha256"), name)
            self.assertEqual(sums["SHA1"], sha(os.path.join(ART, name), "sha1"), name)
        art_pkg = self.doc["packages"][0]
        code = hashlib.sha1("".join(sorted(
            next(c["checksumValue"] for c in f["checksums"] if c["algorithm"] == "SHA1") for f in files.values()
        )).encode()).hexdigest()
        self.assertEqual(art_pkg["packageVerificationCode"]["packageVerificationCodeValue"], code)
        contained = {r["relatedSpdxElement"] for r in self.doc["relationships"]
                     if r["relationshipType"] == "CONTAINS" and r["spdxElementId"] == art_pkg["SPDXID"]}
        self.assertEqual(contained, {f["SPDXID"] for f in files.values()})

    def test_libmtmd_is_a_recorded_source_build(self):
        # llama.cpp's multimodal library is in every artifact, compiled here from the pinned commit
        files = {f["fileName"]: f for f in self.doc["files"]}
        self.assertIn("./libmtmd.so", files)
        self.assertIn(f"built from the pinned llama.cpp commit {self.manifest['llama_commit']} (tools/mtmd)",
                      files["./libmtmd.so"]["comment"])
        built = {b["module"]: b for b in self.manifest["source_builds"]}
        self.assertEqual(built["libmtmd.so"]["source"], "tools/mtmd")

    def test_origins_are_the_pinned_npm_packages(self):
        pins = lock()
        pkgs = {p["SPDXID"]: p for p in self.doc["packages"]}
        origin = {r["spdxElementId"]: pkgs[r["relatedSpdxElement"]] for r in self.doc["relationships"]
                  if r["relationshipType"] == "GENERATED_FROM" and r["spdxElementId"].startswith("SPDXRef-File-")}
        for f in self.doc["files"]:
            p = origin.get(f["SPDXID"])
            self.assertIsNotNone(p, f"{f['fileName']} has no origin")
            built = [b for b in self.manifest.get("source_builds", []) if "./" + b["module"] == f["fileName"]]
            if built and built[0].get("package"):
                # libwhisper: compiled here from another pinned package (deps/whisper.lock), with its
                # compiler and flags, and that package's integrity.
                name, version = built[0]["package"].split("@")
                self.assertEqual((p["name"], p["versionInfo"]), (name, version), f["fileName"])
                self.assertEqual(lock("whisper.lock")[name], (version, built[0]["integrity"]))
                self.assertIn(built[0]["integrity"], p["comment"])
                self.assertIn(built[0]["compiler"], f["comment"])
                self.assertIn(built[0]["flags"], f["comment"])
                continue
            if built:
                # A module compiled here (rpc): from the pinned commit, with its compiler and flags.
                self.assertEqual(p["name"], "llama.cpp", f["fileName"])
                self.assertIn(self.manifest["llama_commit"], p["sourceInfo"])
                self.assertIn(built[0]["compiler"], f["comment"])
                self.assertIn(built[0]["flags"], f["comment"])
                continue
            self.assertIn(p["name"], pins, f["fileName"])
            version, integrity = pins[p["name"]]
            self.assertEqual(p["versionInfo"], version)
            self.assertIn(integrity, p["comment"])
            algo, b64 = integrity.split("-", 1)
            self.assertEqual(p["checksums"], [{"algorithm": algo.upper(), "checksumValue": base64.b64decode(b64).hex()}])
        if "vulkan" in self.manifest["backends"]:
            vk = [f for f in self.doc["files"] if f["fileName"] == "./libggml-vulkan.so"][0]
            self.assertEqual(origin[vk["SPDXID"]]["name"], "@node-llama-cpp/linux-x64-vulkan")

    def test_the_web_pages_libraries(self):
        """The npm packages bundled into the page the binary embeds (deps/web.lock), each with its
        integrity as its checksum, contained in sipp."""
        pins = lock("web.lock")
        self.assertIn("marked", pins)
        pkgs = {p["name"]: p for p in self.doc["packages"]}
        for name, (version, integrity) in pins.items():
            p = pkgs[name]
            self.assertEqual(p["versionInfo"], version, name)
            algo, b64 = integrity.split("-", 1)
            self.assertEqual(p["checksums"], [{"algorithm": algo.upper(), "checksumValue": base64.b64decode(b64).hex()}])
            self.assertIn({"spdxElementId": "SPDXRef-Package-sipp", "relationshipType": "CONTAINS",
                           "relatedSpdxElement": p["SPDXID"]}, self.doc["relationships"])

    def test_sipp_and_the_debian_packages(self):
        pkgs = {p["name"]: p for p in self.doc["packages"]}
        sipp = pkgs["sipp"]
        self.assertEqual(sipp["versionInfo"], run_sipp(["version"], check=True).stdout.split()[1])
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        self.assertEqual(sipp["sourceInfo"], f"git commit {head}" if head else sipp["sourceInfo"])
        self.assertEqual(pkgs["llama.cpp"]["sourceInfo"], f"git commit {self.manifest['llama_commit']}")
        for deb in ("libjansson4", "libmicrohttpd12", "libcurl4", "libssl3", "libc6"):
            self.assertIn(deb, pkgs)
            want = subprocess.run(["dpkg-query", "-W", "-f=${Version}", deb], capture_output=True, text=True).stdout
            self.assertEqual(pkgs[deb]["versionInfo"], want)
            self.assertIn({"spdxElementId": "SPDXRef-Package-sipp", "relationshipType": "DEPENDS_ON",
                           "relatedSpdxElement": pkgs[deb]["SPDXID"]}, self.doc["relationships"])

    def test_the_shipped_models_with_their_record(self):
        with open(os.path.join(ROOT, "models", "models.json")) as f:
            records = json.load(f)["models"]
        pkgs = {p["name"]: p for p in self.doc["packages"]}
        for m in records:
            pkg = pkgs[m["name"]]
            sums = {c["algorithm"]: c["checksumValue"] for c in pkg["checksums"]}
            with open(os.path.join(ROOT, "models", m["file"]), "rb") as f:
                data = f.read()
            self.assertEqual(sums["SHA256"], m["sha256"])
            self.assertEqual(sums["SHA256"], hashlib.sha256(data).hexdigest())
            self.assertEqual(sums["SHA1"], hashlib.sha1(data).hexdigest())
            for phase in m["training"]["phases"]:
                self.assertIn(phase["corpus_sha256"], pkg["comment"])
            self.assertIn({"spdxElementId": "SPDXRef-Package-sipp", "relationshipType": "CONTAINS",
                           "relatedSpdxElement": pkg["SPDXID"]}, self.doc["relationships"])
        self.assertIn("sipp-demo", {m["name"] for m in records})

    def test_a_model_unlike_its_record_is_refused(self):
        sys.path.insert(0, os.path.join(ROOT, "deps"))
        import sbom
        with tempfile.TemporaryDirectory(prefix="sipp-sbom-models-") as d:
            os.mkdir(os.path.join(d, "models"))
            shutil.copy(os.path.join(ROOT, "models", "models.json"), os.path.join(d, "models"))
            with open(os.path.join(d, "models", "sipp-demo.gguf"), "wb") as f:
                f.write(b"GGUF not the trained one")
            for write, expect in ((None, "not the"), ('{"models": [{"name": "x"}]}', "lacks file, sha256, training"),
                                  ("{", "is unreadable")):
                if write is not None:
                    with open(os.path.join(d, "models", "models.json"), "w") as f:
                        f.write(write)
                err = io.StringIO()
                with self.assertRaises(SystemExit), contextlib.redirect_stderr(err):
                    sbom.model_packages(d, "SPDXRef-Package-sipp")
                self.assertIn(expect, err.getvalue())

    def test_source_built_and_unrecorded_files(self):
        """A module built from source (as rpc's is) carries its compiler and flags; a file fetch.sh did not
        record is NOASSERTION, with a warning, never a guessed origin."""
        tmp = tempfile.mkdtemp(prefix="sipp-sbom-")
        try:
            art = os.path.join(tmp, "art")
            os.mkdir(art)
            shutil.copy(os.path.join(ART, "libggml-base.so"), art)
            for name in ("libggml-rpc.so", "libmystery.so"):
                with open(os.path.join(art, name), "wb") as f:
                    f.write(name.encode())
            m = dict(self.manifest, files=[
                next(o for o in self.manifest["files"] if o["file"] == "libggml-base.so"),
                {"file": "libggml-rpc.so", "origin": "source", "commit": self.manifest["llama_commit"],
                 "compiler": "cc (Debian 12.2.0-14) 12.2.0", "flags": "-DGGML_RPC=ON"}])
            with open(os.path.join(art, "manifest.json"), "w") as f:
                json.dump(m, f)
            p = subprocess.run([sys.executable, os.path.join(ROOT, "deps", "sbom.py"), art], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("no recorded origin for libmystery.so", p.stderr)
            with open(os.path.join(art, "sbom.spdx.json")) as f:
                files = {x["fileName"]: x for x in json.load(f)["files"]}
            self.assertIn("built from the pinned llama.cpp commit", files["./libggml-rpc.so"]["comment"])
            self.assertIn("-DGGML_RPC=ON", files["./libggml-rpc.so"]["comment"])
            self.assertIn("NOASSERTION", files["./libmystery.so"]["comment"])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_doctor_and_backends_route_point_at_it(self):
        d = json.loads(run_sipp(["doctor", "--json"], check=True).stdout)
        self.assertEqual(d["artifact"]["sbom"], os.path.join(ART, "sbom.spdx.json"))
        g = gw.serve_model(gw.model("tiny"))
        try:
            status, _, body = g.json("GET", "/v1/backends")
        finally:
            g.stop()
        self.assertEqual(status, 200)
        self.assertEqual(body["sbom"], os.path.join(body["artifact"], "sbom.spdx.json"))
        self.assertTrue(os.path.exists(body["sbom"]))


class SignatureTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sipp-sign-")
        cls.key, cls.pub = keypair(cls.tmp, "release")
        cls.other_key, cls.other_pub = keypair(cls.tmp, "other")
        cls.art = os.path.join(cls.tmp, "signed")
        # the build records this artifact for the cli target; the record is put back as it was
        cls.record = TargetRecord("cli").__enter__()
        p = run_sipp(["build", "--backend", "cpu", "--out", cls.art, "--sign", cls.key])
        if p.returncode != 0:
            raise AssertionError(p.stderr)
        cls.model = make_model(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        cls.record.__exit__(None, None, None)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def copy(self, name):
        dst = os.path.join(self.tmp, name)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(self.art, dst, symlinks=True)
        return dst

    def verify(self, art, key=None):
        return run_sipp(["artifact", "verify", art, *(["--key", key] if key else [])], threads=False)

    def test_signed_artifact_verifies(self):
        for f in META:
            self.assertTrue(os.path.exists(os.path.join(self.art, f)), f)
        p = self.verify(self.art, self.pub)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("verifies with", p.stdout)
        p = self.verify(self.art)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("integrity only", p.stdout)

    def test_another_key_is_refused(self):
        p = self.verify(self.art, self.other_pub)
        self.assertEqual(p.returncode, 1)
        self.assertIn("signed by another key", p.stderr)

    def test_a_flipped_byte_in_any_library_is_named(self):
        libs = libraries(self.art)
        self.assertGreater(len(libs), 3)
        for lib in libs:
            art = self.copy("flipped")
            flip_byte(os.path.join(art, lib))
            p = self.verify(art, self.pub)
            self.assertEqual(p.returncode, 1, lib)
            self.assertIn(f"{lib} differs from the signed SBOM", p.stderr)
            self.assertEqual(p.stderr.count("\n"), 1, p.stderr)

    def test_changed_documents_added_files_and_links(self):
        art = self.copy("manifest")
        with open(os.path.join(art, "manifest.json"), "a") as f:
            f.write(" ")
        p = self.verify(art, self.pub)
        self.assertIn("manifest.json differs from the signed one", p.stderr)
        art = self.copy("sbom")
        with open(os.path.join(art, "sbom.spdx.json"), "a") as f:
            f.write(" ")
        self.assertIn("sbom.spdx.json differs from the signed one", self.verify(art, self.pub).stderr)
        art = self.copy("added")
        shutil.copy(os.path.join(art, "libggml-base.so"), os.path.join(art, "libggml-extra.so"))
        self.assertIn("libggml-extra.so is not in the signed SBOM", self.verify(art, self.pub).stderr)
        art = self.copy("link")
        os.remove(os.path.join(art, "libllama.so"))
        os.symlink(os.path.join(self.tmp, "elsewhere.so"), os.path.join(art, "libllama.so"))
        self.assertIn("libllama.so is not in the signed SBOM", self.verify(art, self.pub).stderr)
        art = self.copy("sig")
        with open(os.path.join(art, "signature.json")) as f:
            sig = json.load(f)
        sig["signature"] = sig["signature"][:10] + ("A" if sig["signature"][10] != "A" else "B") + sig["signature"][11:]
        with open(os.path.join(art, "signature.json"), "w") as f:
            json.dump(sig, f)
        self.assertIn("signature.json does not verify", self.verify(art, self.pub).stderr)

    def test_unsigned_and_bad_keys(self):
        art = self.copy("unsigned-verify")
        os.remove(os.path.join(art, "signature.json"))
        p = self.verify(art, self.pub)
        self.assertEqual(p.returncode, 1)
        self.assertIn("is not signed (no signature.json)", p.stderr)
        p = run_sipp(["build", "--backend", "cpu", "--out", os.path.join(self.tmp, "x"), "--sign",
                      os.path.join(self.tmp, "missing.pem")])
        self.assertEqual(p.returncode, 2)
        self.assertIn("openssl genpkey -algorithm ed25519", p.stderr)
        p = run_sipp(["artifact", "sign", self.copy("rsa"), "--key", self.pub], threads=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("not an Ed25519 private key", p.stderr)
        self.assertEqual(run_sipp(["artifact", "frobnicate", self.art], threads=False).returncode, 2)

    def test_require_signed_refuses_what_does_not_verify(self):
        env = {"SIPP_REQUIRE_SIGNED": self.pub}
        p = run_sipp([self.model, "Hi", "--max-tokens", "2", "--artifact", self.art], env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        art = self.copy("flipped-run")
        flip_byte(os.path.join(art, "libggml-base.so"))
        p = run_sipp([self.model, "Hi", "--max-tokens", "2", "--artifact", art], env=env)
        self.assertEqual(p.returncode, 1)
        self.assertIn("SIPP_REQUIRE_SIGNED", p.stderr)
        self.assertIn("libggml-base.so differs", p.stderr)
        unsigned = os.path.join(self.tmp, "unsigned")
        shutil.rmtree(unsigned, ignore_errors=True)
        shutil.copytree(self.art, unsigned, symlinks=True)
        os.remove(os.path.join(unsigned, "signature.json"))
        p = run_sipp(["backends", "--artifact", unsigned], env=env)
        self.assertEqual(p.returncode, 1)
        self.assertIn("is not signed", p.stderr)
        p = run_sipp(["backends", "--artifact", self.art], env={"SIPP_REQUIRE_SIGNED": self.other_pub})
        self.assertEqual(p.returncode, 1)
        self.assertIn("signed by another key", p.stderr)
        # the bindings go through the same sipp_runtime_init
        code = ("import sipp\ntry:\n    sipp.runtime_info()\nexcept sipp.SippError as e:\n    print('REFUSED', e)\n")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"), SIPP_ARTIFACT=unsigned,
                   SIPP_REQUIRE_SIGNED=self.pub)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        self.assertIn("REFUSED", r.stdout, r.stderr)
        self.assertIn("is not signed", r.stdout)


class ReleaseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sipp-release-")
        p = subprocess.run(["make", "--no-print-directory", "dist"], cwd=ROOT, capture_output=True, text=True,
                           timeout=MAKE_TIMEOUT_S)
        if p.returncode != 0:
            raise AssertionError(f"make dist failed: {p.stdout}{p.stderr}")
        cls.tarball = p.stdout.strip().splitlines()[-1]
        cls.model = make_model(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_installed(self, prefix, *args):
        env = {"PATH": os.path.join(prefix, "bin"), "HOME": self.tmp}
        return subprocess.run(["sipp", *args], env=env, capture_output=True, text=True, timeout=300,
                              cwd=self.tmp)

    def test_tarball_installs_and_runs_from_the_installed_tree(self):
        self.assertTrue(os.path.basename(self.tarball).startswith("sipp-"))
        self.assertTrue(self.tarball.endswith("-linux-x64.tar.gz"))
        unpack = os.path.join(self.tmp, "unpack")
        os.mkdir(unpack)
        subprocess.run(["tar", "xzf", self.tarball, "-C", unpack], check=True)
        (top,) = os.listdir(unpack)
        tree = os.path.join(unpack, top)
        for rel in ("bin/sipp", "lib/libsipp.so", "include/sipp.h", "lib/pkgconfig/sipp.pc",
                    "share/man/man1/sipp.1", "share/sipp/web/index.html", "share/sipp/web/app.js", "install.sh",
                    "lib/sipp/artifact/manifest.json", "lib/sipp/artifact/sbom.spdx.json",
                    "lib/sipp/artifact/libmtmd.so"):
            self.assertTrue(os.path.exists(os.path.join(tree, rel)), rel)
        prefix = os.path.join(self.tmp, "prefix")
        p = subprocess.run(["bash", os.path.join(tree, "install.sh"), "--prefix", prefix], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        shutil.rmtree(unpack)  # the installed tree must not need the unpacked one
        p = self.run_installed(prefix, self.model, "Hello", "--max-tokens", "4", "--threads", "1", "--seed", "1",
                               "--stats", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        stats = json.loads(p.stderr.strip().splitlines()[-1])
        self.assertEqual(stats["generated_tokens"], 4)
        d = json.loads(self.run_installed(prefix, "doctor", "--json").stdout)
        self.assertTrue(d["artifact"]["dir"].startswith(prefix), d["artifact"])
        self.assertEqual(d["artifact"]["sbom"], os.path.join(d["artifact"]["dir"], "sbom.spdx.json"))
        p = self.run_installed(prefix, "artifact", "verify", os.path.join(prefix, "lib", "sipp", "artifact"))
        self.assertEqual(p.returncode, 1)  # the release artifact is not signed unless its maker signs it
        self.assertIn("is not signed", p.stderr)
        # the installed SBOM names the installed binaries (their run paths differ from the build tree's)
        with open(os.path.join(prefix, "lib", "sipp", "artifact", "sbom.spdx.json")) as f:
            sipp_pkg = next(p for p in json.load(f)["packages"] if p["name"] == "sipp")
        self.assertIn(f"sipp sha256 {sha(os.path.join(prefix, 'bin', 'sipp'), 'sha256')}", sipp_pkg["comment"])
        self.assertIn(f"libsipp.so sha256 {sha(os.path.join(prefix, 'lib', 'libsipp.so'), 'sha256')}",
                      sipp_pkg["comment"])
        # a program built against the installed headers and pkg-config file
        src = os.path.join(self.tmp, "hello.c")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n#include <sipp.h>\nint main(void) { printf("%s\\n", sipp_version()); '
                    'return 0; }\n')
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "sipp"], env=env, capture_output=True,
                               text=True, check=True).stdout.split()
        exe = os.path.join(self.tmp, "hello")
        subprocess.run(["cc", src, "-o", exe, *flags], check=True, capture_output=True, timeout=120)
        self.assertEqual(subprocess.run([exe], capture_output=True, text=True, env={}).stdout.strip(),
                         run_sipp(["version"], check=True).stdout.split()[1])

    def test_signed_release(self):
        key, pub = keypair(self.tmp, "release")
        p = subprocess.run(["make", "--no-print-directory", "dist", f"SIGN={key}"], cwd=ROOT, capture_output=True,
                           text=True, timeout=MAKE_TIMEOUT_S)
        self.assertEqual(p.returncode, 0, p.stderr)
        unpack = os.path.join(self.tmp, "signed-unpack")
        os.makedirs(unpack, exist_ok=True)
        subprocess.run(["tar", "xzf", p.stdout.strip().splitlines()[-1], "-C", unpack], check=True)
        (top,) = os.listdir(unpack)
        art = os.path.join(unpack, top, "lib", "sipp", "artifact")
        v = run_sipp(["artifact", "verify", art, "--key", pub], threads=False)
        self.assertEqual(v.returncode, 0, v.stderr)
        # and the unsigned tarball is what make dist writes again without SIGN
        subprocess.run(["make", "--no-print-directory", "dist"], cwd=ROOT, capture_output=True, timeout=MAKE_TIMEOUT_S,
                       check=True)

    def test_destdir_and_make_install(self):
        dest = os.path.join(self.tmp, "dest")
        p = subprocess.run(["make", "--no-print-directory", "install", "PREFIX=/opt/sipp-test", f"DESTDIR={dest}"],
                           cwd=ROOT, capture_output=True, text=True, timeout=MAKE_TIMEOUT_S)
        self.assertEqual(p.returncode, 0, p.stderr)
        root = os.path.join(dest, "opt", "sipp-test")
        with open(os.path.join(root, "lib", "pkgconfig", "sipp.pc")) as f:
            self.assertIn("prefix=/opt/sipp-test\n", f.read())
        p = self.run_installed(root, "version")
        self.assertEqual(p.returncode, 0, p.stderr)
        p = subprocess.run(["bash", os.path.join(BUILD, "stage", "install.sh"), "--prefix", "relative"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("must be an absolute path", p.stderr)

    def test_man_page_lists_every_command_of_help(self):
        help_text = run_sipp(["--help"], check=True).stdout
        commands = re.findall(r"^  ([a-z-]+) ", help_text.split("commands:")[1].split("environment:")[0], re.M)
        self.assertIn("artifact", commands)
        self.assertIn("run", commands)
        man = os.path.join(BUILD, "share", "man", "man1", "sipp.1")
        with open(man) as f:
            page = f.read()
        self.assertEqual(page, subprocess.run([SIPP, "--man"], capture_output=True, text=True).stdout)
        listed = re.findall(r"^\.TP\n\.B (.+)$", page.split(".SH COMMANDS")[1].split(".SH ENVIRONMENT")[0], re.M)
        self.assertEqual([c.replace("\\-", "-") for c in listed], commands)
        if shutil.which("man"):
            rendered = subprocess.run(["man", "-l", man], capture_output=True, text=True,
                                      env=dict(os.environ, MANPAGER="cat", MANWIDTH="100")).stdout
            for c in commands:
                self.assertIn(c, rendered)


if __name__ == "__main__":
    unittest.main()
