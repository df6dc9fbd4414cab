"""sipp verify on a whisper.cpp model (recipe whispercpp, issue 46) and sipp models info on one.

verify runs a synthetic whisper model (sipp-synth --whisper test: random weights, the multilingual
vocabulary) on the CPU and on Vulkan (lavapipe, which ggml uses only when GGML_VK_VISIBLE_DEVICES names
it): each backend encodes one clip (a built-in synthetic one, or --audio FILE) and decodes the
start-of-transcript prompt, and the decoder's logits after each prompt token are compared with the
CPU's and recorded in the manifest. Lavapipe computes in another order than ggml's CPU kernels, so the
drift is small but not zero, which is what shows that Vulkan really ran (libwhisper falls back to the CPU
silently when it finds no GPU device; verify refuses that). A forged or truncated model file is a clear
one-line error, never a crash, for verify, transcribe and models info.
"""

import hashlib
import json
import os
import struct
import subprocess
import tempfile
import unittest
import wave

from tests.integration.common import SYNTH, VOCAB_DIR, make_model, run_sipp

VK = {"GGML_VK_VISIBLE_DEVICES": "0"}
SOT, LANG_EN, TRANSCRIBE = 50258, 50259, 50359  # whisper's multilingual special tokens
N_VOCAB = 51865
FTYPE_OFFSET = 4 + 10 * 4  # the magic, then ten sizes, then ftype
BUILTIN_SAMPLES = 5 * 16000


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def synth_whisper(path, shape="test"):
    subprocess.run([SYNTH, "--whisper", shape, "--out", path, "--vocab", os.path.join(VOCAB_DIR, "ggml-vocab-gpt-2.gguf")],
                   check=True, timeout=300, capture_output=True)


def write_silence(path, seconds):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0" * 16000 * seconds)


def lines(stderr):
    return [l for l in stderr.strip().splitlines() if l.strip()]


class VerifyWhisperTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "ggml-test.bin")
        synth_whisper(cls.model)
        cls.silence = os.path.join(cls.tmp.name, "silence.wav")
        write_silence(cls.silence, 1)
        cls.manifest = os.path.join(cls.tmp.name, "whisper.manifest.json")
        cls.first = run_sipp(["verify", cls.model, "--backends", "cpu,vulkan", "--manifest", cls.manifest, "--json"],
                             env=VK)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def report(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr)
        return json.loads(self.first.stdout)

    def test_cpu_against_vulkan_passes_with_small_nonzero_drift(self):
        r = self.report()
        self.assertEqual(r["recipe"], "whispercpp")
        self.assertTrue(r["verdict"]["passed"], r["verdict"])
        self.assertEqual(r["reference"], "cpu")
        self.assertEqual(sorted(r["backends"]), ["cpu", "vulkan"])
        self.assertNotIn("vs_ref", r["backends"]["cpu"])
        vk = r["backends"]["vulkan"]
        self.assertEqual(vk["device"]["backend"], "vulkan")
        self.assertTrue(vk["device"]["name"].startswith("Vulkan"), vk["device"])
        # the weights, caches and compute buffers sit on the Vulkan device, as libwhisper reported them
        mem = vk["memory"]
        self.assertEqual([k for k in mem["device_bytes"] if not k.startswith("Vulkan")], [], mem)
        # beyond the caches and compute buffers, the weights are on the device too
        self.assertGreater(sum(mem["device_bytes"].values()), mem["kv_bytes"] + mem["compute_bytes"], mem)
        self.assertEqual(mem["host_bytes"], 0, mem)
        self.assertEqual(r["backends"]["cpu"]["memory"]["device_bytes"], {})
        m = vk["vs_ref"]
        self.assertEqual(m["positions"], 3)
        self.assertGreater(m["max_abs_diff"], 0.0, "identical logits: Vulkan did not run")
        self.assertLess(m["kl_mean"], r["thresholds"]["max_kl"])
        self.assertLess(m["kl_max"], r["thresholds"]["max_kl_max"])
        self.assertEqual(m["top1_agreement"], 1.0)
        self.assertGreater(m["max_rel_diff"], 0.0)
        self.assertLess(m["max_rel_diff"], 0.05)
        for b in r["backends"].values():
            self.assertGreater(b["encode_ms"], 0)
            self.assertNotIn("top", b)  # --json leaves the per-position top tokens to the manifest

    def test_manifest_records_model_clip_prompt_and_drift(self):
        self.report()
        with open(self.manifest) as f:
            m = json.load(f)
        self.assertEqual((m["kind"], m["format"], m["recipe"]), ("sipp-verify-manifest", 1, "whispercpp"))
        model = m["model"]
        self.assertEqual(model["sha256"], sha256(self.model))
        self.assertEqual(model["format"], "whisper.cpp")
        w = model["whisper"]
        self.assertEqual((w["n_vocab"], w["n_audio_ctx"], w["n_audio_state"], w["n_audio_layer"], w["n_mels"]),
                         (N_VOCAB, 1500, 64, 2, 80))
        self.assertEqual((w["ftype_name"], w["size"], w["multilingual"]), ("f16", "unknown", True))
        self.assertEqual(m["clip"]["source"], "builtin")
        self.assertEqual((m["clip"]["samples"], m["clip"]["rate"]), (BUILTIN_SAMPLES, 16000))
        self.assertEqual(m["prompts"][0]["tokens"], [SOT, LANG_EN, TRANSCRIBE])
        self.assertEqual(m["prompts"][0]["text"], "<|startoftranscript|><|en|><|transcribe|>")
        for name in ("cpu", "vulkan"):
            top = m["backends"][name]["top"]
            self.assertEqual([row["after"] for row in top], ["<|startoftranscript|>", "<|en|>", "<|transcribe|>"])
            self.assertEqual(len(top[0]["ids"]), 5)
        self.assertEqual(m["backends"]["vulkan"]["vs_ref"]["positions"], 3)
        # the built-in clip is the same samples on every run
        again = run_sipp(["verify", self.model, "--backends", "cpu", "--json"])
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(json.loads(again.stdout)["clip"]["samples_sha256"], m["clip"]["samples_sha256"])

    def test_text_report_names_drift_and_verdict(self):
        p = run_sipp(["verify", self.model, "--backends", "cpu,cpu-fa"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("a whisper.cpp model", p.stdout)
        self.assertIn("prompt: <|startoftranscript|><|en|><|transcribe|> (token ids 50258 50259 50359)", p.stdout)
        self.assertIn("cpu-fa", p.stdout)
        self.assertIn("result: pass", p.stdout)

    def test_a_threshold_exceeded_exits_3_naming_it(self):
        p = run_sipp(["verify", self.model, "--backends", "cpu,cpu-fa", "--max-kl-max", "0", "--min-top1", "1",
                      "--json"])
        r = json.loads(p.stdout)
        if r["backends"]["cpu-fa"]["vs_ref"]["kl_max"] == 0:
            self.skipTest("flash attention off gave the same logits on this CPU")
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("kl_max on cpu-fa", p.stderr)
        self.assertIn("--max-kl-max", p.stderr)

    def test_audio_file(self):
        clip = self.path("speech.wav")
        subprocess.run(["flite", "-t", "a portable model gives the same answer everywhere", "-o", clip], check=True,
                       timeout=60)
        p = run_sipp(["verify", self.model, "--backends", "cpu,cpu-fa", "--audio", clip, "--json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)
        self.assertEqual((r["clip"]["source"], r["clip"]["path"], r["clip"]["sha256"]), ("file", clip, sha256(clip)))
        self.assertLess(r["clip"]["seconds"], 10)
        self.assertEqual(r["backends"]["cpu-fa"]["vs_ref"]["positions"], 3)

    def test_truncated_and_forged_models_are_clear_errors(self):
        with open(self.model, "rb") as f:
            data = f.read()
        half = self.path("ggml-half.bin")
        with open(half, "wb") as f:
            f.write(data[: len(data) // 2])
        forged = self.path("ggml-forged.bin")
        with open(forged, "wb") as f:
            f.write(data[:FTYPE_OFFSET] + struct.pack("<i", 999) + data[FTYPE_OFFSET + 4:])
        for name, path, needle in (("truncated", half, "not a usable whisper.cpp model"),
                                   ("forged ftype", forged, "ftype 999")):
            with self.subTest(model=name):
                p = run_sipp(["verify", path, "--backends", "cpu"])
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertEqual(len(lines(p.stderr)), 1, p.stderr)
                self.assertIn(needle, p.stderr)
                self.assertIn(path, p.stderr)
                # the transcriber walks the file before libwhisper reads it: no abort, no read past the end
                t = run_sipp(["transcribe", path, self.silence])
                self.assertEqual(t.returncode, 1, t.stderr)
                self.assertIn(needle, t.stderr)
                i = run_sipp(["models", "info", path], threads=False)
                self.assertEqual(i.returncode, 1, i.stderr)
                self.assertIn(needle, i.stderr)

    def test_what_does_not_apply_is_refused(self):
        prompts = self.path("prompts.txt")
        with open(prompts, "w") as f:
            f.write("hello\n")
        junk = self.path("junk.wav")
        with open(junk, "wb") as f:
            f.write(b"this is not audio at all" * 10)
        long_clip = self.path("long.wav")
        write_silence(long_clip, 31)
        cases = [
            (["--prompts", prompts], 2, "--prompts does not apply"),
            (["--greedy-tokens", "4"], 2, "--greedy-tokens does not apply"),
            (["--backends", "cpu,browser"], 2, "--backends browser does not apply"),
            (["--audio", junk], 2, junk),
            (["--audio", long_clip], 2, "verify encodes one window of 30 s"),
            (["--audio", self.path("missing.wav")], 2, "cannot be read"),
        ]
        for extra, rc, needle in cases:
            with self.subTest(args=extra):
                args = ["verify", self.model] + (["--backends", "cpu"] if "--backends" not in extra else []) + extra
                p = run_sipp(args)
                self.assertEqual(p.returncode, rc, p.stderr)
                self.assertEqual(len(lines(p.stderr)), 1, p.stderr)
                self.assertIn(needle, p.stderr)

    def test_audio_is_for_whisper_models_and_against_for_llama_manifests(self):
        gguf = make_model(self.tmp.name, "m.gguf")
        p = run_sipp(["verify", gguf, "--backends", "cpu", "--audio", self.path("x.wav")])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--audio is for whisper.cpp models", p.stderr)
        self.report()
        p = run_sipp(["verify", "--against", self.manifest])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("records a whisper.cpp model", p.stderr)

    def test_vulkan_not_exposed_says_how(self):
        p = run_sipp(["verify", self.model, "--backends", "cpu,vulkan"])
        self.assertEqual(p.returncode, 1)
        self.assertEqual(len(lines(p.stderr)), 1, p.stderr)
        self.assertIn("GGML_VK_VISIBLE_DEVICES=0", p.stderr)


class ModelsInfoWhisperTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.test_model = os.path.join(cls.tmp.name, "ggml-test.bin")
        cls.tiny = os.path.join(cls.tmp.name, "ggml-tiny.bin")
        synth_whisper(cls.test_model)
        synth_whisper(cls.tiny, "tiny")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def info(self, *args):
        p = run_sipp(["models", "info", *args], threads=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_text_shows_the_hyperparameters(self):
        out = self.info(self.tiny)
        rows = {line[:15].strip(): line[16:] for line in out.splitlines()}
        self.assertEqual(rows["size"], "tiny (multilingual)")
        self.assertEqual(rows["audio encoder"], "ctx 1500, state 384, heads 6, layers 4")
        self.assertEqual(rows["text decoder"], "ctx 448, state 384, heads 6, layers 4")
        self.assertEqual(rows["vocabulary"], str(N_VOCAB))
        self.assertEqual(rows["mel bins"], "80")
        self.assertTrue(rows["file type"].startswith("f16 (ftype 1"), rows["file type"])
        self.assertEqual(rows["sha256"], sha256(self.tiny))
        self.assertIn("whisper.cpp", rows["format"])
        self.assertIn("with 1 state", rows["memory (est.)"])

    def test_json_and_memory_estimate(self):
        j = json.loads(self.info(self.test_model, "--json", "--backend", "cpu"))
        self.assertEqual((j["format"], j["recipe"], j["sha256"]), ("whisper.cpp", "whispercpp", sha256(self.test_model)))
        w = j["whisper"]
        self.assertEqual([w[k] for k in ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
                                         "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer", "n_mels",
                                         "ftype")],
                         [N_VOCAB, 1500, 64, 2, 2, 64, 64, 2, 2, 80, 1])
        self.assertEqual((w["size"], w["ftype_name"], w["qnt_version"]), ("unknown", "f16", 0))
        self.assertEqual(j["file_size"], os.path.getsize(self.test_model))
        est = j["memory_estimate"]
        self.assertEqual((est["backend"], est["parallel"]), ("cpu", 1))
        self.assertEqual(est["weights_bytes"], j["file_size"])
        self.assertGreater(est["kv_bytes"], 0)
        two = json.loads(self.info(self.test_model, "--json", "--backend", "cpu", "--parallel", "2"))["memory_estimate"]
        self.assertEqual(two["kv_bytes"], 2 * est["kv_bytes"])
        self.assertIsNone(json.loads(self.info(self.test_model, "--json", "--no-hash"))["sha256"])

    def test_ctx_size_does_not_apply(self):
        p = run_sipp(["models", "info", self.test_model, "--ctx-size", "4096"], threads=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--ctx-size does not apply", p.stderr)


if __name__ == "__main__":
    unittest.main()
