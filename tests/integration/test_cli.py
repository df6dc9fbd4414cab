"""The sipp CLI end to end, on tiny synthetic models (random weights, real tokenizers).

What a user relies on: reproducible output for a seed, --max-tokens and --stop doing what they say,
one JSON object of stats on stderr, --chat with the model's template, and on bad input exactly one
line "sipp: ..." on stderr naming the input, exit status 2 for bad usage and 1 for runtime failures,
and never a crash. A valgrind pass checks that neither the error paths nor a short run leak.

The models use GPT-2's tokenizer (50k tokens): a real BPE vocabulary that loads in half the time of
the 128k-token llama-bpe one, which keeps the file well inside its time budget.

Every run uses --threads 1: the test machines are small and shared, and ggml crawls when its threads
outnumber the cores.
"""
import glob
import json
import os
import shutil
import subprocess
import tempfile
import unittest

BUILD = os.environ.get("SIPP_BUILD", "build")
SIPP = os.path.join(BUILD, "bin", "sipp")
SYNTH = os.path.join(BUILD, "bin", "sipp-synth")
LLAMA_COMMIT = "80fb11ac73e66d89eae2c6a91d8a77428fa733ed"
SUPPRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "valgrind.supp")
RUN_TIMEOUT_S = 60
VALGRIND_TIMEOUT_S = 100
BACKEND_NAMES = {"cpu", "cuda", "metal", "vulkan", "webgpu", "rpc"}
# A llama.cpp assertion prints a gdb backtrace by default: slow, and it lands on stdout. A crash is
# still seen as a death by signal.
ENV = dict(os.environ, GGML_NO_BACKTRACE="1")
STATS_KEYS = ("prompt_tokens", "generated_tokens", "load_ms", "ttft_ms", "prefill_tokens_per_s",
              "decode_tokens_per_s", "backend", "backend_reason", "devices", "gpu_layers")


def vocab(name):
    # llama.cpp is laid out once under build/ even when SIPP_BUILD names another (sanitizer) tree.
    for root in (BUILD, "build"):
        path = os.path.join(root, "llama", "vocab", "ggml-vocab-%s.gguf" % name)
        if os.path.exists(path):
            return path
    raise unittest.SkipTest("vocabulary %s not found; run make" % name)


TINY_SHAPE = ["--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128",
              "--type", "q8_0", "--seed", "1"]


def synth(out, vocab_name, *extra):
    proc = subprocess.run([SYNTH, "--out", out, "--vocab", vocab(vocab_name)] + TINY_SHAPE + list(extra),
                          capture_output=True, timeout=RUN_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError("sipp-synth failed (%d): %s" % (proc.returncode, proc.stderr.decode(errors="replace")))
    return out


def run(*args, threads=True, timeout=RUN_TIMEOUT_S):
    """Runs sipp; stdout stays bytes (it is model text), stderr is decoded."""
    argv = [SIPP] + list(args) + (["--threads", "1"] if threads else [])
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=ENV)
    proc.err = proc.stderr.decode("utf-8", "replace")
    return proc


def describe(proc):
    return "rc %d\nstdout: %r\nstderr: %s" % (proc.returncode, proc.stdout[:400], proc.err[-2000:])


def stats_of(proc):
    lines = proc.err.strip("\n").split("\n")
    return json.loads(lines[-1])


class SippCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in (SIPP, SYNTH):
            if not os.access(tool, os.X_OK):
                raise unittest.SkipTest("%s is not built (make all)" % tool)
        cls.tmp = tempfile.mkdtemp(prefix="sipp-cli-test-")
        cls.model = synth(os.path.join(cls.tmp, "chatml.gguf"), "gpt-2", "--chat-template", "chatml")
        cls.plain = synth(os.path.join(cls.tmp, "plain.gguf"), "gpt-2", "--chat-template", "none")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def assertRan(self, proc):
        self.assertGreaterEqual(proc.returncode, 0, "killed by signal %d; %s" % (-proc.returncode, describe(proc)))
        self.assertEqual(proc.returncode, 0, describe(proc))

    def generate(self, *args):
        proc = run(self.model, *args)
        self.assertRan(proc)
        return proc

    # ---- sampling ---------------------------------------------------------------------------------

    def test_greedy_is_deterministic(self):
        args = ("Once upon a time", "--temperature", "0", "--seed", "1", "--max-tokens", "16", "--ignore-eos")
        a, b = self.generate(*args), self.generate(*args)
        self.assertTrue(a.stdout.strip(), "no text generated")
        self.assertEqual(a.stdout, b.stdout)
        # Greedy ignores the seed.
        c = self.generate("Once upon a time", "--temperature", "0", "--seed", "999", "--max-tokens", "16",
                          "--ignore-eos")
        self.assertEqual(a.stdout, c.stdout)

    def test_seeded_sampling_is_reproducible(self):
        def sample(seed):
            return self.generate("The weather today", "--temperature", "0.8", "--seed", str(seed), "--max-tokens",
                                 "16", "--ignore-eos").stdout
        first = sample(42)
        self.assertEqual(first, sample(42), "same seed, same output")
        others = [sample(s) for s in (1, 2, 3)]
        self.assertTrue(any(o != first for o in others), "three other seeds all gave the output of seed 42")

    def test_max_tokens_gives_length(self):
        proc = self.generate("Count:", "--max-tokens", "7", "--ignore-eos", "--temperature", "0", "--stats", "json")
        stats = stats_of(proc)
        self.assertEqual(stats["generated_tokens"], 7, stats)
        self.assertEqual(stats["finish_reason"], "length", stats)

    def test_stop_string(self):
        base = ("A list of things:", "--temperature", "0", "--max-tokens", "32", "--ignore-eos")
        full = self.generate(*base).stdout
        text = full.decode("utf-8", "surrogateescape")
        # A few characters from the middle that are printable, valid UTF-8 and not only whitespace.
        stop = None
        for start in list(range(len(text) // 2, len(text) - 3)) + list(range(1, len(text) // 2)):
            cand = text[start:start + 3]
            if cand.strip() and all(not 0xDC80 <= ord(ch) <= 0xDCFF and ch.isprintable() for ch in cand):
                stop = cand
                break
        self.assertIsNotNone(stop, "no usable stop string in %r" % text)
        stop_bytes = stop.encode("utf-8")
        prefix = full[:full.find(stop_bytes)]
        proc = self.generate(*base, "--stop", stop, "--stats", "json")
        want = prefix + (b"\n" if prefix and not prefix.endswith(b"\n") else b"")
        self.assertEqual(proc.stdout, want, "stop %r in %r" % (stop, text))
        self.assertNotIn(stop_bytes, proc.stdout)
        stats = stats_of(proc)
        self.assertEqual(stats["finish_reason"], "stop", stats)
        self.assertLess(stats["generated_tokens"], 32, stats)

    # ---- stats ------------------------------------------------------------------------------------

    def test_stats_json(self):
        proc = self.generate("Hello", "--max-tokens", "4", "--ignore-eos", "--stats", "json")
        stats = stats_of(proc)
        for key in STATS_KEYS:
            self.assertIn(key, stats)
        for key in ("prompt_tokens", "generated_tokens", "gpu_layers"):
            self.assertIsInstance(stats[key], int, key)
        for key in ("load_ms", "ttft_ms", "prefill_tokens_per_s", "decode_tokens_per_s"):
            self.assertIsInstance(stats[key], (int, float), key)
            self.assertGreaterEqual(stats[key], 0, key)
        self.assertGreater(stats["prompt_tokens"], 0)
        self.assertEqual(stats["generated_tokens"], 4)
        self.assertGreater(stats["load_ms"], 0)
        self.assertGreater(stats["ttft_ms"], 0)
        self.assertIn(stats["backend"], BACKEND_NAMES)
        self.assertTrue(stats["backend_reason"])
        self.assertTrue(stats["devices"])
        self.assertGreaterEqual(stats["gpu_layers"], 0)
        self.assertNotIn(b"prompt_tokens", proc.stdout, "stats go to stderr only")

    def test_stats_json_explicit_cpu(self):
        stats = stats_of(self.generate("Hello", "--max-tokens", "2", "--backend", "cpu", "--stats", "json"))
        self.assertEqual(stats["backend"], "cpu")
        self.assertEqual(stats["devices"], "CPU")
        self.assertEqual(stats["gpu_layers"], 0)
        self.assertIn("cpu", stats["backend_reason"])

    # ---- chat -------------------------------------------------------------------------------------

    def test_chat_with_system(self):
        common = ("--temperature", "0", "--max-tokens", "6", "--ignore-eos", "--stats", "json")
        plain = stats_of(self.generate("hi", *common))
        chat = stats_of(self.generate("hi", "--chat", *common))
        system = stats_of(self.generate("hi", "--chat", "--system", "You answer in one word.", *common))
        self.assertEqual(system["generated_tokens"], 6)
        self.assertGreater(chat["prompt_tokens"], plain["prompt_tokens"], "the template wraps the message")
        self.assertGreater(system["prompt_tokens"], chat["prompt_tokens"], "the system message is in the prompt")

    def test_chat_without_template_falls_back_to_chatml_and_says_so(self):
        proc = run(self.plain, "hi", "--chat", "--max-tokens", "2", "--stats", "json")
        self.assertRan(proc)
        self.assertIn("no chat template", proc.err)
        self.assertIn("ChatML", proc.err)
        self.assertGreater(stats_of(proc)["prompt_tokens"], 2, "the chatml wrapping is in the prompt")

    def test_json_schema_and_grammar_constrain_the_answer(self):
        schema = '{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}'
        for args in (("hi", "--chat"), ("hi",)):
            with self.subTest(args=args):
                proc = run(self.model, *args, "--json-schema", schema, "--max-tokens", "200", "--seed", "1")
                self.assertRan(proc)
                self.assertIsInstance(json.loads(proc.stdout)["ok"], bool)
        gbnf = os.path.join(self.tmp, "yesno.gbnf")
        with open(gbnf, "w") as f:
            f.write('root ::= "yes" | "no"\n')
        proc = run(self.model, "hi", "--chat", "--grammar", gbnf, "--max-tokens", "10", "--seed", "2")
        self.assertRan(proc)
        self.assertIn(proc.stdout.strip(), (b"yes", b"no"))

    def test_tools_print_the_calls_as_json(self):
        tools = os.path.join(self.tmp, "tools.json")
        with open(tools, "w") as f:
            json.dump([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], f)
        hermes = os.path.join("build", "llama", "source", "models", "templates",
                              "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja")
        proc = run(self.model, "hi", "--chat", "--tools", tools, "--chat-template", hermes, "--max-tokens", "4",
                   "--temperature", "0")
        self.assertRan(proc)
        self.assertIsInstance(json.loads(proc.stdout.strip().split(b"\n")[-1]), list)
        # ChatML has no tool-call syntax: the tools would be dropped, so they are refused by name
        self.assertOneLineError(run(self.model, "hi", "--chat", "--tools", tools), 1, "'tools'")
        self.assertOneLineError(run(self.model, "hi", "--tools", tools), 2, "--tools", "--chat")
        self.assertOneLineError(run(self.model, "hi", "--chat", "--reasoning", "loud"), 2, "--reasoning")
        self.assertOneLineError(run(self.model, "hi", "--json-schema", "{bad"), 2, "--json-schema")

    def test_chat_template_flag(self):
        proc = run(self.plain, "hi", "--chat", "--chat-template", "chatml", "--max-tokens", "2", "--stats", "json")
        self.assertRan(proc)
        self.assertGreater(stats_of(proc)["prompt_tokens"], 2, "the chatml wrapping is in the prompt")

    def test_unknown_chat_template_names_it(self):
        proc = run(self.plain, "hi", "--chat", "--chat-template", "nosuchtemplate")
        self.assertOneLineError(proc, (1, 2), "nosuchtemplate")

    def test_template_llama_cpp_cannot_parse_gets_a_reason(self):
        """A quote inside a '...' string (as a system prompt "sipp's" once was) makes llama.cpp's Jinja
        engine throw a bare std::exception: the message says what to check instead."""
        bad = os.path.join(self.tmp, "quote.jinja")
        with open(bad, "w") as f:
            f.write("{{- '<|im_start|>system\\nYou are sipp's model.<|im_end|>\\n' }}"
                    "{%- for m in messages %}{{- m.content }}{%- endfor %}")
        proc = run(self.plain, "hi", "--chat", "--chat-template", bad, "--max-tokens", "2")
        self.assertOneLineError(proc, 1, "chat template")
        self.assertNotIn("std::exception", proc.err)
        self.assertIn("syntax", proc.err)

    # ---- context ----------------------------------------------------------------------------------

    def test_ctx_size_is_honoured(self):
        """Generation until the context is full stops at --ctx-size, not at a larger rounded size."""
        proc = self.generate("hi", "--ctx-size", "64", "--max-tokens", "-1", "--ignore-eos", "--temperature", "0",
                             "--stats", "json")
        stats = stats_of(proc)
        self.assertEqual(stats["finish_reason"], "length", stats)
        used = stats["prompt_tokens"] + stats["generated_tokens"]
        self.assertLessEqual(used, 64, "prompt + generated = %d tokens in a 64-token context" % used)
        self.assertGreaterEqual(used, 60, "stopped long before the context was full: %d tokens" % used)

    # ---- version and help -------------------------------------------------------------------------

    def test_version(self):
        for args in (["version"], ["--version"]):
            with self.subTest(args=args):
                proc = run(*args, threads=False)
                self.assertRan(proc)
                out = proc.stdout.decode()
                self.assertTrue(out.startswith("sipp "), out)
                self.assertIn(LLAMA_COMMIT, out)

    def test_help(self):
        proc = run("--help", threads=False)
        self.assertRan(proc)
        self.assertIn(b"usage", proc.stdout)
        proc = run(self.model, "--help", threads=False)
        self.assertRan(proc)
        self.assertIn(b"--max-tokens", proc.stdout)

    # ---- bad input --------------------------------------------------------------------------------

    def assertOneLineError(self, proc, code, *mentions):
        self.assertGreaterEqual(proc.returncode, 0, "killed by signal %d; %s" % (-proc.returncode, describe(proc)))
        self.assertIn(proc.returncode, code if isinstance(code, tuple) else (code,), describe(proc))
        lines = proc.err.rstrip("\n").split("\n")
        self.assertEqual(len(lines), 1, "want one line on stderr; %s" % describe(proc))
        self.assertTrue(lines[0].startswith("sipp: "), describe(proc))
        for m in mentions:
            self.assertIn(m, lines[0], "the message should name %r" % m)
        self.assertEqual(proc.stdout, b"", "nothing on stdout; %s" % describe(proc))

    def test_bad_usage(self):
        cases = [
            (["hi", "--bogus"], "--bogus"),
            (["hi", "--backend", "nope"], "nope"),
            (["hi", "--backend", "all"], "all"),
            (["hi", "--max-tokens", "abc"], "abc"),
            (["hi", "--max-tokens", "0x"], "0x"),
            (["hi", "--temperature", "hot"], "hot"),
            (["hi", "--temperature", "-1"], "-1"),
            (["hi", "--seed", "-5"], "-5"),
            (["hi", "--top-p", "2"], "--top-p"),
            (["hi", "--ctx-size", "1e3"], "1e3"),
            (["hi", "--stats", "yaml"], "yaml"),
            (["hi", "--max-tokens", "99999999999999999999"], "99999999999999999999"),
            (["hi", "--temperature", "nan"], "nan"),
            (["hi", "--max-tokens"], "--max-tokens"),
            (["hi", "extra"], "extra"),
            ([""], "prompt"),
        ]
        for args, mention in cases:
            with self.subTest(args=args):
                self.assertOneLineError(run(self.model, *args), 2, mention)

    def test_missing_file(self):
        path = os.path.join(self.tmp, "no-such-model.gguf")
        self.assertOneLineError(run(path, "hi"), 1, path)

    def test_directory(self):
        self.assertOneLineError(run(self.tmp, "hi"), 1, self.tmp)

    def test_not_gguf(self):
        path = os.path.join(self.tmp, "notes.txt")
        with open(path, "w") as f:
            f.write("this is not a model\n")
        self.assertOneLineError(run(path, "hi"), 1, path)

    def test_empty_file(self):
        path = os.path.join(self.tmp, "empty.gguf")
        open(path, "wb").close()
        self.assertOneLineError(run(path, "hi"), 1, path)

    def test_truncated_gguf(self):
        with open(self.model, "rb") as f:
            data = f.read()
        for name, size in (("half.gguf", len(data) // 2), ("header.gguf", 64)):
            with self.subTest(cut=name):
                path = os.path.join(self.tmp, name)
                with open(path, "wb") as f:
                    f.write(data[:size])
                self.assertOneLineError(run(path, "hi"), 1, path)

    def test_unsupported_architecture(self):
        with open(self.model, "rb") as f:
            data = bytearray(f.read())
        key = data.find(b"general.architecture")
        self.assertGreater(key, 0)
        # key, then the value's type (u32 string = 8), length (u64 = 5) and bytes "llama"
        value = key + len(b"general.architecture") + 4 + 8
        self.assertEqual(bytes(data[value:value + 5]), b"llama")
        data[value:value + 5] = b"lxxxx"
        path = os.path.join(self.tmp, "notanarch.gguf")
        with open(path, "wb") as f:
            f.write(data)
        self.assertOneLineError(run(path, "hi"), 1, path, "lxxxx")

    def test_prompt_longer_than_context(self):
        # Far beyond the context, and a little beyond it (llama.cpp may round the context up; the
        # prompt must still be refused cleanly rather than crash the decoder).
        for words in (400, 60):
            with self.subTest(words=words):
                prompt = " ".join("word%d" % i for i in range(words))
                self.assertOneLineError(run(self.model, prompt, "--ctx-size", "32"), 1, "prompt")

    def test_backend_not_compiled(self):
        artifact = os.path.join(BUILD, "artifact")
        if os.path.exists(os.path.join(artifact, "libggml-cuda.so")):
            self.skipTest("this artifact has CUDA")
        self.assertOneLineError(run(self.model, "hi", "--backend", "cuda"), 1, "cuda")

    # ---- valgrind ---------------------------------------------------------------------------------

    @unittest.skipUnless(shutil.which("valgrind"), "valgrind is not installed")
    def test_valgrind(self):
        """No memory errors and no definite leaks on two error paths and one short run."""
        small = synth(os.path.join(self.tmp, "small.gguf"), "gpt-2", "--chat-template", "none")
        not_gguf = os.path.join(self.tmp, "vg-notes.txt")
        with open(not_gguf, "w") as f:
            f.write("not a model\n")
        cases = [
            ("missing file", [os.path.join(self.tmp, "vg-missing.gguf"), "hi"], 1),
            ("not GGUF", [not_gguf, "hi"], 1),
            ("short run", [small, "Hello", "--max-tokens", "4", "--temperature", "0"], 0),
        ]
        vg = ["valgrind", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite",
              "--suppressions=" + os.path.normpath(SUPPRESSIONS)]
        # A CPU-only artifact (SIPP_ARTIFACT): the same sipp code paths, without the Vulkan loader and
        # its driver, which are not sipp's and take most of the time under valgrind.
        env = dict(ENV)
        cpu_modules = glob.glob(os.path.join(BUILD, "artifact", "libggml-cpu*.so"))
        if cpu_modules:
            cpu_artifact = os.path.join(self.tmp, "cpu-artifact")
            os.makedirs(cpu_artifact, exist_ok=True)
            for module in cpu_modules:
                link = os.path.join(cpu_artifact, os.path.basename(module))
                if not os.path.lexists(link):
                    os.symlink(os.path.abspath(module), link)
            env["SIPP_ARTIFACT"] = cpu_artifact
        # The three run at once: valgrind is slow and single-threaded, and they are independent.
        procs = [(name, code, subprocess.Popen(vg + [SIPP] + args + ["--threads", "1"], stdin=subprocess.DEVNULL,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env))
                 for name, args, code in cases]
        for name, code, p in procs:
            with self.subTest(case=name):
                try:
                    _, err = p.communicate(timeout=VALGRIND_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.communicate()
                    self.fail("%s: valgrind run took over %ds" % (name, VALGRIND_TIMEOUT_S))
                text = err.decode("utf-8", "replace")
                self.assertNotEqual(p.returncode, 99, "%s: valgrind found errors or definite leaks:\n%s"
                                    % (name, text[-6000:]))
                self.assertEqual(p.returncode, code, "%s:\n%s" % (name, text[-3000:]))
                if "LEAK SUMMARY" in text:
                    self.assertIn("definitely lost: 0 bytes", text, "%s:\n%s" % (name, text[-6000:]))


if __name__ == "__main__":
    unittest.main()
