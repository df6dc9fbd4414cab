"""The lint (tests/lint/banned.py) and the size check (tests/lint/size.py): each fails on a file that
breaks its rule, passes on one that only mentions the call in a comment or a string, and the tree
passes both. The commit-msg hook (scripts/hooks/commit-msg) refuses a subject over 72 characters."""

import os
import subprocess
import sys
import tempfile
import unittest

from tests.integration.common import ROOT

BANNED = os.path.join(ROOT, "tests", "lint", "banned.py")
SIZE = os.path.join(ROOT, "tests", "lint", "size.py")
COMMIT_MSG = os.path.join(ROOT, "scripts", "hooks", "commit-msg")


def run(script, *files):
    return subprocess.run([sys.executable, script, *files], capture_output=True, text=True, timeout=120, cwd=ROOT)


class LintTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_banned_call_fails_with_its_replacement(self):
        bad = self.write("bad.c", "void f(char *d, const char *s) {\n    strcpy(d, s);\n    int n = atoi(s);\n}\n")
        p = run(BANNED, bad)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn(f"{bad}:2: strcpy() is banned; use sipp_strlcpy", p.stdout)
        self.assertIn(f"{bad}:3: atoi() is banned; use strtol", p.stdout)
        self.assertIn("lint: 0 passed, 1 failed", p.stdout)

    def test_the_gateway_reads_the_chat_parser_typed(self):
        # Issue 45: a streamed token crosses no JSON parse inside sipp. The chat parser's JSON forms are
        # the bindings'; in src/gateway/ (and src/cli/) they fail the lint, the typed feed passes.
        os.makedirs(os.path.join(self.dir.name, "src", "gateway"))
        src = ("void f(sipp_chat_parser *p, const char *t, char **d) {\n"
               "    sipp_chat_parser_feed(p, t, 1, false, d);\n    json_loads(sipp_chat_parser_message(p), 0, 0);\n}\n")
        bad = self.write(os.path.join("src", "gateway", "generate.c"), src)
        p = run(BANNED, bad)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn(f"{bad}:2: sipp_chat_parser_feed() makes JSON for the bindings", p.stdout)
        self.assertIn(f"{bad}:3: sipp_chat_parser_message() makes JSON", p.stdout)
        ok = self.write(os.path.join("src", "gateway", "ok.c"),
                        "void g(sipp_chat_parser *p) { sipp_chat_parser_feed_deltas(p, \"\", 0, true, 0, 0); }\n")
        self.assertEqual(run(BANNED, ok).returncode, 0)
        self.assertEqual(run(BANNED, self.write("bindings.c", src)).returncode, 0, "the bindings may use JSON")

    def test_mentions_in_comments_strings_and_longer_names_pass(self):
        ok = self.write(
            "ok.c",
            '/* strcpy(a, b) would overflow */\nvoid g(char *d) {\n    snprintf(d, 4, "%s", "sprintf(x)");\n'
            "    my_atoi(d); // atoi(d)\n    s.strcat(d);\n}\n")
        p = run(BANNED, ok)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("lint: 1 passed, 0 failed", p.stdout)

    def test_long_or_deep_function_fails(self):
        body = "".join(f"    x += {i};\n" for i in range(120))
        deep = "void deep(int x) {\n" + "".join("    " * i + "if (x) {\n" for i in range(1, 6)) + \
               "".join("    " * i + "}\n" for i in range(5, 0, -1)) + "}\n"
        path = self.write("big.c", f"static int x;\nvoid long_one(void) {{\n{body}}}\n\n{deep}\nint small(void) {{ return 1; }}\n")
        p = run(SIZE, path)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("long_one() is 122 lines (limit 100)", p.stdout)
        self.assertIn("deep() is nesting depth 5 (limit 3)", p.stdout)
        self.assertIn("size: 0 passed, 1 failed", p.stdout)

    def test_tree_passes_both(self):
        for script in (BANNED, SIZE):
            p = run(script)
            self.assertEqual(p.returncode, 0, p.stdout)


class CommitMsgHookTest(unittest.TestCase):
    def hook(self, message):
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".msg", delete=False) as f:
            f.write(message)
        self.addCleanup(os.unlink, f.name)
        return subprocess.run([COMMIT_MSG, f.name], capture_output=True, text=True, timeout=30)

    def test_a_subject_of_72_characters_passes_and_73_fails(self):
        self.assertEqual(self.hook("a" * 72 + "\n\n" + "b" * 200 + "\n").returncode, 0)
        p = self.hook("a" * 73 + "\n")
        self.assertEqual(p.returncode, 1)
        self.assertIn("the subject is 73 characters, the most is 72", p.stderr)

    def test_characters_are_counted_not_bytes_and_comments_skipped(self):
        comment = "# " + "x" * 100 + "\n\n"
        self.assertEqual(self.hook(comment + "é" * 72 + "\n").returncode, 0, "72 characters, 144 bytes")
        self.assertEqual(self.hook(comment + "é" * 73 + "\n").returncode, 1)


if __name__ == "__main__":
    unittest.main()
