"""Tool calling, structured output, reasoning, logprobs and n on /v1/chat/completions and
/v1/completions, through llama.cpp's chat library with the real templates of the pinned tree.

The models are tiny synthetic ones with random weights, real vocabularies and real Jinja templates
(sipp-synth --chat-template-file with the bundle's models/templates/*.jinja). A random model writes
anything it is allowed to: under tool_choice "required" or a named function, or under a JSON
schema, its answer can only parse and validate when the grammar really constrains it. Schemas use
enums, bounded integers and booleans only, so the answer has a bounded length.
"""

import json
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import test_gateway_support as gw  # noqa: E402

TEMPLATES = os.path.abspath(os.path.join(gw.BUILD, "llama", "source", "models", "templates"))
VOCABS = os.path.abspath(os.path.join(gw.BUILD, "llama", "vocab"))
MAX_TOKENS = 600  # a bounded schema's answer, with the grammar's whitespace, fits well within this

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "metric": {"type": "boolean"},
    },
    "required": ["city", "days", "metric"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast",
                                      "parameters": WEATHER_SCHEMA}},
    {"type": "function", "function": {"name": "get_time", "description": "Local time",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "enum": ["Paris", "Rome"]}},
                                          "required": ["city"], "additionalProperties": False}}},
]
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def synth(name, vocab, template=None):
    path = os.path.join(gw.tmpdir(), f"{name}.gguf")
    if not os.path.exists(path):
        args = [gw.SYNTH, "--out", path, "--vocab", os.path.join(VOCABS, f"ggml-vocab-{vocab}.gguf"), *gw.TINY]
        args += ["--chat-template-file", os.path.join(TEMPLATES, template)] if template else ["--chat-template", "none"]
        r = gw.subprocess.run(args, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"sipp-synth failed: {r.stderr}")
    return path


def validate(schema, value, where="arguments"):
    """The subset of JSON Schema the tests use: object, enum, bounded integer, boolean."""
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
        return
    t = schema["type"]
    if t == "object":
        assert isinstance(value, dict), f"{where}: {value!r} is not an object"
        for k in schema.get("required", []):
            assert k in value, f"{where}: '{k}' is missing from {value}"
        if schema.get("additionalProperties") is False:
            assert set(value) <= set(schema["properties"]), f"{where}: extra keys in {value}"
        for k, v in value.items():
            validate(schema["properties"][k], v, f"{where}.{k}")
    elif t == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), f"{where}: {value!r} is not an integer"
        assert schema.get("minimum", value) <= value <= schema.get("maximum", value), f"{where}: {value} out of range"
    elif t == "boolean":
        assert isinstance(value, bool), f"{where}: {value!r} is not a boolean"
    elif t == "string":
        assert isinstance(value, str), f"{where}: {value!r} is not a string"


def run_all(fn, args):
    """fn(*a) for each a on threads of their own (the target's slots decode them together)."""
    results, errors = [None] * len(args), []

    def one(i, a):
        try:
            results[i] = fn(*a)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i, a)) for i, a in enumerate(args)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(gw.HTTP_TIMEOUT_S * 4)
    if errors:
        raise errors[0]
    return results


class ChatToolsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        gw.check_build()
        cls.models = {
            "qwen": synth("qwen25", "qwen2", "Qwen-Qwen2.5-7B-Instruct.jinja"),
            "hermes": synth("hermes3", "llama-bpe", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"),
            "llama31": synth("llama31", "llama-bpe", "meta-llama-Llama-3.1-8B-Instruct.jinja"),
            # its generation prompt opens the thinking block ("<think>\n"), so a random model is in it
            "r1": synth("r1", "llama-bpe", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"),
            "plain": synth("plain", "llama-bpe"),
        }
        config = "".join(gw.local_target(name, path, parallel=4, ctx=8192) for name, path in cls.models.items())
        config += gw.local_target("badtemplate", cls.models["plain"], parallel=1, ctx=1024,
                                  extra='chat_template = "/nonexistent/template.jinja"')
        cls.gw = gw.serve_config(config)

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def chat(self, **body):
        status, _, out = self.gw.json("POST", "/v1/chat/completions", body, timeout=gw.HTTP_TIMEOUT_S * 4)
        self.assertEqual(status, 200, out)
        return out

    def assertBadRequest(self, body, needle, path="/v1/chat/completions"):
        status, _, out = self.gw.json("POST", path, body)
        self.assertEqual(status, 400, out)
        self.assertIn(needle, out["error"]["message"])

    def assertToolCall(self, out, name):
        choice = out["choices"][0]
        calls = choice["message"].get("tool_calls")
        self.assertTrue(calls, f"no tool call: {choice}")
        self.assertEqual(len(calls), 1, "parallel_tool_calls is false: one call")
        self.assertEqual(choice["finish_reason"], "tool_calls", choice)
        call = calls[0]
        self.assertTrue(call["id"].startswith("call_"), call)
        self.assertEqual(call["type"], "function")
        self.assertEqual(call["function"]["name"], name)
        args = json.loads(call["function"]["arguments"])
        tool = next(t for t in TOOLS if t["function"]["name"] == name)
        validate(tool["function"]["parameters"], args)
        return args

    # ---- tools ----------------------------------------------------------------------------------

    def test_required_tool_choice_always_calls_a_valid_tool(self):
        cases = [(m, seed) for m in ("qwen", "hermes", "llama31") for seed in (1, 2)]

        def one(m, seed):
            return m, self.chat(model=m, messages=MESSAGES, tools=TOOLS, tool_choice="required", seed=seed,
                                temperature=1.0, max_tokens=MAX_TOKENS)

        for m, out in run_all(one, cases):
            with self.subTest(model=m):
                call = out["choices"][0]["message"]["tool_calls"][0]
                self.assertToolCall(out, call["function"]["name"])

    def test_a_named_function_is_the_one_called(self):
        cases = [(m, name) for m in ("qwen", "hermes", "llama31") for name in ("get_weather", "get_time")]

        def one(m, name):
            return m, name, self.chat(model=m, messages=MESSAGES, tools=TOOLS, seed=7, temperature=1.0,
                                      tool_choice={"type": "function", "function": {"name": name}},
                                      max_tokens=MAX_TOKENS)

        for m, name, out in run_all(one, cases):
            with self.subTest(model=m, name=name):
                self.assertToolCall(out, name)

    def test_streamed_tool_call_deltas_reassemble_to_the_whole(self):
        body = dict(model="qwen", messages=MESSAGES, tools=TOOLS, tool_choice="required", temperature=0,
                    max_tokens=MAX_TOKENS)
        whole = self.chat(**body)
        events = self.gw.sse("/v1/chat/completions", dict(body, stream=True))[2]
        calls, finish, content = {}, None, ""
        for _, data in events:
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            for choice in chunk["choices"]:
                delta = choice["delta"]
                content += delta.get("content") or ""
                finish = choice["finish_reason"] or finish
                for tc in delta.get("tool_calls") or []:
                    c = calls.setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
                    if "id" in tc:
                        self.assertIsNone(c["id"], "the id comes once, in the call's first delta")
                        c["id"] = tc["id"]
                        c["name"] = tc["function"]["name"]
                    c["arguments"] += tc.get("function", {}).get("arguments", "")
        want = whole["choices"][0]["message"]["tool_calls"]
        self.assertEqual(len(calls), len(want))
        self.assertEqual(finish, whole["choices"][0]["finish_reason"])
        self.assertEqual(content, whole["choices"][0]["message"]["content"])
        for i, w in enumerate(want):
            self.assertTrue(calls[i]["id"].startswith("call_"))
            self.assertEqual(calls[i]["name"], w["function"]["name"])
            self.assertEqual(calls[i]["arguments"], w["function"]["arguments"])

    def test_tool_history_renders_through_the_template(self):
        messages = MESSAGES + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_abc", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 2, "metric": true}'}}]},
            {"role": "tool", "tool_call_id": "call_abc", "content": "sunny, 21 C"},
        ]
        short = self.chat(model="hermes", messages=MESSAGES, tools=TOOLS, max_tokens=1, temperature=0)
        long = self.chat(model="hermes", messages=messages, tools=TOOLS, max_tokens=1, temperature=0)
        self.assertGreater(long["usage"]["prompt_tokens"], short["usage"]["prompt_tokens"] + 10)

    def test_tool_choice_none_answers_in_prose(self):
        out = self.chat(model="qwen", messages=MESSAGES, tools=TOOLS, tool_choice="none", max_tokens=8,
                        temperature=0)
        self.assertNotIn("tool_calls", out["choices"][0]["message"])
        self.assertEqual(out["choices"][0]["finish_reason"], "length")

    # ---- structured output ----------------------------------------------------------------------

    def test_json_schema_answers_validate(self):
        fmt = {"type": "json_schema", "json_schema": {"name": "weather", "schema": WEATHER_SCHEMA, "strict": True}}

        def one(seed):
            return self.chat(model="qwen", messages=MESSAGES, response_format=fmt, seed=seed, temperature=1.0,
                             max_tokens=MAX_TOKENS)

        for out in run_all(one, [(s,) for s in (1, 2, 3)]):
            self.assertEqual(out["choices"][0]["finish_reason"], "stop", out)
            validate(WEATHER_SCHEMA, json.loads(out["choices"][0]["message"]["content"]))

    def test_json_object_and_completions_json_schema(self):
        out = self.chat(model="llama31", messages=MESSAGES, response_format={"type": "json_object"}, seed=4,
                        temperature=1.0, max_tokens=MAX_TOKENS)
        if out["choices"][0]["finish_reason"] == "stop":
            self.assertIsInstance(json.loads(out["choices"][0]["message"]["content"]), dict)
        status, _, out = self.gw.json("POST", "/v1/completions", {
            "model": "qwen", "prompt": "Weather:", "json_schema": WEATHER_SCHEMA, "seed": 5, "temperature": 1.0,
            "max_tokens": MAX_TOKENS}, timeout=gw.HTTP_TIMEOUT_S * 4)
        self.assertEqual(status, 200, out)
        validate(WEATHER_SCHEMA, json.loads(out["choices"][0]["text"]))

    def test_a_gbnf_grammar_constrains_the_answer(self):
        out = self.chat(model="qwen", messages=MESSAGES, grammar='root ::= ("yes" | "no") "."', seed=3,
                        temperature=1.0, max_tokens=20)
        self.assertIn(out["choices"][0]["message"]["content"], ("yes.", "no."))

    # ---- reasoning ------------------------------------------------------------------------------

    def test_a_thinking_budget_ends_the_reasoning(self):
        out = self.chat(model="r1", messages=MESSAGES, thinking_budget_tokens=4, ignore_eos=True,
                        max_tokens=40, seed=1, temperature=1.0, logprobs=True)
        msg = out["choices"][0]["message"]
        self.assertIn("reasoning_content", msg, msg)
        self.assertNotIn("</think>", msg["content"])
        # the budget: at most 4 tokens of reasoning, then the end tag is forced
        entries = out["choices"][0]["logprobs"]["content"]
        text = ""
        for i, e in enumerate(entries):
            text += e["token"]
            if "</think>" in text:
                break
        self.assertIn("</think>", text)
        self.assertLessEqual(i, 4 + len("</think>"), [e["token"] for e in entries[:i + 1]])
        plain = self.chat(model="r1", messages=MESSAGES, ignore_eos=True, max_tokens=40, seed=1, temperature=1.0)
        self.assertEqual(plain["choices"][0]["message"]["content"], "", "without a budget a random model does "
                         "not close its thinking block: the budget did it")
        self.assertNotEqual(msg["content"], "")

    def test_reasoning_format_none_leaves_the_tags_in_content(self):
        out = self.chat(model="r1", messages=MESSAGES, thinking_budget_tokens=2, ignore_eos=True,
                        max_tokens=12, seed=1, temperature=1.0, reasoning_format="none")
        self.assertNotIn("reasoning_content", out["choices"][0]["message"])
        self.assertIn("</think>", out["choices"][0]["message"]["content"])

    # ---- logprobs -------------------------------------------------------------------------------

    def test_logprobs_come_from_the_sampled_distribution(self):
        out = self.chat(model="qwen", messages=MESSAGES, logprobs=True, top_logprobs=3, max_tokens=6, temperature=0)
        entries = out["choices"][0]["logprobs"]["content"]
        self.assertEqual(len(entries), out["usage"]["completion_tokens"])
        text = ""
        for e in entries:
            self.assertLessEqual(e["logprob"], 0.0)
            self.assertEqual(len(e["top_logprobs"]), 3)
            lps = [t["logprob"] for t in e["top_logprobs"]]
            self.assertEqual(lps, sorted(lps, reverse=True))
            # greedy: the chosen token is the most likely one
            self.assertEqual(e["token"], e["top_logprobs"][0]["token"])
            self.assertAlmostEqual(e["logprob"], lps[0], places=4)
            self.assertEqual(bytes(e["bytes"]).decode("utf-8", "replace"), e["token"])
            text += e["token"]
        self.assertEqual(text, out["choices"][0]["message"]["content"])
        # streamed: the same entries, spread over the chunks
        streamed = []
        for _, data in self.gw.sse("/v1/chat/completions", dict(model="qwen", messages=MESSAGES, logprobs=True,
                                                                 top_logprobs=3, max_tokens=6, temperature=0,
                                                                 stream=True))[2]:
            if data == "[DONE]":
                break
            for choice in json.loads(data)["choices"]:
                if choice.get("logprobs"):
                    streamed += choice["logprobs"]["content"]
        self.assertEqual([e["token"] for e in streamed], [e["token"] for e in entries])

    def test_logprobs_under_a_grammar_cover_allowed_tokens_only(self):
        out = self.chat(model="qwen", messages=MESSAGES, grammar='root ::= "yes" | "no"', logprobs=True,
                        top_logprobs=5, max_tokens=4, temperature=0)
        first = out["choices"][0]["logprobs"]["content"][0]
        for alt in first["top_logprobs"]:
            self.assertTrue("yes".startswith(alt["token"]) or "no".startswith(alt["token"]), alt)

    def test_completions_logprobs(self):
        status, _, out = self.gw.json("POST", "/v1/completions", {"model": "qwen", "prompt": "Hi", "max_tokens": 4,
                                                                   "logprobs": 2, "temperature": 0})
        self.assertEqual(status, 200, out)
        lp = out["choices"][0]["logprobs"]
        self.assertEqual(len(lp["tokens"]), len(lp["token_logprobs"]))
        self.assertEqual(len(lp["top_logprobs"][0]), 2)

    # ---- n --------------------------------------------------------------------------------------

    def test_n_choices_share_the_prompt(self):
        out = self.chat(model="qwen", messages=MESSAGES, n=3, max_tokens=5, seed=11, temperature=1.0)
        self.assertEqual([c["index"] for c in out["choices"]], [0, 1, 2])
        self.assertEqual(out["usage"]["completion_tokens"], 15)
        texts = {c["message"]["content"] for c in out["choices"]}
        self.assertGreater(len(texts), 1, "the choices draw with different seeds")
        events = self.gw.sse("/v1/chat/completions", dict(model="qwen", messages=MESSAGES, n=2, max_tokens=3,
                                                           stream=True))[2]
        finished = {json.loads(d)["choices"][0]["index"] for _, d in events
                    if d != "[DONE]" and json.loads(d)["choices"][0]["finish_reason"]}
        self.assertEqual(finished, {0, 1})

    def test_n_choices_read_a_cold_prompt_once(self):
        """n choices of a prompt no slot holds yet: the first slot reads it, the others wait and share
        its cells, so all but one choice count it as cached; greedy, each equals the single answer."""
        cold = [{"role": "user", "content": f"cold {time.monotonic_ns()} " + "lighthouse keeper " * 120}]
        def cached():
            return gw.metric(self.gw.metrics(), "sipp_cached_tokens_total", target="qwen") or 0
        before = cached()
        out = self.chat(model="qwen", messages=cold, n=3, max_tokens=4, temperature=0)
        prompt = out["usage"]["prompt_tokens"]
        self.assertGreaterEqual(cached() - before, 2 * (prompt - 1), f"prompt of {prompt} tokens read more than once")
        one = self.chat(model="qwen", messages=cold, max_tokens=4, temperature=0)["choices"][0]["message"]["content"]
        # The first greedy token comes from the shared prompt's logits, the same for every choice. Later
        # tokens decode as rows of one batch: on some CPUs (an Intel Xeon with AMX) a row's logits
        # differ in the last bits from the same row decoded alone, and a random-weight model's near
        # ties can then go either way, so only the start of each answer is the single answer's.
        first = [c["message"]["content"] for c in out["choices"]]
        self.assertTrue(all(os.path.commonprefix([t, one]) for t in first), (first, one))

    # ---- what a model without a template does ---------------------------------------------------

    def test_a_model_without_a_template_falls_back_to_chatml_and_says_so(self):
        out = self.chat(model="plain", messages=MESSAGES, max_tokens=2)
        self.assertIn("ChatML", out["usage"]["sipp"]["warning"])
        status, _, models = self.gw.json("GET", "/v1/models")
        meta = {m["id"]: m.get("meta", {}).get("chat_template") for m in models["data"]}
        self.assertEqual(meta["plain"], "chatml (fallback)")
        self.assertEqual(meta["qwen"], "model")

    # ---- bad input: a 400 naming the problem, and the slot still serves -------------------------

    def test_bad_input_is_a_400_naming_it_and_the_slot_stays_usable(self):
        bad_tool = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "x": {"type": "number", "multipleOf": 3}}}}}]
        cases = [
            (dict(model="qwen", messages=MESSAGES, tools=[{"type": "function", "function": {"parameters": {}}}]),
             "tools[0].function.name"),
            (dict(model="qwen", messages=MESSAGES, tools=bad_tool), "multipleOf"),
            (dict(model="qwen", messages=MESSAGES, tools=TOOLS,
                  tool_choice={"type": "function", "function": {"name": "launch"}}), "'launch'"),
            (dict(model="qwen", messages=MESSAGES, n=5), "'n'"),
            (dict(model="qwen", messages=MESSAGES, grammar="root ::= (("), "grammar"),
            (dict(model="badtemplate", messages=MESSAGES), "/nonexistent/template.jinja"),
            (dict(model="qwen", messages=MESSAGES, response_format={"type": "json_schema", "json_schema": {
                "name": "x", "schema": {"type": "string", "pattern": "a+"}}}), "pattern"),
            (dict(model="qwen", messages=MESSAGES, tools=TOOLS, grammar='root ::= "x"'), "grammar"),
            (dict(model="qwen", messages=MESSAGES, top_logprobs=2), "top_logprobs"),
            (dict(model="qwen", messages=MESSAGES, thinking_budget_tokens=5), "thinking_budget_tokens"),
            (dict(model="plain", messages=MESSAGES, tools=TOOLS), "'tools'"),
        ]
        for body, needle in cases:
            with self.subTest(needle=needle):
                self.assertBadRequest(body, needle)
        out = self.chat(model="qwen", messages=MESSAGES, max_tokens=3)
        self.assertEqual(out["choices"][0]["finish_reason"], "length")


class FieldTableTest(unittest.TestCase):
    """Every row of the field table (request_parse.c, docs/gateway.md): supported fields work,
    ignored ones are accepted, refused ones are a 400 naming them, unknown ones too."""

    @classmethod
    def setUpClass(cls):
        gw.check_build()
        cls.gw = gw.serve_model(gw.model(), "--parallel", "2")
        cls.name = os.path.basename(gw.model())[:-len(".gguf")]

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()

    def body(self, **kw):
        return dict({"model": self.name, "messages": MESSAGES, "max_tokens": 2, "temperature": 0}, **kw)

    def post(self, body, path="/v1/chat/completions"):
        status, _, out = self.gw.json("POST", path, body)
        return status, out

    def test_supported_fields(self):
        fields = {"top_p": 0.9, "top_k": 5, "min_p": 0.1, "repeat_penalty": 1.1, "presence_penalty": 0.5,
                  "frequency_penalty": 0.5, "seed": 3, "stop": ["x"], "ignore_eos": True, "context_key": "k",
                  "n": 1, "logprobs": False, "parallel_tool_calls": False, "reasoning_format": "auto",
                  "chat_template_kwargs": {"enable_thinking": False}, "reasoning_effort": "low",
                  "max_completion_tokens": 2, "stream_options": {"include_usage": True}, "stream": False,
                  "response_format": {"type": "text"}}
        for k, v in fields.items():
            with self.subTest(field=k):
                status, out = self.post(self.body(**{k: v}))
                self.assertEqual(status, 200, out)

    def test_ignored_fields_are_accepted(self):
        for k, v in {"user": "u1", "metadata": {"a": "b"}, "store": False, "service_tier": "auto",
                     "safety_identifier": "s", "prompt_cache_key": "p", "cache_prompt": True, "verbosity": "low"}.items():
            with self.subTest(field=k):
                status, out = self.post(self.body(**{k: v}))
                self.assertEqual(status, 200, out)

    def test_refused_fields_are_named(self):
        for k, v in {"logit_bias": {"1": 2}, "modalities": ["text", "audio"], "audio": {"voice": "x"},
                     "prediction": {"type": "content", "content": "x"}, "web_search_options": {},
                     "functions": [], "function_call": "auto", "mirostat": 2,
                     "chat_template": "/etc/passwd"}.items():
            with self.subTest(field=k):
                status, out = self.post(self.body(**{k: v}))
                self.assertEqual(status, 400, out)
                self.assertIn(f"'{k}'", out["error"]["message"])
        for k, v in {"echo": True, "suffix": "x", "best_of": 2}.items():
            with self.subTest(field=k):
                status, out = self.post({"model": self.name, "prompt": "hi", "max_tokens": 2, k: v}, "/v1/completions")
                self.assertEqual(status, 400, out)
                self.assertIn(f"'{k}'", out["error"]["message"])
        status, out = self.post({"model": self.name, "input": "x", "dimensions": 8}, "/v1/embeddings")
        self.assertEqual(status, 400, out)
        self.assertIn("'dimensions'", out["error"]["message"])

    def test_fields_of_another_route_are_named(self):
        status, out = self.post({"model": self.name, "prompt": "hi", "tools": TOOLS}, "/v1/completions")
        self.assertEqual(status, 400, out)
        self.assertIn("'tools'", out["error"]["message"])


if __name__ == "__main__":
    unittest.main()
