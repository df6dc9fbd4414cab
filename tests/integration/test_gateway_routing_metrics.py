"""The gauges an inference router reads from /metrics (issue 48), checked with numbers on a real gateway.

The Gateway API Inference Extension's endpoint picker (llm-d, Envoy AI Gateway, KServe) picks a replica
by its queue, its running requests and its KV-cache use; sipp exports them as sipp_waiting_requests,
sipp_engine_running_requests and sipp_kv_cache_usage_ratio, and the same numbers under vLLM's names with
a model_name label. What must hold under load:

- requests wait (waiting > 0) only when every slot is busy or about to be taken by another queued
  request (never more than the load beyond the slots), and running equals the busy slots;
- the KV use is the cells the slots hold: a prompt of P tokens answered with N tokens leaves P + N - 1
  cells (the last token is never fed back), a longer context more, and erasing the idle slots
  (POST /v1/models/NAME/erase_slots) brings it back to what the running requests hold.
"""

import json
import os
import socket
import subprocess
import unittest

from tests.integration import test_gateway_support as gw

TARGET = "routed"
SLOTS = 2
CTX = 16384  # room for long streams: the load test's requests end by disconnecting, not by the context
LONG = 100000  # max_tokens that only a disconnect ends
SAMPLE_TIMEOUT_S = 60
# A model a little larger than the tiny one, so that a stream lasts while the test samples /metrics.
SLOW = ["--n-embd", "128", "--n-layer", "4", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "256", "--type", "q8_0"]


def gauges(m, name=TARGET):
    """The routing gauges of one target, sipp's names and vLLM's side by side."""
    return {
        "waiting": gw.metric(m, "sipp_waiting_requests", target=name),
        "running": gw.metric(m, "sipp_engine_running_requests", target=name),
        "ratio": gw.metric(m, "sipp_kv_cache_usage_ratio", target=name),
        "cells": gw.metric(m, "sipp_kv_cache_cells", target=name),
        "used": gw.metric(m, "sipp_kv_cache_cells_used", target=name),
        "vllm_waiting": gw.metric(m, "vllm:num_requests_waiting", model_name=name),
        "vllm_running": gw.metric(m, "vllm:num_requests_running", model_name=name),
        "vllm_kv": gw.metric(m, "vllm:kv_cache_usage_perc", model_name=name),
    }


def slow_model():
    path = os.path.join(gw.tmpdir(), "routed.gguf")
    if not os.path.exists(path):
        r = subprocess.run([gw.SYNTH, "--out", path, "--vocab", gw.VOCAB, "--seed", "7", *SLOW],
                              capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"sipp-synth failed: {r.stderr}")
    return path


def open_stream(g, prompt):
    """A streamed completion that runs until its socket is closed; returns the socket."""
    sock = socket.create_connection((g.host, g.port), timeout=gw.HTTP_TIMEOUT_S)
    body = json.dumps({"model": TARGET, "prompt": prompt, "max_tokens": LONG, "ignore_eos": True, "stream": True})
    sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    return sock


class RoutingGaugesUnderLoadTest(unittest.TestCase):
    """Two slots, up to four long streams: the queue gauge moves only once both slots are busy."""

    @classmethod
    def setUpClass(cls):
        cls.gw = gw.serve_config(gw.local_target(TARGET, path=slow_model(), parallel=SLOTS, ctx=CTX))

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def settle(self, running, waiting, load):
        """Samples /metrics until the gauges read (running, waiting); every sample on the way must keep
        the invariants: at most `load` requests (the streams open now or just before) of which what
        waits is only what the slots cannot hold, so nothing waits while a slot is free for it;
        vLLM's names say the same. (A request that a free slot is about to take does not wait: with
        one slot just freed and two queued, one waits.)"""
        def check():
            g = gauges(self.gw.metrics())
            self.assertEqual(g["vllm_waiting"], g["waiting"], g)
            self.assertEqual(g["vllm_running"], g["running"], g)
            self.assertEqual(g["vllm_kv"], g["ratio"], g)
            self.assertLessEqual(g["running"], SLOTS, g)
            self.assertLessEqual(g["waiting"], max(0, load - SLOTS), f"a request waits while a slot is free: {g}")
            return g if (g["running"], g["waiting"]) == (running, waiting) else None

        return gw.wait_until(check, SAMPLE_TIMEOUT_S, f"running {running}, waiting {waiting}")

    def test_waiting_only_when_every_slot_is_busy(self):
        self.settle(0, 0, 0)
        socks = []
        try:
            for n in range(1, SLOTS + 3):  # 1 and 2 run; 3 and 4 wait
                socks.append(open_stream(self.gw, f"Stream number {n} goes on"))
                self.settle(min(n, SLOTS), max(0, n - SLOTS), n)
            g = gw.wait_until(lambda: (lambda g: g if g["used"] > 0 else None)(gauges(self.gw.metrics())),
                              SAMPLE_TIMEOUT_S, "the streams' cells counted")
            self.assertAlmostEqual(g["ratio"], g["used"] / CTX, places=5)
            socks.pop(0).close()  # a slot frees, a waiting request takes it
            self.settle(SLOTS, 1, SLOTS + 2)
            socks.pop(0).close()
            self.settle(SLOTS, 0, SLOTS + 1)
        finally:
            for s in socks:
                s.close()
        self.settle(0, 0, SLOTS)

    def test_lora_info_is_exported_empty(self):
        m = self.gw.metrics()
        labels = dict(model_name=TARGET, running_lora_adapters="", waiting_lora_adapters="", max_lora="0")
        self.assertGreater(gw.metric(m, "vllm:lora_requests_info", **labels), 1.6e9)  # the time, as vLLM's
        self.assertEqual(gw.metric(m, "sipp_kv_cache_cells", target=TARGET), CTX)


class KvUsageTest(unittest.TestCase):
    """One slot: the KV gauge is exactly the cells the slot holds."""

    @classmethod
    def setUpClass(cls):
        cls.gw = gw.serve_config(gw.local_target(TARGET, parallel=1, ctx=4096))

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def used_becomes(self, cells):
        def check():
            g = gauges(self.gw.metrics())
            return g if g["used"] == cells else None

        g = gw.wait_until(check, SAMPLE_TIMEOUT_S, f"{cells} cells used (now {gauges(self.gw.metrics())})")
        self.assertAlmostEqual(g["ratio"], cells / 4096, places=5)
        self.assertAlmostEqual(g["vllm_kv"], cells / 4096, places=5)
        return g

    def chat(self, content, max_tokens):
        status, _, body = self.gw.json("POST", "/v1/chat/completions",
                                       gw.chat_body(TARGET, content, max_tokens=max_tokens, ignore_eos=True))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["usage"]["completion_tokens"], max_tokens)
        return body["usage"]["prompt_tokens"]

    def erase(self):
        status, _, body = self.gw.json("POST", f"/v1/models/{TARGET}/erase_slots", {})
        self.assertEqual((status, body.get("erased")), (200, True), body)

    def test_rises_with_context_and_falls_after_erase(self):
        self.erase()
        self.used_becomes(0)
        short = self.chat("Hello there", 4)
        self.used_becomes(short + 4 - 1)
        longer = self.chat("Hello there " + "and a much longer question " * 60, 8)
        self.assertGreater(longer, short + 100)
        g = self.used_becomes(longer + 8 - 1)
        self.assertGreater(g["ratio"], (short + 3) / 4096)
        self.erase()
        self.used_becomes(0)

    def test_erase_of_an_unknown_model_is_404(self):
        status, _, body = self.gw.json("POST", "/v1/models/nope/erase_slots", {})
        self.assertEqual(status, 404, body)
        self.assertIn("nope", body["error"]["message"])


class EraseNeedsAdminTest(unittest.TestCase):
    """Emptying a model's cache is an operator's act, as loading and unloading are."""

    def test_a_token_without_admin_may_not_erase(self):
        env = {"SIPP_T_USER": "u" * 32, "SIPP_T_ADMIN": "a" * 32}
        cfg = ('[[tokens]]\nenv = "SIPP_T_USER"\ncaller = "user"\n\n'
               '[[tokens]]\nenv = "SIPP_T_ADMIN"\ncaller = "ops"\nadmin = true\n\n' + gw.local_target(TARGET))
        g = gw.serve_config(cfg, env=env)
        try:
            path = f"/v1/models/{TARGET}/erase_slots"
            status, _, body = g.json("POST", path, {}, headers={"Authorization": "Bearer " + "u" * 32})
            self.assertEqual((status, body["error"]["code"]), (403, "admin_required"), body)
            status, _, body = g.json("POST", path, {}, headers={"Authorization": "Bearer " + "a" * 32})
            self.assertEqual((status, body["erased"]), (200, True), body)
        finally:
            g.stop()


if __name__ == "__main__":
    unittest.main()
