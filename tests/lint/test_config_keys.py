"""docs/gateway.md's reference of the configuration keys is what the key tables print.

Every key of the gateway's TOML file is a row of src/gateway/config_keys.c (kind, range, the field it
fills, default, help line); `sipp serve --config-keys` prints the rows as Markdown. The reference in
docs/gateway.md, between the two marks below, must be that output byte for byte, so a key added,
renamed or given another range without its documentation fails here.

After changing a row, rewrite the reference with
    python3 tests/lint/test_config_keys.py --write
(it runs $SIPP_BUILD/bin/sipp, default build/bin/sipp: build first). Run by tests/run.sh's lint suite,
so by make check: python3 -m unittest tests.lint.test_config_keys
"""

import difflib
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "gateway.md")
BEGIN = "<!-- config-keys: printed by `sipp serve --config-keys`; tests/lint/test_config_keys.py checks it -->\n"
END = "<!-- /config-keys -->\n"
TIMEOUT_S = 30


def sipp():
    build = os.environ.get("SIPP_BUILD", "build")
    return os.path.join(build if os.path.isabs(build) else os.path.join(ROOT, build), "bin", "sipp")


def printed():
    """What the tables print, or raises with the next step."""
    binary = sipp()
    if not os.path.exists(binary):
        raise FileNotFoundError(f"{binary} is not built: run make first")
    r = subprocess.run([binary, "serve", "--config-keys"], capture_output=True, text=True, timeout=TIMEOUT_S)
    if r.returncode != 0:
        raise RuntimeError(f"sipp serve --config-keys exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def split(text):
    """(before, reference, after) of the doc; raises when the marks are missing."""
    start = text.find(BEGIN)
    end = text.find(END, start + 1)
    if start < 0 or end < 0:
        raise ValueError(f"{DOC}: the marks {BEGIN.strip()!r} and {END.strip()!r} are missing")
    start += len(BEGIN)
    return text[:start], text[start:end], text[end:]


def differences(doc_text, tables_text):
    """The unified diff from the doc's reference to the tables' output; empty when they agree."""
    _, reference, _ = split(doc_text)
    return "".join(difflib.unified_diff(reference.splitlines(True), tables_text.splitlines(True),
                                        "docs/gateway.md", "sipp serve --config-keys"))


class ConfigKeysTest(unittest.TestCase):
    def test_the_comparison_sees_a_difference(self):
        # The checker itself: an edited row is a difference, the same text is none.
        doc = "intro\n" + BEGIN + "| `a` | x |\n" + END + "outro\n"
        self.assertEqual(differences(doc, "| `a` | x |\n"), "")
        self.assertIn("+| `a` | y |", differences(doc, "| `a` | y |\n"))
        with self.assertRaises(ValueError):
            split("no marks here\n")

    def test_docs_match_the_tables(self):
        with open(DOC, encoding="utf-8") as f:
            text = f.read()
        diff = differences(text, printed())
        self.assertEqual(diff, "", "docs/gateway.md's key reference differs from the tables; run "
                         "python3 tests/lint/test_config_keys.py --write\n" + diff)


def write():
    with open(DOC, encoding="utf-8") as f:
        before, _, after = split(f.read())
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(before + printed() + after)
    print(f"{os.path.relpath(DOC)}: the key reference rewritten from sipp serve --config-keys")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        unittest.main()
