"""Many models behind one gateway (src/gateway/fleet/residency.c): loading on demand, admission by
measured memory, least-recently-used eviction of idle models only, pins, keep-alive, one load for
concurrent first requests, a failed load that leaves the others serving, the admin load/unload
routes, the memory figures against the process's RSS, and `sipp serve --models-dir`.

Three tiny synthetic models of one shape and a [server] memory_budget_mb that fits two of them:
the budget is worked out from the gateway's own estimate (GET /v1/models before anything loads),
so the test does not depend on the figures of one llama.cpp build.
"""

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import unittest

from tests.integration.test_gateway_support import (SIPP, SYNTH, VOCAB, Gateway, check_build, closed_port, metric, model,
                                                    serve_config, tmpdir, write)

MIB = 1 << 20
CTX = 256
STATE_TIMEOUT_S = 60  # bound on waiting for a state to change (keep-alive)
LONG_TOKENS = 3000  # a stream long enough to still be running while another model loads
LONG_CTX = 4096
BUSY_ATTEMPTS = 3  # setting up two busy streams at once, on a machine loaded enough to end them early
WIDE = ["--n-embd", "256", "--n-layer", "4", "--n-head", "8", "--n-head-kv", "4", "--n-ff", "768", "--type", "q8_0"]
RSS_TOLERANCE = 0.15


def synth(name, seed, shape, vocab=VOCAB):
    path = os.path.join(tmpdir(), f"{name}.gguf")
    if not os.path.exists(path):
        r = subprocess.run([SYNTH, "--out", path, "--vocab", vocab, "--seed", str(seed), *shape],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    return path


def target(name, path, extra=""):
    return (f'[[targets]]\nname = "{name}"\nmodel = "{path}"\nthreads = 1\nparallel = 1\nctx_size = {CTX}\n'
            f'load = "on_demand"\n{extra}\n')


def models(gw):
    status, _, body = gw.json("GET", "/v1/models")
    assert status == 200, body
    return {m["id"]: m for m in body["data"]}


def state(gw, name):
    return models(gw)[name]["sipp"]["state"]


def chat(gw, name, max_tokens=2, headers=None):
    return gw.json("POST", "/v1/chat/completions",
                   {"model": name, "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens,
                    "temperature": 0}, headers=headers)


def three_models():
    return [model(n, seed) for n, seed in (("ra", 11), ("rb", 12), ("rc", 13))]


def budget_for_two(paths):
    """A budget (MiB) that holds two of the models but not three, from the gateway's estimates."""
    text = "".join(target(n, p) for n, p in zip("abc", paths))
    gw = serve_config(text)
    try:
        est = [m["sipp"]["memory_estimate"]["host_bytes"] for m in models(gw).values()]
    finally:
        gw.stop()
    # two fit, three do not (the estimate is within a few percent of what a load measures)
    return int(max(est) * 2.4 / MIB) + 1


class Residency(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        check_build()
        cls.paths = three_models()
        cls.budget = budget_for_two(cls.paths)

    def serve(self, extra_targets="", pins=(), server="", flags=()):
        text = f"[server]\nmemory_budget_mb = {self.budget}\n{server}\n"
        for n, p in zip("abc", self.paths):
            text += target(n, p, "pin = true" if n in pins else "")
        gw = serve_config(text + extra_targets, *flags)
        self.addCleanup(gw.stop)
        return gw

    def assert_states(self, gw, **want):
        got = {n: state(gw, n) for n in want}
        self.assertEqual(got, want, gw.text()[-3000:])

    def test_nothing_loads_before_its_first_request(self):
        gw = self.serve()
        self.assert_states(gw, a="unloaded", b="unloaded", c="unloaded")
        self.assertEqual(gw.request("GET", "/ready")[0], 200)  # no start-up targets: ready at once
        m = models(gw)["a"]
        self.assertEqual(m["state"], "unloaded")
        self.assertGreater(m["sipp"]["memory_estimate"]["weights_bytes"], 0)
        self.assertIsNone(m["sipp"]["last_used"])

    def test_least_recently_used_idle_model_is_evicted_first(self):
        gw = self.serve()
        for name in ("a", "b", "a"):  # a is now more recent than b
            self.assertEqual(chat(gw, name)[0], 200)
        self.assert_states(gw, a="loaded", b="loaded", c="unloaded")
        self.assertEqual(chat(gw, "c")[0], 200)
        self.assert_states(gw, a="loaded", b="unloaded", c="loaded")
        self.assertEqual(chat(gw, "b")[0], 200)  # a was used before c: a goes
        self.assert_states(gw, a="unloaded", b="loaded", c="loaded")
        m = models(gw)
        self.assertEqual((m["a"]["sipp"]["evictions"], m["b"]["sipp"]["evictions"], m["c"]["sipp"]["evictions"]),
                         (1, 1, 0))
        metrics = gw.metrics()
        self.assertEqual(metric(metrics, "sipp_model_evictions_total"), 2)
        self.assertEqual(metric(metrics, "sipp_model_loads_total"), 4)
        self.assertIn("evicted, least recently used, to make room for 'c'", gw.text())
        # the figures held never pass the budget
        held = metric(metrics, "sipp_memory_held_bytes", place="host")
        self.assertLessEqual(held, self.budget * MIB)
        self.assertEqual(metric(metrics, "sipp_memory_budget_bytes", place="host"), self.budget * MIB)

    def long_stream(self, gw, name):
        """A chat stream on name, read only to its first event; the small receive buffer keeps the
        gateway from sending the rest, so the request stays in use until it is read."""
        conn = gw.connect()
        conn.connect()
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        body = {"model": name, "messages": [{"role": "user", "content": "go"}], "max_tokens": LONG_TOKENS,
                "ignore_eos": True, "stream": True, "temperature": 0}
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        first = resp.readline()
        self.assertTrue(first.startswith(b"data: "), first)
        return conn, resp

    def finish_stream(self, conn, resp):
        rest = resp.read().decode()
        conn.close()
        events = [json.loads(line[6:]) for line in rest.splitlines() if line.startswith("data: {")]
        self.assertFalse([e for e in events if "error" in e], rest[-500:])
        self.assertEqual(events[-1]["choices"][0]["finish_reason"], "length")

    def test_a_model_in_use_is_never_evicted(self):
        # long and c decode slowly enough (a wider model, LONG_TOKENS tokens) that their streams are
        # still running while other models load; b is a tiny one
        wide = [synth(f"rwide{k}", seed, WIDE) for k, seed in ((0, 21), (1, 22))]
        text = (target("long", wide[0]).replace(f"ctx_size = {CTX}", f"ctx_size = {LONG_CTX}") +
                target("b", self.paths[1]) +
                target("c", wide[1]).replace(f"ctx_size = {CTX}", f"ctx_size = {LONG_CTX}"))
        # What each takes once loaded: residency charges a loaded model its measured memory, which can be
        # well below the header's estimate (here 354 MB measured against 420 MB estimated on an Intel
        # Xeon), so a budget from the estimates let all three fit.
        probe = serve_config(text)
        try:
            for name in ("long", "b", "c"):
                self.assertEqual(chat(probe, name)[0], 200)
            est = {n: m["sipp"]["memory"]["host_bytes"] for n, m in models(probe).items()}
        finally:
            probe.stop()
        # long with b, or long with c, fits; all three do not
        budget = int((est["long"] + est["c"] + est["b"] / 2) / MIB) + 1
        gw = serve_config(f"[server]\nmemory_budget_mb = {budget}\n" + text)
        self.addCleanup(gw.stop)
        self.assertEqual(chat(gw, "long")[0], 200)
        self.assertEqual(chat(gw, "b")[0], 200)  # long is now the least recently used
        conn, resp = self.long_stream(gw, "long")
        self.assertGreaterEqual(models(gw)["long"]["sipp"]["uses"], 1, "the stream ended before the test could use it")
        self.assertEqual(chat(gw, "c")[0], 200)  # makes room by evicting b, not the busy long
        self.assert_states(gw, long="loaded", b="unloaded", c="loaded")
        # both loaded models busy: a third cannot fit, and the 503 says why. A held stream can still run
        # to its end while the machine is loaded (the kernel's loopback buffers take all its chunks):
        # then the scenario did not happen, and it is set up again, a bounded number of times.
        for attempt in range(BUSY_ATTEMPTS):
            if not models(gw)["long"]["sipp"]["uses"]:
                self.finish_stream(conn, resp)
                conn, resp = self.long_stream(gw, "long")
            conn2, resp2 = self.long_stream(gw, "c")
            m = models(gw)
            if m["long"]["sipp"]["uses"] and m["c"]["sipp"]["uses"] and m["b"]["state"] == "unloaded":
                break
            conn2.close()
        else:
            self.skipTest(f"the held streams ended before 'b' was asked for, {BUSY_ATTEMPTS} times")
        status, hdrs, body = chat(gw, "b")
        self.assertEqual(status, 503, body)
        msg = body["error"]["message"]
        for part in ("model 'b' needs", "MiB of host memory", f"the budget is {budget} MiB", "'long'", "'c'",
                     "(serving)"):
            self.assertIn(part, msg)
        self.assertIn("retry-after", hdrs)
        conn2.close()  # c's stream is cancelled; long's runs to its end, through c's load
        self.finish_stream(conn, resp)
        self.assertEqual(models(gw)["long"]["sipp"]["unloads"], 0)
        self.assertEqual(chat(gw, "b")[0], 200)  # now an idle one can go

    def test_a_pinned_model_is_never_evicted(self):
        gw = self.serve(pins=("a",))
        for name in ("a", "b"):  # a is the least recently used, but pinned
            self.assertEqual(chat(gw, name)[0], 200)
        self.assertEqual(chat(gw, "c")[0], 200)
        self.assert_states(gw, a="loaded", b="unloaded", c="loaded")
        self.assertTrue(models(gw)["a"]["sipp"]["pinned"])

    def test_max_loaded_models_caps_the_count(self):
        gw = self.serve(server="max_loaded_models = 1")
        self.assertEqual(chat(gw, "a")[0], 200)
        self.assertEqual(chat(gw, "b")[0], 200)
        self.assert_states(gw, a="unloaded", b="loaded", c="unloaded")

    def test_keep_alive_unloads_after_the_deadline(self):
        text = f"[server]\nmemory_budget_mb = {self.budget}\n" + target("a", self.paths[0], "keep_alive = 1")
        gw = serve_config(text)
        self.addCleanup(gw.stop)
        t0 = time.monotonic()
        self.assertEqual(chat(gw, "a")[0], 200)
        m = models(gw)["a"]["sipp"]
        self.assertEqual(m["keep_alive_seconds"], 1)
        # The answer is sent a moment before the request's use ends, and only then is the deadline set.
        deadline = time.monotonic() + STATE_TIMEOUT_S
        while m["state"] == "loaded" and m.get("unload_at") is None and time.monotonic() < deadline:
            time.sleep(0.05)
            m = models(gw)["a"]["sipp"]
        if m["state"] == "loaded":  # (it may already be gone on a slow machine)
            self.assertAlmostEqual(m["unload_at"], m["last_used"] + 1, delta=0.01)
        deadline = time.monotonic() + STATE_TIMEOUT_S
        while state(gw, "a") != "unloaded" and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(state(gw, "a"), "unloaded")
        self.assertGreaterEqual(time.monotonic() - t0, 1.0)
        self.assertIn("target 'a' unloaded (keep_alive passed)", gw.text())
        self.assertEqual(metric(gw.metrics(), "sipp_model_unloads_total"), 1)
        self.assertEqual(chat(gw, "a")[0], 200)  # and loads again on the next request

    def test_eight_concurrent_first_requests_cause_one_load(self):
        gw = self.serve()
        results = []

        def one():
            results.append(chat(gw, "a")[0])

        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(results, [200] * 8)
        self.assertEqual(models(gw)["a"]["sipp"]["loads"], 1)
        self.assertEqual(metric(gw.metrics(), "sipp_model_loads_total"), 1)
        self.assertEqual(gw.text().count("target 'a' ready in"), 1)

    def test_a_corrupt_model_fails_alone(self):
        bad = os.path.join(tmpdir(), "corrupt.gguf")
        with open(self.paths[0], "rb") as f:
            data = f.read()
        with open(bad, "wb") as f:
            f.write(data[: len(data) // 3])  # a truncated file: the header is fine, the tensors are not
        gw = self.serve(extra_targets=target("bad", bad))
        self.assertEqual(chat(gw, "a")[0], 200)
        results = []
        threads = [threading.Thread(target=lambda: results.append(chat(gw, "bad"))) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for status, _, body in results:
            self.assertEqual(status, 503, body)
            self.assertIn("model 'bad' failed to load", body["error"]["message"])
        self.assertEqual(state(gw, "bad"), "failed")
        self.assertIn("error", models(gw)["bad"]["sipp"])
        self.assertEqual(chat(gw, "a")[0], 200)
        self.assertEqual(chat(gw, "b")[0], 200)
        self.assertEqual(metric(gw.metrics(), "sipp_model_load_failures_total"), 1)

    def test_admin_tokens_load_and_unload(self):
        env = {"SIPP_T_ADMIN": "admin-secret-0123456789", "SIPP_T_USER": "user-secret-0123456789"}
        tokens = ('[[tokens]]\nenv = "SIPP_T_ADMIN"\ncaller = "ops"\nadmin = true\n'
                  '[[tokens]]\nenv = "SIPP_T_USER"\ncaller = "app"\n')
        text = tokens + target("a", self.paths[0])
        gw = serve_config(text, env=env)
        self.addCleanup(gw.stop)
        admin = {"Authorization": "Bearer " + env["SIPP_T_ADMIN"]}
        user = {"Authorization": "Bearer " + env["SIPP_T_USER"]}
        status, _, body = gw.json("POST", "/v1/models/a/load", headers=user)
        self.assertEqual(status, 403, body)
        self.assertIn("admin = true", body["error"]["message"])
        status, _, body = gw.json("POST", "/v1/models/a/load", headers=admin)
        self.assertEqual((status, body["state"]), (200, "loaded"), body)
        self.assertGreater(body["memory"]["total_bytes"], 0)
        self.assertEqual(gw.json("GET", "/v1/models/a/load", headers=admin)[0], 405)
        self.assertEqual(gw.json("POST", "/v1/models/nope/load", headers=admin)[0], 404)
        status, _, body = gw.json("POST", "/v1/models/a/unload", headers=user)
        self.assertEqual(status, 403)
        status, _, body = gw.json("POST", "/v1/models/a/unload", headers=admin)
        self.assertEqual((status, body["state"], body["deferred"]), (200, "unloaded", False), body)
        self.assertEqual(chat(gw, "a", headers=user)[0], 200)  # a user's request still loads it

    def test_startup_targets_decide_ready(self):
        text = (f"[server]\nmemory_budget_mb = {self.budget}\n" +
                target("a", self.paths[0]).replace('load = "on_demand"', 'load = "startup"') +
                target("b", self.paths[1]))
        gw = serve_config(text)  # waits for /ready
        self.addCleanup(gw.stop)
        self.assert_states(gw, a="loaded", b="unloaded")
        self.assertEqual(chat(gw, "b")[0], 200)
        self.assertEqual(gw.request("GET", "/ready")[0], 200)


class Repack(unittest.TestCase):
    """repack = false (sipp_model_params.no_repack) loads the CPU weights as the file has them: the same
    greedy answer as the default; a value that is not a boolean is refused naming the key."""

    def test_repack_false_answers_as_the_default(self):
        check_build()
        [path] = three_models()[:1]
        gw = serve_config(target("packed", path) + target("plain", path, "repack = false"))
        try:
            answers = []
            for name in ("packed", "plain"):
                status, _, r = gw.json("POST", "/v1/completions",
                                       {"model": name, "prompt": "Hello", "max_tokens": 12, "temperature": 0})
                self.assertEqual(status, 200, r)
                answers.append(r["choices"][0]["text"])
            self.assertEqual(answers[0], answers[1])
        finally:
            gw.stop()

    def test_repack_must_be_a_boolean(self):
        check_build()
        [path] = three_models()[:1]
        conf = write("repack.toml", target("a", path, 'repack = "no"'))
        r = subprocess.run([SIPP, "serve", "--check", "--config", conf], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("repack", r.stderr)


class MemoryAgainstRss(unittest.TestCase):
    """The measured figure (the backend buffers llama.cpp allocated) against what the process's RSS
    grew by once a request has read every weight. The model is shaped so that its weights dominate:
    a 32k vocabulary (llama-spm) and a small context keep the compute buffer's logits, which are
    reserved for a whole batch but touched only for the outputs, a small part of it."""

    def measure_against_rss(self, weight_type):
        check_build()
        spm = VOCAB.replace("llama-bpe", "llama-spm")
        path = synth(f"rss-{weight_type}", 1, ["--n-embd", "512", "--n-layer", "8", "--n-head", "8", "--n-head-kv",
                                               "4", "--n-ff", "1536", "--type", weight_type], vocab=spm)
        gw = serve_config(target("m", path).replace(f"ctx_size = {CTX}", "ctx_size = 64"))
        self.addCleanup(gw.stop)

        def rss():
            with open(f"/proc/{gw.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
            raise AssertionError("no VmRSS")

        before = rss()
        self.assertEqual(chat(gw, "m", max_tokens=4)[0], 200)
        grown = rss() - before
        mem = models(gw)["m"]["sipp"]["memory"]
        measured = mem["total_bytes"]
        self.assertLess(abs(grown - measured) / measured, RSS_TOLERANCE,
                        f"RSS grew by {grown / MIB:.1f} MiB, measured {measured / MIB:.1f} MiB: {mem}")
        # a CPU load holds nothing on a device, whatever layout the CPU module keeps weights in (an
        # AMX host's "AMX" buffers once counted as a device of that name)
        self.assertEqual(mem["device_bytes"], {}, mem)
        est = models(gw)["m"]["sipp"]["memory_estimate"]
        self.assertGreaterEqual(est["total_bytes"], measured, f"the estimate errs low: {est} against {mem}")
        return gw

    def test_measured_memory_agrees_with_rss(self):
        self.measure_against_rss("f16")

    def test_repacked_weights_are_host_memory(self):
        """q4_0 weights go to a CPU extra buffer type where the CPU module has one (CPU_REPACK with AVX2,
        AMX on a Xeon with AMX): those bytes are host memory, and placement shows them as a layout of
        the CPU device holding the CPU's layers."""
        gw = self.measure_against_rss("q4_0")
        status, _, body = gw.json("GET", "/v1/backends")
        self.assertEqual(status, 200, body)
        place = [t for t in body["targets"] if t["name"] == "m"][0]["placement"]
        self.assertTrue(all(p["device"] == "CPU" and p["host"] == "local" for p in place), place)
        plain = [p for p in place if not p["layout"]]
        laid = [p for p in place if p["layout"]]
        self.assertEqual(len(plain), 1, place)
        with open("/proc/cpuinfo") as f:
            flags = f.read()
        if " avx2" not in flags:
            self.skipTest("this CPU has no AVX2: its CPU module keeps q4_0 weights in no layout of its own")
        self.assertGreaterEqual(len(laid), 1, place)
        for p in laid:
            self.assertIn(p["layout"], ("REPACK", "AMX", "KLEIDIAI"), place)
            self.assertGreater(p["buffer_bytes"], 0, place)
            for key in ("first_layer", "n_layers", "output"):
                self.assertEqual(p[key], plain[0][key], place)


class ModelsDir(unittest.TestCase):
    def test_serve_a_models_directory(self):
        check_build()
        d = os.path.join(tmpdir(), f"models-{time.monotonic_ns()}")
        os.makedirs(d)
        paths = three_models()
        for name, p in zip(("one", "two"), paths):
            shutil.copy(p, os.path.join(d, f"{name}.gguf"))
        shutil.copy(paths[0], os.path.join(d, "mmproj-one-f16.gguf"))  # a projector goes with a model
        gw = Gateway(["--models-dir", d, "--port", "0", "--keep-alive", "5m"])
        self.addCleanup(gw.stop)
        m = models(gw)
        self.assertEqual(sorted(m), ["one", "two"])
        self.assertEqual(m["one"]["sipp"]["load"], "on_demand")
        self.assertEqual(m["one"]["sipp"]["keep_alive_seconds"], 300)
        self.assertEqual(chat(gw, "two")[0], 200)
        self.assertEqual(state(gw, "two"), "loaded")
        self.assertEqual(state(gw, "one"), "unloaded")
        # files that appear are served without a restart: listed, or asked for by name
        shutil.copy(paths[2], os.path.join(d, "three.gguf"))
        self.assertEqual(sorted(models(gw)), ["one", "three", "two"])
        shutil.copy(paths[2], os.path.join(d, "four.gguf"))
        self.assertEqual(chat(gw, "four")[0], 200)
        self.assertEqual(state(gw, "four"), "loaded")
        self.assertEqual(chat(gw, "five")[0], 404)
        self.assertIn("new model 'three'", gw.text())

    def odd_directory(self):
        """A models directory with one model, entries that are no models, and links in and out."""
        check_build()
        d = os.path.join(tmpdir(), f"odd-{time.monotonic_ns()}")
        outside = os.path.join(tmpdir(), f"outside-{time.monotonic_ns()}")
        os.makedirs(d)
        os.makedirs(outside)
        first = three_models()[0]
        shutil.copy(first, os.path.join(d, "good.gguf"))
        shutil.copy(first, os.path.join(d, "My Model.gguf"))
        shutil.copy(first, os.path.join(outside, "elsewhere.gguf"))
        os.mkfifo(os.path.join(d, "pipe.gguf"))
        os.mkfifo(os.path.join(d, "plain-fifo"))
        os.symlink(os.path.join(d, "good.gguf"), os.path.join(d, "inside.gguf"))
        os.symlink(os.path.join(outside, "elsewhere.gguf"), os.path.join(d, "out.gguf"))
        os.symlink(os.path.join(outside, "missing.gguf"), os.path.join(d, "dangling.gguf"))
        with open(os.path.join(d, "README.txt"), "w") as f:
            f.write("not a model, and not reported\n")
        return d, outside

    def test_entries_that_are_not_served_are_logged_once(self):
        d, _ = self.odd_directory()
        gw = Gateway(["--models-dir", d, "--port", "0"])
        self.addCleanup(gw.stop)
        self.assertEqual(sorted(models(gw)), ["good", "inside"])
        os.mkfifo(os.path.join(d, "later.gguf"))
        self.assertEqual(sorted(models(gw)), ["good", "inside"])  # a rescan
        self.assertEqual(sorted(models(gw)), ["good", "inside"])
        log = gw.text()
        for entry, why in (("My Model.gguf", "'My Model' is not a model name"),
                           ("pipe.gguf", "it is a FIFO, not a regular file"),
                           ("plain-fifo", "it is a FIFO, not a regular file"),
                           ("dangling.gguf", "symbolic link to nothing"),
                           ("out.gguf", "models_follow_symlinks = true"),
                           ("later.gguf", "it is a FIFO")):
            lines = [ln for ln in log.splitlines() if f"'{entry}' is skipped" in ln]
            self.assertEqual(len(lines), 1, (entry, lines, log))
            self.assertIn(why, lines[0])
            self.assertIn(d, lines[0])
        self.assertNotIn("README.txt", log)
        self.assertNotIn("'good.gguf'", log)
        self.assertEqual(chat(gw, "out")[0], 404)

    def test_models_follow_symlinks_serves_links_out(self):
        d, outside = self.odd_directory()
        cfg = os.path.join(tmpdir(), f"follow-{time.monotonic_ns()}.toml")
        with open(cfg, "w") as f:
            f.write("[server]\nmodels_follow_symlinks = true\n\n[[targets]]\nname = \"far\"\n"
                    f'type = "openai_compatible"\nbase_url = "http://127.0.0.1:{closed_port()}/v1"\n')
        gw = Gateway(["--config", cfg, "--models-dir", d, "--port", "0"])
        self.addCleanup(gw.stop)
        self.assertEqual(sorted(models(gw)), ["far", "good", "inside", "out"])
        self.assertNotIn("'out.gguf' is skipped", gw.text())
        flag = Gateway(["--models-dir", d, "--models-follow-symlinks", "--port", "0"])  # the same, without a config
        self.addCleanup(flag.stop)
        self.assertEqual(sorted(models(flag)), ["good", "inside", "out"])

    def test_serve_without_a_model_serves_the_store(self):
        check_build()
        d = os.path.join(tmpdir(), f"store-{time.monotonic_ns()}")
        os.makedirs(d)
        shutil.copy(three_models()[0], os.path.join(d, "stored.gguf"))
        gw = Gateway(["--port", "0"], env={"SIPP_MODELS_DIR": d})
        self.addCleanup(gw.stop)
        self.assertEqual(list(models(gw)), ["stored"])
        self.assertEqual(chat(gw, "stored")[0], 200)

    def test_bad_keep_alive_and_load_are_refused(self):
        check_build()
        cfg = write("bad-residency.toml", '[server]\nmemory_budget_mb = 0\n[[targets]]\nname = "a"\n'
                                          f'model = "{model()}"\nload = "lazy"\nkeep_alive = "5 minutes"\npin = 1\n')
        r = subprocess.run([SIPP, "serve", "--check", "--config", cfg], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn(":2: [server] memory_budget_mb: 0 is out of range", r.stderr)
        self.assertIn(":6: target 'a' load: 'lazy' is not \"startup\" or \"on_demand\"", r.stderr)
        self.assertIn(":7: target 'a' keep_alive: expected seconds", r.stderr)
        self.assertIn(":8: target 'a' pin: expected true or false", r.stderr)
        r = subprocess.run([SIPP, "serve", "--keep-alive", "soon"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--keep-alive 'soon'", r.stderr)


if __name__ == "__main__":
    unittest.main()
