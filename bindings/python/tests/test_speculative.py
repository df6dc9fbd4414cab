"""Speculative decoding through the Python binding: sipp.local(draft_model=..., speculative=...).

A sipp-synth pair (a target whose blocks past the first two add nothing, and the draft that is its
first two blocks) gives the same greedy text with and without the draft, with nearly every proposal
accepted; a draft of another vocabulary and bad values are refused with messages naming them.
"""

import os
import subprocess
import unittest

import _support
import sipp

PAIR = ["--n-layer", "4"]
HIGH_ACCEPTANCE = 0.9


def pair():
    return (_support.model("pair-target", *PAIR, "--active-layers", "2"),
            _support.model("pair-draft", *PAIR, "--layers", "2"))


class SpeculativeTest(unittest.TestCase):
    def test_draft_greedy_identical_and_accepted(self):
        target, draft = pair()
        with sipp.Client() as client:
            plain = client.add("plain", sipp.local(target, backend="cpu", threads=_support.THREADS, parallel=1))
            spec = client.add("spec", sipp.local(target, backend="cpu", threads=_support.THREADS, parallel=1,
                                                 draft_model=draft, draft_max=4, draft_p_min=0.0))
            a = client.query("Hello", endpoint=plain, max_tokens=40, temperature=0, ignore_eos=True)
            b = client.query("Hello", endpoint=spec, max_tokens=40, temperature=0, ignore_eos=True)
            self.assertEqual(b.text, a.text)
            self.assertEqual(a.stats["draft_tokens"], 0)
            self.assertGreater(b.stats["draft_tokens"], 0)
            self.assertGreater(b.stats["accepted_tokens"] / b.stats["draft_tokens"], HIGH_ACCEPTANCE)
            ngram = client.add("ngram", sipp.local(target, backend="cpu", threads=_support.THREADS, parallel=1,
                                                   speculative="ngram"))
            c = client.query("Hello", endpoint=ngram, max_tokens=40, temperature=0, ignore_eos=True)
            self.assertEqual(c.text, a.text)

    def test_refusals(self):
        target, draft = pair()
        for kw, needle in (({"speculative": "medusa"}, "speculative must be"),
                           ({"draft_p_min": 1.0}, "draft_p_min must be a number in [0, 1)"),
                           ({"draft_model": 3}, "draft_model must be a .gguf path")):
            with self.assertRaises(sipp.InvalidArgumentError) as cm:
                sipp.local(target, **kw)
            self.assertIn(needle, str(cm.exception))
        with sipp.Client() as client:
            with self.assertRaises(sipp.SippError) as cm:
                client.add("x", sipp.local(target, backend="cpu", speculative="draft"))
            self.assertIn("speculative 'draft' needs a draft_model", str(cm.exception))
            other = os.path.join(_support.tmpdir(), "qwen2-draft.gguf")
            vocab = os.path.join(os.path.dirname(_support.VOCAB), "ggml-vocab-qwen2.gguf")
            r = subprocess.run([_support.SYNTH, "--out", other, "--vocab", vocab, *_support.TINY], capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            with self.assertRaises(sipp.SippError) as cm:
                client.add("y", sipp.local(target, backend="cpu", draft_model=other))
            self.assertIn(f"draft model '{other}' does not share the vocabulary of '{target}'", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
