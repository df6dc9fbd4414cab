"""What coding agents send, against `sipp serve`: the captured request corpus of tests/fixtures/agents/
(the first request and the tool-result follow-up of Codex CLI (Responses), Claude Code (Messages)
and Qwen Code (chat completions), byte for byte, with
their headers and query strings) replayed on a 32k-context synthetic model with Qwen2.5's template;
prompt caching across the turns of one agent conversation; target aliases (globs) and a target's
max_tokens (the default and ceiling of a request's output, also `sipp serve --max-tokens`).

Each fixture names what `sipp-ignored` must list for it (`expect_ignored`); the test also checks that
list against docs/api-fields.md: every top-level field the table marks ignored is named, and no
top-level field the table honours is.
"""

import glob
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_api_fields as fields  # noqa: E402
import test_gateway_support as gw  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "agents")
MODEL = "qwen"
CTX = 32768
CAP = 8  # the target's max_tokens: agents send none (Codex) or 32000 (Claude Code)
HOP_HEADERS = {"host", "content-length", "connection", "accept-encoding", "transfer-encoding"}
GEN_PROMPT_SLACK = 16  # tokens after the shared prefix a new turn re-reads (the template's turn markers)
TIMEOUT_S = 600
ALIAS_TOKEN = "alias-scoped-secret-001"
ALL_TOKEN = "alias-all-secret-00001"
API_OF = {"/v1/responses": "responses", "/v1/messages": "messages", "/v1/chat/completions": "chat"}
AGENTS = ("codex", "claude-code", "qwen-code")


def fixtures():
    out = []
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*.json"))):
        with open(path, encoding="utf-8") as f:
            out.append((os.path.basename(path), json.load(f)))
    return out


def replay_headers(fx):
    return {k: v for k, v in fx["headers"].items() if k.lower() not in HOP_HEADERS}


def usage_of(api, events):
    """The final usage of a stream: (prompt tokens in all, cached)."""
    for event, data in reversed(events):
        d = json.loads(data) if data.startswith("{") else {}
        if api == "responses" and event in ("response.completed", "response.incomplete"):
            u = d["response"]["usage"]
            return u["input_tokens"], u["input_tokens_details"]["cached_tokens"]
        if api == "messages" and event == "message_delta":
            u = d["usage"]
            return u["input_tokens"] + u["cache_read_input_tokens"], u["cache_read_input_tokens"]
        if api == "chat" and d.get("usage"):
            u = d["usage"]
            return u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"]
    raise AssertionError(f"no usage in {[e for e, _ in events]}")


def qwen_model():
    return fields.make_model(os.path.join(gw.tmpdir(), "agents-qwen25.gguf"), "Qwen-Qwen2.5-7B-Instruct.jinja")


class AgentCorpusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = gw.serve_config(gw.local_target(MODEL, path=qwen_model(), parallel=1, ctx=CTX,
                                                 extra=f'max_tokens = {CAP}\naliases = ["gpt-5*"]\n'))
        cls.table = fields.read_table()

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def replay(self, fx):
        api = API_OF[fx["path"].split("?")[0]]
        conn, resp = self.gw.stream(fx["path"], fx["body"], headers=replay_headers(fx), timeout=TIMEOUT_S)
        try:
            body = resp.read().decode()
            self.assertEqual(resp.status, 200, body[:2000])
            ignored = [n.strip() for n in (resp.getheader("sipp-ignored") or "").split(",") if n.strip()]
        finally:
            conn.close()
        events = []
        for block in body.split("\n\n"):
            ev = [ln[7:] for ln in block.splitlines() if ln.startswith("event: ")]
            data = [ln[6:] for ln in block.splitlines() if ln.startswith("data: ")]
            if data:
                events.append((ev[0] if ev else "", "\n".join(data)))
        return api, ignored, events

    def test_the_corpus_has_every_agent_and_both_turns(self):
        names = [n for n, _ in fixtures()]
        for agent in AGENTS:
            self.assertTrue(any(n.startswith(agent) and "turn1" in n for n in names), agent)
            self.assertTrue(any(n.startswith(agent) and "tool-result" in n for n in names), agent)

    def test_every_captured_request_is_served(self):
        for name, fx in fixtures():
            with self.subTest(fixture=name):
                api, ignored, events = self.replay(fx)
                self.assertFalse([e for e, _ in events if e in ("error", "response.failed")], events[-3:])
                self.assertEqual(ignored, fx["expect_ignored"])
                decisions = {f: d for a, f, d, _ in self.table if a == api}
                for key in fx["body"]:
                    if decisions.get(key) == "ignored":
                        self.assertIn(key, ignored, f"the table ignores '{key}'")
                for n in ignored:
                    top = n.split("[")[0].split(".")[0]
                    if "[" not in n and "." not in n and n != "max_tokens":
                        self.assertEqual(decisions.get(top), "ignored", f"'{n}' is named but the table says "
                                                                        f"{decisions.get(top)}")
                prompt, _ = usage_of(api, events)
                self.assertGreater(prompt, 5000, "the agents' prompts are long")

    def test_the_second_turn_rereads_only_new_tokens(self):
        conversations = {}  # "codex-0.169.0-gpt55": its turns, the first first
        for name, fx in fixtures():
            conversations.setdefault(name.split("-turn")[0], []).append((name, fx))
        for conv, turns in sorted(conversations.items()):
            with self.subTest(conversation=conv):
                (_, first), (_, second) = sorted(turns, key=lambda t: "-turn1" not in t[0])
                api, _, ev1 = self.replay(first)
                prompt1, _ = usage_of(api, ev1)
                _, _, ev2 = self.replay(second)
                prompt2, cached2 = usage_of(api, ev2)
                self.assertGreater(prompt2, prompt1)
                self.assertGreaterEqual(cached2, prompt1 - GEN_PROMPT_SLACK,
                                        f"turn 2 re-read {prompt2 - cached2} of {prompt2} tokens")


class AliasesAndOutputCapTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cfg = (f'[[tokens]]\nenv = "SIPP_ALIAS_ALL"\ncaller = "all"\n\n'
               f'[[tokens]]\nenv = "SIPP_ALIAS_SCOPED"\ncaller = "scoped"\ntargets = ["other"]\n\n' +
               gw.local_target(MODEL, path=qwen_model(), parallel=1, ctx=2048,
                               extra='aliases = ["claude-*", "gpt-5*"]\nmax_tokens = 3\n') +
               gw.local_target("other", parallel=1, ctx=1024))
        cls.gw = gw.serve_config(cfg, env={"SIPP_ALIAS_ALL": ALL_TOKEN, "SIPP_ALIAS_SCOPED": ALIAS_TOKEN})
        cls.all = {"Authorization": f"Bearer {ALL_TOKEN}"}
        cls.scoped = {"Authorization": f"Bearer {ALIAS_TOKEN}"}

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def chat(self, headers=None, **kw):
        body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "ignore_eos": True, **kw}
        return self.gw.json("POST", "/v1/chat/completions", body, headers or self.all)

    def test_aliases_route_to_their_target(self):
        for name in ("claude-haiku-4-5-20251001", "gpt-5.5", "gpt-5"):
            st, _, b = self.chat(model=name)
            self.assertEqual(st, 200, b)
        st, _, b = self.gw.json("POST", "/v1/messages", {"model": "claude-sonnet-4-6", "max_tokens": 2, "messages": [
            {"role": "user", "content": "Hi"}]}, self.all)
        self.assertEqual(st, 200, b)
        st, _, b = self.chat(model="llama-3")
        self.assertEqual(st, 404, b)
        st, _, b = self.chat(model="gpt-4o")
        self.assertEqual(st, 404, b)

    def test_models_lists_a_target_once_with_its_aliases(self):
        st, _, b = self.gw.json("GET", "/v1/models", headers=self.all)
        self.assertEqual(st, 200)
        ids = [m["id"] for m in b["data"]]
        self.assertEqual(ids.count(MODEL), 1)
        self.assertEqual(next(m for m in b["data"] if m["id"] == MODEL)["aliases"], ["claude-*", "gpt-5*"])
        self.assertNotIn("aliases", next(m for m in b["data"] if m["id"] == "other"))
        # A token scoped to another target neither sees the aliases nor reaches the target through them.
        st, _, b = self.gw.json("GET", "/v1/models", headers=self.scoped)
        self.assertEqual([m["id"] for m in b["data"]], ["other"])
        st, _, b = self.chat(headers=self.scoped, model="gpt-5.5")
        self.assertEqual(st, 404, b)

    def test_max_tokens_is_the_default_and_the_ceiling(self):
        st, h, b = self.chat()
        self.assertEqual((st, b["usage"]["completion_tokens"]), (200, 3), b)
        self.assertIsNone(h.get("sipp-ignored"))
        st, h, b = self.chat(max_tokens=2)
        self.assertEqual((b["usage"]["completion_tokens"], h.get("sipp-ignored")), (2, None))
        st, h, b = self.chat(max_tokens=50)
        self.assertEqual((b["usage"]["completion_tokens"], h.get("sipp-ignored")), (3, "max_tokens"))
        st, h, b = self.chat(max_completion_tokens=50)
        self.assertEqual(h.get("sipp-ignored"), "max_completion_tokens")
        st, h, b = self.gw.json("POST", "/v1/responses", {"model": MODEL, "input": "Hi", "max_output_tokens": 50},
                                self.all)
        self.assertEqual((st, b["usage"]["output_tokens"] <= 3, h.get("sipp-ignored")), (200, True, "max_output_tokens"))
        st, h, b = self.gw.json("POST", "/api/chat", {"model": MODEL, "stream": False, "messages": [
            {"role": "user", "content": "Hi"}], "options": {"num_predict": 50}}, self.all)
        self.assertEqual((st, h.get("sipp-ignored")), (200, "options.num_predict"))
        st, h, b = self.gw.json("POST", "/v1/messages", {"model": MODEL, "max_tokens": 32000, "messages": [
            {"role": "user", "content": "Hi"}]}, self.all)
        self.assertEqual((st, h.get("sipp-ignored")), (200, "max_tokens"))
        self.assertLessEqual(b["usage"]["output_tokens"], 3)

    def test_config_errors_name_the_key(self):
        for extra, want in (('max_tokens = 0\n', "max_tokens"), ('aliases = "gpt-*"\n', "aliases"),
                            ('aliases = [""]\n', "aliases")):
            path = gw.write("bad-alias.toml", gw.local_target(MODEL, path=qwen_model(), extra=extra))
            r = subprocess.run([gw.SIPP, "serve", "--check", "--config", path], capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(want, r.stderr)

    def test_serve_max_tokens_flag(self):
        g = gw.serve_model(qwen_model(), "--max-tokens", "2")
        try:
            st, _, b = g.json("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                               "ignore_eos": True})
            self.assertEqual((st, b["usage"]["completion_tokens"]), (200, 2), b)
        finally:
            g.stop()
        path = gw.write("flag.toml", gw.local_target(MODEL, path=qwen_model()))
        r = subprocess.run([gw.SIPP, "serve", "--config", path, "--max-tokens", "2"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--max-tokens", r.stderr)


if __name__ == "__main__":
    unittest.main()
