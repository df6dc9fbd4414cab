"""SIGHUP reads the gateway's configuration file again (src/gateway/fleet/reload.c): a target added loads, one
removed drains and goes, one changed reloads with its new settings, and an untouched one keeps serving
(a stream running across the signal ends whole); a file that does not parse or check keeps the running
configuration and says why; settings the server took at start are logged as needing a restart.
SIGTERM stays the graceful stop (test_gateway.py and others).
"""

import os
import re
import signal
import time
import unittest

from tests.integration.test_gateway_support import (Gateway, chat_body, check_build, closed_port, local_target, model,
                                                    read_sse, tmpdir, wait_until)

LOG_TIMEOUT_S = 30  # bound on the log saying a reload happened
LONG_TOKENS = 1500  # a stream that is still running when the signal comes
LONG_CTX = 4096


def models(gw):
    status, _, body = gw.json("GET", "/v1/models")
    assert status == 200, body
    return {m["id"]: m.get("sipp", {}) for m in body["data"]}


class Reload(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        check_build()
        cls.a, cls.b, cls.c = model("reload-a", 31), model("reload-b", 32), model("reload-c", 33)

    def serve(self, text):
        self.path = os.path.join(tmpdir(), f"reload-{time.monotonic_ns()}.toml")
        self.write(text)
        gw = Gateway(["--config", self.path, "--port", "0"])
        self.addCleanup(gw.stop)
        return gw

    def write(self, text):
        with open(self.path, "w") as f:
            f.write(text)

    def hup(self, gw, text, outcome):
        """Writes the file, sends SIGHUP and waits for the log line that ends a reload (outcome)."""
        self.write(text)
        before = gw.text().count(outcome)
        gw.signal(signal.SIGHUP)
        wait_until(lambda: gw.text().count(outcome) > before or gw.proc.poll() is not None, LOG_TIMEOUT_S,
                   f"'{outcome}' in the log")
        self.assertIsNone(gw.proc.poll(), gw.text()[-3000:])

    def base(self):
        return local_target("a", self.a, parallel=2, ctx=LONG_CTX) + local_target("b", self.b, parallel=1, ctx=256)

    def test_added_removed_and_untouched_targets_and_a_stream_across_the_signal(self):
        gw = self.serve(self.base())
        conn, resp = gw.stream("/v1/chat/completions",
                               chat_body("a", max_tokens=LONG_TOKENS, ignore_eos=True, stream=True))
        self.assertEqual(resp.status, 200)
        events = read_sse(resp)
        next(events)
        self.hup(gw, local_target("a", self.a, parallel=2, ctx=LONG_CTX) + local_target("c", self.c, parallel=1, ctx=256),
                 "sipp: reloaded")
        rest = list(events)
        conn.close()
        self.assertEqual(rest[-1], (None, "[DONE]"), rest[-3:])
        self.assertFalse([e for e in rest if "error" in e[1]], gw.text()[-3000:])
        self.assertGreater(len(rest), LONG_TOKENS // 4)
        self.assertIn("removed 'b', added 'c'; 1 target untouched", gw.text())
        wait_until(lambda: models(gw).get("c", {}).get("state") == "loaded", LOG_TIMEOUT_S, "c loaded")
        listed = models(gw)
        self.assertEqual(sorted(listed), ["a", "c"])
        self.assertEqual(listed["a"]["loads"], 1)  # untouched: not reloaded
        self.assertEqual(gw.json("POST", "/v1/chat/completions", chat_body("b"))[0], 404)
        self.assertEqual(gw.json("POST", "/v1/chat/completions", chat_body("c"))[0], 200)
        self.assertIn("target 'b' unloaded (removed from the configuration)", gw.text())
        self.assertEqual(gw.request("GET", "/ready")[0], 200)

    def test_a_removed_target_drains_its_running_stream_first(self):
        gw = self.serve(local_target("a", self.a, parallel=1, ctx=256) +
                        local_target("b", self.b, parallel=1, ctx=LONG_CTX))
        conn, resp = gw.stream("/v1/chat/completions",
                               chat_body("b", max_tokens=LONG_TOKENS, ignore_eos=True, stream=True))
        events = read_sse(resp)
        next(events)
        self.hup(gw, local_target("a", self.a, parallel=1, ctx=256), "sipp: reloaded")
        self.assertEqual(gw.json("POST", "/v1/chat/completions", chat_body("b"))[0], 404)
        rest = list(events)
        conn.close()
        self.assertEqual(rest[-1], (None, "[DONE]"), rest[-3:])
        wait_until(lambda: "target 'b' unloaded (removed from the configuration)" in gw.text(), LOG_TIMEOUT_S,
                   "b unloaded once its stream ended")

    def test_without_a_configuration_file_sighup_changes_nothing(self):
        gw = Gateway([self.a, "--port", "0", "--threads", "1"])
        self.addCleanup(gw.stop)
        gw.signal(signal.SIGHUP)
        wait_until(lambda: "no configuration file to read again" in gw.text() or gw.proc.poll() is not None,
                   LOG_TIMEOUT_S, "the SIGHUP line")
        self.assertIsNone(gw.proc.poll(), gw.text()[-3000:])
        self.assertEqual(gw.json("POST", "/v1/chat/completions", chat_body("reload-a"))[0], 200)

    def test_a_changed_target_reloads_with_its_new_settings(self):
        gw = self.serve(self.base())
        self.hup(gw, local_target("a", self.a, parallel=2, ctx=LONG_CTX) + local_target("b", self.b, parallel=1, ctx=512),
                 "sipp: reloaded")
        wait_until(lambda: models(gw)["b"]["ctx_size"] == 512 and models(gw)["b"]["state"] == "loaded",
                   LOG_TIMEOUT_S, "b reloaded with ctx_size 512")
        listed = models(gw)
        self.assertEqual((listed["a"]["loads"], listed["b"]["loads"]), (1, 2))
        self.assertEqual(gw.json("POST", "/v1/chat/completions", chat_body("b"))[0], 200)
        self.assertIn("reloading 'b'", gw.text())

    def test_an_alias_is_taken_without_a_reload(self):
        gw = self.serve(self.base())
        self.hup(gw, local_target("a", self.a, parallel=2, ctx=LONG_CTX, extra='aliases = ["first-*"]') +
                 local_target("b", self.b, parallel=1, ctx=256), "sipp: reloaded")
        self.assertEqual(gw.json("POST", "/v1/chat/completions", chat_body("first-model"))[0], 200)
        self.assertEqual(models(gw)["a"]["loads"], 1)

    def test_a_remote_target_added_and_then_changed(self):
        up = Gateway([self.c, "--port", "0", "--threads", "1"])
        self.addCleanup(up.stop)
        gw = self.serve(self.base())

        def remote(timeout):
            return (f'[[targets]]\nname = "far"\ntype = "openai_compatible"\nbase_url = "{up.base}/v1"\n'
                    f'model = "reload-c"\ntimeout_seconds = {timeout}\n')

        self.hup(gw, self.base() + remote(60), "sipp: reloaded")
        self.assertIn("added 'far'", gw.text())
        status, _, body = gw.json("POST", "/v1/chat/completions", chat_body("far"))
        self.assertEqual(status, 200, body)
        self.hup(gw, self.base() + remote(30), "removed 'far', added 'far'")
        self.assertEqual(gw.json("POST", "/v1/chat/completions", chat_body("far"))[0], 200)
        self.assertEqual(sorted(models(gw)), ["a", "b", "far"])

    def test_an_rpc_target_is_not_changed_by_a_reload(self):
        rpc = f'backend = "rpc"\nrpc = ["127.0.0.1:{closed_port()}"]\nload = "on_demand"'
        self.path = os.path.join(tmpdir(), f"reload-{time.monotonic_ns()}.toml")
        self.write(self.base() + local_target("split", self.c, extra=rpc))
        gw = Gateway(["--config", self.path, "--port", "0"], wait_ready=False)
        self.addCleanup(gw.stop)
        self.hup(gw, self.base() + local_target("split", self.c, extra=rpc + '\naliases = ["s-*"]'),
                 "the running configuration stays")
        self.assertIn("target 'split' is served through rpc servers by a supervised process", gw.text())

    def test_a_file_that_does_not_parse_keeps_the_running_configuration(self):
        gw = self.serve(self.base())
        self.hup(gw, "[[targets]\nname = ", "the running configuration stays")
        self.assertRegex(gw.text(), re.escape(self.path) + r":1:\d+: expected")
        for name in ("a", "b"):
            self.assertEqual(gw.json("POST", "/v1/chat/completions", chat_body(name))[0], 200)
        self.assertEqual(sorted(models(gw)), ["a", "b"])

    def test_a_file_that_does_not_check_keeps_the_running_configuration(self):
        gw = self.serve(self.base())
        missing = os.path.join(tmpdir(), "no-such-model.gguf")
        self.hup(gw, self.base() + local_target("c", missing), "the running configuration stays")
        self.assertIn(missing, gw.text())
        self.assertEqual(sorted(models(gw)), ["a", "b"])
        self.assertEqual(gw.json("POST", "/v1/chat/completions", chat_body("b"))[0], 200)

    def test_settings_taken_at_start_are_logged_as_needing_a_restart(self):
        gw = self.serve(self.base())
        self.hup(gw, "[server]\nlisten = \"127.0.0.1:1\"\nmax_concurrent_requests = 3\n" + self.base(), "sipp: reloaded")
        self.assertIn("[server] max_concurrent_requests changed: that needs a restart", gw.text())
        self.assertNotIn("[server] listen changed", gw.text())  # the command line's --port 0 wins, as at start
        self.assertEqual(gw.request("GET", "/health")[0], 200)


if __name__ == "__main__":
    unittest.main()
