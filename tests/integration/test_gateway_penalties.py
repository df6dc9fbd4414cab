"""The repetition penalties (presence_penalty, frequency_penalty, repeat_penalty) change the output,
on every API that offers them, the way llama-server's do.

The tiny random model decodes greedily as a chain: its next token depends on little more than the
last one, so from the same start it writes the same run of tokens. A prompt that already holds that
run and then starts it again ("one two" + run + "\\none two") makes the unpenalised model repeat the
run, while a penalty must steer it off the run's first token, which the prompt already holds
(llama-server counts the prompt's last 64 tokens in the penalties, and so does sipp). The same
requests go to llama-server, built from the pinned source, when its build is in the cache: greedy
output must be the same text.
"""

import os
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support import peer  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

RUN_TOKENS = 16
START = "one two"
PENALTIES = [{"frequency_penalty": 1.5}, {"presence_penalty": 1.5}, {"repeat_penalty": 1.5}]
PEER = peer.PEER
PEER_READY_S = 60


post = peer.post


class Penalties(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.g = gw.serve_model()
        cls.run_text = cls.complete(START, {})
        cls.prompt = START + cls.run_text + "\n" + START

    @classmethod
    def tearDownClass(cls):
        cls.g.stop()

    @classmethod
    def complete(cls, prompt, extra):
        body = {"model": "tiny", "prompt": prompt, "max_tokens": RUN_TOKENS, "temperature": 0, **extra}
        status, _, out = cls.g.json("POST", "/v1/completions", body)
        assert status == 200, out
        return out["choices"][0]["text"]

    def first_token(self, prompt):
        """The text of the first token the unpenalised model writes after prompt."""
        body = {"model": "tiny", "prompt": prompt, "max_tokens": 1, "temperature": 0, "logprobs": 0}
        status, _, out = self.g.json("POST", "/v1/completions", body)
        self.assertEqual(status, 200, out)
        return out["choices"][0]["logprobs"]["tokens"][0]

    def assert_avoids_run(self, unpenalised, penalised, what):
        self.assertEqual(unpenalised, self.run_text, f"{what}: without a penalty the model repeats the run")
        self.assertNotEqual(penalised, unpenalised, f"{what}: the penalty changed nothing")
        self.assertFalse(penalised.startswith(self.first_token(self.prompt)),
                         f"{what}: the penalty did not avoid the token the prompt repeats: {penalised!r}")

    def test_completions(self):
        plain = self.complete(self.prompt, {})
        for p in PENALTIES:
            with self.subTest(**p):
                self.assert_avoids_run(plain, self.complete(self.prompt, p), f"/v1/completions {p}")

    def test_chat_completions(self):
        def chat(content, extra):
            body = {"model": "tiny", "messages": [{"role": "user", "content": content}],
                    "max_tokens": RUN_TOKENS, "temperature": 0, "logprobs": True, **extra}
            status, _, out = self.g.json("POST", "/v1/chat/completions", body)
            self.assertEqual(status, 200, out)
            choice = out["choices"][0]
            return choice["message"]["content"], choice["logprobs"]["content"][0]["token"]
        # The answer to any message starts with the same token (after the template's assistant
        # header); a message that holds the answer makes a penalty avoid that token.
        run, first = chat(START, {})
        plain, plain_first = chat(run, {})
        self.assertEqual(plain_first, first, "without a penalty the chat answer starts as before")
        for p in PENALTIES:
            with self.subTest(**p):
                penalised, penalised_first = chat(run, p)
                self.assertNotEqual(penalised, plain, f"chat {p}: the penalty changed nothing")
                self.assertNotEqual(penalised_first, first,
                                    f"chat {p}: the penalty did not avoid the token the message repeats")

    def test_ollama_options(self):
        def generate(options):
            body = {"model": "tiny", "prompt": self.prompt, "raw": True, "stream": False,
                    "options": {"num_predict": RUN_TOKENS, "temperature": 0, "repeat_penalty": 1.0, **options}}
            status, _, out = self.g.json("POST", "/api/generate", body)
            self.assertEqual(status, 200, out)
            return out["response"]
        plain = generate({})
        for p in PENALTIES:
            with self.subTest(**p):
                self.assert_avoids_run(plain, generate(p), f"/api/generate options {p}")

    def test_penalties_out_of_range_are_refused_by_name(self):
        for field, value in (("frequency_penalty", 2.5), ("presence_penalty", -3), ("repeat_penalty", 0)):
            with self.subTest(field=field):
                body = {"model": "tiny", "prompt": "hi", "max_tokens": 1, field: value}
                status, _, out = self.g.json("POST", "/v1/completions", body)
                self.assertEqual(status, 400, out)
                self.assertIn(field, out["error"]["message"])

    def test_same_text_as_llama_server(self):
        server = os.path.join(PEER, "llama-server")
        if not os.access(server, os.X_OK):
            self.skipTest(f"{server} is not built (deps/build-source.sh peer builds it)")
        port = free_port()
        log = open(os.path.join(gw.tmpdir(), "llama-server-penalties.log"), "w+")
        proc = subprocess.Popen([server, "-m", gw.model(), "--host", "127.0.0.1", "--port", str(port), "-t", "1",
                                 "-c", "1024", "-np", "1", "--no-repack"], stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, LD_LIBRARY_PATH=PEER))
        try:
            base = f"http://127.0.0.1:{port}"
            gw.wait_until(lambda: self.peer_ready(base, proc), PEER_READY_S, "llama-server to load the model")
            for p in [{}, *PENALTIES]:
                with self.subTest(**p):
                    peer = post(base, "/completion", {"prompt": self.prompt, "n_predict": RUN_TOKENS,
                                                      "temperature": 0, "cache_prompt": False, **p})
                    self.assertEqual(self.complete(self.prompt, p), peer["content"])
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
