"""Builds the gateway's request-decoder fuzzer (tests/fuzz/fuzz_request.c) with clang and libFuzzer
(AddressSanitizer and UndefinedBehaviorSanitizer) and runs it for a few seconds from seed bodies, so
that the harness keeps compiling and the decoder keeps surviving it. Longer runs: see the harness."""

import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ_SECONDS = int(os.environ.get("SIPP_FUZZ_SECONDS", "8"))
BUILD_TIMEOUT_S = 300
MAX_LEN = 4096

SEEDS = {
    "chat": '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true,'
            '"stream_options":{"include_usage":true},"stop":["a","b"],"temperature":0.5,"top_p":0.9,"top_k":40,'
            '"min_p":0.1,"seed":7,"ignore_eos":true}',
    "completion": '{"model":"tiny","prompt":["once"],"max_completion_tokens":4,"stop":"x","n":1,"logprobs":false}',
    "parts": '{"model":"tiny","messages":[{"role":"system","content":[{"type":"text","text":"a"}]},'
             '{"role":"developer","content":null}],"context_key":"k"}',
    "embed": '{"model":"e","input":["a","b"],"encoding_format":"base64","normalize":false}',
    "query": '{"prompt":"p","response_format":{"type":"text"},"tools":[],"repeat_penalty":1.1}',
}


@unittest.skipUnless(shutil.which("clang"), "clang is needed for the libFuzzer harness")
class RequestFuzzTest(unittest.TestCase):
    def test_fuzz_request_decoder(self):
        build = os.path.join(ROOT, gw.BUILD)
        lib = os.path.join(build, "lib")
        if not os.path.isfile(os.path.join(lib, "libsipp.so")):
            raise AssertionError(f"{lib}/libsipp.so is not built (make all)")
        exe = os.path.join(gw.tmpdir(), "fuzz_request")
        r = subprocess.run(["clang", "-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-std=c11", "-D_GNU_SOURCE",
                            "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
                            "-Iinclude", "-Isrc", "tests/fuzz/fuzz_request.c", "src/gateway/decode.c",
                            "src/gateway/errors.c", "-o", exe, f"-L{lib}", "-lsipp", f"-Wl,-rpath,{lib}", "-ljansson"],
                           cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        corpus = os.path.join(gw.tmpdir(), "fuzz-corpus")
        os.makedirs(corpus, exist_ok=True)
        for name, text in SEEDS.items():
            with open(os.path.join(corpus, name), "w") as f:
                f.write(text)
        r = subprocess.run([exe, f"-max_total_time={FUZZ_SECONDS}", f"-max_len={MAX_LEN}", "-print_final_stats=1",
                            corpus], cwd=gw.tmpdir(), capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
        self.assertEqual(r.returncode, 0, r.stderr[-4000:])
        self.assertIn("Done", r.stderr)


if __name__ == "__main__":
    unittest.main()
