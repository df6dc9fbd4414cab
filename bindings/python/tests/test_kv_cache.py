"""The KV cache's types through the Python binding: sipp.local(cache_type_k=..., cache_type_v=...).
A q8_0 cache loads and answers; a quantized V cache on a load without flash attention, and a type
that is not one of f16, q8_0, q4_0, are refused with messages naming them."""

import unittest

import _support
import sipp

WIDE_HEADS = ["--n-embd", "128", "--n-head", "4", "--n-ff", "256"]  # 32-wide heads: one q8_0 block


class KvCacheTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = _support.model("wide-heads", *WIDE_HEADS)

    def test_q8_0_cache_answers(self):
        with sipp.Client() as client:
            client.add("q8", sipp.local(self.model, cache_type_k="q8_0", cache_type_v="q8_0", ctx_size=512,
                                        parallel=1, threads=_support.THREADS))
            r = client.query("Hello", max_tokens=4, temperature=0)
            self.assertTrue(r.text)

    def test_refusals(self):
        with self.assertRaises(sipp.InvalidArgumentError) as cm:
            sipp.local(self.model, cache_type_k="q5_1")
        self.assertIn("cache_type_k must be 'f16', 'q8_0' or 'q4_0'", str(cm.exception))
        with sipp.Client() as client:
            with self.assertRaises(sipp.InvalidArgumentError) as cm:
                client.add("x", sipp.local(self.model, backend="cpu", cache_type_v="q8_0", parallel=1,
                                           threads=_support.THREADS))
            self.assertIn("cache_type_v 'q8_0' needs flash attention", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
