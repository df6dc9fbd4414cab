"""Model files that change under a served target (src/gateway/fleet/model_watch.c, residency.c,
sigbus_guard.c): a file truncated in place takes its target out of service and then fails it, naming
the file, while the other targets serve; a same-size copy over a served file reloads the target from
the new weights instead of switching them silently; a failed target loads again when its file is
restored; and a request that is reading the weights when the file is cut short ends the gateway with
one line naming the file and exit status 75, not a bare SIGBUS.

Each target is served from a copy of a tiny synthetic model in a directory of the test's own, so
that the files can be cut, copied over and renamed.
"""

import os
import re
import shutil
import subprocess
import time
import unittest

from tests.integration.test_gateway_support import (SYNTH, VOCAB, chat_body, check_build, local_target, model,
                                                    read_sse, serve_config, tmpdir, wait_until)

STATE_TIMEOUT_S = 30  # bound on a reload after a file changed
CUT_TO_BYTES = 4096  # what is left of a truncated model file: its header's start
EXIT_MAPPED_FILE_LOST = 75  # EX_TEMPFAIL, as a lost rpc server
# A model whose weights a running request keeps reading from the mapping: f16 and no repacking, so
# that the CPU backend uses the mapped tensors as they are, and wide enough that a long stream is
# still generating when its file is cut.
WIDE = ["--n-embd", "256", "--n-layer", "4", "--n-head", "8", "--n-head-kv", "4", "--n-ff", "768", "--type", "f16"]
LONG_TOKENS = 3000


def served_copy(src, name):
    """A copy of src that one test serves and changes."""
    d = os.path.join(tmpdir(), f"files-{time.monotonic_ns()}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{name}.gguf")
    shutil.copy(src, path)
    return path


def replace_by_rename(src, path):
    """The way docs/residency.md says to replace a model: a new file renamed over the old."""
    tmp = path + ".new"
    shutil.copy(src, tmp)
    os.rename(tmp, path)


def models(gw):
    status, _, body = gw.json("GET", "/v1/models")
    assert status == 200, body
    return {m["id"]: m["sipp"] for m in body["data"]}


def answer(gw, name):
    status, _, body = gw.json("POST", "/v1/chat/completions", chat_body(name, max_tokens=8))
    assert status == 200, (status, body, gw.text()[-3000:])
    return body["choices"][0]["message"]["content"]


class ModelFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        check_build()
        cls.a = model("files-a", 21)
        cls.b = model("files-b", 22)
        assert os.path.getsize(cls.a) == os.path.getsize(cls.b)  # same shape: a copy keeps the size

    def serve_two(self):
        pa, pb = served_copy(self.a, "a"), served_copy(self.b, "b")
        gw = serve_config(local_target("a", pa, parallel=1, ctx=256) + local_target("b", pb, parallel=1, ctx=256))
        self.addCleanup(gw.stop)
        return gw, pa, pb

    def wait_state(self, gw, name, want):
        return wait_until(lambda: models(gw)[name]["state"] == want and models(gw)[name], STATE_TIMEOUT_S,
                          f"target '{name}' {want}")

    def test_a_file_truncated_in_place_fails_its_target_and_the_others_serve(self):
        gw, pa, _ = self.serve_two()
        self.assertTrue(answer(gw, "a"))
        os.truncate(pa, CUT_TO_BYTES)
        time.sleep(1)
        status, _, body = gw.json("POST", "/v1/chat/completions", chat_body("a", max_tokens=8))
        self.assertEqual(status, 503, body)
        self.assertIn(pa, body["error"]["message"])
        self.assertIn("not a valid GGUF file", body["error"]["message"])
        self.assertIsNone(gw.proc.poll(), gw.text()[-3000:])
        self.assertTrue(answer(gw, "b"))
        a = self.wait_state(gw, "a", "failed")
        self.assertIn(pa, a["error"])
        self.assertIn("truncated in place", gw.text())

    def test_a_same_size_copy_over_a_served_file_reloads_its_target(self):
        gw, pa, _ = self.serve_two()
        before, of_b = answer(gw, "a"), answer(gw, "b")
        self.assertNotEqual(before, of_b)  # two seeds, two answers
        loads = models(gw)["a"]["loads"]
        shutil.copyfile(self.b, pa)  # written in place, as cp does: same size, other weights
        wait_until(lambda: models(gw)["a"]["loads"] == loads + 1 and models(gw)["a"]["state"] == "loaded",
                   STATE_TIMEOUT_S, "a reload of target 'a'")
        self.assertEqual(answer(gw, "a"), of_b)  # now b's weights, read from the new file
        self.assertRegex(gw.text(), r"target 'a': its file \S+ was (truncated|written) in place")
        self.assertIn("target 'a': loading again from its changed file", gw.text())

    def test_a_failed_target_loads_again_when_its_file_is_restored(self):
        gw, pa, _ = self.serve_two()
        before = answer(gw, "a")
        os.truncate(pa, CUT_TO_BYTES)
        self.wait_state(gw, "a", "failed")
        replace_by_rename(self.a, pa)
        self.wait_state(gw, "a", "loaded")
        self.assertEqual(answer(gw, "a"), before)

    def test_a_request_waiting_while_the_file_is_replaced_is_served_by_the_new_file(self):
        gw, pa, _ = self.serve_two()
        of_b = answer(gw, "b")
        self.assertNotEqual(answer(gw, "a"), of_b)
        replace_by_rename(self.b, pa)
        self.assertEqual(answer(gw, "a"), of_b)  # at once: it waits for the reload, no 503
        self.assertEqual(models(gw)["a"]["loads"], 2)


class CutUnderARequest(unittest.TestCase):
    def test_a_request_reading_a_file_cut_short_ends_the_gateway_naming_it(self):
        check_build()
        src = os.path.join(tmpdir(), "files-wide.gguf")
        if not os.path.exists(src):
            r = subprocess.run([SYNTH, "--out", src, "--vocab", VOCAB, "--seed", "23", *WIDE], capture_output=True,
                               text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
        path = served_copy(src, "wide")
        gw = serve_config(local_target("wide", path, parallel=1, ctx=4096, extra="repack = false"))
        self.addCleanup(gw.kill)
        conn, resp = gw.stream("/v1/chat/completions",
                               chat_body("wide", max_tokens=LONG_TOKENS, ignore_eos=True, stream=True))
        self.assertEqual(resp.status, 200)
        events = read_sse(resp)
        next(events)
        os.truncate(path, CUT_TO_BYTES)
        try:
            for _ in events:
                pass
        except OSError:
            pass
        conn.close()
        gw.proc.wait(STATE_TIMEOUT_S)
        log = gw.text()
        self.assertEqual(gw.proc.returncode, EXIT_MAPPED_FILE_LOST, log[-3000:])
        lines = [line for line in log.splitlines() if "SIGBUS" in line]
        self.assertEqual(len(lines), 1, log[-3000:])
        self.assertRegex(lines[0], re.escape(f"target 'wide': its file {path} was cut short"))


if __name__ == "__main__":
    unittest.main()
