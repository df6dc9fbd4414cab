"""The KV of a context-keyed conversation survives its model's eviction (sipp_engine_save_slots and
sipp_engine_restore_slots, src/engine/slot_state.c, called by src/gateway/fleet/residency.c): three models
with a budget for two, a conversation on a, a evicted by using b and c, and the next turn on a
reports cached_tokens > 0 and gives the answer that a gateway which never evicted a gives, and the one
a fresh gateway gives without any cache (greedy); a new conversation with the same first words reuses
the restored prefix. A model file that changed meanwhile restores
nothing, and its stale file is removed; a keep_alive unload saves as an eviction does; a gateway
removes its directory of saved slots when it stops.
"""

import os
import time
import unittest

from tests.integration.test_gateway_residency import (STATE_TIMEOUT_S, budget_for_two, models, state, target,
                                                      three_models)
from tests.integration.test_gateway_support import check_build, serve_config, tmpdir

KEY = "conversation-1"
TURN_TOKENS = 12
POLL_S = 0.05


def turn(gw, name, messages, key=KEY):
    body = {"model": name, "messages": messages, "max_tokens": TURN_TOKENS, "temperature": 0}
    if key:
        body["context_key"] = key
    status, _, r = gw.json("POST", "/v1/chat/completions", body)
    assert status == 200, r
    return r["choices"][0]["message"]["content"], r["usage"]["prompt_tokens_details"]["cached_tokens"]


def conversation(answer):
    return [{"role": "user", "content": "Tell me about the sea."}, {"role": "assistant", "content": answer},
            {"role": "user", "content": "And the mountains?"}]


FIRST = [{"role": "user", "content": "Tell me about the sea."}]


def slot_files(root):
    found = []
    for d, _, files in os.walk(root):
        found += [os.path.join(d, f) for f in files if f.endswith(".slot")]
    return found


class SlotState(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        check_build()
        cls.paths = three_models()
        cls.budget = budget_for_two(cls.paths)

    def serve(self, extra_a="", extra_server=""):
        self.root = os.path.join(tmpdir(), f"slots-{time.monotonic_ns()}")
        text = f'[server]\nmemory_budget_mb = {self.budget}\nslot_state_dir = "{self.root}"\n{extra_server}'
        for n, p in zip("abc", self.paths):
            text += target(n, p, extra_a if n == "a" else "")
        gw = serve_config(text)
        self.addCleanup(gw.stop)
        return gw

    def evict_a(self, gw):
        for name in ("b", "c"):
            self.assertEqual(turn(gw, name, FIRST, key=None)[1], 0)
        self.assertEqual(state(gw, "a"), "unloaded")
        self.assertIn("target 'a': saved 1 idle conversation for its next load", gw.text())

    def test_a_conversation_survives_an_eviction(self):
        # reference: a gateway that keeps a loaded between the turns
        ref = self.serve()
        answer1, _ = turn(ref, "a", FIRST)
        ref_answer2, ref_cached = turn(ref, "a", conversation(answer1))
        self.assertGreater(ref_cached, 0)
        ref.stop()
        # and no cache at all: a fresh gateway, no key
        fresh = self.serve()
        uncached_answer2, uncached = turn(fresh, "a", conversation(answer1), key=None)
        self.assertEqual(uncached, 0)
        fresh.stop()

        gw = self.serve()
        self.assertEqual(turn(gw, "a", FIRST)[0], answer1)
        self.evict_a(gw)
        self.assertEqual(len(slot_files(self.root)), 1)
        answer2, cached = turn(gw, "a", conversation(answer1))
        self.assertIn("target 'a': restored 1 saved conversation", gw.text())
        self.assertEqual(cached, ref_cached)  # all the history read before the eviction
        self.assertEqual(answer2, ref_answer2)
        self.assertEqual(answer2, uncached_answer2)
        self.assertEqual(slot_files(self.root), [])  # removed once restored
        self.assertEqual(gw.stop(), 0)
        self.assertEqual(os.listdir(self.root), [])  # the gateway's own directory goes with it

    def test_a_new_conversation_shares_a_restored_prefix(self):
        # issue 32: the prefix lives in a slot that came back from disk; another conversation (another
        # key) that starts with the same words reuses it, and answers as a fresh gateway does
        gw = self.serve()
        answer1, _ = turn(gw, "a", FIRST)
        self.evict_a(gw)
        answer, cached = turn(gw, "a", FIRST, key="conversation-2")
        self.assertIn("target 'a': restored 1 saved conversation", gw.text())
        self.assertGreater(cached, 0)
        self.assertEqual(answer, answer1)

    def test_slot_state_max_mb_0_saves_nothing(self):
        gw = self.serve(extra_server="slot_state_max_mb = 0\n")
        answer1, _ = turn(gw, "a", FIRST)
        for name in ("b", "c"):
            turn(gw, name, FIRST, key=None)
        self.assertEqual(state(gw, "a"), "unloaded")
        self.assertNotIn("saved 1 idle conversation", gw.text())
        self.assertEqual(slot_files(self.root), [])
        self.assertEqual(turn(gw, "a", conversation(answer1))[1], 0)

    def test_a_changed_model_file_restores_nothing(self):
        gw = self.serve()
        answer1, _ = turn(gw, "a", FIRST)
        self.evict_a(gw)
        st = os.stat(self.paths[0])
        os.utime(self.paths[0], ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # "a new file at the same path"
        _, cached = turn(gw, "a", conversation(answer1))
        self.assertEqual(cached, 0)
        self.assertNotIn("restored", gw.text())
        self.assertEqual(slot_files(self.root), [])  # the stale file is removed

    def test_a_damaged_file_restores_nothing(self):
        for damage in ("truncate", "flip"):
            gw = self.serve()
            answer1, _ = turn(gw, "a", FIRST)
            self.evict_a(gw)
            [path] = slot_files(self.root)
            with open(path, "r+b") as f:
                data = f.read()
                f.seek(0)
                if damage == "truncate":
                    f.truncate(len(data) // 2)
                else:  # the token count in the header: the sizes no longer add up
                    f.seek(16)
                    f.write(b"\xff\xff")
            _, cached = turn(gw, "a", conversation(answer1))
            self.assertEqual(cached, 0, damage)
            self.assertEqual(slot_files(self.root), [], damage)
            self.assertEqual(gw.stop(), 0)

    def test_a_keep_alive_unload_saves_too(self):
        gw = self.serve(extra_a="keep_alive = 1")
        answer1, _ = turn(gw, "a", FIRST)
        deadline = time.monotonic() + STATE_TIMEOUT_S
        while state(gw, "a") != "unloaded" and time.monotonic() < deadline:
            time.sleep(POLL_S)
        self.assertEqual(state(gw, "a"), "unloaded")
        _, cached = turn(gw, "a", conversation(answer1))
        self.assertGreater(cached, 0)
        self.assertEqual(models(gw)["a"]["sipp"]["loads"], 2)


if __name__ == "__main__":
    unittest.main()
