"""Tokenizer conformance: build/tests/tokvec against llama.cpp's own test vectors.

tokvec loads each ggml-vocab-*.gguf through sipp's public API (vocab_only) and compares sipp_tokenize
with the .inp/.out vectors that llama.cpp's test-tokenizer-0 uses, then checks that detokenize gives
multi-byte UTF-8 text back unchanged.

REQUIRED vocabularies must pass. Every other vocabulary with vectors is run too: those known to pass
must keep passing; KNOWN_FAILING lists the ones that do not, with the reason, and are skipped with
that reason so the report says which they are.
"""
import glob
import os
import re
import subprocess
import unittest

BUILD = os.environ.get("SIPP_BUILD", "build")
TOKVEC = os.path.join(BUILD, "tests", "tokvec")
TIMEOUT_S = 60
# A llama.cpp assertion prints a gdb backtrace by default; a crash is still seen as a signal.
ENV = dict(os.environ, GGML_NO_BACKTRACE="1")


def vocab_dir():
    # llama.cpp is laid out once under build/ even when SIPP_BUILD names another (sanitizer) tree.
    for d in (os.path.join(BUILD, "llama", "vocab"), os.path.join("build", "llama", "vocab")):
        if os.path.isdir(d):
            return d
    return os.path.join(BUILD, "llama", "vocab")


REQUIRED = ["llama-spm", "llama-bpe", "qwen2", "gpt-2"]

# Every other vocabulary with vectors that passes today.
ALSO_PASSING = [
    "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "mpt", "phi-3", "qwen35",
    "refact", "starcoder",
]

KNOWN_FAILING = {
    # WordPiece normalises (lower case, accents stripped, spaces around CJK and punctuation), so the
    # detokenize(tokenize(text)) round trip cannot give the text back. Its test vectors pass.
    "bert-bge": "round trip only: WordPiece lower-cases and strips accents by design",
}

SUMMARY = re.compile(r"^tokvec (\S+): (\d+) passed, (\d+) failed$", re.M)


def run_tokvec(name):
    path = os.path.join(vocab_dir(), "ggml-vocab-%s.gguf" % name)
    proc = subprocess.run([TOKVEC, path], capture_output=True, timeout=TIMEOUT_S, env=ENV)
    return proc, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


class TokenizerVectors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(TOKVEC, os.X_OK):
            raise unittest.SkipTest("%s is not built (make test-bins)" % TOKVEC)

    def check(self, name):
        path = os.path.join(vocab_dir(), "ggml-vocab-%s.gguf" % name)
        self.assertTrue(os.path.exists(path + ".inp"), "no test vectors for %s" % path)
        proc, out, err = run_tokvec(name)
        detail = "tokvec %s: rc %d\nstdout: %s\nstderr (tail): %s" % (name, proc.returncode, out, err[-3000:])
        self.assertGreaterEqual(proc.returncode, 0, "killed by signal %d; %s" % (-proc.returncode, detail))
        m = SUMMARY.search(out)
        self.assertIsNotNone(m, "no summary line; " + detail)
        self.assertEqual(m.group(1), "ggml-vocab-%s.gguf" % name)
        passed, failed = int(m.group(2)), int(m.group(3))
        self.assertGreater(passed, 0, detail)
        self.assertEqual(failed, 0, detail)
        self.assertEqual(proc.returncode, 0, detail)

    def test_every_vocab_is_classified(self):
        """A new vocabulary with vectors must be added to one of the lists."""
        found = sorted(
            os.path.basename(p)[len("ggml-vocab-"):-len(".gguf.inp")]
            for p in glob.glob(os.path.join(vocab_dir(), "ggml-vocab-*.gguf.inp"))
        )
        self.assertTrue(found, "no vocabularies with vectors in %s" % vocab_dir())
        known = set(REQUIRED) | set(ALSO_PASSING) | set(KNOWN_FAILING)
        self.assertEqual([v for v in found if v not in known], [])

    def test_known_failing(self):
        """Runs the vocabularies known not to pass; skipped with the list, failed if one passes now."""
        report = []
        for name, why in sorted(KNOWN_FAILING.items()):
            proc, out, _ = run_tokvec(name)
            self.assertGreaterEqual(proc.returncode, 0, "%s: killed by signal %d" % (name, -proc.returncode))
            if proc.returncode == 0:
                self.fail("%s passes now: move it to ALSO_PASSING (%s)" % (name, out.strip()))
            report.append("%s (%s; %s)" % (name, why, out.strip().splitlines()[-1] if out.strip() else "no output"))
        if report:
            self.skipTest("do not pass: " + "; ".join(report))

    def test_usage_error(self):
        proc = subprocess.run([TOKVEC], capture_output=True, timeout=TIMEOUT_S)
        self.assertEqual(proc.returncode, 2)
        proc = subprocess.run([TOKVEC, "/nonexistent/vocab.gguf"], capture_output=True, timeout=TIMEOUT_S)
        self.assertEqual(proc.returncode, 2)


def _add(name):
    def test(self):
        self.check(name)
    test.__doc__ = "tokvec %s" % name
    setattr(TokenizerVectors, "test_vocab_" + name.replace("-", "_"), test)


for _name in REQUIRED + ALSO_PASSING:
    _add(_name)

if __name__ == "__main__":
    unittest.main()
