"""Custom (freeform) tools whose grammar is enforced: a Lark grammar or a regex of a custom tool
(Responses' {"type": "custom", "format": {"type": "grammar", ...}}, chat completions'
{"type": "custom", "custom": {...}}) is converted to GBNF (src/chat/lark_gbnf.c) and constrains the
tool call's input (src/chat/custom_tools.h).

- A random-weight model (Qwen 2.5's vocabulary and template) forced to call a tool whose grammar is
  start: "yes" | "no" | "maybe" returns exactly one of the three, plain and streamed, greedy and
  sampled, on Responses and on chat completions (there with a regex).
- Codex's own apply_patch grammar (the captured request of tests/fixtures/agents) converts and
  constrains: a random model's call parses as a patch. The model is made with sipp-synth --favour
  (the escaped newline, "***", " End", " Patch" win wherever the grammar allows them, every other
  token is equally likely): without the grammar it writes newlines and nothing else, so the test fails
  on a server that does not enforce it; with it, every line ends and a patch closes.
- A construct outside the subset is a 400 naming the field and the construct.
"""

import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN_VOCAB = os.path.join(os.path.dirname(gw.VOCAB), "ggml-vocab-qwen2.gguf")
QWEN_TEMPLATE = os.path.join(os.path.dirname(gw.VOCAB), "..", "source", "models", "templates",
                             "Qwen-Qwen2.5-7B-Instruct.jinja")
CODEX_REQUEST = os.path.join(ROOT, "tests", "fixtures", "agents", "codex-0.169.0-gpt55-turn1.json")
YES_NO = 'start: "yes" | "no" | "maybe"'
ANSWERS = ("yes", "no", "maybe")
PROMPTS = ("Hello", "Is it raining?", "Pick one", "What now?")
# Codex's apply_patch grammar as a Python regular expression, to check what the model wrote.
LINE = r"[^\n]"
PATCH = re.compile(
    r"\*\*\* Begin Patch\n"
    r"(?:\*\*\* Add File: " + LINE + r"+\n(?:\+" + LINE + r"*\n)+"
    r"|\*\*\* Delete File: " + LINE + r"+\n"
    r"|\*\*\* Update File: " + LINE + r"+\n(?:\*\*\* Move to: " + LINE + r"+\n)?"
    r"(?:(?:(?:@@|@@ " + LINE + r"+)\n|[-+ ]" + LINE + r"*\n)+(?:\*\*\* End of File\n)?)?)+"
    r"\*\*\* End Patch\n?")


def synth(name, *extra):
    path = os.path.join(gw.tmpdir(), name)
    r = subprocess.run([gw.SYNTH, "--out", path, "--vocab", QWEN_VOCAB, "--chat-template-file", QWEN_TEMPLATE,
                        "--seed", "1", *gw.TINY, *extra], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return path


def codex_apply_patch():
    with open(CODEX_REQUEST) as f:
        body = json.load(f)["body"]
    return next(t for t in body["tools"] if t.get("name") == "apply_patch")


class CustomToolGrammarTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        gw.check_build()
        cls.gw = gw.serve_config(gw.local_target("qwen", path=synth("qwen-custom.gguf"), parallel=2, ctx=4096))

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    def responses(self, prompt, definition=YES_NO, syntax="lark", **kw):
        tool = {"type": "custom", "name": "answer", "description": "Answer the question.",
                "format": {"type": "grammar", "syntax": syntax, "definition": definition}}
        return {"model": "qwen", "input": prompt, "tools": [tool], "tool_choice": {"type": "custom", "name": "answer"},
                "parallel_tool_calls": False, "max_output_tokens": 400, **kw}

    def test_responses_answers_one_of_three(self):
        for prompt in PROMPTS:
            for temperature in (0, 1.0):
                with self.subTest(prompt=prompt, temperature=temperature):
                    status, headers, r = self.gw.json("POST", "/v1/responses",
                                                      self.responses(prompt, temperature=temperature))
                    self.assertEqual(status, 200, r)
                    self.assertIsNone(headers.get("sipp-ignored"), "the grammar is honoured, not ignored")
                    calls = [o for o in r["output"] if o["type"] == "custom_tool_call"]
                    self.assertEqual(len(calls), 1, r["output"])
                    self.assertIn(calls[0]["input"], ANSWERS)

    def test_responses_streamed_answer_is_one_of_three(self):
        _, _, events = self.gw.sse("/v1/responses", self.responses("Hello", temperature=0, stream=True))
        data = [json.loads(d) for _, d in events]
        done = next(d for d in data if d["type"] == "response.custom_tool_call_input.done")
        self.assertIn(done["input"], ANSWERS)
        _, _, plain = self.gw.json("POST", "/v1/responses", self.responses("Hello", temperature=0))
        self.assertEqual(done["input"], plain["output"][0]["input"], "streamed and plain agree (greedy)")

    def test_a_regex_format_constrains_too(self):
        status, _, r = self.gw.json("POST", "/v1/responses",
                                    self.responses("Your code?", definition=r"^[A-Z]{2}-\d{3}$", syntax="regex",
                                                   temperature=1.0))
        self.assertEqual(status, 200, r)
        self.assertRegex(r["output"][0]["input"], r"^[A-Z]{2}-\d{3}$")

    def test_chat_completions_custom_tool(self):
        tool = {"type": "custom", "custom": {"name": "answer", "format": {
            "type": "grammar", "grammar": {"syntax": "regex", "definition": "yes|no|maybe"}}}}
        for prompt in PROMPTS[:2]:
            body = {"model": "qwen", "messages": [{"role": "user", "content": prompt}], "tools": [tool],
                    "tool_choice": {"type": "custom", "custom": {"name": "answer"}}, "parallel_tool_calls": False,
                    "max_tokens": 400, "temperature": 1.0}
            status, _, r = self.gw.json("POST", "/v1/chat/completions", body)
            self.assertEqual(status, 200, r)
            call = r["choices"][0]["message"]["tool_calls"][0]
            self.assertEqual(call["function"]["name"], "answer")
            self.assertIn(json.loads(call["function"]["arguments"])["input"], ANSWERS)

    def test_a_remote_target_gets_a_function_and_the_grammar_is_named(self):
        """Through a remote target the grammar cannot be enforced: the upstream is sent a function of
        one string (an upstream need not know chat's custom tools) and sipp-ignored names the format;
        the call still comes back as a custom_tool_call."""
        front = gw.serve_config(f'[[targets]]\nname = "far"\ntype = "openai_compatible"\n'
                                f'base_url = "{self.gw.base}/v1"\nmodel = "qwen"\n')
        try:
            status, headers, r = front.json("POST", "/v1/responses", dict(self.responses("Hello", temperature=0),
                                                                          model="far"))
            self.assertEqual(status, 200, r)
            self.assertEqual(headers.get("sipp-ignored"), "tools[0].format")
            calls = [o for o in r["output"] if o["type"] == "custom_tool_call"]
            self.assertEqual([c["name"] for c in calls], ["answer"], r["output"])
            self.assertIsInstance(calls[0]["input"], str)
        finally:
            front.stop()

    def test_outside_the_subset_is_a_400_naming_it(self):
        for definition, syntax, words in (
                ('start: WS "a"\n%import common.WS\n%ignore WS\n', "lark", ("'tools[0].format.definition'",
                                                                            "line 3: '%ignore'")),
                ("start: other\n", "lark", ("'other' is used but not defined",)),
                ("a(?=b)", "regex", ("'(?='",)),
                ("yes", "peg", ("'tools[0].format.syntax'",))):
            with self.subTest(definition=definition):
                status, _, e = self.gw.json("POST", "/v1/responses", self.responses("Hi", definition, syntax))
                self.assertEqual(status, 400, e)
                for w in words:
                    self.assertIn(w, e["error"]["message"])


class CodexApplyPatchTest(unittest.TestCase):
    """Codex's captured apply_patch grammar on a model that ends lines where the grammar lets it."""

    @classmethod
    def setUpClass(cls):
        gw.check_build()
        path = synth("qwen-favour.gguf", "--favour", "\\n", "--favour", "***", "--favour", "\u0120End",
                     "--favour", "\u0120Patch")
        cls.gw = gw.serve_config(gw.local_target("qwen", path=path, parallel=2, ctx=4096))

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        assert rc == 0, f"sipp serve exited with {rc}:\n{cls.gw.text()}"

    def test_the_captured_grammar_makes_a_patch(self):
        tool = codex_apply_patch()
        self.assertEqual(tool["format"]["syntax"], "lark")
        for prompt in ("Add a file hello.txt", "Fix the bug", "x"):
            for temperature in (0, 0.7):
                with self.subTest(prompt=prompt, temperature=temperature):
                    body = {"model": "qwen", "input": prompt, "tools": [tool], "parallel_tool_calls": False,
                            "tool_choice": {"type": "custom", "name": "apply_patch"}, "max_output_tokens": 600,
                            "temperature": temperature}
                    status, _, r = self.gw.json("POST", "/v1/responses", body)
                    self.assertEqual(status, 200, r)
                    self.assertEqual(r["status"], "completed", r["output"])
                    patch = r["output"][0]["input"]
                    self.assertTrue(patch.startswith("*** Begin Patch\n"), patch)
                    self.assertEqual(patch.rstrip("\n").rsplit("\n", 1)[-1], "*** End Patch", patch)
                    self.assertRegex(patch, PATCH)
                    self.assertIsNotNone(PATCH.fullmatch(patch), patch)

    def test_without_the_grammar_the_model_writes_no_patch(self):
        """The same model and tool with the format left out: only newlines, the test above can fail."""
        tool = {k: v for k, v in codex_apply_patch().items() if k != "format"}
        body = {"model": "qwen", "input": "Fix the bug", "tools": [tool], "parallel_tool_calls": False,
                "tool_choice": {"type": "custom", "name": "apply_patch"}, "max_output_tokens": 60, "temperature": 0}
        status, _, r = self.gw.json("POST", "/v1/responses", body)
        self.assertEqual(status, 200, r)
        self.assertIsNone(PATCH.fullmatch(r["output"][0].get("input", "")), r["output"])


if __name__ == "__main__":
    unittest.main()
