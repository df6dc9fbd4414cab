"""LoRA adapters: `sipp-synth --lora-for BASE --rank 8` writes an adapter llama.cpp loads; `sipp --lora
FILE[:SCALE]`, `sipp serve --lora`, a target's lora = [{path, scale}], GET/POST /lora-adapters (admin)
and a request's "lora": [{id, scale}] apply it.

- The adapter changes the greedy output, and at scale 0 it is the base model's (the test can fail).
- The same greedy text as llama.cpp's C API alone (tests/tools/lora_ref.c), and as llama-server
  --lora-scaled A.gguf:0.75, built from the pinned source (skipped, saying why, when that build is
  absent).
- Requests with different adapter sets, sent together, each get the text they get alone: the engine
  never batches them together, and a slot's cached prefix serves only its own set.
- Bad input: a missing adapter file (config and CLI) names the path; a request id out of range names
  'lora[0].id'; /lora-adapters needs an admin token and refuses a path.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support.paths import BUILD  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

PEER = os.path.expanduser("~/.cache/sipp/build-80fb11ac73e66d89eae2c6a91d8a77428fa733ed-peer/bin")
PEER_READY_S = 60
PROMPT = "The quick brown fox"
N = 24
SCALE = 0.75
ADMIN, USER = "lora-admin-secret-000001", "lora-user-secret-0000001"
ENV = {"LORA_ADMIN": ADMIN, "LORA_USER": USER}


def adapter(name, base, seed):
    path = os.path.join(gw.tmpdir(), name)
    if not os.path.exists(path):
        r = subprocess.run([gw.SYNTH, "--out", path, "--lora-for", base, "--rank", "8", "--seed", str(seed)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    return path


def post(base, path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=gw.HTTP_TIMEOUT_S) as r:
        return json.loads(r.read())


def lora_info(m, name="tiny"):
    """The labels of vLLM's lora_requests_info sample of target name (running, waiting, max)."""
    for (metric, labels), _ in m.items():
        d = dict(labels)
        if metric == "vllm:lora_requests_info" and d.get("model_name") == name:
            return d["running_lora_adapters"], d["waiting_lora_adapters"], d["max_lora"]
    return None


def open_stream(g, lora):
    """A streamed completion under lora that runs until its socket is closed; returns the socket."""
    sock = socket.create_connection((g.host, g.port), timeout=gw.HTTP_TIMEOUT_S)
    body = json.dumps({"model": "tiny", "prompt": PROMPT, "max_tokens": 100000, "ignore_eos": True,
                       "stream": True, "lora": lora})
    sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  f"Authorization: Bearer {ADMIN}\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
    return sock


class LoraRoutingInfoTest(unittest.TestCase):
    """vLLM's lora_requests_info names the adapters the running and the waiting requests apply: a request
    of another set of scales waits until the running set's requests end (one set runs at a time)."""

    def test_running_and_waiting_adapters(self):
        base = gw.model()
        a, b = adapter("lora-a.gguf", base, 1), adapter("lora-b.gguf", base, 2)
        cfg = (f'[[tokens]]\nenv = "LORA_ADMIN"\ncaller = "ops"\nadmin = true\n\n' +
               gw.local_target("tiny", base, parallel=2, ctx=32768,
                               extra=f'lora = [{{path = "{a}", scale = {SCALE}}}, {{path = "{b}", scale = 0}}]'))
        g = gw.serve_config(cfg, env=ENV)
        self.addCleanup(g.stop)
        settle = lambda want: gw.wait_until(lambda: lora_info(g.metrics()) == want, 60, f"lora info {want}")
        settle(("", "", "2"))  # not loaded yet: the config's adapters
        socks = []
        try:
            socks.append(open_stream(g, [{"id": 1, "scale": 1.0}]))
            settle(("lora-b", "", "2"))
            socks.append(open_stream(g, []))  # the defaults: a at 0.75, another set, so it waits
            settle(("lora-b", "lora-a", "2"))
            socks.pop(0).close()
            settle(("lora-a", "", "2"))
        finally:
            for sock in socks:
                sock.close()
        settle(("", "", "2"))


class LoraTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.base = gw.model()
        cls.a = adapter("lora-a.gguf", cls.base, 1)
        cls.b = adapter("lora-b.gguf", cls.base, 2)
        cfg = (f'[[tokens]]\nenv = "LORA_ADMIN"\ncaller = "ops"\nadmin = true\n\n'
               f'[[tokens]]\nenv = "LORA_USER"\ncaller = "user"\n\n' +
               gw.local_target("tiny", cls.base, parallel=2, ctx=1024,
                               extra=f'lora = [{{path = "{cls.a}", scale = {SCALE}}}, {{path = "{cls.b}", scale = 0}}]'))
        cls.gw = gw.serve_config(cfg, env=ENV)
        cls.plain = gw.serve_model(cls.base)

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        cls.plain.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    def complete(self, g, token=ADMIN, **kw):
        body = {"model": "tiny", "prompt": PROMPT, "max_tokens": N, "temperature": 0, **kw}
        status, _, out = g.json("POST", "/v1/completions", body, {"Authorization": f"Bearer {token}"})
        self.assertEqual(status, 200, out)
        return out["choices"][0]["text"]

    def test_the_adapter_changes_the_output_and_scale_zero_does_not(self):
        base = self.complete(self.plain)
        with_a = self.complete(self.gw)
        self.assertNotEqual(with_a, base, "the adapter at 0.75 changed nothing")
        self.assertEqual(self.complete(self.gw, lora=[{"id": 0, "scale": 0}]), base, "scale 0 is the base model")
        self.assertEqual(self.complete(self.gw, lora=[{"id": 0, "scale": SCALE}]), with_a)
        with_b = self.complete(self.gw, lora=[{"id": 1, "scale": 1.0}])
        self.assertNotIn(with_b, (base, with_a))

    def test_adapters_count_in_memory(self):
        """The adapters' buffers are the model's weights in the measured memory, and in the estimate."""
        def memory(g, token):
            status, _, m = g.json("GET", "/v1/models/tiny", None, {"Authorization": f"Bearer {token}"} if token else {})
            self.assertEqual(status, 200, m)
            return m["sipp"]["memory"]["weights_bytes"], m["sipp"]["memory_estimate"]["weights_bytes"]
        self.complete(self.plain)  # both loaded
        self.complete(self.gw)
        (with_lora, est_lora), (without, est) = memory(self.gw, ADMIN), memory(self.plain, None)
        adapters = os.path.getsize(self.a) + os.path.getsize(self.b)
        self.assertGreaterEqual(with_lora - without, adapters * 0.9, (with_lora, without, adapters))
        self.assertGreaterEqual(est_lora - est, adapters * 0.9, (est_lora, est, adapters))

    def test_cli_lora_flag(self):
        def run(*flags):
            r = subprocess.run([gw.SIPP, self.base, PROMPT, "--max-tokens", str(N), "--temperature", "0",
                                "--threads", "1", *flags], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout
        self.assertEqual(run(f"--lora={self.a}:{SCALE}").strip(), self.complete(self.gw).strip())
        self.assertEqual(run(f"--lora={self.a}:0").strip(), self.complete(self.plain).strip())
        r = subprocess.run([gw.SIPP, self.base, PROMPT, "--lora", "/nonexistent/a.gguf:1"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("'/nonexistent/a.gguf' is not a file", r.stderr)

    def test_serve_lora_flag(self):
        """sipp serve MODEL --lora FILE:SCALE is the config's lora = [{path, scale}]."""
        g = gw.serve_model(self.base, f"--lora={self.a}:{SCALE}")
        try:
            self.assertEqual(self.complete(g), self.complete(self.gw))
            status, _, got = g.json("GET", "/lora-adapters")
            self.assertEqual(status, 200, got)
            self.assertEqual([(a["id"], a["path"], a["scale"]) for a in got], [(0, self.a, SCALE)])
        finally:
            g.stop()

    def test_different_sets_in_flight_keep_their_outputs(self):
        sets = [None, [{"id": 0, "scale": 0}], [{"id": 1, "scale": 1.0}], [{"id": 0, "scale": 0.3}]]
        alone = [self.complete(self.gw, **({"lora": s} if s else {})) for s in sets]
        together = [None] * (2 * len(sets))

        def one(i):
            s = sets[i % len(sets)]
            together[i] = self.complete(self.gw, **({"lora": s} if s else {}))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(together))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(together, alone + alone)

    def test_lora_adapters_route(self):
        status, _, got = self.gw.json("GET", "/lora-adapters", None, {"Authorization": f"Bearer {ADMIN}"})
        self.assertEqual(status, 200, got)
        self.assertEqual([(a["id"], a["path"], a["scale"]) for a in got], [(0, self.a, SCALE), (1, self.b, 0.0)])
        status, _, e = self.gw.json("GET", "/lora-adapters", None, {"Authorization": f"Bearer {USER}"})
        self.assertEqual(status, 403, e)
        base = self.complete(self.plain)
        try:
            status, _, got = self.gw.json("POST", "/lora-adapters", [{"id": 1, "scale": 0.5}],
                                          {"Authorization": f"Bearer {ADMIN}"})
            self.assertEqual(status, 200, got)
            self.assertEqual([a["scale"] for a in got], [0.0, 0.5], "unlisted adapters go to 0")
            with_b = self.complete(self.gw)
            self.assertEqual(with_b, self.complete(self.gw, lora=[{"id": 1, "scale": 0.5}]))
            self.assertNotEqual(with_b, base)
        finally:
            self.gw.json("POST", "/lora-adapters", [{"id": 0, "scale": SCALE}], {"Authorization": f"Bearer {ADMIN}"})
        for body, words in (([{"id": 0, "path": "/etc/passwd"}], "'[0].path'"), ([{"id": 5, "scale": 1}], "'[0].id'"),
                            ({"id": 0}, "array")):
            status, _, e = self.gw.json("POST", "/lora-adapters", body, {"Authorization": f"Bearer {ADMIN}"})
            self.assertEqual(status, 400, e)
            self.assertIn(words, e["error"]["message"])

    def test_verify_records_the_adapters(self):
        """sipp verify --lora applies the adapters on every backend and records them in the manifest."""
        def verify(name, *flags):
            out = os.path.join(gw.tmpdir(), name)
            r = subprocess.run([gw.SIPP, "verify", self.base, "--backends", "cpu", "--greedy-tokens", "4", "--threads",
                                "1", "--manifest", out, *flags], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            with open(out) as f:
                return json.load(f)
        with_a, base = verify("lora-verify.json", f"--lora={self.a}:{SCALE}"), verify("lora-verify-base.json")
        self.assertEqual([(a["path"], a["scale"]) for a in with_a["model"]["lora"]], [(self.a, SCALE)])
        self.assertRegex(with_a["model"]["lora"][0]["sha256"], "^[0-9a-f]{64}$")
        self.assertNotIn("lora", base["model"])
        texts = [g["text"] for g in with_a["backends"]["cpu"]["greedy"]]
        self.assertNotEqual(texts, [g["text"] for g in base["backends"]["cpu"]["greedy"]], "the adapter was applied")

    def test_bad_request_ids_are_named(self):
        for lora, words in (([{"id": 7, "scale": 1}], "'lora[0].id' is 7"), ([{"id": -1, "scale": 1}], "'lora[0].id'"),
                            ([{"id": 0, "scale": "x"}], "'lora[0].scale'")):
            body = {"model": "tiny", "prompt": PROMPT, "max_tokens": 2, "lora": lora}
            status, _, e = self.gw.json("POST", "/v1/completions", body, {"Authorization": f"Bearer {ADMIN}"})
            self.assertEqual(status, 400, e)
            self.assertIn(words, e["error"]["message"])

    def test_a_missing_adapter_file_is_a_config_error(self):
        cfg = gw.write("lora-bad.toml", gw.local_target("tiny", self.base,
                                                         extra='lora = [{path = "/nonexistent/a.gguf"}]'))
        r = subprocess.run([gw.SIPP, "serve", "--check", "--config", cfg], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("lora[0] path: '/nonexistent/a.gguf' is not a file", r.stderr)

    def test_same_text_as_llama_cpp_alone(self):
        """build/tests/lora_ref decodes with llama.cpp's C API only (the adapter loaded and applied as
        llama-server's common_init does, argmax per token): sipp's engine gives the same text."""
        ref = os.path.join(BUILD, "tests", "lora_ref")
        for scale in (SCALE, 0.3):
            r = subprocess.run([ref, self.base, self.a, str(scale), str(N), PROMPT], capture_output=True, timeout=120,
                               env=dict(os.environ, SIPP_ARTIFACT=os.path.join(BUILD, "artifact")))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.complete(self.gw, lora=[{"id": 0, "scale": scale}]), r.stdout.decode())

    def test_same_text_as_llama_server(self):
        server = os.path.join(PEER, "llama-server")
        if not os.access(server, os.X_OK):
            self.skipTest(f"{server} is not built (deps/build-source.sh peer builds it)")
        port = free_port()
        log = open(os.path.join(gw.tmpdir(), "llama-server-lora.log"), "w+")
        proc = subprocess.Popen([server, "-m", self.base, "--host", "127.0.0.1", "--port", str(port), "-t", "1",
                                 "-c", "1024", "-np", "1", "--no-repack", "--lora-scaled", f"{self.a}:{SCALE}"],
                                stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, LD_LIBRARY_PATH=PEER))
        try:
            base = f"http://127.0.0.1:{port}"
            gw.wait_until(lambda: self.peer_ready(base, proc), PEER_READY_S, "llama-server to load the model")
            peer = post(base, "/completion", {"prompt": PROMPT, "n_predict": N, "temperature": 0,
                                              "cache_prompt": False})
            self.assertEqual(self.complete(self.gw), peer["content"])
            peer_b = post(base, "/completion", {"prompt": PROMPT, "n_predict": N, "temperature": 0,
                                                "cache_prompt": False, "lora": [{"id": 0, "scale": 0.3}]})
            self.assertEqual(self.complete(self.gw, lora=[{"id": 0, "scale": 0.3}]), peer_b["content"])
        finally:
            proc.terminate()
            proc.wait(gw.STOP_TIMEOUT_S)
            log.close()

    @staticmethod
    def peer_ready(base, proc):
        if proc.poll() is not None:
            raise AssertionError(f"llama-server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            time.sleep(gw.POLL_S)
            return False


if __name__ == "__main__":
    unittest.main()
