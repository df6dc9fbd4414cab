"""Speculative decoding with a draft model (issue 19: `--draft MODEL`, target keys `draft_model`,
`draft_p_min`), on sipp-synth pairs.

A pair is a target whose blocks past the first two add only `--perturb S` times noise and the draft
that is exactly its first two blocks (`--layers 2`, same seed): at S = 0 the target's logits are the
draft's, so greedy acceptance is ~100%; a larger S moves them apart and acceptance falls. The
contract tested: a greedy request gives the same tokens with and without the draft, token for token,
whatever the acceptance (CLI, limits, draft sizes, p_min, 1 and 4 concurrent gateway streams in one
engine); a sampled request speculates too (its distribution is tested in
bindings/python/tests/test_speculative.py), one with a repeat penalty does not; a draft of another
vocabulary, a missing draft and inconsistent settings are refused with messages naming them.

The draft cut-off: tests that need proposals verified set it "off" (every step proposes up to
draft_max); "auto" (the default, a cost model measured as the engine runs) must give the same tokens,
and where drafting cannot pay (a draft that costs many times the target's decode) it must run the
steps plain once it has explored. Counters are asserted, never speeds.
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2
RUN_TIMEOUT_S = 180
LONG = 120
SHAPE = ["--n-embd", "64", "--n-layer", "6", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128", "--type",
         "q8_0", "--seed", "3"]
# Wide enough that attention computed two ways (flash attention on in one context, off in the other)
# flips greedy picks among the 128k vocabulary's near-tied logits: with that mismatch the model as
# its own draft got 418 of 441 proposals accepted over PROMPTS instead of all.
WIDE_SHAPE = ["--n-embd", "512", "--n-layer", "4", "--n-head", "8", "--n-head-kv", "4", "--n-ff", "1024", "--type",
              "q4_0", "--seed", "3"]
DRAFT_LAYERS = "2"
PROMPTS = ["Hello", "def add(a, b): return a + b\ndef sub(a, b):", "one two three", "The quick brown fox"]
HIGH_ACCEPTANCE = 0.9  # the bound for the S = 0 pair
OFF = ["--draft-cutoff", "off"]  # propose every step: the verification paths must run

_made = {}


def synth(name, *flags, vocab=None, shape=SHAPE):
    """A model made once per test process from shape and flags."""
    if name not in _made:
        path = os.path.join(gw.tmpdir(), f"{name}.gguf")
        r = subprocess.run([gw.SYNTH, "--out", path, "--vocab", vocab or gw.VOCAB, *shape, *flags],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"sipp-synth {flags} failed: {r.stderr}")
        _made[name] = path
    return _made[name]


def target(perturb):
    return synth(f"target-{perturb}", "--active-layers", DRAFT_LAYERS, "--perturb", str(perturb))


def draft():
    return synth("draft", "--layers", DRAFT_LAYERS)


def run(*args):
    env = dict(os.environ, GGML_NO_BACKTRACE="1")
    return subprocess.run([gw.SIPP, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)


def generate(model, prompt, *flags, max_tokens=LONG):
    p = run(model, prompt, "--max-tokens", str(max_tokens), "--threads", "1", "--ignore-eos", "--stats", "json",
            *flags)
    if p.returncode != 0:
        raise AssertionError(f"sipp {flags} exited {p.returncode}: {p.stderr}")
    return p.stdout, json.loads(p.stderr.strip().splitlines()[-1]), p.stderr


class DraftCliTest(unittest.TestCase):
    def test_greedy_identical_and_acceptance_follows_perturbation(self):
        rates = []
        for perturb in (0, 2, 8):
            drafted = accepted = 0
            for prompt in PROMPTS[:2]:
                plain, s0, _ = generate(target(perturb), prompt, "--temperature", "0")
                spec, s1, _ = generate(target(perturb), prompt, "--temperature", "0", "--draft", draft(), *OFF)
                self.assertEqual(spec, plain, f"S={perturb} prompt {prompt!r}")
                self.assertEqual((s1["cutoff_steps"], s1["speculation"]), (0, "draft"))
                auto, s2, _ = generate(target(perturb), prompt, "--temperature", "0", "--draft", draft())
                self.assertEqual(auto, plain, f"draft cut-off auto, S={perturb} prompt {prompt!r}")
                self.assertGreater(s2["draft_steps"], 0, "auto drafts while it measures")
                self.assertEqual(s1["generated_tokens"], s0["generated_tokens"])
                self.assertEqual(s0["draft_tokens"], 0)
                self.assertLessEqual(s1["accepted_tokens"], s1["draft_tokens"])
                drafted += s1["draft_tokens"]
                accepted += s1["accepted_tokens"]
            self.assertGreater(drafted, 0)
            rates.append(accepted / drafted)
        self.assertGreater(rates[0], HIGH_ACCEPTANCE, f"S=0 must be accepted almost always: {rates}")
        self.assertLess(rates[2], rates[0], f"acceptance must fall as S grows: {rates}")

    def test_limits_draft_sizes_and_p_min(self):
        model, prompt = target(2), PROMPTS[2]
        for max_tokens in (1, 2, 9, 40):
            plain, _, _ = generate(model, prompt, "--temperature", "0", max_tokens=max_tokens)
            for sizes in (["--draft-max", "1"], ["--draft-max", "3", "--draft-min", "2"], ["--draft-max", "32"],
                          ["--draft-p-min", "0.5"]):
                spec, s, _ = generate(model, prompt, "--temperature", "0", "--draft", draft(), *sizes, *OFF,
                                      max_tokens=max_tokens)
                self.assertEqual(spec, plain, f"max_tokens {max_tokens} {sizes}")
                self.assertEqual(s["generated_tokens"], max_tokens)

    def test_p_min_stops_the_draft_early(self):
        _, low, _ = generate(target(0), "Hello", "--temperature", "0", "--draft", draft(), *OFF)
        _, high, _ = generate(target(0), "Hello", "--temperature", "0", "--draft", draft(), "--draft-p-min", "0.99",
                              *OFF)
        # Random weights give flat distributions: the draft is rarely 99% sure of a token.
        self.assertLess(high["draft_tokens"], low["draft_tokens"])

    def test_the_same_model_as_its_own_draft(self):
        """The draft's context computes exactly as the target's (flash attention included, which the
        default auto policy decides): the model as its own draft has every greedy proposal accepted."""
        for model in (gw.model(), synth("wide", shape=WIDE_SHAPE)):
            for prompt in PROMPTS:
                plain, _, _ = generate(model, prompt, "--temperature", "0")
                spec, s, _ = generate(model, prompt, "--temperature", "0", "--draft", model, "--spec", "draft",
                                      *OFF)
                self.assertEqual(spec, plain, f"{model} {prompt!r}")
                self.assertEqual(s["accepted_tokens"], s["draft_tokens"], f"{model} {prompt!r}")
                self.assertGreater(s["draft_tokens"], 0)

    def test_cutoff_runs_plain_where_drafting_cannot_pay(self):
        # A pair turned around: the target is the first 2 layers, the draft the whole 24-layer model
        # whose layers past 2 add nothing (S = 0), so the draft's logits are the target's and every
        # proposal is confirmed, yet each costs a draft decode about three times the target's own
        # token (the wide feed-forward layers outweigh the vocabulary's output rows, which dominate
        # the tiny SHAPE). Drafting cannot pay whatever the acceptance; once both costs are
        # measured the cut-off runs plain, drafting only to explore (after 16, 32, ... plain steps).
        wide = ["--n-embd", "128", "--n-ff", "4096", "--n-layer", "24"]
        small = synth("wide-2", *wide, "--layers", DRAFT_LAYERS)
        heavy = synth("wide-24-perturb0", *wide, "--active-layers", DRAFT_LAYERS, "--perturb", "0")
        plain, _, _ = generate(small, "Hello", "--temperature", "0")
        auto, s, _ = generate(small, "Hello", "--temperature", "0", "--draft", heavy)
        self.assertEqual(auto, plain)
        self.assertGreater(s["accepted_tokens"], HIGH_ACCEPTANCE * s["draft_tokens"], s)
        self.assertGreater(s["draft_steps"], 0, "it must explore")
        self.assertGreater(s["cutoff_steps"], 3 * s["draft_steps"], s)
        self.assertEqual(s["speculation"], "draft")
        _, s, _ = generate(small, "Hello", "--temperature", "0", "--draft", heavy, *OFF)
        self.assertEqual(s["cutoff_steps"], 0)
        self.assertGreater(s["draft_steps"], 0)

    def test_sampled_requests_speculate(self):
        flags = ["--temperature", "0.8", "--seed", "7", "--draft", draft(), *OFF]
        a, s, _ = generate(target(2), "Hello", *flags, max_tokens=40)
        b, _, _ = generate(target(2), "Hello", *flags, max_tokens=40)
        self.assertEqual(a, b, "the same seed gives the same text")
        self.assertEqual(s["speculation"], "draft")
        self.assertGreater(s["draft_tokens"], 0)
        # S = 0: the draft's distribution is the target's, so every proposal is accepted.
        _, s, _ = generate(target(0), "Hello", *flags, max_tokens=40)
        self.assertEqual(s["accepted_tokens"], s["draft_tokens"])
        _, s, _ = generate(target(0), "Hello", "--temperature", "0.8", "--repeat-penalty", "1.2", "--draft", draft(),
                           max_tokens=8)
        self.assertEqual((s["speculation"], s["draft_tokens"]), ("off (repeat penalty)", 0))
        _, s, _ = generate(target(0), "Hello", "--temperature", "0", "--draft", draft(), max_tokens=4)
        self.assertEqual(s["speculation"], "draft")
        _, s, _ = generate(target(0), "Hello", "--temperature", "0", max_tokens=4)
        self.assertEqual(s["speculation"], "none")

    def test_another_vocabulary_is_refused_naming_both_files(self):
        other = synth("draft-qwen2", "--layers", DRAFT_LAYERS,
                      vocab=os.path.join(os.path.dirname(gw.VOCAB), "ggml-vocab-qwen2.gguf"))
        p = run(target(0), "Hi", "--draft", other, "--threads", "1", "--temperature", "0")
        self.assertEqual(p.returncode, EXIT_RUNTIME, p.stderr)
        self.assertIn(f"draft model '{other}' does not share the vocabulary of '{target(0)}'", p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_bad_settings(self):
        p = run(target(0), "Hi", "--draft", "/nonexistent/draft.gguf")
        self.assertEqual(p.returncode, EXIT_RUNTIME)
        self.assertIn("draft model:", p.stderr)
        self.assertIn("/nonexistent/draft.gguf", p.stderr)
        p = run(target(0), "Hi", "--spec", "draft")
        self.assertNotEqual(p.returncode, EXIT_OK)
        self.assertIn("speculative 'draft' needs a draft_model", p.stderr)
        p = run(target(0), "Hi", "--spec", "ngram", "--draft", draft())
        self.assertNotEqual(p.returncode, EXIT_OK)
        self.assertIn("drop one of them", p.stderr)
        for bad in ("1.5", "1"):  # the CLI answers for the range, before any model loads
            p = run(target(0), "Hi", "--draft", draft(), "--draft-p-min", bad)
            self.assertEqual(p.returncode, EXIT_USAGE)
            self.assertEqual(p.stderr.strip(), f"sipp: --draft-p-min '{bad}' is not a number in [0, 1)")
        p = run(target(0), "Hi", "--draft", draft(), "--draft-cutoff", "on")
        self.assertEqual(p.returncode, EXIT_USAGE)
        self.assertEqual(p.stderr.strip(), "sipp: --draft-cutoff 'on' is not one of auto, off")


class DraftGatewayTest(unittest.TestCase):
    def complete(self, g, name, prompt, max_tokens=80):
        body = {"model": name, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
        status, _, out = g.json("POST", "/v1/completions", body)
        self.assertEqual(status, 200, out)
        return out["choices"][0]["text"], out["usage"]["sipp"]

    def test_one_and_four_streams_identical_and_counted(self):
        extra = f'draft_model = "{draft()}"\ndraft_max = 6'
        g = gw.serve_config(gw.local_target("spec", path=target(2), parallel=4, extra=extra + '\ndraft_cutoff = "off"') +
                            gw.local_target("auto", path=target(2), parallel=4, extra=extra) +
                            gw.local_target("plain", path=target(2), parallel=4))
        try:
            plain = [self.complete(g, "plain", p) for p in PROMPTS]
            one = [self.complete(g, "spec", p) for p in PROMPTS]
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                four = list(pool.map(lambda p: self.complete(g, "spec", p), PROMPTS))
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                auto = list(pool.map(lambda p: self.complete(g, "auto", p), PROMPTS))
            self.assertEqual([t for t, _ in one], [t for t, _ in plain])
            self.assertEqual([t for t, _ in four], [t for t, _ in plain])
            self.assertEqual([t for t, _ in auto], [t for t, _ in plain])
            spec = one + four
            drafted = sum(u["draft_tokens"] for _, u in spec)
            accepted = sum(u["accepted_tokens"] for _, u in spec)
            self.assertGreater(accepted, 0)
            self.assertGreater(drafted, accepted, "S=2 rejects some proposals: both paths must run")
            status, _, text = g.request("GET", "/metrics")
            self.assertEqual(status, 200)
            metrics = gw.parse_metrics(text.decode() if isinstance(text, bytes) else text)
            self.assertEqual(gw.metric(metrics, "sipp_speculative_draft_tokens_total", target="spec"), drafted)
            self.assertEqual(gw.metric(metrics, "sipp_speculative_accepted_tokens_total", target="spec"), accepted)
            self.assertEqual({u["speculation"] for _, u in spec}, {"draft"})
            steps = gw.metric(metrics, "sipp_speculative_draft_steps_total", target="spec")
            self.assertGreater(steps, 0)
            self.assertLessEqual(steps, sum(u["draft_steps"] for _, u in spec))
            self.assertEqual(gw.metric(metrics, "sipp_speculative_cutoff_steps_total", target="spec"), 0)
            decided = (gw.metric(metrics, "sipp_speculative_draft_steps_total", target="auto") +
                       gw.metric(metrics, "sipp_speculative_cutoff_steps_total", target="auto"))
            self.assertLessEqual(decided, sum(u["draft_steps"] + u["cutoff_steps"] for _, u in auto))
            self.assertGreater(decided, 0)
            body = {"model": "spec", "prompt": "Hello", "max_tokens": 8, "temperature": 0.7, "seed": 3}
            status, _, out = g.json("POST", "/v1/completions", body)
            self.assertEqual(status, 200, out)
            self.assertEqual(out["usage"]["sipp"]["speculation"], "draft")
            body["repeat_penalty"] = 1.2
            status, _, out = g.json("POST", "/v1/completions", body)
            self.assertEqual(status, 200, out)
            self.assertEqual(out["usage"]["sipp"]["speculation"], "off (repeat penalty)")
            self.assertEqual(out["usage"]["sipp"]["draft_tokens"], 0)
        finally:
            self.assertEqual(g.stop(), 0)

    def test_serve_model_with_draft_flag(self):
        g = gw.serve_model(target(0), "--draft", draft())
        try:
            _, usage = self.complete(g, os.path.basename(target(0))[:-len(".gguf")], "Hello", 40)
            self.assertGreater(usage["draft_tokens"], 0)
            self.assertGreater(usage["accepted_tokens"] / usage["draft_tokens"], HIGH_ACCEPTANCE)
        finally:
            self.assertEqual(g.stop(), 0)

    def check_fails(self, extra, *needles, path=None):
        text = gw.local_target("t", path=path or target(0), extra=extra)
        cfg = gw.write(f"draft-bad-{abs(hash(extra))}.toml", text)
        p = run("serve", "--check", "--config", cfg)
        self.assertNotEqual(p.returncode, EXIT_OK, p.stderr)
        for n in needles:
            self.assertIn(n, p.stderr)
        return text, cfg, p

    def test_bad_target_values(self):
        text, cfg, p = self.check_fails('speculative = "draft"', "'draft' needs draft_model")
        self.check_fails(f'speculative = "ngram"\ndraft_model = "{draft()}"', "draft_model: given, but speculative "
                                                                               "is 'ngram'")
        text, cfg, p = self.check_fails(f'draft_model = "{draft()}"\ndraft_p_min = 1.5',
                                        "draft_p_min: 1.5 is out of range [0, 1)")
        line = text.splitlines().index("draft_p_min = 1.5") + 1
        self.assertIn(f"{cfg}:{line}:", p.stderr)
        self.check_fails('draft_model = "/nonexistent/d.gguf"', "draft_model file '/nonexistent/d.gguf' cannot be "
                                                                "read")
        self.check_fails('speculative = "eagle"', "'eagle' is not one of none, ngram, draft")
        text, cfg, p = self.check_fails(f'draft_model = "{draft()}"\ndraft_cutoff = 1',
                                        "draft_cutoff")
        self.check_fails(f'draft_model = "{draft()}"\ndraft_cutoff = "always"',
                         "draft_cutoff: 'always' is not one of auto, off")

    def test_good_target_passes_check(self):
        cfg = gw.write("draft-good.toml", gw.local_target("t", path=target(0),
                                                          extra=f'draft_model = "{draft()}"\ndraft_p_min = 0.5\n'
                                                                'draft_cutoff = "off"'))
        p = run("serve", "--check", "--config", cfg)
        self.assertEqual(p.returncode, EXIT_OK, p.stderr)


if __name__ == "__main__":
    unittest.main()
