"""The portability tools on a synthetic model: sipp verify (CPU against Vulkan on lavapipe, which ggml
uses only when GGML_VK_VISIBLE_DEVICES names it), its manifest and --against, sipp ops, the fields of
sipp bench -o json, and sipp backend-ops (only with SIPP_TEST_BACKEND_OPS=1: its first run compiles
llama.cpp's test-backend-ops, minutes on a small machine).

Lavapipe evaluates one token at a time slowly, so the Vulkan runs use two short prompts and 8 greedy
tokens; the built-in prompts run on the CPU alone.

The image case (--mmproj: a fixed chat with a fixed image through each backend's projector) and the
perplexity case (--ppl-text: the model's perplexity on a text on each backend, and its drift) run on a
sipp-synth llava projector and a text of random words, in 32-token chunks."""

import hashlib
import json
import os
import random
import re
import tempfile
import unittest

from tests.integration.common import make_model, run_sipp
from tests.support.models import make_projector

VK = {"GGML_VK_VISIBLE_DEVICES": "0"}
PROMPTS = "The quick brown fox jumps.\n1, 2, 3, 5, 8\n"
CONTRACTS = ["checkpoint", "tokenizer", "graph", "numerics", "speed"]
WORDS = ["river", "stone", "quick", "lazy", "fox", "over", "hill", "blue", "seven", "cat", "ran", "jumped", "the"]
IMAGE_TOKENS = 36  # sipp-synth's llava projector: 48 px images in 8 px patches
PPL = ["--ppl-ctx", "32", "--ppl-chunks", "4"]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_words(path, n, seed=1):
    rng = random.Random(seed)
    with open(path, "w") as f:
        f.write(" ".join(rng.choice(WORDS) for _ in range(n)))


def one_line(stderr):
    return [l for l in stderr.strip().splitlines() if l.strip()]


class FirstRun:
    """A test class whose setUpClass ran one verify in cls.tmp (cls.first, with --json)."""

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def report(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr)
        return json.loads(self.first.stdout)


class VerifyTests(FirstRun, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = make_model(cls.tmp.name, "m.gguf")
        cls.prompts = os.path.join(cls.tmp.name, "prompts.txt")
        with open(cls.prompts, "w") as f:
            f.write(PROMPTS)
        cls.short = ["--prompts", cls.prompts, "--greedy-tokens", "8"]
        cls.manifest = os.path.join(cls.tmp.name, "manifest.json")
        cls.first = run_sipp(["verify", cls.model, "--backends", "cpu,vulkan", *cls.short, "--manifest", cls.manifest,
                              "--json"], env=VK)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_cpu_against_vulkan_passes_defaults_with_nonzero_drift(self):
        r = self.report()
        self.assertTrue(r["verdict"]["passed"], r["verdict"])
        self.assertEqual(r["reference"], "cpu")
        self.assertEqual(r["thresholds"]["max_kl"], 0.01)
        vk = r["backends"]["vulkan"]
        self.assertEqual(vk["device"]["name"], "Vulkan0")
        self.assertTrue(vk["device"]["software"])
        d = vk["vs_ref"]
        self.assertGreater(d["max_abs_diff"], 0, "lavapipe and the CPU round differently: drift is never exactly 0")
        self.assertGreater(d["kl_mean"], 0)
        self.assertLess(d["kl_mean"], r["thresholds"]["max_kl"])
        self.assertGreaterEqual(d["top1_agreement"], r["thresholds"]["min_top1"])
        for key in ("rms_diff", "kl_max", "top5_overlap", "positions"):
            self.assertIn(key, d)
        self.assertIsNone(r["backends"]["cpu"]["vs_ref"])
        for b in ("cpu", "vulkan"):
            self.assertLessEqual(r["backends"][b]["cached"]["kl_mean"], r["thresholds"]["max_cached_kl"])
            greedy = r["backends"][b]["greedy"]
            self.assertEqual(len(greedy), 2)
            self.assertTrue(all(len(g["sha256"]) == 64 for g in greedy))
        # The text report says the same.
        text = run_sipp(["verify", self.model, "--backends", "cpu", *self.short], check=True).stdout
        self.assertIn("result: pass", text)

    def test_manifest_records_model_runtime_host_devices(self):
        self.report()
        with open(self.manifest) as f:
            m = json.load(f)
        self.assertEqual(m["kind"], "sipp-verify-manifest")
        with open(self.model, "rb") as f:
            self.assertEqual(m["model"]["sha256"], hashlib.sha256(f.read()).hexdigest())
        self.assertEqual(m["model"]["size_bytes"], os.path.getsize(self.model))
        self.assertEqual(m["model"]["architecture"], "llama")
        self.assertGreater(m["model"]["n_params"], 0)
        self.assertIn("q8_0", m["model"]["tensor_types"])
        tok = m["model"]["tokenizer"]
        self.assertEqual(tok["model"], "gpt2")
        self.assertEqual(len(tok["vocab_sha256"]), 64)
        self.assertEqual(m["runtime"]["llama_commit"], "80fb11ac73e66d89eae2c6a91d8a77428fa733ed")
        self.assertIn("manifest", m["runtime"]["artifact"])
        self.assertIn("features", m["host"]["cpu"])
        self.assertIn("kernel", m["host"]["os"])
        self.assertEqual([p["text"] for p in m["prompts"]], PROMPTS.split("\n")[:2])
        self.assertTrue(all(p["tokens"] for p in m["prompts"]))
        for b in ("cpu", "vulkan"):
            self.assertIn("ops", m["backends"][b]["graph"])
            self.assertEqual(len(m["backends"][b]["top"]), 2)

    def test_tolerance_tighter_than_the_drift_fails_with_status_3(self):
        kl = self.report()["backends"]["vulkan"]["vs_ref"]["kl_mean"]
        p = run_sipp(["verify", self.model, "--backends", "cpu,vulkan", "--prompts", self.prompts, "--greedy-tokens",
                      "0", "--max-kl", repr(kl / 100)], env=VK)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("kl_mean on vulkan", p.stderr)
        self.assertIn("--max-kl", p.stderr)
        self.assertIn("result: FAIL", p.stdout)

    def test_against_its_own_manifest_holds(self):
        self.report()
        p = run_sipp(["verify", "--against", self.manifest, "--json"], env=VK)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)
        status = {c["contract"]: c["status"] for c in r["contracts"]}
        self.assertEqual(list(status), CONTRACTS)
        for c in CONTRACTS[:4]:
            self.assertEqual(status[c], "holds", r["contracts"])
        self.assertEqual(status["speed"], "not checked")  # the manifest was written without --bench
        self.assertTrue(r["against_passed"])

    def test_manifest_of_another_model_changes_the_checkpoint_contract(self):
        self.report()
        with open(self.manifest) as f:
            m = json.load(f)
        m["model"]["sha256"] = "0" * 64
        edited = self.path("edited.json")
        with open(edited, "w") as f:
            json.dump(m, f)
        # The CPU alone is enough to show it; vulkan's contracts are then "not checked".
        p = run_sipp(["verify", "--against", edited, "--backends", "cpu"])
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertRegex(p.stdout, r"checkpoint\s+changed")
        self.assertIn("the manifest recorded 000000000000", p.stdout)
        self.assertRegex(p.stdout, r"tokenizer\s+holds")
        self.assertIn("contract", p.stderr)

    def test_cases_without_their_inputs_are_skipped_with_the_reason(self):
        r = self.report()
        self.assertIn("--mmproj", r["image"]["skipped"])
        self.assertIn("--ppl-text", r["perplexity"]["skipped"])
        self.assertNotIn("image", r["backends"]["vulkan"])
        self.assertNotIn("perplexity", r["backends"]["vulkan"])

    def test_builtin_prompts_on_the_cpu(self):
        p = run_sipp(["verify", self.model, "--backends", "cpu", "--greedy-tokens", "4", "--json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)
        self.assertEqual(len(r["prompts"]), 4)
        self.assertGreater(r["backends"]["cpu"]["cached"]["positions"], 40)

    def test_bad_input(self):
        cases = [
            (["verify", self.model, "--backends", "cpu,warp"], 2, "'warp'"),
            (["verify", self.model], 2, "--backends is required"),
            (["verify", self.model, "--backends", "cpu", "--min-top1", "2"], 2, "fractions"),
            (["verify", "--against", self.path("nowhere.json")], 1, "cannot read manifest"),
            (["verify", self.path("nowhere.gguf"), "--backends", "cpu"], 1, "nowhere.gguf"),
            (["verify", self.prompts, "--backends", "cpu"], 1, "not a GGUF file"),
            (["verify", "--against", self.manifest, "--prompts", self.prompts], 2, "do not mix"),
        ]
        bad = self.path("bad.json")
        with open(bad, "w") as f:
            f.write('{"kind": "sipp-verify-manifest", "format": 1,')
        cases.append((["verify", "--against", bad], 1, "not valid JSON"))
        other = self.path("other.json")
        with open(other, "w") as f:
            json.dump({"hello": 1}, f)
        cases.append((["verify", "--against", other], 1, "not a sipp verify manifest"))
        for args, rc, needle in cases:
            with self.subTest(args=args):
                p = run_sipp(args)
                self.assertEqual(p.returncode, rc, p.stderr)
                lines = one_line(p.stderr)
                self.assertEqual(len(lines), 1, p.stderr)
                self.assertIn(needle, lines[0])

    def test_vulkan_not_exposed_says_how(self):
        p = run_sipp(["verify", self.model, "--backends", "cpu,vulkan", "--prompts", self.prompts])
        self.assertEqual(p.returncode, 1)
        lines = one_line(p.stderr)
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("GGML_VK_VISIBLE_DEVICES=0", lines[0])


class VerifyCasesTests(FirstRun, unittest.TestCase):
    """The image case and the perplexity case, CPU against Vulkan (lavapipe), and the perplexity of two
    quantizations through a manifest."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model = make_model(d, "m.gguf")
        cls.mmproj = make_projector(d, "llava")  # the one projector beside the model: --mmproj auto finds it
        os.makedirs(os.path.join(d, "elsewhere"))
        cls.other = make_projector(os.path.join(d, "elsewhere"), "llava", seed=2)  # another projector's weights
        cls.prompts = os.path.join(d, "prompts.txt")
        with open(cls.prompts, "w") as f:
            f.write("The quick brown fox jumps.\n")
        cls.text = os.path.join(d, "held-out.txt")
        write_words(cls.text, 300)
        cls.manifest = os.path.join(d, "cases.json")
        cls.base = ["--prompts", cls.prompts, "--ppl-text", cls.text, *PPL]
        cls.first = run_sipp(["verify", cls.model, "--backends", "cpu,vulkan", *cls.base, "--greedy-tokens", "4",
                              "--mmproj", "auto", "--manifest", cls.manifest, "--json"], env=VK)

    def test_image_case_cpu_against_vulkan_passes(self):
        r = self.report()
        self.assertTrue(r["verdict"]["passed"], r["verdict"])
        image = r["image"]
        self.assertEqual(image["projector"]["path"], self.mmproj)
        self.assertEqual(image["projector"]["sha256"], sha256(self.mmproj))
        self.assertTrue(image["offload"])
        self.assertEqual((image["image"]["format"], image["image"]["width"], image["image"]["height"]), ("png", 64, 48))
        cpu, vk = r["backends"]["cpu"]["image"], r["backends"]["vulkan"]["image"]
        self.assertEqual(cpu["projector_device"], "CPU")
        self.assertEqual(vk["projector_device"], "Vulkan0", "mmproj offload runs the projector on the backend")
        for b in (cpu, vk):
            self.assertEqual(b["media_positions"], IMAGE_TOKENS)
            self.assertGreater(b["positions"], 10, "the question and the assistant's turn follow the image")
            self.assertEqual(b["prompt_positions"], cpu["prompt_positions"])
            self.assertEqual(len(b["greedy"]["sha256"]), 64)
        self.assertIsNone(cpu["vs_ref"])
        d = vk["vs_ref"]
        self.assertEqual(d["positions"], cpu["positions"])
        self.assertGreater(d["kl_mean"], 0, "lavapipe and the CPU round differently")
        self.assertLess(d["kl_mean"], r["thresholds"]["max_kl"])
        self.assertGreaterEqual(d["top1_agreement"], r["thresholds"]["min_top1"])
        text = run_sipp(["verify", self.model, "--backends", "cpu", "--prompts", self.prompts, "--greedy-tokens", "0",
                         "--mmproj", self.mmproj, "--no-mmproj-offload"], check=True).stdout
        self.assertRegex(text, r"image case: .*mmproj-llava.gguf")
        self.assertRegex(text, rf"cpu +projector on CPU, {IMAGE_TOKENS} image positions")

    def test_perplexity_case_passes_and_the_manifest_records_both(self):
        self.report()
        with open(self.manifest) as f:
            m = json.load(f)
        self.assertEqual(m["thresholds"]["ppl_max_drift"], 0.02)
        case = m["perplexity"]
        self.assertEqual((case["text"]["path"], case["text"]["sha256"]), (self.text, sha256(self.text)))
        self.assertEqual((case["ctx_size"], case["chunks"]), (32, 4))
        cpu, vk = m["backends"]["cpu"]["perplexity"], m["backends"]["vulkan"]["perplexity"]
        self.assertEqual((cpu["n_chunks"], vk["n_chunks"]), (4, 4))
        self.assertGreater(cpu["ppl"], 1)
        self.assertIsNone(cpu["drift"])
        self.assertAlmostEqual(vk["drift"], abs(vk["ppl"] - cpu["ppl"]) / cpu["ppl"], places=6)
        self.assertGreater(vk["drift"], 0)
        self.assertLess(vk["drift"], 0.02)
        # the image case is in the manifest with its projector's hash
        self.assertEqual(m["image"]["projector"]["sha256"], sha256(self.mmproj))
        self.assertIn("top", m["backends"]["vulkan"])

    def test_thresholds_of_zero_fail_both_cases_naming_the_numbers(self):
        vk = self.report()["backends"]["vulkan"]
        p = run_sipp(["verify", self.model, "--backends", "cpu,vulkan", *self.base, "--greedy-tokens", "0",
                      "--mmproj", self.mmproj, "--max-kl", "0", "--ppl-max-drift", "0"], env=VK)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("result: FAIL", p.stdout)
        self.assertRegex(p.stderr, r"image\.kl_mean on vulkan is \S+ nats, above the threshold 0 \(--max-kl\)")
        line = [l for l in p.stderr.splitlines() if "perplexity.drift on vulkan" in l]
        self.assertEqual(len(line), 1, p.stderr)
        self.assertIn("above the threshold 0 (--ppl-max-drift)", line[0])
        m = re.search(r"perplexity (\d+\.\d+) on vulkan against (\d+\.\d+) on cpu", line[0])
        self.assertIsNotNone(m, line[0])
        # the same model, text and chunks as the first run: the same figures
        self.assertAlmostEqual(float(m.group(1)), vk["perplexity"]["ppl"], delta=1e-3 * vk["perplexity"]["ppl"])

    def test_against_with_another_projector_changes_the_checkpoint(self):
        self.report()
        p = run_sipp(["verify", "--against", self.manifest, "--backends", "cpu", "--greedy-tokens", "0",
                      "--mmproj", self.other])
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertRegex(p.stdout, r"checkpoint\s+changed")
        self.assertIn(f"the manifest recorded {sha256(self.mmproj)[:12]}", p.stdout)
        self.assertRegex(p.stdout, r"cpu: perplexity [\d.]+ here, [\d.]+ in the manifest: drift [\d.e-]+, within")

    def test_quantizations_compared_through_a_manifest(self):
        d = self.tmp.name
        f16 = make_model(d, "f16.gguf", type="f16")
        q4 = make_model(d, "q4.gguf", type="q4_0")
        manifest = os.path.join(d, "f16.json")
        cpu = ["--backends", "cpu", "--greedy-tokens", "0"]
        run_sipp(["verify", f16, *cpu, *self.base, "--manifest", manifest], check=True)
        p = run_sipp(["verify", q4, "--against", manifest, "--backends", "cpu", "--json"])
        self.assertEqual(p.returncode, 3, p.stderr)  # another file: the checkpoint contract changed
        r = json.loads(p.stdout)
        numerics = next(c for c in r["contracts"] if c["contract"] == "numerics")
        line = next(x for x in numerics["details"] if "perplexity" in x)
        self.assertRegex(line, r"cpu: perplexity [\d.]+ here, [\d.]+ in the manifest: drift [\d.e-]+, within the "
                               r"0\.12 allowed \(--ppl-max-drift-quant x 4 steps: q4_0 here, f16 in the manifest\)")
        with open(manifest) as f:
            was = json.load(f)["backends"]["cpu"]["perplexity"]["ppl"]
        now = r["backends"]["cpu"]["perplexity"]["ppl"]
        self.assertNotEqual(now, was, "q4_0 weights predict differently from f16 ones")
        # a tighter allowance per step fails the contract on the perplexity
        p = run_sipp(["verify", q4, "--against", manifest, "--backends", "cpu", "--ppl-max-drift-quant", "0"])
        self.assertRegex(p.stdout, r"drift [\d.e-]+, above the 0 allowed")

    def test_bad_case_inputs(self):
        short = os.path.join(self.tmp.name, "short.txt")
        write_words(short, 10)
        cpu = [self.model, "--backends", "cpu", "--prompts", self.prompts, "--greedy-tokens", "0"]
        cases = [
            ([*cpu, "--ppl-text", os.path.join(self.tmp.name, "nowhere.txt")], 1, "cannot read --ppl-text"),
            ([*cpu, "--ppl-text", short, "--ppl-ctx", "32"], 2, "needs at least 64"),
            ([*cpu, "--ppl-ctx", "4"], 2, "--ppl-ctx"),
            ([*cpu, "--mmproj", self.model], 1, "not a multimodal projector"),
            ([*cpu, "--mmproj", self.prompts], 1, "prompts.txt"),
        ]
        for args, rc, needle in cases:
            with self.subTest(args=args):
                p = run_sipp(["verify", *args])
                self.assertEqual(p.returncode, rc, p.stderr)
                lines = one_line(p.stderr)
                self.assertEqual(len(lines), 1, p.stderr)
                self.assertIn(needle, lines[0])


class OpsTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = make_model(cls.tmp.name, "m.gguf")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_ops_on_vulkan_lists_every_op_with_its_support(self):
        p = run_sipp(["ops", self.model, "--backend", "vulkan", "--json"], env=VK)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)
        self.assertEqual((r["backend"], r["device"]), ("vulkan", "Vulkan0"))
        ops = {o["op"]: o for o in r["ops"]}
        self.assertEqual(sum(o["count"] for o in r["ops"]), r["n_nodes"])
        for name in ("MUL_MAT", "ROPE", "RMS_NORM", "GET_ROWS"):
            self.assertIn(name, ops)
        for o in r["ops"]:
            self.assertIsInstance(o["all_supported"], bool)
            self.assertLessEqual(o["supported"], o["count"])
            self.assertTrue(o["where"])
        self.assertIn("Vulkan0", ops["MUL_MAT"]["where"])
        if r["boundaries_decode"]:
            self.assertIn("each costs a copy every token", r["warning"])
        text = run_sipp(["ops", self.model, "--backend", "vulkan"], env=VK, check=True).stdout
        for name in ops:
            self.assertRegex(text, rf"\n  {name}\s+{ops[name]['count']}\s+(yes|no|\d+/\d+)\s")
        self.assertIn("per decode step", text)

    def test_ops_on_cpu_has_no_boundaries_and_nothing_on_vulkan(self):
        p = run_sipp(["ops", self.model, "--backend", "cpu", "--json"], env=VK)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)
        self.assertEqual((r["device"], r["boundaries_decode"], r["boundaries_prefill"]), ("CPU", 0, 0))
        self.assertTrue(all(o["where"] == "CPU" and o["on_device"] == o["count"] for o in r["ops"]), r["ops"])
        self.assertIsNone(r.get("warning"))
        text = run_sipp(["ops", self.model, "--backend", "cpu"], env=VK, check=True).stdout
        self.assertIn("0 per decode step", text)
        self.assertNotIn("Vulkan", text)

    def test_ops_bad_input(self):
        for args, rc, needle in ((["ops", self.model], 2, "--backend is required"),
                                 (["ops", self.model, "--backend", "warp"], 2, "'warp'"),
                                 (["ops", self.model, "--backend", "vulkan"], 1, "GGML_VK_VISIBLE_DEVICES")):
            with self.subTest(args=args):
                p = run_sipp(args)
                self.assertEqual(p.returncode, rc, p.stderr)
                self.assertEqual(len(one_line(p.stderr)), 1, p.stderr)
                self.assertIn(needle, p.stderr)

    def test_backend_ops_bad_input(self):
        # Checked before anything is built.
        p = run_sipp(["backend-ops", "--backend", "cpu", "--mode", "fast"], threads=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not one of test, perf, support", p.stderr)
        p = run_sipp(["backend-ops", "--mode", "test"], threads=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--backend is required", p.stderr)

    def test_bench_json_has_every_field(self):
        p = run_sipp(["bench", self.model, "-o", "json", "-p", "16", "-n", "8", "-r", "1"])
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)
        for key in ("load_ms", "ttft_ms_p50", "itl_ms_p50", "itl_ms_p99", "peak_rss_mb", "device_memory_mb"):
            self.assertIsInstance(r[key], (int, float), key)
        for key in ("pp", "tg"):
            self.assertEqual(set(r[key]), {"tokens", "mean", "stddev"})
        self.assertEqual((r["pp"]["tokens"], r["tg"]["tokens"]), (16, 8))
        self.assertGreater(r["pp"]["mean"], 0)
        self.assertGreater(r["tg"]["mean"], 0)
        self.assertGreaterEqual(len(r["levels"]), 1)
        self.assertIn("concurrency", r["levels"][0])


@unittest.skipUnless(os.environ.get("SIPP_TEST_BACKEND_OPS") == "1",
                     "set SIPP_TEST_BACKEND_OPS=1: the first run compiles test-backend-ops (minutes)")
class BackendOpsTests(unittest.TestCase):
    def test_backend_ops_on_vulkan(self):
        p = run_sipp(["backend-ops", "--backend", "vulkan", "--mode", "test", "--op", "ADD"], env=VK, threads=False,
                     timeout=3600)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        self.assertIn("Vulkan0", p.stdout)
        self.assertIn("OK", p.stdout)

    def test_backend_ops_support_on_cpu(self):
        p = run_sipp(["backend-ops", "--backend", "cpu", "--mode", "support", "--op", "MUL_MAT"], threads=False,
                     timeout=3600)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        self.assertIn("MUL_MAT", p.stdout)


if __name__ == "__main__":
    unittest.main()
