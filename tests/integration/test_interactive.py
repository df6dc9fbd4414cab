"""`sipp MODEL --chat` with no prompt on a terminal: an interactive chat that keeps the conversation.
The test gives sipp a real pseudo-terminal (Python's pty), types turns and reads the screen."""

import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import tempfile
import time
import unittest

from tests.integration.common import SIPP, SYNTH, make_model

READ_LIMIT_S = 120


class InteractiveChat(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = make_model(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def spawn(self, *args):
        pid, fd = pty.fork()
        if pid == 0:
            env = dict(os.environ, TERM="dumb")
            os.execve(SIPP, [SIPP, self.model, "--chat", "--threads", "1", *args], env)
        self.addCleanup(self.reap, pid, fd)
        return pid, fd

    def reap(self, pid, fd):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(fd)

    def read_until(self, fd, pattern, seen=b""):
        """Reads the terminal until pattern (bytes regex) matches what came after `seen`."""
        out = b""
        deadline = time.monotonic() + READ_LIMIT_S
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 1.0)
            if not r:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if re.search(pattern, out):
                return out
        self.fail(f"timed out waiting for {pattern!r}; got {out[-500:]!r}")

    def test_two_turns_keep_the_conversation(self):
        pid, fd = self.spawn("--temperature", "0", "--max-tokens", "8", "--ignore-eos", "--stats", "json",
                             "--system", "You are terse.")
        self.read_until(fd, rb"> $")
        os.write(fd, b"Hello there\n")
        first = self.read_until(fd, rb"\}\r?\n> $")
        os.write(fd, b"And again\n")
        second = self.read_until(fd, rb"\}\r?\n> $")
        stats = [json.loads(m) for m in re.findall(rb"\{\"prompt_tokens\"[^\r\n]*\}", first + second)]
        self.assertEqual(len(stats), 2, first + second)
        self.assertEqual(stats[0]["generated_tokens"], 8)
        # The second turn's prompt holds the first turn; its KV was kept and reused.
        self.assertGreater(stats[1]["prompt_tokens"], stats[0]["prompt_tokens"])
        self.assertGreater(stats[1]["cached_tokens"], stats[0]["prompt_tokens"] // 2)
        os.write(fd, b"/exit\n")
        _, status = os.waitpid(pid, 0)
        self.assertTrue(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status)

    def test_image_goes_with_the_next_message(self):
        d = self.tmp.name
        mmproj = os.path.join(d, "mmproj.gguf")
        subprocess.run([SYNTH, "--out", mmproj, "--projector", "llava", "--n-embd", "64"], check=True,
                       capture_output=True, timeout=120)
        image = os.path.join(d, "a.bmp")  # 2x2, 24-bit, bottom-up rows
        with open(image, "wb") as f:
            f.write(b"BM" + struct.pack("<IHHI", 70, 0, 0, 54) + struct.pack("<IiiHHIIiiII", 40, 2, 2, 1, 24, 0, 16,
                                                                              2835, 2835, 0, 0) + b"\x10" * 16)
        pid, fd = self.spawn("--mmproj", mmproj, "--temperature", "0", "--max-tokens", "4", "--stats", "json")
        self.read_until(fd, rb"/image PATH[\s\S]*> $")
        os.write(fd, f"/image {image}\n".encode())
        self.read_until(fd, rb"goes with your next message\r?\n> $")
        os.write(fd, b"What is it?\n")
        out = self.read_until(fd, rb"\}\r?\n> $")
        stats = json.loads(re.findall(rb"\{\"prompt_tokens\"[^\r\n]*\}", out)[-1])
        self.assertEqual(stats["media_tokens"], 36)
        os.write(fd, b"/image /nonexistent.png\n")
        self.read_until(fd, rb"No such file or directory\r?\n> $")
        os.write(fd, b"/exit\n")
        _, status = os.waitpid(pid, 0)
        self.assertTrue(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status)

    def test_clear_and_end_of_input(self):
        pid, fd = self.spawn("--temperature", "0", "--max-tokens", "4", "--stats", "json")
        self.read_until(fd, rb"> $")
        os.write(fd, b"one\n")
        first = self.read_until(fd, rb"\}\r?\n> $")
        os.write(fd, b"/clear\n")
        self.read_until(fd, rb"> $")
        os.write(fd, b"one\n")
        again = self.read_until(fd, rb"\}\r?\n> $")
        p1 = json.loads(re.findall(rb"\{\"prompt_tokens\"[^\r\n]*\}", first)[-1])["prompt_tokens"]
        p2 = json.loads(re.findall(rb"\{\"prompt_tokens\"[^\r\n]*\}", again)[-1])["prompt_tokens"]
        self.assertEqual(p1, p2, "after /clear the conversation starts over")
        os.write(fd, b"\x04")  # end of input on a terminal
        _, status = os.waitpid(pid, 0)
        self.assertTrue(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status)


if __name__ == "__main__":
    unittest.main()
