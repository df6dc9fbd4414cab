"""The KV cache's types (sipp_engine_params.cache_type_k / cache_type_v): a q8_0 cache loads and
answers through the CLI and the gateway, its KV is smaller than f16's (measured and estimated),
and a quantized V cache where flash attention is off is refused with the reason, by the CLI (exit
2) and by the gateway's config check (FILE:LINE). A target's ctx_size = "auto" picks a context whose
estimate is within the memory budget and never past the model's trained context. sipp verify records
each quantized type's logit drift against f16 per backend. Correctness only: bytes and speed are
bench/'s.

The model's heads are 32 wide, one block of q8_0 and q4_0 (a 16-wide head is refused: its test is
here too)."""

import json
import subprocess
import unittest

from tests.integration.test_gateway_support import SIPP, check_build, serve_config, serve_model, tmpdir, write
from tests.support.models import make_model

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2
RUN_TIMEOUT_S = 120
CTX = 1024
WIDE_HEADS = {"n_embd": 128, "n_head": 4, "n_head_kv": 2, "n_ff": 256}


def run(*args):
    return subprocess.run([SIPP, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


def greedy(model, *flags):
    return run(model, "Hello", "--max-tokens", "4", "--temperature", "0", "--threads", "1", "--ctx-size",
               str(CTX), *flags)


class KvCacheCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        check_build()
        cls.model = make_model(tmpdir(), "kv-wide.gguf", **WIDE_HEADS)
        cls.narrow = make_model(tmpdir(), "kv-narrow.gguf")  # 16-wide heads

    def test_q8_0_and_q4_0_caches_answer(self):
        for k, v in (("q8_0", "q8_0"), ("q4_0", "q4_0"), ("q8_0", "f16")):
            with self.subTest(k=k, v=v):
                r = greedy(self.model, "--cache-type-k", k, "--cache-type-v", v)
                self.assertEqual(r.returncode, EXIT_OK, r.stderr)
                self.assertTrue(r.stdout.strip(), "no text generated")

    def test_quantized_v_without_flash_attention_is_refused(self):
        for flags in (["--flash-attn", "off"], ["--backend", "cpu"]):
            with self.subTest(flags=flags):
                r = greedy(self.model, "--cache-type-v", "q8_0", *flags)
                self.assertEqual(r.returncode, EXIT_USAGE, r.stderr)
                self.assertIn("cache_type_v 'q8_0' needs flash attention", r.stderr)
                self.assertIn("flash_attn on", r.stderr)
        r = greedy(self.model, "--cache-type-v", "q8_0", "--backend", "cpu", "--flash-attn", "on")
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)
        r = greedy(self.model, "--cache-type-k", "q8_0", "--backend", "cpu")  # a quantized K needs nothing
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)

    def test_unknown_type_is_refused(self):
        r = greedy(self.model, "--cache-type-k", "q5_1")
        self.assertEqual(r.returncode, EXIT_USAGE, r.stderr)
        self.assertIn("--cache-type-k 'q5_1' is not one of f16, q8_0, q4_0", r.stderr)
        r = run("bench", self.model, "-ctv", "bf16")
        self.assertEqual(r.returncode, EXIT_USAGE, r.stderr)
        self.assertIn("--cache-type-v 'bf16' is not one of f16, q8_0, q4_0", r.stderr)

    def test_heads_the_blocks_do_not_divide_are_refused(self):
        r = greedy(self.narrow, "--cache-type-k", "q8_0")
        self.assertEqual(r.returncode, EXIT_RUNTIME, r.stderr)
        self.assertIn("do not divide the 16-wide attention heads", r.stderr)


class KvCacheGatewayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        check_build()
        cls.model = make_model(tmpdir(), "kv-wide.gguf", **WIDE_HEADS)
        targets = "".join(
            f'[[targets]]\nname = "{name}"\nmodel = "{cls.model}"\nthreads = 1\nparallel = 2\n'
            f'ctx_size = {CTX}\nload = "startup"\n{extra}\n'
            for name, extra in (("f16", ""), ("q8", 'cache_type_k = "q8_0"\ncache_type_v = "q8_0"\n')))
        cls.gw = serve_config(targets)

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def entries(self):
        status, _, body = self.gw.json("GET", "/v1/models")
        self.assertEqual(status, 200, body)
        return {m["id"]: m for m in body["data"]}

    def test_q8_0_target_answers(self):
        body = {"model": "q8", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                "temperature": 0}
        status, _, out = self.gw.json("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, out)
        self.assertEqual(out["usage"]["completion_tokens"], 4)

    def test_q8_0_kv_is_smaller_measured_and_estimated(self):
        models = self.entries()
        f16, q8 = models["f16"]["sipp"], models["q8"]["sipp"]
        self.assertTrue(f16["measured"] and q8["measured"])
        for key in ("memory", "memory_estimate"):
            with self.subTest(key=key):
                # q8_0 stores 34 bytes per 32 values, f16 64
                self.assertLess(q8[key]["kv_bytes"], f16[key]["kv_bytes"] * 0.6)
                self.assertGreater(q8[key]["kv_bytes"], 0)


class KvCacheConfigTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        check_build()
        cls.model = make_model(tmpdir(), "kv-wide.gguf", **WIDE_HEADS)

    def check(self, extra):
        path = write("kv-check.toml", f'[[targets]]\nname = "t"\nmodel = "{self.model}"\n{extra}')
        return subprocess.run([SIPP, "serve", "--check", "--config", path], capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S), path

    def test_good_values(self):
        r, _ = self.check('cache_type_k = "q4_0"\ncache_type_v = "q8_0"\n')
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)
        r, _ = self.check('backend = "cpu"\nflash_attn = "on"\ncache_type_v = "q4_0"\n')
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)

    def test_bad_values(self):
        r, path = self.check('cache_type_k = "bf16"\n')
        self.assertEqual(r.returncode, EXIT_RUNTIME, r.stderr)
        self.assertIn(f"{path}:4: target 't': cache_type_k 'bf16' is not one of f16, q8_0, q4_0", r.stderr)
        r, path = self.check('flash_attn = "off"\ncache_type_v = "q8_0"\n')
        self.assertEqual(r.returncode, EXIT_RUNTIME, r.stderr)
        self.assertIn(f"{path}:5: target 't': cache_type_v 'q8_0' needs flash attention", r.stderr)
        r, path = self.check('backend = "cpu"\ncache_type_v = "q4_0"\n')
        self.assertEqual(r.returncode, EXIT_RUNTIME, r.stderr)
        self.assertIn("explicit cpu", r.stderr)



class CtxAutoTest(unittest.TestCase):
    """ctx_size = "auto" under a [server] memory_budget_mb that holds a long-context model's weights
    and compute buffers but not its whole trained context."""

    BUDGET_MB = 400
    LONG_TRAIN, SHORT_TRAIN = 65536, 1000

    @classmethod
    def setUpClass(cls):
        check_build()
        long = make_model(tmpdir(), "kv-long.gguf", n_ctx=cls.LONG_TRAIN, **WIDE_HEADS)
        short = make_model(tmpdir(), "kv-short.gguf", n_ctx=cls.SHORT_TRAIN, **WIDE_HEADS)
        targets = "".join(
            f'[[targets]]\nname = "{name}"\nmodel = "{path}"\nthreads = 1\nctx_size = "auto"\n{extra}\n'
            for name, path, extra in (("long", long, 'load = "on_demand"\n'),
                                      ("long-q4", long, 'load = "on_demand"\ncache_type_k = "q4_0"\n'),
                                      ("short", short, "parallel = 1\n")))
        cls.gw = serve_config(f"[server]\nmemory_budget_mb = {cls.BUDGET_MB}\n\n{targets}")

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def test_auto_fits_the_budget_and_the_trained_context(self):
        status, _, body = self.gw.json("GET", "/v1/models")
        self.assertEqual(status, 200, body)
        models = {m["id"]: m["sipp"] for m in body["data"]}
        for name, train in (("long", self.LONG_TRAIN), ("long-q4", self.LONG_TRAIN), ("short", self.SHORT_TRAIN)):
            with self.subTest(target=name):
                s = models[name]
                self.assertTrue(s["ctx_size_auto"])
                self.assertEqual(s["ctx_size"] % 256, 0)
                self.assertGreaterEqual(s["ctx_size"], 256)
                self.assertLessEqual(s["ctx_size"], train)
                self.assertLessEqual(s["memory_estimate"]["total_bytes"], self.BUDGET_MB << 20)
        self.assertLess(models["long"]["ctx_size"], self.LONG_TRAIN, "the budget should not hold it all")
        self.assertEqual(models["short"]["ctx_size"], 768, "the largest multiple of 256 in its 1000")
        self.assertGreaterEqual(models["long-q4"]["ctx_size"], models["long"]["ctx_size"])

    def test_auto_is_stated_at_start_and_at_load(self):
        log = self.gw.text()
        self.assertIn("target 'short': ctx_size \"auto\" is 768 tokens (KV f16/f16, 1 slots)", log)
        self.assertIn("768 tokens of context (ctx_size auto)", log)

    def test_serve_model_takes_ctx_size_auto(self):
        gw = serve_model(make_model(tmpdir(), "kv-short.gguf", n_ctx=self.SHORT_TRAIN, **WIDE_HEADS), "--ctx-size",
                         "auto", "--parallel", "1")
        try:
            status, _, body = gw.json("GET", "/v1/models")
            self.assertEqual(status, 200, body)
            self.assertEqual(body["data"][0]["sipp"]["ctx_size"], 768)
        finally:
            gw.stop()

    def test_a_word_other_than_auto_is_refused(self):
        path = write("ctx-check.toml", f'[[targets]]\nname = "t"\nmodel = "{make_model(tmpdir(), "kv-wide.gguf", **WIDE_HEADS)}"\n'
                                       'ctx_size = "max"\n')
        r = subprocess.run([SIPP, "serve", "--check", "--config", path], capture_output=True, text=True,
                           timeout=RUN_TIMEOUT_S)
        self.assertEqual(r.returncode, EXIT_RUNTIME, r.stderr)
        self.assertIn(f"{path}:4: target 't' ctx_size: 'max' is not a number of tokens or \"auto\"", r.stderr)



class VerifyKvDriftTest(unittest.TestCase):
    """sipp verify's kv_cache entries: q8_0 and q4_0 against f16 on each backend, K alone where flash
    attention is off (cpu), K and V where it is on (cpu+fa); a type the heads cannot take is skipped
    with the reason."""

    def verify(self, model):
        r = run("verify", model, "--backends", "cpu,cpu+fa", "--threads", "1", "--greedy-tokens", "2", "--json")
        self.assertEqual(r.returncode, EXIT_OK, r.stderr)
        return json.loads(r.stdout)["backends"]

    def test_drift_of_each_type_is_recorded(self):
        backends = self.verify(make_model(tmpdir(), "kv-wide.gguf", **WIDE_HEADS))
        for name, v_quantized in (("cpu", False), ("cpu+fa", True)):
            kv = {e["cache_type_k"]: e for e in backends[name]["kv_cache"]}
            self.assertEqual(sorted(kv), ["q4_0", "q8_0"])
            for t, e in kv.items():
                with self.subTest(backend=name, type=t):
                    self.assertEqual(e["cache_type_v"], t if v_quantized else "f16")
                    self.assertIsNone(e["skipped"])
                    self.assertGreater(e["vs_f16"]["positions"], 0)
                    self.assertGreaterEqual(e["vs_f16"]["kl_mean"], 0)
                    self.assertLess(e["vs_f16"]["kl_mean"], 0.1)  # drift, not breakage

    def test_a_type_the_heads_cannot_take_is_skipped(self):
        backends = self.verify(make_model(tmpdir(), "kv-narrow.gguf"))
        for e in backends["cpu"]["kv_cache"]:
            self.assertIsNone(e["vs_f16"])
            self.assertIn("do not divide the 16-wide attention heads", e["skipped"])


if __name__ == "__main__":
    unittest.main()
