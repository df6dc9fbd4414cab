"""Speculative decoding by prompt lookup (issue 19, part 2: `--spec ngram`, target key `speculative`).

The contract: a greedy request gives the same tokens with and without speculation, whatever the
proposals were (all confirmed, some, none), through stop strings and max_tokens; a sampled request
speculates by speculative sampling (reproducible for a seed; its distribution is tested in
bindings/python/tests/test_speculative.py), one with a repeat penalty does not; and the counts
of proposed and confirmed tokens reach the request's stats and /metrics. Random-weight models fall
into loops after some tokens, which prompt lookup predicts, so the proposals here are both confirmed
and rejected ones. The gateway test runs four streams at once in one engine, so proposals of several
slots ride in one batch beside one another. The tests that need proposals verified set the draft
cut-off "off" (a fixed draft length); the cut-off "auto" (the default: a measured cost model may run
steps plain) must give the same tokens too.
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

EXIT_OK, EXIT_USAGE = 0, 2
RUN_TIMEOUT_S = 180
LONG = 160  # tokens: long enough for the tiny model to loop, so lookup proposes
OFF = ["--draft-cutoff", "off"]  # propose every step: the verification paths must run
PROMPTS = ["Hello", "def add(a, b): return a + b\ndef sub(a, b): return a - b\ndef add(a, b):",
           "one two three one two three one two", "The quick brown fox"]


def run(*args):
    env = dict(os.environ, GGML_NO_BACKTRACE="1")
    return subprocess.run([gw.SIPP, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)


def generate(prompt, *flags, max_tokens=LONG):
    p = run(gw.model(), prompt, "--max-tokens", str(max_tokens), "--threads", "1", "--ignore-eos", "--stats",
            "json", *flags)
    if p.returncode != 0:
        raise AssertionError(f"sipp {flags} exited {p.returncode}: {p.stderr}")
    return p.stdout, json.loads(p.stderr.strip().splitlines()[-1]), p.stderr


class SpeculativeCliTest(unittest.TestCase):
    def test_greedy_output_is_identical(self):
        drafted = accepted = 0
        for prompt in PROMPTS:
            plain, s0, _ = generate(prompt, "--temperature", "0")
            spec, s1, _ = generate(prompt, "--temperature", "0", "--spec", "ngram", *OFF)
            self.assertEqual(spec, plain, f"prompt {prompt!r}")
            self.assertEqual(s1["cutoff_steps"], 0)
            auto, s2, _ = generate(prompt, "--temperature", "0", "--spec", "ngram")
            self.assertEqual(auto, plain, f"draft cut-off auto, prompt {prompt!r}")
            self.assertGreater(s2["draft_steps"] + s2["cutoff_steps"], 0, "auto must decide something")
            self.assertEqual(s1["generated_tokens"], s0["generated_tokens"])
            self.assertEqual(s0["draft_tokens"], 0)
            self.assertIsNone(s0["acceptance_rate"])
            self.assertLessEqual(s1["accepted_tokens"], s1["draft_tokens"])
            drafted += s1["draft_tokens"]
            accepted += s1["accepted_tokens"]
        self.assertGreater(drafted, 0, "prompt lookup never proposed: the test proves nothing")
        self.assertGreater(accepted, 0)

    def test_limits_and_draft_sizes(self):
        prompt = PROMPTS[2]
        for max_tokens in (1, 2, 7, 61):
            plain, _, _ = generate(prompt, "--temperature", "0", max_tokens=max_tokens)
            for sizes in (["--draft-max", "1"], ["--draft-max", "3", "--draft-min", "2"], ["--draft-max", "32"]):
                for cutoff in ("off", "auto"):
                    spec, s, _ = generate(prompt, "--temperature", "0", "--spec", "ngram", *sizes, "--draft-cutoff",
                                          cutoff, max_tokens=max_tokens)
                    self.assertEqual(spec, plain, f"max_tokens {max_tokens} {sizes} cut-off {cutoff}")
                    self.assertEqual(s["generated_tokens"], max_tokens)

    def test_stop_string(self):
        plain, _, _ = generate("Hello", "--temperature", "0")
        stop = plain[len(plain) * 3 // 4:][:4]
        if not stop.strip():
            self.skipTest(f"no usable stop string in {plain!r}")
        a, sa, _ = generate("Hello", "--temperature", "0", "--stop", stop)
        b, sb, _ = generate("Hello", "--temperature", "0", "--stop", stop, "--spec", "ngram", *OFF)
        self.assertEqual(b, a)
        self.assertEqual(sb["finish_reason"], "stop")
        self.assertEqual(sb["generated_tokens"], sa["generated_tokens"])

    def test_sampled_requests_speculate_reproducibly(self):
        # Speculative sampling keeps the distribution, not the draws: the same seed gives the same
        # text with speculation, and bindings/python/tests/test_speculative.py tests the distribution.
        # top-k 1 keeps the sampled path (speculative sampling's test against a one-token p) but lets
        # the tiny model loop as greedy decoding does, so that lookup proposes.
        flags = ["--temperature", "0.8", "--top-k", "1", "--seed", "7", "--spec", "ngram", *OFF]
        a, s, _ = generate("one two three one two three one two", *flags, max_tokens=LONG)
        b, _, _ = generate("one two three one two three one two", *flags, max_tokens=LONG)
        self.assertEqual(a, b)
        self.assertEqual(s["speculation"], "ngram")
        self.assertGreater(s["draft_tokens"], 0)
        _, s, err = generate("Hello", "--temperature", "0", "--repeat-penalty", "1.1", "--spec", "ngram", max_tokens=40)
        self.assertEqual(s["draft_tokens"], 0, "a repeat penalty makes the choice depend on the history")
        self.assertEqual(s["speculation"], "off (repeat penalty)")
        self.assertIn("speculative decoding is off for a request with --repeat-penalty", err)

    def test_bad_flags(self):
        p = run(gw.model(), "Hi", "--spec", "medusa")
        self.assertEqual(p.returncode, EXIT_USAGE)
        self.assertEqual(p.stderr.strip(), "sipp: --spec 'medusa' is not one of none, ngram, draft")
        p = run(gw.model(), "Hi", "--draft-max", "33")
        self.assertEqual(p.returncode, EXIT_USAGE)
        self.assertIn("--draft-max", p.stderr)
        p = run(gw.model(), "Hi", "--spec", "ngram", "--draft-max", "2", "--draft-min", "3")
        self.assertNotEqual(p.returncode, EXIT_OK)
        self.assertIn("draft_min", p.stderr)
        p = run(gw.model(), "Hi", "--spec", "ngram", "--draft-cutoff", "sometimes")
        self.assertEqual(p.returncode, EXIT_USAGE)
        self.assertEqual(p.stderr.strip(), "sipp: --draft-cutoff 'sometimes' is not one of auto, off")


class SpeculativeGatewayTest(unittest.TestCase):
    def test_four_streams_identical_and_counted(self):
        g = gw.serve_config(gw.local_target("spec", parallel=4, extra='speculative = "ngram"\ndraft_cutoff = "off"') +
                            gw.local_target("auto", parallel=4, extra='speculative = "ngram"') +
                            gw.local_target("plain", parallel=4))
        try:
            def complete(target, prompt):
                body = {"model": target, "prompt": prompt, "max_tokens": 96, "temperature": 0, "ignore_eos": True}
                status, _, out = g.json("POST", "/v1/completions", body)
                self.assertEqual(status, 200, out)
                return out["choices"][0]["text"], out["usage"]["sipp"]

            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                spec = list(pool.map(lambda p: complete("spec", p), PROMPTS))
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                auto = list(pool.map(lambda p: complete("auto", p), PROMPTS))
            plain = [complete("plain", p) for p in PROMPTS]
            self.assertEqual([t for t, _ in spec], [t for t, _ in plain])
            self.assertEqual([t for t, _ in auto], [t for t, _ in plain])
            drafted = sum(u["draft_tokens"] for _, u in spec)
            accepted = sum(u["accepted_tokens"] for _, u in spec)
            self.assertGreater(drafted, 0)
            self.assertEqual(sum(u["draft_tokens"] for _, u in plain), 0)
            status, _, text = g.request("GET", "/metrics")
            self.assertEqual(status, 200)
            metrics = gw.parse_metrics(text.decode() if isinstance(text, bytes) else text)
            self.assertEqual(gw.metric(metrics, "sipp_speculative_draft_tokens_total", target="spec"), drafted)
            self.assertEqual(gw.metric(metrics, "sipp_speculative_accepted_tokens_total", target="spec"), accepted)
            self.assertEqual(gw.metric(metrics, "sipp_speculative_draft_tokens_total", target="plain"), 0)
            # Steps are the engine's, shared by the slots that drafted in them: at most the requests' sum.
            steps = gw.metric(metrics, "sipp_speculative_draft_steps_total", target="spec")
            self.assertGreater(steps, 0)
            self.assertLessEqual(steps, sum(u["draft_steps"] for _, u in spec))
            self.assertEqual(gw.metric(metrics, "sipp_speculative_cutoff_steps_total", target="spec"), 0)
            self.assertEqual(sum(u["cutoff_steps"] for _, u in spec), 0)
            decided = (gw.metric(metrics, "sipp_speculative_draft_steps_total", target="auto") +
                       gw.metric(metrics, "sipp_speculative_cutoff_steps_total", target="auto"))
            self.assertGreater(decided, 0)
        finally:
            self.assertEqual(g.stop(), 0)

    def test_bad_target_value_names_file_and_line(self):
        text = gw.local_target("t", extra='speculative = "eagle"')
        path = gw.write("spec-bad.toml", text)
        p = run("serve", "--check", "--config", path)
        self.assertNotEqual(p.returncode, EXIT_OK)
        line = text.splitlines().index('speculative = "eagle"') + 1
        self.assertIn(f"{path}:{line}:", p.stderr)
        self.assertIn("'eagle' is not one of none, ngram", p.stderr)
        text = gw.local_target("t", extra='speculative = "ngram"\ndraft_cutoff = "never"')
        path = gw.write("spec-bad-cutoff.toml", text)
        p = run("serve", "--check", "--config", path)
        self.assertNotEqual(p.returncode, EXIT_OK)
        line = text.splitlines().index('draft_cutoff = "never"') + 1
        self.assertIn(f"{path}:{line}:", p.stderr)
        self.assertIn("draft_cutoff: 'never' is not one of auto, off", p.stderr)


if __name__ == "__main__":
    unittest.main()
