"""Speculative decoding through the Python binding: sipp.local(draft_model=..., speculative=...).

A sipp-synth pair (a target whose blocks past the first two add nothing, and the draft that is its
first two blocks) gives the same greedy text with and without the draft, with nearly every proposal
accepted; a draft of another vocabulary and bad values are refused with messages naming them.
"""

import collections
import math
import os
import subprocess
import unittest

import _support
import sipp

PAIR = ["--n-layer", "4"]
SAMPLES = 1200
PROMPT = "Hello"
MIN_EXPECTED = 5  # chi-square cells expected below this are pooled
BOUND_SIGMAS = 5  # chi-square bound: df + 5 standard deviations (sqrt(2 df)); a wrong rule is far past it


def chi_square(a, b):
    """The chi-square statistic of homogeneity of two histograms, and its degrees of freedom."""
    na, nb = sum(a.values()), sum(b.values())
    cells, rest = [], [0, 0]
    for key in set(a) | set(b):
        x, y = a[key], b[key]
        if (x + y) * min(na, nb) / (na + nb) < MIN_EXPECTED:
            rest[0] += x
            rest[1] += y
        else:
            cells.append((x, y))
    if sum(rest):
        cells.append(tuple(rest))
    stat = 0.0
    for x, y in cells:
        ea, eb = (x + y) * na / (na + nb), (x + y) * nb / (na + nb)
        stat += (x - ea) ** 2 / ea + (y - eb) ** 2 / eb
    return stat, max(len(cells) - 1, 1)


def bound(df):
    return df + BOUND_SIGMAS * math.sqrt(2 * df)
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
                                                 draft_model=draft, draft_max=4, draft_p_min=0.0, draft_cutoff="off"))
            auto = client.add("auto", sipp.local(target, backend="cpu", threads=_support.THREADS, parallel=1,
                                                 draft_model=draft, draft_max=4))
            a = client.query("Hello", endpoint=plain, max_tokens=40, temperature=0, ignore_eos=True)
            b = client.query("Hello", endpoint=spec, max_tokens=40, temperature=0, ignore_eos=True)
            self.assertEqual(b.text, a.text)
            self.assertEqual(b.stats["cutoff_steps"], 0)
            d = client.query("Hello", endpoint=auto, max_tokens=40, temperature=0, ignore_eos=True)
            self.assertEqual(d.text, a.text)
            self.assertGreater(d.stats["draft_steps"], 0, "the cut-off drafts while it measures")
            engine = client.stats("auto")
            self.assertEqual(engine["draft_steps"], d.stats["draft_steps"])
            self.assertEqual(engine["cutoff_steps"], d.stats["cutoff_steps"])
            self.assertEqual(client.stats("spec")["cutoff_steps"], 0)
            self.assertEqual(a.stats["draft_tokens"], 0)
            self.assertGreater(b.stats["draft_tokens"], 0)
            self.assertGreater(b.stats["accepted_tokens"] / b.stats["draft_tokens"], HIGH_ACCEPTANCE)
            ngram = client.add("ngram", sipp.local(target, backend="cpu", threads=_support.THREADS, parallel=1,
                                                   speculative="ngram"))
            c = client.query("Hello", endpoint=ngram, max_tokens=40, temperature=0, ignore_eos=True)
            self.assertEqual(c.text, a.text)

    def test_sampled_speculation_keeps_the_target_distribution(self):
        """The texts of many seeded 3-token samples, with and without a draft (the first blocks of
        a pair at --perturb 3, so the draft's q is off the target's p and many proposals are rejected), are
        one distribution by a chi-square test of homogeneity; the same test tells the target's
        samples from the draft's own, so it would catch an acceptance rule that let q through."""
        target = _support.model("pair-target-s3", *PAIR, "--active-layers", "2", "--perturb", "3")
        other = pair()[1]
        kw = dict(max_tokens=3, temperature=1.0, top_k=3, ignore_eos=True)
        with sipp.Client() as client:
            base = dict(backend="cpu", threads=_support.THREADS, parallel=1)
            eps = {"plain": client.add("plain", sipp.local(target, **base)),
                   "spec": client.add("spec", sipp.local(target, draft_model=other, draft_max=2, draft_cutoff="off",
                                                         **base)),
                   "ngram": client.add("ngram", sipp.local(target, speculative="ngram", draft_cutoff="off", **base)),
                   "draft": client.add("draft", sipp.local(other, **base))}
            hist = {k: collections.Counter() for k in eps}
            drafted = accepted = 0
            for seed in range(SAMPLES):
                for k, ep in eps.items():
                    r = client.query(PROMPT, endpoint=ep, seed=seed, **kw)
                    hist[k][r.text] += 1
                    if k == "spec":
                        self.assertEqual(r.stats["speculation"], "draft")
                        drafted += r.stats["draft_tokens"]
                        accepted += r.stats["accepted_tokens"]
        self.assertGreater(drafted, 0)
        self.assertTrue(0 < accepted < drafted, f"both paths must run: {accepted} of {drafted}")
        stat, df = chi_square(hist["plain"], hist["spec"])
        self.assertLess(stat, bound(df), f"draft speculation changed the distribution: chi2 {stat:.1f}, df {df}")
        stat, df = chi_square(hist["plain"], hist["ngram"])
        self.assertLess(stat, bound(df), f"n-gram speculation changed the distribution: chi2 {stat:.1f}, df {df}")
        stat, df = chi_square(hist["plain"], hist["draft"])
        self.assertGreater(stat, bound(df), "the test cannot tell the target from its draft: it proves nothing")

    def test_refusals(self):
        target, draft = pair()
        for kw, needle in (({"speculative": "medusa"}, "speculative must be"),
                           ({"draft_p_min": 1.0}, "draft_p_min must be a number in [0, 1)"),
                           ({"draft_model": 3}, "draft_model must be a .gguf path"),
                           ({"draft_cutoff": "on"}, "draft_cutoff must be 'auto' or 'off'")):
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
