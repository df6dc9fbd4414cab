"""The model store end to end: `sipp pull`, `sipp models list|info|rm|path`, against a real HTTP server
on 127.0.0.1 (httpfixture.py) that can drop connections, ignore Range and answer 404.

What a user relies on: a pull either puts a complete, checked model in the store or leaves the store as
it was (a .part in partial/ at most, for resuming); an interrupted pull resumes instead of starting
over; a known hash is checked and a mismatch deletes the download; every failure is one line on
stderr and exit status 1. Models are synthetic (build/bin/sipp-synth, and split sets written here
with a minimal GGUF writer), so nothing leaves the machine: all traffic is loopback, every
subprocess has a timeout, and the server runs in this process.
"""

import hashlib
import json
import os
import pty
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpfixture import HTTPFixture, closed_port  # noqa: E402

BUILD = os.environ.get("SIPP_BUILD", "build")
SIPP = os.path.join(BUILD, "bin", "sipp")
SYNTH = os.path.join(BUILD, "bin", "sipp-synth")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_TIMEOUT_S = 60
PTY_TIMEOUT_S = 30
EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2
TINY = ["--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128",
        "--type", "q8_0", "--seed", "1"]
WRONG_SHA = "0" * 64
WRITE_LIMIT_BYTES = 1 << 20  # RLIMIT_FSIZE for the write-error test: smaller than the model


def vocab(name):
    for root in (BUILD, "build"):
        path = os.path.join(root, "llama", "vocab", "ggml-vocab-%s.gguf" % name)
        if os.path.exists(path):
            return path
    raise AssertionError("vocabulary %s not found; run make" % name)


def synth(out, vocab_name, *extra):
    r = subprocess.run([SYNTH, "--out", out, "--vocab", vocab(vocab_name)] + TINY + list(extra),
                       capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if r.returncode != 0:
        raise AssertionError("sipp-synth failed: %s" % r.stderr)
    with open(out, "rb") as f:
        return f.read()


# ---- a minimal GGUF v3 writer, for split sets (sipp-synth writes single files) ----------------------

GGUF_U16, GGUF_U32, GGUF_I32, GGUF_BOOL, GGUF_STRING = 2, 4, 5, 7, 8
GGUF_ALIGN = 32
GGML_F32 = 0


def _gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_file(kv, tensors):
    """kv: [(key, type, value)]; tensors: [(name, shape)] of f32 zeros."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)))
    for key, t, v in kv:
        out += _gguf_str(key) + struct.pack("<I", t)
        out += _gguf_str(v) if t == GGUF_STRING else struct.pack(
            {GGUF_U16: "<H", GGUF_U32: "<I", GGUF_I32: "<i", GGUF_BOOL: "<?"}[t], v)
    data, offset = bytearray(), 0
    for name, shape in tensors:
        out += _gguf_str(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", GGML_F32, offset)
        n = 4
        for d in shape:
            n *= d
        blob = bytes(n) + bytes(-n % GGUF_ALIGN)
        data += blob
        offset += len(blob)
    out += bytes(-len(out) % GGUF_ALIGN)
    return bytes(out + data)


SPLIT_TENSORS = [[("token_embd.weight", [8, 16])], [("blk.0.attn_q.weight", [8, 8])], [("output.weight", [8, 16])]]
SPLIT_PARAMS = 8 * 16 + 8 * 8 + 8 * 16


def split_set(count=3):
    files = []
    for i in range(count):
        kv = [("split.no", GGUF_U16, i), ("split.count", GGUF_U16, count), ("split.tensors.count", GGUF_I32, count)]
        if i == 0:
            kv = [("general.architecture", GGUF_STRING, "llama"), ("llama.block_count", GGUF_U32, 1),
                  ("llama.embedding_length", GGUF_U32, 8), ("llama.context_length", GGUF_U32, 128),
                  ("llama.attention.head_count", GGUF_U32, 2)] + kv
        files.append(gguf_file(kv, SPLIT_TENSORS[i]))
    return files


def sha(data):
    return hashlib.sha256(data).hexdigest()


class ModelStoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for binary in (SIPP, SYNTH):
            if not os.access(binary, os.X_OK):
                raise AssertionError("%s is not built (make all)" % binary)
        cls.build_dir = tempfile.mkdtemp(prefix="sipp-models-build-")
        cls.model = synth(os.path.join(cls.build_dir, "tiny.gguf"), "llama-spm")
        cls.fx = HTTPFixture()
        cls.url = cls.fx.add("/files/tiny.gguf", cls.model)
        cls.fx.add("/org/repo/resolve/main/tiny.gguf", cls.model)
        cls.fx.add("/files/page.gguf", b"<!DOCTYPE html><html><body>Sign in to download</body></html>\n" * 50)
        cls.fx.add("/files/half.gguf", cls.model[: len(cls.model) // 2])
        cls.shards = split_set()
        for i, data in enumerate(cls.shards):
            cls.fx.add("/org/repo/resolve/main/set-%05d-of-00003.gguf" % (i + 1), data)

    @classmethod
    def tearDownClass(cls):
        cls.fx.stop()
        shutil.rmtree(cls.build_dir, ignore_errors=True)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sipp-models-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.store = os.path.join(self.tmp, "models")
        self.catalog = os.path.join(self.tmp, "shipped-catalog.json")
        with open(self.catalog, "w") as f:
            json.dump({"version": 1, "models": [
                {"name": "cat-tiny", "url": "hf://org/repo/tiny.gguf", "sha256": sha(self.model),
                 "size": len(self.model), "labels": ["chat"], "backends": ["cpu"], "ctx_size": 512},
                {"name": "cat-set", "url": "hf://org/repo/set-00001-of-00003.gguf",
                 "sha256": [sha(s) for s in self.shards], "labels": ["chat", "reasoning"]},
            ]}, f)
        self.env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        self.env.update({"SIPP_MODELS_DIR": self.store, "SIPP_CATALOG": self.catalog, "NO_PROXY": "*",
                         "no_proxy": "*", "SIPP_HF_ENDPOINT": self.fx.url(""), "HOME": self.tmp})
        self.env.pop("HF_TOKEN", None)
        self.fx.set(mode="normal", drops=0, chunk_delay=0)
        self.fx.wait_idle()  # a response an earlier test abandoned must not count here
        self.fx.reset_counters()

    # ---- helpers ----

    def sipp(self, *args, **kw):
        return subprocess.run([SIPP] + list(args), capture_output=True, text=True, env=self.env,
                              stdin=subprocess.DEVNULL, timeout=RUN_TIMEOUT_S, **kw)

    def ok(self, r):
        self.assertEqual(r.returncode, EXIT_OK, "stdout: %s\nstderr: %s" % (r.stdout, r.stderr))

    def fails(self, r, *needles):
        """Exit 1 with exactly one line on stderr that contains every needle."""
        self.assertEqual(r.returncode, EXIT_RUNTIME, "stdout: %s\nstderr: %s" % (r.stdout, r.stderr))
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("sipp: "), lines[0])
        for n in needles:
            self.assertIn(n, lines[0])

    def store_files(self):
        if not os.path.isdir(self.store):
            return []
        return sorted(n for n in os.listdir(self.store) if n != "partial" and not n.startswith("."))

    def partials(self):
        d = os.path.join(self.store, "partial")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def listed(self):
        r = self.sipp("models", "list", "--json")
        self.ok(r)
        return {m["name"]: m for m in json.loads(r.stdout)["models"]}

    def read(self, name):
        with open(os.path.join(self.store, name), "rb") as f:
            return f.read()

    # ---- pulls that work ----

    def test_pull_url_with_sha256(self):
        r = self.sipp("pull", self.url, "--sha256", sha(self.model).upper())
        self.ok(r)
        self.assertIn("pulled tiny", r.stdout)
        self.assertIn("verified", r.stdout)
        self.assertEqual(r.stderr, "", "no progress output when stderr is not a terminal")
        self.assertEqual(self.store_files(), ["tiny.gguf", "tiny.json"])
        self.assertEqual(self.read("tiny.gguf"), self.model)
        self.assertEqual(self.partials(), [])
        meta = json.loads(self.read("tiny.json"))
        self.assertEqual(meta["files"][0]["sha256"], sha(self.model))
        self.assertTrue(meta["sha256_verified"])
        m = self.listed()["tiny"]
        self.assertEqual(m["size"], len(self.model))
        self.assertEqual(m["url"], self.url)
        self.assertEqual(self.sipp("models", "path", "tiny").stdout.strip(), os.path.join(self.store, "tiny.gguf"))

        # a second pull finds it there and downloads nothing
        self.fx.reset_counters()
        r = self.sipp("pull", self.url)
        self.ok(r)
        self.assertIn("already in the store", r.stdout)
        self.assertEqual(self.fx.bytes_served, 0)
        # --force downloads again
        r = self.sipp("pull", self.url, "--force")
        self.ok(r)
        self.assertEqual(self.fx.bytes_served, len(self.model))

    def test_pull_catalog_name_and_hf(self):
        r = self.sipp("pull", "cat-tiny")
        self.ok(r)
        self.assertIn("pulled cat-tiny", r.stdout)
        self.assertIn("verified", r.stdout, "the catalog's sha256 is checked")
        self.assertEqual(self.read("cat-tiny.gguf"), self.model)
        self.assertEqual(self.fx.requests[-1][0], "/org/repo/resolve/main/tiny.gguf")
        # an hf:// URL with another name
        r = self.sipp("pull", "hf://org/repo/tiny.gguf", "--name", "mine")
        self.ok(r)
        m = self.listed()
        self.assertEqual(set(m), {"cat-tiny", "mine"})
        self.assertEqual(m["cat-tiny"]["labels"], ["chat"])
        self.assertTrue(m["mine"]["sha256_verified"], "an hf:// URL of a catalog entry takes its sha256")

    def test_user_catalog_beside_the_store(self):
        with open(os.path.join(self.tmp, "catalog.json"), "w") as f:
            json.dump({"version": 1, "models": [{"name": "user-tiny", "url": self.url, "labels": ["coding"]}]}, f)
        r = self.sipp("models", "list", "--all", "--json")
        self.ok(r)
        doc = json.loads(r.stdout)
        names = {m["name"]: m for m in doc["models"]}
        self.assertEqual(set(names), {"cat-tiny", "cat-set", "user-tiny"})
        self.assertFalse(names["user-tiny"]["in_store"])
        self.assertTrue(doc["user_catalog_exists"])
        self.ok(self.sipp("pull", "user-tiny"))
        self.assertTrue(self.listed()["user-tiny"]["in_store"])

    # ---- resuming ----

    def test_resume_after_a_drop(self):
        size = len(self.model)
        self.fx.set(drop_after=size // 2, drops=1)
        r = self.sipp("pull", self.url, "--retries", "0")
        self.fails(r, "resume")
        self.assertEqual(self.store_files(), [], "no half model in the store")
        self.assertEqual(self.partials(), ["tiny.gguf.part", "tiny.gguf.part.json"])
        self.assertEqual(os.path.getsize(os.path.join(self.store, "partial", "tiny.gguf.part")), size // 2)
        self.assertNotIn("tiny", self.listed())

        r = self.sipp("pull", self.url, "--sha256", sha(self.model))
        self.ok(r)
        self.assertIn("resumed", r.stdout)
        self.assertEqual(self.fx.requests[-1][1], "bytes=%d-" % (size // 2))
        self.assertLess(self.fx.bytes_served, 2 * size, "a resume fetches only the missing part")
        self.assertEqual(self.fx.bytes_served, size)
        self.assertEqual(self.read("tiny.gguf"), self.model)
        self.assertEqual(self.partials(), [])

    def test_retries_a_dropped_transfer_by_itself(self):
        size = len(self.model)
        self.fx.set(drop_after=size // 3, drops=2)
        r = self.sipp("pull", self.url, "--sha256", sha(self.model))
        self.ok(r)
        self.assertEqual(len(self.fx.requests), 3)
        self.assertEqual(self.fx.bytes_served, size, "each retry continues where the last one stopped")
        self.assertEqual(self.read("tiny.gguf"), self.model)

    def test_server_without_range_support(self):
        size = len(self.model)
        self.fx.set(drop_after=size // 2, drops=1)
        self.fails(self.sipp("pull", self.url, "--retries", "0"))
        self.fx.set(mode="norange")
        self.fx.reset_counters()
        r = self.sipp("pull", self.url, "--sha256", sha(self.model))
        self.ok(r)
        self.assertNotIn("resumed", r.stdout)
        self.assertEqual(self.fx.bytes_served, size, "a 200 to a range request starts over cleanly")
        self.assertEqual(self.read("tiny.gguf"), self.model)
        self.assertEqual(self.partials(), [])

    def test_a_changed_file_is_not_spliced(self):
        """If-Range: a .part of an older file must not be continued with the newer file's bytes."""
        other = synth(os.path.join(self.tmp, "other.gguf"), "llama-spm", "--seed", "9")
        url = self.fx.add("/files/changing.gguf", self.model)
        self.fx.set(drop_after=len(self.model) // 2, drops=1)
        self.fails(self.sipp("pull", url, "--retries", "0"))
        self.fx.add("/files/changing.gguf", other)
        r = self.sipp("pull", url, "--sha256", sha(other))
        self.ok(r)
        self.assertEqual(self.read("changing.gguf"), other)

    def test_ctrl_c_keeps_the_partial_download(self):
        self.fx.set(chunk_delay=0.05)  # about 1.3 MB/s: the pull takes seconds
        part = os.path.join(self.store, "partial", "tiny.gguf.part")
        p = subprocess.Popen([SIPP, "pull", self.url], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=self.env)
        deadline = time.monotonic() + PTY_TIMEOUT_S
        while time.monotonic() < deadline and not (os.path.exists(part) and os.path.getsize(part) > 0):
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=RUN_TIMEOUT_S)
        self.assertEqual(p.returncode, EXIT_RUNTIME, err)
        self.assertIn("interrupted", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertEqual(self.store_files(), [])
        kept = os.path.getsize(part)
        self.assertGreater(kept, 0)
        self.assertLess(kept, len(self.model))

        self.fx.set(chunk_delay=0)
        self.assertTrue(self.fx.wait_idle())
        self.fx.reset_counters()
        r = self.sipp("pull", self.url, "--sha256", sha(self.model))
        self.ok(r)
        self.assertIn("resumed", r.stdout)
        self.assertEqual(self.fx.bytes_served, len(self.model) - kept)

    # ---- failures ----

    def test_hash_mismatch_deletes_the_download(self):
        r = self.sipp("pull", self.url, "--sha256", WRONG_SHA)
        self.fails(r, "sha256 mismatch", WRONG_SHA, sha(self.model))
        self.assertEqual(self.store_files(), [])
        self.assertEqual(self.partials(), [])
        self.assertEqual(self.listed(), {})

    def test_bad_sha256_values(self):
        self.fails(self.sipp("pull", self.url, "--sha256", "abc"), "64 hex digits")
        self.fails(self.sipp("pull", "hf://org/repo/set-00001-of-00003.gguf", "--sha256", sha(self.shards[0])),
                   "3 digests")
        self.assertEqual(self.fx.bytes_served, 0)

    def test_not_found(self):
        r = self.sipp("pull", self.fx.url("/files/missing.gguf"))
        self.fails(r, "404", "/files/missing.gguf")
        self.assertEqual(self.store_files(), [])
        self.assertEqual(self.partials(), [])
        self.fx.set(mode="404")
        self.fails(self.sipp("pull", "cat-tiny"), "404")

    def test_unreachable(self):
        url = "http://127.0.0.1:%d/m.gguf" % closed_port()
        r = self.sipp("pull", url)
        self.fails(r, "cannot reach", url)
        self.assertEqual(self.store_files(), [])
        self.assertEqual(self.partials(), [])

    def test_not_a_gguf_file(self):
        r = self.sipp("pull", self.fx.url("/files/page.gguf"))
        self.fails(r, "not a GGUF file")
        self.assertEqual(self.store_files(), [])
        self.assertEqual(self.partials(), [])
        self.assertLess(self.fx.bytes_served, 1 << 16, "the download stops at the first bytes")

    def test_truncated_gguf_is_rejected(self):
        r = self.sipp("pull", self.fx.url("/files/half.gguf"))
        self.fails(r, "not a usable GGUF", "truncated")
        self.assertEqual(self.store_files(), [])
        self.assertEqual(self.partials(), [])

    def test_write_error_leaves_no_model(self):
        def limit():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (WRITE_LIMIT_BYTES, WRITE_LIMIT_BYTES))

        r = subprocess.run([SIPP, "pull", self.url], capture_output=True, text=True, env=self.env,
                           stdin=subprocess.DEVNULL, timeout=RUN_TIMEOUT_S, preexec_fn=limit)
        self.fails(r, "cannot write", "File too large", "resume")
        self.assertEqual(self.store_files(), [])
        self.assertNotIn("tiny", self.listed())

    def test_unknown_name_and_bad_usage(self):
        self.fails(self.sipp("pull", "no-such-model"), "no-such-model", "catalog")
        self.fails(self.sipp("pull", "hf://org"), "hf://")
        self.fails(self.sipp("pull", self.url, "--name", "../evil"), "--name")
        for args in (["pull"], ["pull", self.url, "--bogus"], ["pull", "a", "b"], ["models"],
                     ["models", "frob"], ["models", "list", "--bogus"], ["models", "info"], ["models", "rm"]):
            r = self.sipp(*args)
            self.assertEqual(r.returncode, EXIT_USAGE, "%s: %s" % (args, r.stderr))
        self.ok(self.sipp("pull", "--help"))
        self.ok(self.sipp("models", "--help"))
        self.assertEqual(self.fx.bytes_served, 0)

    # ---- split sets ----

    def test_split_set(self):
        # naming shard 2 pulls the whole set, under the set's name
        r = self.sipp("pull", "hf://org/repo/set-00002-of-00003.gguf")
        self.ok(r)
        self.assertIn("3 files", r.stdout)
        names = ["set-%05d-of-00003.gguf" % i for i in (1, 2, 3)]
        self.assertEqual(self.store_files(), names + ["set.json"])
        for name, data in zip(names, self.shards):
            self.assertEqual(self.read(name), data)
        self.assertEqual(self.sipp("models", "path", "set").stdout.strip(), os.path.join(self.store, names[0]))

        r = self.sipp("models", "info", "set", "--json")
        self.ok(r)
        info = json.loads(r.stdout)
        self.assertEqual(info["name"], "set")
        self.assertEqual(info["n_files"], 3)
        self.assertEqual(info["n_params"], SPLIT_PARAMS)
        self.assertEqual(info["file_size"], sum(len(s) for s in self.shards))
        self.assertEqual([f["sha256"] for f in info["files"]], [sha(s) for s in self.shards])
        self.assertEqual(info["architecture"], "llama")
        self.assertEqual(info["n_embd"], 8)
        self.assertEqual(info["quantization"], {"f32": 3})
        # a later shard given as a path stands for its set
        r = self.sipp("models", "info", os.path.join(self.store, names[2]), "--json", "--no-hash")
        self.ok(r)
        self.assertEqual(json.loads(r.stdout)["n_params"], SPLIT_PARAMS)

        self.ok(self.sipp("models", "rm", "set"))
        self.assertEqual(self.store_files(), [])

    def test_split_set_from_the_catalog_is_verified(self):
        r = self.sipp("pull", "cat-set")
        self.ok(r)
        self.assertIn("verified", r.stdout)
        self.assertTrue(self.listed()["cat-set"]["sha256_verified"])

    def test_split_set_with_a_missing_shard_fails_cleanly(self):
        self.fx.add("/org/repo/resolve/main/gap-00001-of-00002.gguf", self.shards[0])
        r = self.sipp("pull", "hf://org/repo/gap-00001-of-00002.gguf")
        self.fails(r, "404", "gap-00002-of-00002.gguf")
        self.assertEqual(self.store_files(), [], "no shard lands in the store until all are there")

    # ---- models info, list, rm ----

    def test_models_info_fields(self):
        path = os.path.join(self.tmp, "bpe.gguf")
        data = synth(path, "llama-bpe")
        r = self.sipp("models", "info", path, "--json")
        self.ok(r)
        info = json.loads(r.stdout)
        self.assertIsNone(info["name"])
        self.assertEqual(info["architecture"], "llama")
        self.assertEqual((info["n_embd"], info["n_layer"], info["n_head"], info["n_head_kv"], info["n_ff"]),
                         (64, 2, 4, 2, 128))
        self.assertEqual(info["n_ctx_train"], 4096)
        self.assertEqual(info["n_vocab"], 128256)
        self.assertEqual(info["tokenizer"], "gpt2")
        self.assertTrue(info["has_chat_template"])
        self.assertEqual(info["file_type"], "Q8_0")
        self.assertEqual(info["quantization"], {"q8_0": 2 * 7 + 2, "f32": 2 * 2 + 1})
        n_embd, n_kv, n_ff, n_vocab, n_layer = 64, 64 // 4 * 2, 128, 128256, 2
        per_layer = 2 * n_embd + 2 * n_embd * n_embd + 2 * n_embd * n_kv + 3 * n_embd * n_ff
        self.assertEqual(info["n_params"], 2 * n_vocab * n_embd + n_layer * per_layer + n_embd)
        self.assertEqual(info["file_size"], len(data))
        self.assertEqual(info["sha256"], sha(data))
        self.assertFalse(info["sha256_cached"])
        # the second call takes the hash from the cache ...
        r = self.sipp("models", "info", path, "--json")
        self.assertTrue(json.loads(r.stdout)["sha256_cached"])
        # ... until the file changes
        with open(path, "ab") as f:
            f.write(b"\0" * 32)
        info = json.loads(self.sipp("models", "info", path, "--json").stdout)
        self.assertFalse(info["sha256_cached"])
        self.assertEqual(info["sha256"], sha(data + b"\0" * 32))

        self.assertIsNone(info["projector"])
        r = self.sipp("models", "info", path)
        self.ok(r)
        for needle in ("architecture    llama", "layers          2", "chat template   yes", "q8_0 x16"):
            self.assertIn(needle, r.stdout)
        self.assertNotIn("projector", r.stdout)

    def test_models_info_of_a_projector(self):
        # sipp-synth's vision and audio projectors (mmproj files): what they take in, and the width of
        # the embeddings they give the text model instead of the text hyperparameters
        cases = (("llava", ["--image-size", "32", "--patch-size", "8"],
                  {"vision": True, "audio": False, "type": "mlp", "image_size": 32, "patch_size": 8, "n_embd": 96},
                  "vision (mlp, 32 px in 8 px patches) -> 96-wide embeddings"),
                 ("qwen2a", [], {"vision": False, "audio": True, "type": "qwen2a", "image_size": None, "patch_size": None,
                   "n_embd": 96},
                  "audio (qwen2a) -> 96-wide embeddings"))
        for kind, extra, want, row in cases:
            with self.subTest(kind=kind):
                path = os.path.join(self.tmp, f"mmproj-{kind}.gguf")
                r = subprocess.run([SYNTH, "--out", path, "--projector", kind, "--n-embd", "96", *extra],
                                   capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
                self.assertEqual(r.returncode, 0, r.stderr)
                r = self.sipp("models", "info", path, "--json", "--no-hash")
                self.ok(r)
                info = json.loads(r.stdout)
                self.assertEqual(info["architecture"], "clip")
                self.assertEqual(info["projector"], want)
                r = self.sipp("models", "info", path, "--no-hash")
                self.ok(r)
                self.assertIn("projector       " + row, r.stdout)
                self.assertNotIn("layers", r.stdout)

    def test_models_info_projector_width_is_its_output_tensors(self):
        # legacy llava conversions wrote CLIP's own projection_dim (768), not the text model's width:
        # the width comes from the output tensor, as llama.cpp's mtmd reads it
        vision = [("clip.has_vision_encoder", GGUF_BOOL, True), ("clip.projector_type", GGUF_STRING, "mlp"),
                  ("clip.vision.projection_dim", GGUF_U32, 768)]
        info = self.projector_info(vision + [("clip.vision.image_size", GGUF_U32, 336)],
                                   [("mm.0.weight", [16, 40]), ("mm.2.weight", [40, 40])])
        self.assertEqual(info, {"vision": True, "audio": False, "type": "mlp", "image_size": 336, "patch_size": None,
                                "n_embd": 40})
        # ... and a known type without it has no width (mtmd would crash on it: test_synth_projector)
        self.assertIsNone(self.projector_info(vision, [("mm.0.weight", [16, 40])])["n_embd"])
        # a type whose output tensor sipp does not know: projection_dim stands for it
        info = self.projector_info([("clip.has_audio_encoder", GGUF_BOOL, True),
                                    ("clip.audio.projector_type", GGUF_STRING, "glma"),
                                    ("clip.audio.projection_dim", GGUF_U32, 2048)], [("mm.a.fc.weight", [8, 8])])
        self.assertEqual(info, {"vision": False, "audio": True, "type": "glma", "image_size": None, "patch_size": None,
                                "n_embd": 2048})

    def projector_info(self, kv, tensors):
        """models info's projector object of a "clip" file with these keys and f32 tensors."""
        path = os.path.join(self.tmp, "mmproj.gguf")
        with open(path, "wb") as f:
            f.write(gguf_file([("general.architecture", GGUF_STRING, "clip")] + kv, tensors))
        r = self.sipp("models", "info", path, "--json", "--no-hash")
        self.ok(r)
        return json.loads(r.stdout)["projector"]

    def test_models_info_without_template_and_f16(self):
        path = os.path.join(self.tmp, "plain.gguf")
        synth(path, "llama-spm", "--chat-template", "none", "--type", "f16")
        info = json.loads(self.sipp("models", "info", path, "--json", "--no-hash").stdout)
        self.assertFalse(info["has_chat_template"])
        self.assertEqual(info["tokenizer"], "llama")
        self.assertIn("f16", info["quantization"])
        self.assertIsNone(info["sha256"])

    def test_models_info_of_a_pulled_model_uses_the_pull_hash(self):
        self.ok(self.sipp("pull", self.url))
        info = json.loads(self.sipp("models", "info", "tiny", "--json").stdout)
        self.assertEqual(info["name"], "tiny")
        self.assertEqual(info["sha256"], sha(self.model))
        self.assertTrue(info["sha256_cached"], "the pull recorded the hash; info does not hash again")

    def test_models_info_errors(self):
        self.fails(self.sipp("models", "info", "nothing-here"), "sipp pull")
        junk = os.path.join(self.tmp, "junk.gguf")
        with open(junk, "wb") as f:
            f.write(b"not a model at all")
        self.fails(self.sipp("models", "info", junk), "not a GGUF file")
        with open(junk, "wb") as f:
            f.write(self.model[:4096])
        self.fails(self.sipp("models", "info", junk), junk)

    def test_models_info_with_a_string_where_a_number_belongs(self):
        # gguf aborts when asked for a string key's data as a number: the header reader must check the
        # type first (found by tests/fuzz/fuzz_gguf). The value then counts as not given.
        odd = os.path.join(self.tmp, "odd.gguf")
        with open(odd, "wb") as f:
            f.write(gguf_file([("general.architecture", GGUF_STRING, "llama"),
                               ("llama.context_length", GGUF_STRING, "2048")], [("token_embd.weight", [8, 4])]))
        r = self.sipp("models", "info", odd, "--json", "--no-hash")
        self.ok(r)
        info = json.loads(r.stdout)
        self.assertEqual(info["architecture"], "llama")
        self.assertIsNone(info["n_ctx_train"])

    def test_models_list_and_rm(self):
        r = self.sipp("models", "list")
        self.ok(r)
        self.assertIn("no models", r.stdout)
        self.ok(self.sipp("pull", self.url))
        self.ok(self.sipp("pull", self.url, "--name", "second"))
        # a model copied in by hand is listed too
        shutil.copy(os.path.join(self.store, "tiny.gguf"), os.path.join(self.store, "copied.gguf"))
        r = self.sipp("models", "list")
        self.ok(r)
        lines = r.stdout.strip().splitlines()
        self.assertTrue(lines[0].startswith("NAME"))
        self.assertEqual([l.split()[0] for l in lines[1:]], ["copied", "second", "tiny"])
        self.assertFalse(self.listed()["copied"]["sha256_verified"])

        r = self.sipp("models", "list", "--all")
        self.ok(r)
        self.assertIn("cat-set", r.stdout)

        r = self.sipp("models", "rm", "second", "copied")
        self.ok(r)
        self.assertEqual(self.store_files(), ["tiny.gguf", "tiny.json"])
        self.fails(self.sipp("models", "rm", "second"), "not in the store")
        self.fails(self.sipp("models", "rm", "../models/tiny"))
        self.assertEqual(self.store_files(), ["tiny.gguf", "tiny.json"])

    def test_rm_discards_a_partial_download(self):
        self.fx.set(drop_after=len(self.model) // 2, drops=1)
        self.fails(self.sipp("pull", self.url, "--retries", "0"))
        self.assertEqual(len(self.partials()), 2)
        self.ok(self.sipp("models", "rm", "tiny"))
        self.assertEqual(self.partials(), [])

    # ---- the progress bar on a terminal ----

    def test_progress_on_a_terminal(self):
        master, slave = pty.openpty()
        try:
            p = subprocess.Popen([SIPP, "pull", self.url], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=slave, env=self.env)
            os.close(slave)
            slave = -1
            seen = b""
            deadline = time.monotonic() + PTY_TIMEOUT_S
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 0.2)
                if ready:
                    try:
                        chunk = os.read(master, 4096)
                    except OSError:
                        break
                    if not chunk:
                        break
                    seen += chunk
                elif p.poll() is not None:
                    break
            out, _ = p.communicate(timeout=RUN_TIMEOUT_S)
        finally:
            os.close(master)
            if slave >= 0:
                os.close(slave)
        self.assertEqual(p.returncode, EXIT_OK, seen)
        text = seen.decode(errors="replace")
        self.assertIn("tiny.gguf", text)
        self.assertIn("100%", text)
        self.assertIn("/s", text)
        self.assertIn(b"pulled tiny", out)

    # ---- a store name where a MODEL is accepted ----

    @unittest.skipUnless("sipp_store_resolve" in open(os.path.join(REPO, "src", "model", "model.c")).read(),
                         "sipp_model_load does not resolve store names yet (hook sipp_store_resolve)")
    def test_cli_runs_a_store_name(self):
        self.ok(self.sipp("pull", self.url))
        r = self.sipp("tiny", "Hello", "--max-tokens", "2", "--threads", "1", "--seed", "1")
        self.ok(r)
        r = self.sipp("no-such-model", "Hello", "--threads", "1")
        self.fails(r, "sipp pull")

    @unittest.skipUnless(any("sipp_store_resolve" in open(os.path.join(REPO, "src", "gateway", f)).read()
                             for f in os.listdir(os.path.join(REPO, "src", "gateway")) if f.endswith(".c")),
                         "the gateway does not resolve store names yet (hook sipp_store_resolve)")
    def test_gateway_target_takes_a_store_name(self):
        self.ok(self.sipp("pull", self.url))
        config = os.path.join(self.tmp, "gw.toml")
        with open(config, "w") as f:
            f.write('[server]\nlisten = "127.0.0.1:0"\n\n[[targets]]\nname = "t"\ntype = "local"\n'
                    'model = "tiny"\nbackend = "cpu"\nthreads = 1\n')
        self.ok(self.sipp("serve", "--check", "--config", config))
        with open(config, "w") as f:
            f.write('[server]\nlisten = "127.0.0.1:0"\n\n[[targets]]\nname = "t"\ntype = "local"\n'
                    'model = "not-pulled"\nbackend = "cpu"\n')
        r = self.sipp("serve", "--check", "--config", config)
        self.assertNotEqual(r.returncode, EXIT_OK)
        self.assertIn("not-pulled", r.stderr)


if __name__ == "__main__":
    unittest.main()
