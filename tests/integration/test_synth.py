"""Integration tests of sipp-synth, the random-weight GGUF model writer (tools/synth/).

Runs $SIPP_BUILD/bin/sipp-synth (SIPP_BUILD defaults to "build") with the smallest of llama.cpp's
tokenizer-only vocab files, and checks the output file and the CLI's error handling.
"""

import os
import subprocess
import tempfile
import unittest

BUILD = os.environ.get("SIPP_BUILD", "build")
SYNTH = os.path.join(BUILD, "bin", "sipp-synth")
VOCAB = os.path.join(BUILD, "llama", "vocab", "ggml-vocab-llama-spm.gguf")

GGUF_MAGIC = b"GGUF"
EXIT_RUNTIME = 1
EXIT_USAGE = 2
TIMEOUT_S = 120

# a tiny model: one block, widths that are multiples of the q4_0/q8_0 block size (32)
TINY = ["--n-embd", "64", "--n-layer", "1", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128"]


def run_synth(*args):
    return subprocess.run([SYNTH, *args], capture_output=True, text=True, timeout=TIMEOUT_S)


class SynthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # a missing binary or vocab is a broken build, not a reason to skip
        if not os.access(SYNTH, os.X_OK):
            raise AssertionError(f"{SYNTH} is not built (make {SYNTH})")
        if not os.path.isfile(VOCAB):
            raise AssertionError(f"{VOCAB} is missing (make deps)")

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="sipp-synth-test-")
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_writes_gguf(self):
        for wtype in ("f32", "f16", "q8_0", "q4_0"):
            with self.subTest(type=wtype):
                out = self.path(f"tiny-{wtype}.gguf")
                r = run_synth("--out", out, "--vocab", VOCAB, "--type", wtype, *TINY)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(out, "rb") as f:
                    self.assertEqual(f.read(len(GGUF_MAGIC)), GGUF_MAGIC)
                # the temporary file it writes first is renamed into place, not left behind
                leftovers = [n for n in os.listdir(self.tmp.name) if n.startswith(os.path.basename(out) + ".")]
                self.assertEqual(leftovers, [])

    def test_default_type_is_f16(self):
        default, f16 = self.path("default.gguf"), self.path("f16.gguf")
        for out, extra in ((default, []), (f16, ["--type", "f16"])):
            r = run_synth("--out", out, "--vocab", VOCAB, *extra, *TINY)
            self.assertEqual(r.returncode, 0, r.stderr)
        with open(default, "rb") as fa, open(f16, "rb") as fb:
            self.assertEqual(fa.read(), fb.read())

    def test_deterministic_by_seed(self):
        a, b, c = self.path("a.gguf"), self.path("b.gguf"), self.path("c.gguf")
        for out, seed in ((a, "5"), (b, "5"), (c, "6")):
            r = run_synth("--out", out, "--vocab", VOCAB, "--type", "q8_0", "--seed", seed, *TINY)
            self.assertEqual(r.returncode, 0, r.stderr)
        with open(a, "rb") as fa, open(b, "rb") as fb, open(c, "rb") as fc:
            da, db, dc = fa.read(), fb.read(), fc.read()
        self.assertEqual(da, db)
        self.assertNotEqual(da, dc)

    def test_chat_template(self):
        with_tmpl, without = self.path("chatml.gguf"), self.path("none.gguf")
        r = run_synth("--out", with_tmpl, "--vocab", VOCAB, "--chat-template", "chatml", *TINY)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_synth("--out", without, "--vocab", VOCAB, "--chat-template", "none", *TINY)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(with_tmpl, "rb") as f:
            self.assertIn(b"<|im_start|>", f.read())
        with open(without, "rb") as f:
            self.assertNotIn(b"tokenizer.chat_template", f.read())

    def test_tied_output_has_no_output_matrix_and_runs(self):
        tied, separate = self.path("tied.gguf"), self.path("separate.gguf")
        for out, how in ((tied, "tied"), (separate, "separate")):
            r = run_synth("--out", out, "--vocab", VOCAB, "--type", "q8_0", "--output", how, *TINY)
            self.assertEqual(r.returncode, 0, r.stderr)
        name = len(b"output.weight").to_bytes(8, "little") + b"output.weight"  # as GGUF stores a tensor's name
        with open(tied, "rb") as f:
            self.assertFalse(name in f.read(), "the tied model has an output.weight")
        with open(separate, "rb") as f:
            self.assertTrue(name in f.read(), "the separate model has no output.weight")
        # llama.cpp takes token_embd as the output projection of a file without one
        sipp = os.path.join(BUILD, "bin", "sipp")
        r = subprocess.run([sipp, tied, "Hello", "--max-tokens", "4", "--threads", "1", "--seed", "1"],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_synth("--out", self.path("x.gguf"), "--vocab", VOCAB, "--output", "tied", "--stop-token", "</s>", *TINY)
        self.assertEqual(r.returncode, EXIT_USAGE)
        self.assertIn("--stop-token and --favour need the output matrix", r.stderr)
        r = run_synth("--out", self.path("x.gguf"), "--vocab", VOCAB, "--output", "shared", *TINY)
        self.assertEqual(r.returncode, EXIT_USAGE)
        self.assertIn("--output: unknown 'shared'", r.stderr)

    def test_help(self):
        r = run_synth("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--vocab", r.stdout)

    def test_bad_type(self):
        out = self.path("bad.gguf")
        r = run_synth("--out", out, "--vocab", VOCAB, "--type", "q5_k", *TINY)
        self.assertEqual(r.returncode, EXIT_USAGE)
        self.assertIn("--type", r.stderr)
        self.assertTrue(r.stderr.startswith("sipp-synth: "), r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_unknown_flag(self):
        r = run_synth("--out", self.path("x.gguf"), "--vocab", VOCAB, "--frobnicate", "1")
        self.assertEqual(r.returncode, EXIT_USAGE)
        self.assertIn("--frobnicate", r.stderr)

    def test_missing_vocab(self):
        missing = self.path("no-such-vocab.gguf")
        out = self.path("out.gguf")
        r = run_synth("--out", out, "--vocab", missing, *TINY)
        self.assertEqual(r.returncode, EXIT_RUNTIME)
        self.assertIn(missing, r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_vocab_not_gguf(self):
        bogus = self.path("bogus.gguf")
        with open(bogus, "wb") as f:
            f.write(b"not a gguf file at all")
        r = run_synth("--out", self.path("out.gguf"), "--vocab", bogus, *TINY)
        self.assertEqual(r.returncode, EXIT_RUNTIME)
        self.assertIn(bogus, r.stderr)

    def test_embd_not_divisible_by_heads(self):
        r = run_synth("--out", self.path("x.gguf"), "--vocab", VOCAB,
                      "--n-embd", "96", "--n-head", "5", "--n-head-kv", "5", "--n-ff", "128")
        self.assertEqual(r.returncode, EXIT_USAGE)
        self.assertIn("--n-head", r.stderr)

    def test_heads_not_divisible_by_kv_heads(self):
        r = run_synth("--out", self.path("x.gguf"), "--vocab", VOCAB,
                      "--n-embd", "64", "--n-head", "4", "--n-head-kv", "3")
        self.assertEqual(r.returncode, EXIT_USAGE)
        self.assertIn("--n-head-kv", r.stderr)

    def test_quantized_row_size(self):
        r = run_synth("--out", self.path("x.gguf"), "--vocab", VOCAB, "--type", "q4_0",
                      "--n-embd", "48", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128")
        self.assertEqual(r.returncode, EXIT_USAGE)
        self.assertIn("--n-embd", r.stderr)


class SynthProjectorTest(unittest.TestCase):
    """--projector: the files' keys and determinism here; that mtmd loads them, test_synth_projector."""

    def setUp(self):
        if not os.access(SYNTH, os.X_OK):
            raise AssertionError(f"{SYNTH} is not built (make {SYNTH})")
        self.tmp = tempfile.TemporaryDirectory(prefix="sipp-synth-proj-")
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def write(self, name, *args):
        out = self.path(name)
        r = run_synth("--out", out, *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, "rb") as f:
            return f.read()

    def test_kinds_write_clip_files(self):
        for kind, ptype in (("llava", b"mlp"), ("qwen2a", b"qwen2a")):
            with self.subTest(kind=kind):
                data = self.write(f"{kind}.gguf", "--projector", kind, "--n-embd", "64")
                self.assertEqual(data[:len(GGUF_MAGIC)], GGUF_MAGIC)
                self.assertIn(b"clip.projector_type", data)
                self.assertIn(b"clip", data[:4096])
                self.assertIn(ptype, data)
                self.assertIn(b"mm.a.fc.weight" if kind == "qwen2a" else b"mm.2.weight", data)

    def test_deterministic_by_seed(self):
        for kind in ("llava", "qwen2a"):
            with self.subTest(kind=kind):
                a = self.write("a.gguf", "--projector", kind, "--seed", "5")
                b = self.write("b.gguf", "--projector", kind, "--seed", "5")
                c = self.write("c.gguf", "--projector", kind, "--seed", "6")
                self.assertEqual(a, b)
                self.assertNotEqual(a, c)

    def test_usage_errors(self):
        cases = [
            (["--projector", "sam"], "--projector"),
            (["--projector", "llava", "--vocab", VOCAB], "--vocab"),
            (["--projector", "llava", "--n-layer", "2"], "--n-layer"),
            (["--projector", "llava", "--type", "q8_0"], "--type"),
            (["--projector", "llava", "--image-size", "50", "--patch-size", "8"], "--patch-size"),
            (["--vocab", VOCAB, "--image-size", "64"], "--image-size needs --projector"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                out = self.path("x.gguf")
                r = run_synth("--out", out, *args)
                self.assertEqual(r.returncode, EXIT_USAGE, r.stderr)
                self.assertIn(message, r.stderr)
                self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
