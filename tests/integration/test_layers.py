"""libsipp's layers, from its includes: every `#include "dir/x.h"` under src/ names a header of the
including file's own layer or of a lower one, and no directory's modules include each other in a cycle.

The order is written once, in docs/architecture.md ("layers: util < backend < ..."), and read from
there; `=` joins layers of the same rank (the top: the CLI and the browser runtime's glue, which
include nothing of each other). A module is foo.c and foo.h together. The gateway's own finer
rules (each header declares only its module's functions) are test_gateway_layers.py's.
"""

import os
import re
import unittest

from tests.integration.common import ROOT
from tests.integration.test_gateway_layers import find_cycle

SRC = os.path.join(ROOT, "src")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([A-Za-z0-9_]+)\.h"', re.M)
LAYERS_LINE = re.compile(r"^\s*layers:\s*(.+)$", re.M)


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
    for d in sorted(os.listdir(SRC)):
        path = os.path.join(SRC, d)
        if not os.path.isdir(path):
            continue
        for f in sorted(os.listdir(path)):
            if os.path.splitext(f)[1] in (".c", ".h", ".cpp"):
                with open(os.path.join(path, f), encoding="utf-8") as fh:
                    yield d, f, fh.read()


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


if __name__ == "__main__":
    unittest.main()
