"""Integration tests of sipp-train (tools/train) and its corpus generator (tools/train/corpus.py).

A tiny f32 model (llama-spm's vocabulary, one narrow block) is trained for one short epoch on a
small generated corpus: the held-out loss must fall, and the output must load and generate in the
sipp CLI with the chat template it started with. The failure paths (a missing, empty or too short
corpus, a model with nothing to train) must be a message and exit status 1, and Ctrl-C a checkpoint
and status 130.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from tests.integration import gguf_corrupt
from tests.support.models import make_model
from tests.support.paths import BUILD, ROOT, SIPP

TRAIN = os.path.join(BUILD, "bin", "sipp-train")
CORPUS_PY = os.path.join(ROOT, "tools", "train", "corpus.py")
TIMEOUT_S = 300  # a bound far above the ~12 s the training run takes on 2 busy cores
EXIT_RUNTIME = 1
EXIT_INTERRUPTED = 130

# one block of width 64: the 32k-token output layer is most of the work, about 1000 tokens/s
TINY = {"vocab": "llama-spm", "type": "f32", "n_embd": 64, "n_layer": 1, "n_head": 4, "n_head_kv": 2,
        "n_ff": 128, "chat_template": "chatml"}
# small enough for ~25 windows of 256 tokens, with two held-out windows
DIALOGUES, PROSE = 60, 0
TRAIN_ARGS = ["--threads", "1", "--lr", "3e-3", "--val-split", "0.1", "--seed", "3"]

LOSS_RE = re.compile(r"^epoch (\d+)/\d+: .*held-out loss ([0-9.]+)", re.M)


def write_corpus(path, seed=1, dialogues=DIALOGUES, prose=PROSE):
    subprocess.run([sys.executable, CORPUS_PY, "--out", path, "--seed", str(seed), "--dialogues", str(dialogues),
                    "--prose", str(prose)], check=True, capture_output=True, timeout=TIMEOUT_S)
    return path


def train(*args):
    return subprocess.run([TRAIN, *args], capture_output=True, text=True, timeout=TIMEOUT_S)


class TrainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(TRAIN, os.X_OK):
            raise AssertionError(f"{TRAIN} is not built (make)")
        cls.tmp = tempfile.TemporaryDirectory(prefix="sipp-train-test-")
        cls.model = make_model(cls.tmp.name, "start.gguf", **TINY)
        cls.corpus = write_corpus(os.path.join(cls.tmp.name, "corpus.jsonl"))
        cls.out = os.path.join(cls.tmp.name, "trained.gguf")
        cls.trained = train("--model", cls.model, "--corpus", cls.corpus, "--out", cls.out, *TRAIN_ARGS)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_held_out_loss_falls(self):
        self.assertEqual(self.trained.returncode, 0, self.trained.stderr)
        losses = {int(e): float(v) for e, v in LOSS_RE.findall(self.trained.stdout)}
        self.assertIn(0, losses, self.trained.stdout)
        self.assertIn(1, losses, self.trained.stdout)
        self.assertLess(losses[1], losses[0] - 1.0, self.trained.stdout)

    def test_every_weight_trains(self):
        """sipp-train's own graph (tools/train/graph.c) trains every weight, the three kinds llama.cpp's
        trainer cannot train at the pinned commit included (docs/training.md): the token embeddings
        and the attention's K and V projections, here with fewer K/V heads than query heads."""
        self.assertEqual(self.trained.returncode, 0, self.trained.stderr)
        with open(self.model, "rb") as f:
            before = f.read()
        with open(self.out, "rb") as f:
            after = f.read()
        for name in ("token_embd.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_q.weight",
                     "blk.0.attn_output.weight", "blk.0.ffn_up.weight", "output.weight", "blk.0.attn_norm.weight"):
            moved = max(abs(a - b) for a, b in zip(gguf_corrupt.f32_tensor(before, name),
                                                   gguf_corrupt.f32_tensor(after, name)))
            with self.subTest(tensor=name):
                self.assertGreater(moved, 1e-4)

    def test_accumulate_takes_one_step_per_n_windows(self):
        out = self.path("accumulated.gguf")
        r = train("--model", self.model, "--corpus", self.corpus, "--out", out, "--accumulate", "4", *TRAIN_ARGS)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"(\d+) training windows .*; (\d+) steps of 4 windows", r.stdout)
        self.assertTrue(m, r.stdout)
        self.assertEqual(int(m.group(2)), (int(m.group(1)) + 3) // 4)
        losses = {int(e): float(v) for e, v in LOSS_RE.findall(r.stdout)}
        self.assertLess(losses[1], losses[0] - 1.0, r.stdout)


        self.assertEqual(self.trained.returncode, 0, self.trained.stderr)
        r = subprocess.run([SIPP, self.out, "Hello", "--max-tokens", "8", "--seed", "1", "--ignore-eos",
                            "--stats", "json"], capture_output=True, text=True, timeout=TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        stats = json.loads(r.stderr.strip().splitlines()[-1])
        self.assertEqual(stats["generated_tokens"], 8, r.stderr)
        with open(self.out, "rb") as f:
            self.assertIn(b"<|im_start|>", f.read(), "the chat template was not carried over")

    def test_quantized_output_without_training(self):
        sizes = {}
        for out_type in ("f16", "q8_0", "q4_0"):
            q = self.path(f"{out_type}.gguf")
            r = train("--model", self.out, "--corpus", self.corpus, "--out", q, "--epochs", "0", "--out-type",
                      out_type, "--threads", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"epoch 0/0: held-out loss [0-9.]+")
            info = subprocess.run([SIPP, "models", "info", q, "--json"], capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
            self.assertEqual(info.returncode, 0, info.stderr)
            self.assertEqual(json.loads(info.stdout)["file_type"], out_type.upper())
            sizes[out_type] = os.path.getsize(q)
        self.assertLess(sizes["f16"], os.path.getsize(self.out) * 0.6)
        self.assertLess(sizes["q8_0"], os.path.getsize(self.out) / 3)
        self.assertLess(sizes["q4_0"], sizes["q8_0"])
        q8 = self.path("q8_0.gguf")
        self.assertFalse([f for f in os.listdir(self.tmp.name) if f.endswith(".tmp")], "a staged file was left")
        bad = train("--model", self.out, "--corpus", self.corpus, "--out", q8, "--out-type", "q5_1")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--out-type: 'q5_1' is not f32, f16, q8_0 or q4_0", bad.stderr)

    def test_chat_template_file_gives_the_output_a_template_llama_cpp_renders(self):
        """corpus.py's template (an unescaped quote inside its '...' strings once broke every chat with
        it), given to the trained model by sipp-train --chat-template-file, renders in the CLI."""
        self.assertEqual(self.trained.returncode, 0, self.trained.stderr)
        qwen = os.path.join(BUILD, "llama", "source", "models", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
        tpl, q8 = self.path("demo.jinja"), self.path("templated.gguf")
        r = subprocess.run([sys.executable, CORPUS_PY, "--template", qwen, "--template-out", tpl],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = train("--model", self.out, "--corpus", self.corpus, "--out", q8, "--epochs", "0", "--out-type", "q8_0",
                  "--threads", "1", "--chat-template-file", tpl)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(q8, "rb") as f:
            self.assertIn(b"You are sipp\\'s demo model", f.read())
        r = subprocess.run([SIPP, q8, "Hello!", "--chat", "--max-tokens", "2", "--stats", "json"],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        # the default system prompt is rendered: far more tokens than the message and the markers
        self.assertGreater(json.loads(r.stderr.strip().splitlines()[-1])["prompt_tokens"], 20, r.stderr)
        bad = train("--model", self.out, "--corpus", self.corpus, "--out", self.path("x.gguf"), "--epochs", "0",
                    "--chat-template-file", self.path("missing.jinja"))
        self.assertEqual(bad.returncode, EXIT_RUNTIME)
        self.assertIn("--chat-template-file", bad.stderr)
        empty = self.path("empty.jinja")
        open(empty, "w").close()
        bad = train("--model", self.out, "--corpus", self.corpus, "--out", self.path("x.gguf"), "--epochs", "0",
                    "--chat-template-file", empty)
        self.assertEqual(bad.returncode, EXIT_RUNTIME)
        self.assertIn("empty", bad.stderr)
        self.assertFalse(os.path.exists(self.path("x.gguf")))

    def fails(self, corpus, expect, model=None):
        r = train("--model", model or self.model, "--corpus", corpus, "--out", self.path("x.gguf"), "--threads", "1")
        self.assertEqual(r.returncode, EXIT_RUNTIME, r.stderr)
        self.assertIn(expect, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertFalse(os.path.exists(self.path("x.gguf")))

    def test_missing_corpus(self):
        self.fails(self.path("nope.jsonl"), "No such file or directory")

    def test_empty_corpus(self):
        for name, text in (("empty.txt", ""), ("blank.jsonl", "\n\n{\"text\": \"\"}\n")):
            with self.subTest(name=name):
                with open(self.path(name), "w") as f:
                    f.write(text)
                self.fails(self.path(name), "is empty")

    def test_corpus_shorter_than_a_window(self):
        with open(self.path("short.txt"), "w") as f:
            f.write("Hello there.\n")
        self.fails(self.path("short.txt"), "shorter than one window")

    def test_bad_jsonl_line(self):
        with open(self.path("bad.jsonl"), "w") as f:
            f.write("{\"text\": \"hi\"}\nnot json\n")
        self.fails(self.path("bad.jsonl"), "line 2")

    def test_model_with_nothing_to_train(self):
        quantized = make_model(self.tmp.name, "q8.gguf", vocab="llama-spm", n_layer=1)
        self.fails(self.corpus, "no f32 weight matrices", model=quantized)

    def test_interrupt_writes_a_checkpoint(self):
        out = self.path("interrupted.gguf")
        p = subprocess.Popen([TRAIN, "--model", self.model, "--corpus", self.corpus, "--out", out, "--epochs", "50",
                              *TRAIN_ARGS], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # the first epoch line means training is under way
            while not p.stdout.readline().startswith("epoch 0/"):
                if p.poll() is not None:
                    self.fail(f"sipp-train ended before training: {p.stderr.read()}")
            time.sleep(1)
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=TIMEOUT_S)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        checkpoint = self.path("interrupted.checkpoint.gguf")
        self.assertEqual(p.returncode, EXIT_INTERRUPTED, err)
        self.assertIn(checkpoint, err)
        self.assertTrue(os.path.isfile(checkpoint))
        self.assertFalse(os.path.exists(out))


class CorpusTest(unittest.TestCase):
    def test_deterministic_and_well_formed(self):
        with tempfile.TemporaryDirectory(prefix="sipp-corpus-test-") as d:
            a, b, c = (write_corpus(os.path.join(d, n), seed=s, dialogues=200, prose=0)
                       for n, s in (("a.jsonl", 1), ("b.jsonl", 1), ("c.jsonl", 2)))
            with open(a) as fa, open(b) as fb, open(c) as fc:
                da, db, dc = fa.read(), fb.read(), fc.read()
        self.assertEqual(da, db)
        self.assertNotEqual(da, dc)
        texts = [json.loads(line)["text"] for line in da.splitlines()]
        self.assertEqual(len(texts), 200)
        calls = [json.loads(m) for t in texts for m in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", t)
                 if "<function-name>" not in m]
        self.assertTrue(calls)
        for call in calls:
            self.assertIn(call["name"], ("get_weather", "get_time"))
            self.assertEqual(set(call["arguments"]), {"city"})
        for t in texts:
            self.assertTrue(t.startswith("<|im_start|>system\n"), t)
            self.assertTrue(t.endswith("<|im_end|>\n"), t)
        sums = [re.search(r"user\n(?:What is |What's |Compute )?(\d+) ?\+ ?(\d+).*?assistant\n\1 \+ \2 is (-?\d+)\.",
                          t, re.S) for t in texts]
        self.assertGreater(len(list(filter(None, sums))), 5)
        for m in filter(None, sums):
            self.assertEqual(int(m.group(1)) + int(m.group(2)), int(m.group(3)))

    def test_the_sum_table_and_compact_results(self):
        with tempfile.TemporaryDirectory(prefix="sipp-corpus-test-") as d:
            out = os.path.join(d, "c.jsonl")
            r = subprocess.run([sys.executable, CORPUS_PY, "--out", out, "--seed", "5", "--dialogues", "400",
                                "--prose", "0", "--sums", "2", "--compact-results", "0.5"],
                               capture_output=True, text=True, timeout=TIMEOUT_S)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                texts = [json.loads(line)["text"] for line in f]
            self.assertEqual(len(texts), 400 + 2 * 100)
            answers = re.findall(r"assistant\n(\d) \+ (\d) is (\d+)\.<\|im_end\|>", "".join(texts))
            table = {(int(a), int(b)) for a, b, _ in answers}
            self.assertEqual(table, {(a, b) for a in range(10) for b in range(10)})
            self.assertTrue(all(int(a) + int(b) == int(c) for a, b, c in answers))
            results = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", "".join(texts))
            compact = [x for x in results if ", " not in x and ": " not in x]
            self.assertTrue(compact and len(compact) < len(results), results[:4])
            r = subprocess.run([sys.executable, CORPUS_PY, "--out", out, "--compact-results", "2"],
                               capture_output=True, text=True, timeout=TIMEOUT_S)
            self.assertEqual(r.returncode, 2)
            self.assertIn("--compact-results is a share", r.stderr)

    def test_the_demo_corpora_keep_their_bytes(self):
        """`make demo-model` regenerates the committed model's corpora: a change to the generator must
        not change them (models/models.json records their sha256)."""
        with open(os.path.join(ROOT, "models", "models.json")) as f:
            phases = {p["phase"]: p for m in json.load(f)["models"] if m["name"] == "sipp-demo"
                      for p in m["training"]["phases"]}
        with tempfile.TemporaryDirectory(prefix="sipp-corpus-test-") as d:
            # phase 2 has dialogues only; the others' prose comes from Debian's bible-kjv and fortunes-min
            for phase in sorted(phases) if shutil.which("bible") else (2,):
                out = os.path.join(d, f"{phase}.jsonl")
                r = subprocess.run([sys.executable, CORPUS_PY, "--demo", str(phase), "--out", out],
                                   capture_output=True, text=True, timeout=TIMEOUT_S)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(out, "rb") as f:
                    self.assertEqual(hashlib.sha256(f.read()).hexdigest(), phases[phase]["corpus_sha256"])

    def test_the_models_template_has_the_corpus_system_prompt(self):
        qwen = os.path.join(BUILD, "llama", "source", "models", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
        with tempfile.TemporaryDirectory(prefix="sipp-corpus-test-") as d:
            out = os.path.join(d, "t.jinja")
            r = subprocess.run([sys.executable, CORPUS_PY, "--template", qwen, "--template-out", out],
                               capture_output=True, text=True, timeout=TIMEOUT_S)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                text = f.read()
            self.assertNotIn("You are Qwen", text)
            self.assertEqual(text.count("You are sipp\\'s demo model, a small assistant."), 2)
            other = os.path.join(BUILD, "llama", "source", "models", "templates", "llama-cpp-deepseek-r1.jinja")
            r = subprocess.run([sys.executable, CORPUS_PY, "--template", other if os.path.exists(other) else out,
                                "--template-out", out], capture_output=True, text=True, timeout=TIMEOUT_S)
            self.assertEqual(r.returncode, 1)
            self.assertIn("no Qwen2.5 default system prompt", r.stderr)


if __name__ == "__main__":
    unittest.main()
