"""Signed images (issue 48): deploy/container/sign.sh signs the image with a GPG key (simple signing,
Debian's skopeo and gpg), and the policy it writes accepts that key's signature and nothing else.

A throwaway keyring made here holds sipp's test key and a stranger's. With the policy:
- the signed image copies (skopeo) and runs (podman run dir:...);
- an unsigned copy, one signed by the stranger, and one whose manifest was changed after signing
  (a label edited, the config and manifest re-digested so the image itself is consistent) are
  refused on copy and on run, each with the reason containers/image gives;
- a layer with one byte flipped is refused on copy too (its digest no longer matches; a run takes
  the genuine layer of that digest from its store, which the signed manifest names).

sign.sh signs with --remove-signatures: podman keeps the signatures of what it pulled, and a copy out
of its store would otherwise carry them along.

Skipped, with the reason, only where podman cannot run containers at all.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from tests.support import containers as ct
from tests.support.paths import ROOT

SIGN = os.path.join(ROOT, "deploy", "container", "sign.sh")
GPG_TIMEOUT_S = 60


class SigningTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tag = ct.image()
        cls.tmp = tempfile.mkdtemp(prefix="sipp-sign-")
        cls.gnupg = os.path.join(cls.tmp, "gnupg")
        os.mkdir(cls.gnupg, 0o700)
        cls.env = dict(ct.ENV, GNUPGHOME=cls.gnupg)
        cls.key = cls.gen_key("sipp test <sipp@test.invalid>")
        cls.stranger = cls.gen_key("stranger <stranger@test.invalid>")
        cls.signed = os.path.join(cls.tmp, "signed")
        r = subprocess.run(["bash", SIGN, cls.key, cls.tag, cls.signed], capture_output=True, text=True,
                           env=cls.env, timeout=ct.RUN_TIMEOUT_S)
        if r.returncode != 0:
            raise AssertionError(f"sign.sh failed: {r.stderr}")
        cls.policy = cls.signed + ".policy.json"

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def gen_key(cls, uid):
        subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never"],
                       check=True, capture_output=True, env=cls.env, timeout=GPG_TIMEOUT_S)
        out = subprocess.run(["gpg", "--batch", "--with-colons", "--list-keys", uid], check=True, capture_output=True,
                             text=True, env=cls.env, timeout=GPG_TIMEOUT_S).stdout
        return next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr"))

    def skopeo(self, *args):
        return subprocess.run(["skopeo", *args], capture_output=True, text=True, env=self.env,
                              timeout=ct.RUN_TIMEOUT_S)

    def copy_checked(self, src):
        """skopeo copy under the policy, into an OCI layout (which stores no signatures)."""
        dest = os.path.join(self.tmp, "out-" + os.path.basename(src))
        shutil.rmtree(dest, ignore_errors=True)
        return self.skopeo("copy", "--quiet", "--policy", self.policy, "--remove-signatures", f"dir:{src}",
                           f"oci:{dest}:x")

    def run_checked(self, src):
        return ct.podman("run", "--rm", "--network", "none", "--signature-policy", self.policy, f"dir:{src}",
                         "version", check=False)

    def copy_of_signed(self, name):
        dest = os.path.join(self.tmp, name)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(self.signed, dest)
        return dest

    def assert_refused(self, src, reason):
        for r in (self.copy_checked(src), self.run_checked(src)):
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn(reason, r.stderr)

    def test_policy_names_only_sipps_key(self):
        with open(self.policy, encoding="utf-8") as f:
            policy = json.load(f)
        self.assertEqual(policy["default"], [{"type": "reject"}])
        rule = policy["transports"]["dir"][""][0]
        self.assertEqual((rule["type"], rule["keyPath"]), ("signedBy", self.signed + ".pub.gpg"))
        self.assertEqual(rule["signedIdentity"]["dockerReference"], self.tag)

    def test_signed_image_copies_and_runs(self):
        self.assertTrue(os.path.exists(os.path.join(self.signed, "signature-1")))
        r = self.copy_checked(self.signed)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_checked(self.signed)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"sipp {ct.version()}", r.stdout)

    def test_unsigned_image_is_refused(self):
        unsigned = os.path.join(self.tmp, "unsigned")
        shutil.rmtree(unsigned, ignore_errors=True)
        r = self.skopeo("copy", "--quiet", "--remove-signatures", f"containers-storage:{self.tag}", f"dir:{unsigned}")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_refused(unsigned, "A signature was required, but no signature exists")

    def test_a_strangers_signature_is_refused(self):
        other = os.path.join(self.tmp, "stranger")
        r = subprocess.run(["bash", SIGN, self.stranger, self.tag, other], capture_output=True, text=True,
                           env=self.env, timeout=ct.RUN_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_refused(other, "Invalid GPG signature")

    def test_a_manifest_changed_after_signing_is_refused(self):
        tampered = self.copy_of_signed("tampered")
        with open(os.path.join(tampered, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        old = manifest["config"]["digest"].split(":", 1)[1]
        with open(os.path.join(tampered, old), encoding="utf-8") as f:
            config = json.load(f)
        config["config"]["Labels"]["io.sipp.flavor"] = "tampered"
        raw = json.dumps(config).encode()
        new = hashlib.sha256(raw).hexdigest()
        os.remove(os.path.join(tampered, old))
        with open(os.path.join(tampered, new), "wb") as f:
            f.write(raw)
        manifest["config"].update(digest="sha256:" + new, size=len(raw))
        with open(os.path.join(tampered, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump(manifest, f)
        self.assert_refused(tampered, "does not match")

    def test_a_flipped_layer_byte_is_refused(self):
        tampered = self.copy_of_signed("flipped")
        with open(os.path.join(tampered, "manifest.json"), encoding="utf-8") as f:
            layer = json.load(f)["layers"][-1]["digest"].split(":", 1)[1]
        path = os.path.join(tampered, layer)
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0xFF]))
        # on copy: podman run would take the genuine layer of that digest already in its store
        r = self.copy_checked(tampered)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertRegex(r.stderr, "[Dd]igest")


if __name__ == "__main__":
    unittest.main()
