"""sipp perplexity on synthetic models: llama-perplexity's method (chunks of --ctx-size tokens, the
second half of each scored), its output, and its failures.

A random model gives a finite perplexity above 1 on any text; a model made with sipp-synth
--stop-token " the" (that token wins at every position) is near 1 on a text of that token repeated and
enormous on anything else. The number is checked against an independent computation: a script that
takes the logits of each chunk through sipp_model_eval_logits (a fresh context, one batched prefill)
and sums the negative log-likelihoods itself.
"""

import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import unittest

from tests.integration.common import ROOT, make_model, run_sipp

CTX = 32
STOP_TOKEN = "\u0120the"  # " the" in the llama-bpe vocabulary (GPT-2's byte-level space)
WORDS = ["river", "stone", "quick", "lazy", "fox", "over", "hill", "blue", "seven", "cat", "ran", "jumped"]
CHUNK_LINE = re.compile(r"^(\[\d+\]\d+\.\d{4},)+$")
FINAL = re.compile(r"^Final estimate: PPL = (\d+\.\d{4}) \+/- (\d+\.\d{5})$")

# The independent computation: tokenize with BOS, cut into chunks, BOS over each chunk's first token,
# logits of the whole chunk from sipp_model_eval_logits, NLL of positions ctx/2 .. ctx-2 in Python.
CROSS_CHECK = r"""
import ctypes, json, math, sys
from ctypes import POINTER, byref, c_bool, c_char_p, c_float, c_int, c_int32, c_size_t, c_void_p
sys.path.insert(0, sys.argv[1])
from sipp import _native
model_path, text_path, ctx = sys.argv[2], sys.argv[3], int(sys.argv[4])
lib = _native.library()
dll = lib.dll
dll.sipp_tokenize.restype = c_int
dll.sipp_tokenize.argtypes = [c_void_p, c_char_p, c_size_t, c_bool, c_bool, POINTER(c_int32), c_size_t,
                              POINTER(c_size_t)]
dll.sipp_model_eval_logits.restype = c_int
dll.sipp_model_eval_logits.argtypes = [c_void_p, POINTER(c_int32), c_size_t, c_bool, c_int,
                                       POINTER(POINTER(c_float)), POINTER(c_int), c_char_p]
err = ctypes.create_string_buffer(512)
mp = lib.model_default_params()
mp.backend = b"cpu"
model = c_void_p()
assert lib.model_load(model_path.encode(), byref(mp), byref(model), err) == 0, err.value

def tokenize(data):
    cap = len(data) + 8
    toks, n = (c_int32 * cap)(), c_size_t()
    assert dll.sipp_tokenize(model, data, len(data), True, False, toks, cap, byref(n)) == 0
    return list(toks[:n.value])

data = open(text_path, "rb").read()
tokens = tokenize(data)
bos = tokenize(b"")  # [BOS] when the vocabulary adds one
first = ctx // 2
nll, count, chunks = 0.0, 0, len(tokens) // ctx
for c in range(chunks):
    chunk = tokens[c * ctx:(c + 1) * ctx]
    if bos:
        chunk[0] = bos[0]
    logits, n_vocab = POINTER(c_float)(), c_int()
    arr = (c_int32 * ctx)(*chunk)
    assert dll.sipp_model_eval_logits(model, arr, ctx, False, 1, byref(logits), byref(n_vocab), err) == 0, err.value
    nv = n_vocab.value
    for i in range(first, ctx - 1):
        row = logits[i * nv:(i + 1) * nv]
        top = max(row)
        lse = top + math.log(sum(math.exp(v - top) for v in row))
        nll += lse - row[chunk[i + 1]]
        count += 1
    dll.sipp_free(logits)
lib.model_free(model)
print(json.dumps({"ppl": math.exp(nll / count), "n_chunks": chunks, "n_scored": count, "n_tokens": len(tokens)}))
"""


def last_line(stderr):
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


class PerplexityTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model = make_model(d, "m.gguf")
        cls.stop_model = make_model(d, "stop.gguf", stop_token=STOP_TOKEN)
        rng = random.Random(7)
        cls.text = cls.write("random.txt", " ".join(rng.choice(WORDS) for _ in range(420)))
        cls.the = cls.write("the.txt", " the" * 300)
        cls.short = cls.write("short.txt", " ".join(WORDS * 2))  # about 25 tokens: under 2 x CTX
        cls.empty = cls.write("empty.txt", "")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def write(cls, name, text):
        path = os.path.join(cls.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def ppl(self, model, text, *flags):
        p = run_sipp(["perplexity", model, text, "--ctx-size", str(CTX), "--backend", "cpu", "--json", *flags])
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_random_text_is_finite_and_above_one(self):
        r = self.ppl(self.model, self.text)
        self.assertTrue(math.isfinite(r["ppl"]) and r["ppl"] > 1, r)
        self.assertTrue(math.isfinite(r["ppl_error"]) and r["ppl_error"] > 0, r)

    def test_stop_token_model_is_certain_of_its_token_and_wrong_elsewhere(self):
        same = self.ppl(self.stop_model, self.the)
        self.assertLess(same["ppl"], 1.01, same)
        other = self.ppl(self.stop_model, self.text)
        self.assertGreater(other["ppl"], 1e6, other)

    def test_chunks_are_whole_ctx_sizes_and_the_second_half_is_scored(self):
        r = self.ppl(self.model, self.text)
        self.assertEqual(r["n_chunks"], r["n_text_tokens"] // CTX, r)
        self.assertGreaterEqual(r["n_chunks"], 2)
        self.assertEqual(r["n_scored"], r["n_chunks"] * (CTX - CTX // 2 - 1))
        self.assertEqual(len(r["chunks"]), r["n_chunks"])
        self.assertAlmostEqual(r["chunks"][-1], r["ppl"], places=9)
        capped = self.ppl(self.model, self.text, "--chunks", "2")
        self.assertEqual(capped["n_chunks"], 2)
        self.assertEqual(capped["chunks"], r["chunks"][:2])

    def test_json_fields(self):
        r = self.ppl(self.model, self.text)
        for key, kind in [("model", str), ("description", str), ("backend", str), ("ppl", float),
                          ("ppl_error", float), ("ctx_size", int), ("batch_size", int), ("n_seq", int),
                          ("n_chunks", int), ("n_text_tokens", int), ("n_scored", int), ("seconds", float),
                          ("tokens_per_second", float), ("chunks", list)]:
            self.assertIsInstance(r.get(key), kind, key)
        self.assertEqual((r["backend"], r["ctx_size"], r["batch_size"], r["n_seq"]), ("cpu", CTX, 2048, 2048 // CTX))
        self.assertGreater(r["tokens_per_second"], 0)

    def test_output_is_llama_perplexity_s_and_repeats_exactly(self):
        args = ["perplexity", self.model, self.text, "--ctx-size", str(CTX), "--backend", "cpu"]
        a, b = run_sipp(args), run_sipp(args)
        self.assertEqual(a.returncode, 0, a.stderr)
        self.assertEqual(a.stdout, b.stdout)
        lines = a.stdout.strip().splitlines()
        self.assertEqual(len(lines), 2, a.stdout)
        self.assertRegex(lines[0], CHUNK_LINE)
        final = FINAL.match(lines[1])
        self.assertIsNotNone(final, lines[1])
        self.assertEqual(lines[0].rstrip(",").split(",")[-1].split("]")[1], final.group(1))
        self.assertIn("calculating perplexity over", a.stderr)

    def test_batches_smaller_than_a_chunk_and_one_chunk_per_batch_agree(self):
        many = self.ppl(self.model, self.text)
        for batch in ("8", str(CTX), str(CTX + CTX // 2)):  # the last holds one whole chunk, as llama's does
            r = self.ppl(self.model, self.text, "--batch-size", batch)
            self.assertEqual((r["n_seq"], r["batch_size"]), (1, min(int(batch), CTX)))
            self.assertAlmostEqual(r["ppl"] / many["ppl"], 1.0, delta=1e-3, msg=f"batch {batch}")

    def test_matches_an_independent_computation(self):
        r = self.ppl(self.model, self.text, "--batch-size", str(CTX))
        p = subprocess.run([sys.executable, "-c", CROSS_CHECK, os.path.join(ROOT, "bindings", "python"), self.model,
                            self.text, str(CTX)], capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        ref = json.loads(p.stdout)
        self.assertEqual((r["n_chunks"], r["n_scored"], r["n_text_tokens"]),
                         (ref["n_chunks"], ref["n_scored"], ref["n_tokens"]))
        self.assertAlmostEqual(r["ppl"] / ref["ppl"], 1.0, delta=1e-3, msg=f"{r['ppl']} against {ref['ppl']}")

    def test_a_missing_or_empty_file_is_one_line_and_exit_1(self):
        for path, words in [(os.path.join(self.tmp.name, "nope.txt"), "cannot read"), (self.empty, "empty")]:
            p = run_sipp(["perplexity", self.model, path, "--backend", "cpu"])
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn(words, p.stderr)
            self.assertIn(path, p.stderr)

    def test_a_text_under_two_chunks_says_its_tokens_and_the_ctx_that_fits(self):
        p = run_sipp(["perplexity", self.model, self.short, "--ctx-size", str(CTX), "--backend", "cpu"])
        self.assertEqual(p.returncode, 1, p.stderr)
        msg = last_line(p.stderr)
        m = re.search(r"the text is (\d+) tokens.*needs at least (\d+).*a context of (\d+) would fit", msg)
        self.assertIsNotNone(m, msg)
        n = int(m.group(1))
        self.assertEqual((int(m.group(2)), int(m.group(3))), (2 * CTX, n // 2))
        fits = self.ppl(self.model, self.short, "--ctx-size", str(n // 2))
        self.assertEqual(fits["n_chunks"], 2)
        tiny = self.write("tiny.txt", "river stone")
        p = run_sipp(["perplexity", self.model, tiny, "--backend", "cpu"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("no context fits", last_line(p.stderr))

    def test_a_model_that_cannot_load_is_exit_1(self):
        bad = self.write("bad.gguf", "not a gguf file")
        p = run_sipp(["perplexity", bad, self.text, "--backend", "cpu"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("bad.gguf", last_line(p.stderr))

    def test_bad_flags_are_exit_2(self):
        for flags in (["--ctx-size", "abc"], ["--ctx-size", "4"], ["--batch-size", "0"],
                      ["--chunks", "0"], ["--nope"], ["--backend", "nonsense"]):
            p = run_sipp(["perplexity", self.model, self.text, *flags])
            self.assertEqual(p.returncode, 2, f"{flags}: {p.stderr}")
        p = run_sipp(["perplexity", self.model])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("no FILE", p.stderr)


if __name__ == "__main__":
    unittest.main()
