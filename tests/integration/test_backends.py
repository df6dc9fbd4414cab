"""Backends on real hardware paths: the CPU backend, Vulkan on lavapipe (Debian's software Vulkan
driver, which ggml only uses when GGML_VK_VISIBLE_DEVICES names it), a CPU-only artifact, CUDA
absent, the auto policy, doctor, sipp build and the GPU residency lease."""

import fcntl
import json
import os
import subprocess
import tempfile
import unittest

from tests.integration.common import BUILD, SIPP, make_model, run_sipp

VK = {"GGML_VK_VISIBLE_DEVICES": "0"}


def stats_of(proc):
    return json.loads(proc.stderr.strip().splitlines()[-1])


class BackendTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = make_model(cls.tmp.name, "m.gguf")
        cls.lease_dir = os.path.join(cls.tmp.name, "leases")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def gen(self, backend, env=None, extra=()):
        env = dict(env or {}, SIPP_LEASE_DIR=self.lease_dir)
        return run_sipp([self.model, "Hello world", "--backend", backend, "--temperature", "0",
                         "--max-tokens", "4", "--ignore-eos", "--stats", "json", *extra], env=env)

    def test_backends_json_lists_every_name(self):
        out = run_sipp(["backends", "--json"], check=True)
        names = {b["name"]: b for b in json.loads(out.stdout)["backends"]}
        self.assertEqual(set(names), {"cpu", "cuda", "metal", "vulkan", "webgpu", "rpc"})
        self.assertTrue(names["cpu"]["compiled"] and names["cpu"]["available"])
        self.assertTrue(names["vulkan"]["compiled"])
        self.assertFalse(names["vulkan"]["available"], "lavapipe must stay hidden without GGML_VK_VISIBLE_DEVICES")
        self.assertFalse(names["cuda"]["compiled"])

    def test_recipe_matrix(self):
        out = run_sipp(["backends", "--json"], check=True)
        recipes = {r["name"]: r for r in json.loads(out.stdout)["recipes"]}
        self.assertEqual(set(recipes), {"llamacpp", "whispercpp", "tts", "flite"})
        for r in recipes.values():
            self.assertEqual([b["name"] for b in r["backends"]], ["cpu", "vulkan", "cuda", "metal", "rpc"])
            for b in r["backends"]:
                self.assertIn(b["state"], ("installed", "installable", "unsupported"))
                self.assertEqual(b["compiled"], b["state"] == "installed", (r["name"], b))
                self.assertTrue(b["state"] == "installed" or b["note"], (r["name"], b))
            # lavapipe is hidden and software: auto takes the CPU, whatever is installed
            self.assertEqual(r["auto"]["backend"], "cpu", r["auto"])
        state = {(r, b["name"]): b["state"] for r in recipes for b in recipes[r]["backends"]}
        self.assertEqual(state["whispercpp", "cpu"], "installed")
        self.assertEqual(state["whispercpp", "vulkan"], "installed")
        self.assertEqual(state["whispercpp", "rpc"], "unsupported")
        self.assertEqual(state["flite", "vulkan"], "unsupported")
        self.assertEqual(state["llamacpp", "rpc"], "installed")
        self.assertEqual(state["llamacpp", "metal"], "unsupported")
        # the table, and the devices the matrix says are available
        text = run_sipp(["backends"], check=True).stdout
        self.assertRegex(text, r"whispercpp\s+installed\+avail\s+installed\s")
        vk = run_sipp(["backends", "--json"], env=VK, check=True)
        whisper = [r for r in json.loads(vk.stdout)["recipes"] if r["name"] == "whispercpp"][0]
        self.assertTrue(whisper["backends"][1]["available"])
        self.assertEqual(whisper["auto"]["backend"], "cpu", "auto never picks a software device")

    def test_recipe_matrix_of_an_artifact_without_whisper(self):
        # the default artifact less libwhisper and the Vulkan and RPC modules
        art = os.path.join(self.tmp.name, "art-no-whisper")
        os.makedirs(art)
        src = os.path.realpath(os.path.join(BUILD, "artifact"))
        for f in os.listdir(src):
            if f not in ("libwhisper.so", "libggml-vulkan.so", "libggml-rpc.so"):
                os.symlink(os.path.join(src, f), os.path.join(art, f))
        out = run_sipp(["backends", "--json", "--artifact", art], check=True)
        recipes = {r["name"]: {b["name"]: b for b in r["backends"]} for r in json.loads(out.stdout)["recipes"]}
        self.assertEqual(recipes["whispercpp"]["cpu"]["state"], "installable")
        self.assertIn("deps/build-whisper.sh", recipes["whispercpp"]["cpu"]["note"])
        self.assertEqual(recipes["llamacpp"]["vulkan"]["state"], "installable")
        self.assertIn("sipp build --backend vulkan", recipes["llamacpp"]["vulkan"]["note"])
        self.assertEqual(recipes["llamacpp"]["rpc"]["state"], "installable")
        self.assertEqual(recipes["tts"]["cpu"]["state"], "installed")
        doctor = json.loads(run_sipp(["doctor", "--json", "--artifact", art], check=True).stdout)
        whisper = [r for r in doctor["recipes"] if r["name"] == "whispercpp"][0]
        self.assertEqual(whisper["auto"]["backend"], "cpu")
        self.assertIn("nothing is installed", whisper["auto"]["reason"])

    def test_lavapipe_visible_is_labelled_software(self):
        out = run_sipp(["backends", "--json"], env=VK, check=True)
        vk = [b for b in json.loads(out.stdout)["backends"] if b["name"] == "vulkan"][0]
        self.assertTrue(vk["available"])
        self.assertTrue(all(d["software"] for d in vk["devices"]), vk["devices"])

    def test_cpu_and_vulkan_run_and_report_the_backend_used(self):
        cpu = self.gen("cpu", env=VK)
        self.assertEqual(cpu.returncode, 0, cpu.stderr)
        s_cpu = stats_of(cpu)
        self.assertEqual((s_cpu["backend"], s_cpu["devices"], s_cpu["gpu_layers"]), ("cpu", "CPU", 0))
        vk = self.gen("vulkan", env=VK)
        self.assertEqual(vk.returncode, 0, vk.stderr)
        s_vk = stats_of(vk)
        self.assertEqual(s_vk["backend"], "vulkan")
        self.assertTrue(s_vk["devices"].startswith("Vulkan"))
        self.assertGreater(s_vk["gpu_layers"], 0)
        self.assertIn("software", s_vk["backend_reason"])
        # Greedy decoding of the same model: the first token is the argmax on both backends.
        self.assertEqual(cpu.stdout.split()[:1], vk.stdout.split()[:1])

    def test_cpu_backend_puts_nothing_on_the_vulkan_device(self):
        # llama.cpp's own load log names every buffer it allocates and where.
        p = self.gen("cpu", env=dict(VK, SIPP_LOG="info"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("model buffer size", p.stderr)
        self.assertNotIn("Vulkan0 model buffer", p.stderr)
        self.assertNotIn("Vulkan0 KV buffer", p.stderr)
        self.assertNotIn("Vulkan0 compute buffer", p.stderr)
        v = self.gen("vulkan", env=dict(VK, SIPP_LOG="info"))
        self.assertIn("Vulkan0 model buffer", v.stderr)

    def test_auto_never_picks_a_software_device(self):
        p = self.gen("auto", env=VK)
        self.assertEqual(p.returncode, 0, p.stderr)
        s = stats_of(p)
        self.assertEqual(s["backend"], "cpu")
        self.assertIn("software", s["backend_reason"])

    def test_explicit_vulkan_without_visible_device_fails_cleanly(self):
        p = self.gen("vulkan")
        self.assertEqual(p.returncode, 1)
        self.assertIn("not available", p.stderr)
        self.assertIn("GGML_VK_VISIBLE_DEVICES", p.stderr)

    def test_cuda_not_compiled_fails_cleanly(self):
        p = self.gen("cuda")
        self.assertEqual(p.returncode, 1)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("not compiled", lines[0])
        self.assertIn("make BACKENDS", lines[0])

    def test_all_is_a_build_selector_only(self):
        p = self.gen("all")
        self.assertEqual(p.returncode, 2)
        self.assertIn("build selector", p.stderr)

    def test_bad_backend_order(self):
        p = self.gen("auto", env={"SIPP_BACKEND_ORDER": "vulkan,warp"})
        self.assertEqual(p.returncode, 1)
        self.assertIn("'warp' is not a backend name", p.stderr)

    def test_rpc_artifact_records_its_source_build(self):
        b = run_sipp(["build", "--backend", "rpc"])
        self.assertEqual(b.returncode, 0, b.stderr)
        art = os.path.join(BUILD, "artifacts", "cpu+rpc")
        self.assertTrue(os.path.isfile(os.path.join(art, "libggml-rpc.so")))
        with open(os.path.join(art, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["backends"], ["cpu", "rpc"])
        built = {m["module"]: m for m in manifest["source_builds"]}
        self.assertEqual(built["libggml-rpc.so"]["origin"], "source build")
        self.assertEqual(built["libggml-rpc.so"]["llama_commit"], "80fb11ac73e66d89eae2c6a91d8a77428fa733ed")
        self.assertIn("-DGGML_BACKEND_DL", built["libggml-rpc.so"]["flags"])
        self.assertTrue(built["libggml-rpc.so"]["compiler"])
        # The default artifact has it too, and the CPU-only one has none.
        with open(os.path.join(BUILD, "artifact", "manifest.json")) as f:
            self.assertIn("rpc", json.load(f)["backends"])
        self.assertEqual(run_sipp(["build", "--backend", "cpu"]).returncode, 0)
        p = self.gen("rpc", env={"SIPP_ARTIFACT": os.path.join(BUILD, "artifacts", "cpu"), "SIPP_RPC_SERVERS": "h:1"})
        self.assertEqual(p.returncode, 1)
        self.assertIn("not compiled", p.stderr)

    def test_cpu_only_artifact_has_no_vulkan(self):
        b = run_sipp(["build", "--backend", "cpu"])
        self.assertEqual(b.returncode, 0, b.stderr)
        art = os.path.join(BUILD, "artifacts", "cpu")
        with open(os.path.join(art, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["backends"], ["cpu"])
        self.assertEqual(manifest["llama_commit"], "80fb11ac73e66d89eae2c6a91d8a77428fa733ed")
        self.assertFalse(any("vulkan" in f for f in os.listdir(art)))
        # llama.cpp's multimodal library is in every artifact, whatever the backends
        self.assertTrue(os.path.isfile(os.path.join(art, "libmtmd.so")))
        self.assertIn("libmtmd.so", [m["module"] for m in manifest["source_builds"]])
        p = self.gen("vulkan", env=dict(VK, SIPP_ARTIFACT=art))
        self.assertEqual(p.returncode, 1)
        self.assertIn("not compiled", p.stderr)
        p = self.gen("cpu", env={"SIPP_ARTIFACT": art})
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.gen("cpu", extra=("--artifact", os.path.join(self.tmp.name, "nowhere")))
        self.assertEqual(p.returncode, 1)
        self.assertIn("not a directory", p.stderr)

    def test_build_rejects_unknown_backend(self):
        p = run_sipp(["build", "--backend", "opencl"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("not one of cpu, vulkan, cuda, rpc, all", p.stderr)

    def test_doctor(self):
        p = run_sipp(["doctor", "--json"], check=True)
        r = json.loads(p.stdout)
        for key in ("os", "cpu", "artifact", "backends", "recipes", "drivers", "toolchains", "decision", "notes"):
            self.assertIn(key, r)
        self.assertTrue(r["cpu"]["ggml_cpu_module"].startswith("libggml-cpu-"))
        self.assertEqual(r["decision"]["backend"], "cpu")
        self.assertTrue(any("GGML_VK_VISIBLE_DEVICES" in n for n in r["notes"]))
        bad = run_sipp(["doctor", "--backend", "vulkan"])
        self.assertEqual(bad.returncode, 1)
        self.assertIn("not available", bad.stderr)
        good = run_sipp(["doctor", "--backend", "vulkan"], env=VK)
        self.assertEqual(good.returncode, 0, good.stderr)
        cuda = run_sipp(["doctor", "--backend", "cuda"])
        self.assertEqual(cuda.returncode, 1)
        self.assertIn("not compiled", cuda.stderr)

    def test_gpu_lease_held_by_another_process(self):
        os.makedirs(self.lease_dir, exist_ok=True)
        path = os.path.join(self.lease_dir, "vulkan-Vulkan0.lock")
        with open(path, "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            f.write("424242\n")
            f.flush()
            p = self.gen("vulkan", env=VK)
            self.assertEqual(p.returncode, 1)
            self.assertIn("leased by another sipp process (pid 424242", p.stderr)
            # The CPU takes no lease.
            self.assertEqual(self.gen("cpu", env=VK).returncode, 0)
        # The holder is gone (its flock released): the stale file is reclaimed.
        p = self.gen("vulkan", env=VK)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_gpu_memory_margin(self):
        p = self.gen("vulkan", env=dict(VK, SIPP_GPU_MARGIN_MB="100000000"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("SIPP_GPU_MARGIN_MB", p.stderr)


if __name__ == "__main__":
    unittest.main()
