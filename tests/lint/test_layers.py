"""libsipp's layers, from its includes and its calls: every `#include "dir/x.h"` under src/ names a
header of the including file's own layer or of a lower one, no directory's modules include each other
in a cycle (in gateway/ and verify/, where each header declares only its own module's functions,
the includes show the calls), and no file calls a function of sipp.h that a higher layer defines (sipp.h is included
everywhere, so an upward call hides from the include check: chat_request.c once called the engine's
sipp_schema_limits_default).

The order is written once, in docs/architecture.md ("layers: util < backend < ..."), and read from
there; `=` joins layers of the same rank (the top: the CLI and the browser runtime's glue, which
include nothing of each other). A module is foo.c and foo.h together. The gateway's own finer
rules (each header declares only its module's functions) are test_gateway_layers.py's.

Run by tests/run.sh's lint suite, so by make check: python3 -m unittest tests.lint.test_layers
"""

import functools
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csource  # noqa: E402
from test_gateway_layers import find_cycle, misplaced_declarations  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src")
SIPP_H = os.path.join(ROOT, "include", "sipp.h")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([A-Za-z0-9_/]+)\.h"', re.M)
LAYERS_LINE = re.compile(r"^\s*layers:\s*(.+)$", re.M)
API_DECL = re.compile(r"^SIPP_API\b[^;(]*?\b(sipp_[a-z0-9_]+)\s*\(", re.M)
DEFINED = re.compile(r"^(?:static\s+)?[A-Za-z_][^;{}()=]*?\b(sipp_[a-z0-9_]+)\s*\(", re.M)
CALL = re.compile(r"(?<![A-Za-z0-9_])(sipp_[a-z0-9_]+)\s*\(")


def layer_ranks():
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as fh:
        m = LAYERS_LINE.search(fh.read())
    assert m, "docs/architecture.md has no 'layers: ...' line"
    ranks = {}
    for rank, group in enumerate(m.group(1).split("<")):
        for name in group.split("="):
            ranks[name.strip()] = rank
    return ranks


def sources():
    """(layer, path inside it, text) of every source file under src/ (src/gateway/http/connection.c is
    ("gateway", "http/connection.c", ...): a folder inside a layer is part of that layer)."""
    for d in sorted(os.listdir(SRC)):
        path = os.path.join(SRC, d)
        if not os.path.isdir(path):
            continue
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for f in sorted(files):
                if os.path.splitext(f)[1] in (".c", ".h", ".cpp"):
                    full = os.path.join(root, f)
                    with open(full, encoding="utf-8") as fh:
                        yield d, os.path.relpath(full, path), fh.read()


def upward_includes(ranks):
    bad = []
    for d, f, text in sources():
        for target, header in INCLUDE.findall(text):
            if target not in ranks:
                bad.append(f"src/{d}/{f} includes {target}/{header}.h: '{target}' is in no layer")
            elif d not in ranks:
                bad.append(f"src/{d}/ is in no layer of docs/architecture.md")
            elif ranks[target] > ranks[d] or (ranks[target] == ranks[d] and target != d):
                bad.append(f"src/{d}/{f} includes {target}/{header}.h, a layer above or beside '{d}'")
    return bad


def api_functions():
    with open(SIPP_H, encoding="utf-8") as fh:
        return set(API_DECL.findall(fh.read()))


@functools.lru_cache(maxsize=None)
def blanked():
    """[(directory, file, code)] of src/, comments and literals blanked (csource.blank)."""
    return [(d, f, csource.blank(text)) for d, f, text in sources()]


# The browser runtime's stand-ins (src/wasm/) define functions of libsipp again for the browser build,
# which leaves the real ones out: they are no home of those functions.
STAND_INS = ("wasm",)


def definitions(api):
    """{function of sipp.h: the layer whose sources define it}: a name at the start of a line's
    declarator whose parameter list is followed by a body, not by ';' (sipp's sources are
    clang-formatted)."""
    where = {}
    for d, f, code in blanked():
        if d in STAND_INS or not f.endswith((".c", ".cpp")):
            continue
        for m in DEFINED.finditer(code):
            if m.group(1) in api and code[after_parens(code, m.end() - 1):].lstrip()[:1] == "{":
                where[m.group(1)] = d
    return where


def after_parens(code, i):
    """The index past the parenthesis that closes the one at code[i]."""
    depth = 0
    for j in range(i, len(code)):
        depth += {"(": 1, ")": -1}.get(code[j], 0)
        if depth == 0:
            return j + 1
    return len(code)


def upward_calls(ranks):
    """'src/d/f:line calls NAME of LAYER' for each call of a sipp.h function defined by a layer above
    (or beside) the caller's."""
    api = api_functions()
    where = definitions(api)
    bad = []
    for d, f, code in blanked():
        if d not in ranks:
            continue
        for m in CALL.finditer(code):
            name, home = m.group(1), where.get(m.group(1))
            if home is None or home == d or home not in ranks:
                continue
            if ranks[home] > ranks[d] or ranks[home] == ranks[d]:
                line = code.count("\n", 0, m.start()) + 1
                bad.append(f"src/{d}/{f}:{line} calls {name}, which src/{home}/ defines: a layer above '{d}'")
    return bad


def module_graph(directory):
    graph = {}
    for d, f, text in sources():
        if d != directory:
            continue
        stem = os.path.splitext(f)[0]
        deps = {h for t, h in INCLUDE.findall(text) if t == directory and h != stem}
        graph.setdefault(stem, set()).update(deps)
    return graph


class Layers(unittest.TestCase):
    def test_every_directory_is_a_layer(self):
        ranks = layer_ranks()
        dirs = sorted(d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d)))
        self.assertEqual([d for d in dirs if d not in ranks], [], "directories of src/ missing from the layers line")

    def test_no_include_reaches_up(self):
        self.assertEqual(upward_includes(layer_ranks()), [])

    def test_no_call_through_sipp_h_reaches_up(self):
        self.assertEqual(upward_calls(layer_ranks()), [])

    def test_every_verify_header_declares_its_own_module(self):
        """verify/'s files once shared one header, which let run.c and image_case.c call each other in
        a circle that no include showed; each now declares its functions in its own header."""
        self.assertEqual(misplaced_declarations(os.path.join(SRC, "verify"), ("verify_", "manifest_"), {}), [])

    def test_no_module_cycle_in_a_layer(self):
        for d in sorted(layer_ranks()):
            with self.subTest(layer=d):
                self.assertIsNone(find_cycle(module_graph(d)))

    def test_the_check_can_fail(self):
        """A chat header included by the model layer, as model.c once did, is caught."""
        ranks = layer_ranks()
        self.assertLess(ranks["model"], ranks["chat"])
        self.assertTrue(INCLUDE.findall('#include "chat/chat_request.h"\n'))
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"a"}}), ["a", "b", "a"])

    def test_the_call_check_sees_definitions_and_calls(self):
        """The engine defines sipp_engine_submit, and a call is found in code but not in a comment."""
        self.assertEqual(definitions({"sipp_engine_submit"}), {"sipp_engine_submit": "engine"})
        code = csource.blank("/* sipp_engine_submit(e) */\nint f(void) { return sipp_engine_submit(e, r); }\n")
        self.assertEqual([m.group(1) for m in CALL.finditer(code)], ["sipp_engine_submit"])


if __name__ == "__main__":
    unittest.main()
