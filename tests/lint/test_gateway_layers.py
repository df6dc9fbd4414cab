"""The gateway's layers, from its includes: src/gateway has no include cycle.

A node is a module: foo.c and foo.h together (routes_openai.c is its own). An edge goes from a
module to each gateway header its files include. A cycle means two layers depend on each other,
which is how server.c used to be both the top and the bottom of the gateway; the test names it.
Run by tests/run.sh's lint suite, so by make check: python3 -m unittest tests.lint.test_gateway_layers

The include graph shows the call graph only if every header declares its own module's functions
(one header declaring everything has no cycle and hides them all), so that is checked too: each
function a header declares is defined in that module's .c files (routes.h: routes_*.c and web.c;
gateway.h: listener.c, the top).
"""

import os
import re
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GATEWAY = os.path.join(ROOT, "src", "gateway")
INCLUDE = re.compile(r'^\s*#\s*include\s+"gateway/([A-Za-z0-9_]+)\.h"', re.M)
# A declaration at the start of a line: "type gw_name(" (struct members and macros are indented).
DECLARED = r"^(?!typedef|#|static)[A-Za-z][^;{{(]*?\b((?:{prefixes})[a-z0-9_]+)\s*\("
IMPLEMENTED_IN = {"routes": ("routes_", "web"), "gateway": ("listener",)}


def include_graph(directory):
    graph = {}
    for name in sorted(os.listdir(directory)):
        stem, ext = os.path.splitext(name)
        if ext not in (".c", ".h"):
            continue
        with open(os.path.join(directory, name), encoding="utf-8") as fh:
            deps = {d for d in INCLUDE.findall(fh.read()) if d != stem}
        graph.setdefault(stem, set()).update(deps)
    return graph


def find_cycle(graph):
    """A list of modules forming a cycle (first == last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def defined(name, text):
    return re.search(r"^[A-Za-z][^;]*\b" + name + r"\s*\([^;{]*(\{|$)", text, re.M) is not None


def misplaced_declarations(directory, prefixes=("gw_",), implemented_in=None):
    """(header, function) pairs where a function (named with one of prefixes) is not defined in the
    header's module: foo.h's in foo.c, or in the files implemented_in names for it."""
    implemented_in = IMPLEMENTED_IN if implemented_in is None else implemented_in
    declared = re.compile(DECLARED.format(prefixes="|".join(prefixes)), re.M)
    sources = {}
    for f in os.listdir(directory):
        if f.endswith(".c"):
            with open(os.path.join(directory, f), encoding="utf-8") as fh:
                sources[f[:-2]] = fh.read()
    bad = []
    for f in sorted(os.listdir(directory)):
        if not f.endswith(".h"):
            continue
        module = f[:-2]
        owners = implemented_in.get(module, (module,))
        texts = [t for stem, t in sources.items() if any(stem == o or (o.endswith("_") and stem.startswith(o))
                                                        for o in owners)]
        with open(os.path.join(directory, f), encoding="utf-8") as fh:
            for name in declared.findall(fh.read()):
                if not any(defined(name, t) for t in texts):
                    bad.append((f, name))
    return bad


class GatewayLayersTest(unittest.TestCase):
    def test_find_cycle_sees_one(self):
        # The checker itself: a two-module loop and a longer one are found, a layered graph is not.
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"a"}}), ["a", "b", "a"])
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}), ["a", "b", "c", "a"])
        self.assertIsNone(find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}))

    def test_gateway_has_no_include_cycle(self):
        graph = include_graph(GATEWAY)
        self.assertIn("connection", graph)
        cycle = find_cycle(graph)
        self.assertIsNone(cycle, "src/gateway includes form a cycle: " + " -> ".join(cycle or []))

    def test_every_header_declares_its_own_module(self):
        self.assertEqual(misplaced_declarations(GATEWAY), [])

    def test_the_bottom_layers_include_no_upper_one(self):
        # The connection layer knows no route, guard, admission or listener: they are handed to it.
        graph = include_graph(GATEWAY)
        for upper in ("router", "routes", "guard", "admission", "gateway"):
            self.assertNotIn(upper, graph["connection"])
            self.assertNotIn(upper, graph["server"])


if __name__ == "__main__":
    unittest.main()
