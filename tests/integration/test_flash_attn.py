"""Flash attention policy end to end (issue 19, part 1): what each way of loading a model gets, that the
choice really reaches llama.cpp's context, and that every client can set it (CLI, gateway target key,
Python binding) and is refused a value that is not auto, on or off.

  auto (default)   llama.cpp's own default (flash_attn_type auto) on a GPU and on auto's fallback to the
                   CPU; off for an explicit `--backend cpu` (the conservative path) and for an rpc split
  on / off         what was asked, on any backend

What llama.cpp did is read from its own log (SIPP_LOG=info: "llama_context: flash_attn = auto|enabled|
disabled"), so a test fails if the choice is dropped on the way to the context, not only if the
reason text is wrong. `sipp verify --backends cpu,cpu+fa` compares the two on one backend.
"""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

EXIT_OK, EXIT_USAGE, EXIT_DRIFT = 0, 2, 3
RUN_TIMEOUT_S = 120
CONTEXT_FA = re.compile(r"llama_context: flash_attn\s*=\s*(\w+)")


def run(*args, env=None):
    full_env = dict(os.environ, SIPP_LOG="info", GGML_NO_BACKTRACE="1")
    full_env.pop("GGML_VK_VISIBLE_DEVICES", None)  # auto falls back to the CPU here
    full_env.update(env or {})
    return subprocess.run([gw.SIPP, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=full_env)


def generate(*flags):
    """One short greedy run; returns (its stats, what llama.cpp's context said about flash attention)."""
    p = run(gw.model(), "Hello", "--max-tokens", "4", "--temperature", "0", "--threads", "1", "--stats", "json",
            *flags)
    if p.returncode != 0:
        raise AssertionError(f"sipp {' '.join(flags)} exited {p.returncode}: {p.stderr}")
    stats = json.loads(p.stderr.strip().splitlines()[-1])
    contexts = CONTEXT_FA.findall(p.stderr)
    return stats, contexts


class FlashAttnPolicyTest(unittest.TestCase):
    def test_auto_falling_back_to_cpu_uses_llama_default(self):
        stats, contexts = generate()
        self.assertEqual(stats["backend"], "cpu")
        self.assertIn("no GPU backend usable", stats["backend_reason"])
        self.assertTrue(stats["backend_reason"].endswith("flash attention auto (llama.cpp's default)"),
                        stats["backend_reason"])
        self.assertEqual(contexts, ["auto"])

    def test_explicit_cpu_keeps_it_off(self):
        stats, contexts = generate("--backend", "cpu")
        self.assertIn("requested cpu", stats["backend_reason"])
        self.assertIn("flash attention off (explicit cpu", stats["backend_reason"])
        self.assertEqual(contexts, ["disabled"])

    def test_explicit_cpu_with_flash_attn_on(self):
        stats, contexts = generate("--backend", "cpu", "--flash-attn", "on")
        self.assertIn("flash attention on (asked)", stats["backend_reason"])
        self.assertEqual(contexts, ["enabled"])

    def test_auto_with_flash_attn_off(self):
        stats, contexts = generate("--flash-attn", "off")
        self.assertIn("flash attention off (asked)", stats["backend_reason"])
        self.assertEqual(contexts, ["disabled"])

    def test_bad_value_is_a_usage_error(self):
        for cmd in ([gw.model(), "Hello"], ["serve", gw.model()], ["bench", gw.model()]):
            p = run(*cmd, "--flash-attn", "maybe")
            self.assertEqual(p.returncode, EXIT_USAGE, p.stderr)
            self.assertEqual(p.stderr.strip(), "sipp: --flash-attn: flash_attn 'maybe' is not one of auto, on, off")

    def test_serve_with_config_refuses_the_flag(self):
        path = gw.write("fa-flag.toml", gw.local_target("t"))
        p = run("serve", "--config", path, "--flash-attn", "on")
        self.assertEqual(p.returncode, EXIT_USAGE)
        self.assertIn("--flash-attn", p.stderr)

    def test_bench_reports_the_reason(self):
        p = run("bench", gw.model(), "-p", "8", "-n", "4", "-r", "1", "--threads", "1", "--flash-attn", "on",
                "-o", "json")
        self.assertEqual(p.returncode, EXIT_OK, p.stderr)
        out = json.loads(p.stdout)
        self.assertIn("flash attention on (asked)", out["backend_reason"])


class FlashAttnGatewayTest(unittest.TestCase):
    def test_target_key(self):
        g = gw.serve_config(gw.local_target("fa", extra='flash_attn = "on"') +
                            gw.local_target("plain", extra='backend = "cpu"'))
        try:
            status, _, body = g.json("GET", "/v1/backends")
            self.assertEqual(status, 200, body)
            reasons = {t["name"]: t["reason"] for t in body["targets"]}
            self.assertIn("flash attention on (asked)", reasons["fa"])
            self.assertIn("flash attention off (explicit cpu", reasons["plain"])
            status, _, out = g.json("POST", "/v1/chat/completions", gw.chat_body("fa", max_tokens=2))
            self.assertEqual(status, 200, out)
        finally:
            self.assertEqual(g.stop(), 0)

    def test_bad_target_value_names_file_and_line(self):
        text = gw.local_target("t", extra='flash_attn = "fast"')
        path = gw.write("fa-bad.toml", text)
        p = run("serve", "--check", "--config", path)
        self.assertNotEqual(p.returncode, EXIT_OK)
        line = text.splitlines().index('flash_attn = "fast"') + 1
        self.assertIn(f"{path}:{line}:", p.stderr)
        self.assertIn("flash_attn 'fast' is not one of auto, on, off", p.stderr)

    def test_serve_flag_sets_the_model_target(self):
        g = gw.serve_model(gw.model(), "--flash-attn", "off")
        try:
            status, _, body = g.json("GET", "/v1/backends")
            self.assertEqual(status, 200, body)
            self.assertIn("flash attention off (asked)", body["targets"][0]["reason"])
        finally:
            self.assertEqual(g.stop(), 0)


class FlashAttnVerifyTest(unittest.TestCase):
    def test_verify_compares_on_and_off_on_one_backend(self):
        p = run("verify", gw.model(), "--backends", "cpu,cpu+fa", "--threads", "1", "--greedy-tokens", "4",
                "--json")
        self.assertIn(p.returncode, (EXIT_OK, EXIT_DRIFT), p.stderr)
        out = json.loads(p.stdout)
        self.assertEqual(set(out["backends"]), {"cpu", "cpu+fa"})
        cpu, fa = out["backends"]["cpu"], out["backends"]["cpu+fa"]
        self.assertIn("flash attention off (explicit cpu", cpu["device"]["backend_reason"])
        self.assertIn("flash attention on (asked)", fa["device"]["backend_reason"])
        # the fused kernel replaces the separate attention ops in the graph
        self.assertLess(fa["graph"]["n_nodes"], cpu["graph"]["n_nodes"])
        # a different kernel: the logits differ a little, never wildly, on a random-weight model
        self.assertGreater(fa["vs_ref"]["max_abs_diff"], 0)
        self.assertLess(fa["vs_ref"]["kl_mean"], 0.01)

    def test_verify_refuses_a_bad_label(self):
        p = run("verify", gw.model(), "--backends", "cpu,gpu+fa")
        self.assertEqual(p.returncode, EXIT_USAGE, p.stderr)
        self.assertIn("gpu", p.stderr)


if __name__ == "__main__":
    unittest.main()
