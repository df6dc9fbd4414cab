"""The gateway's rooms, from its includes: src/gateway/ is a base, four folders and a top.

    base (the files directly in src/gateway/) < http/ < kinds/ < fleet/ < api/ < top (gateway.c)

The order is written once, in docs/architecture.md ("gateway layers: ..."), and read from there.
A file includes only headers of its own room or of a lower one, so no two rooms depend on each
other. Each folder has one header of its own, named after it (http/http.h, kinds/kinds.h,
fleet/fleet.h, api/api.h): what a file outside the folder may include of it, and which declares only
functions that the folder's files define. api/web_assets.h is the one other header in a folder: the
table scripts/embed_assets.py generates, which api/web.c serves.

In the base, where each module (foo.c and foo.h together) keeps a header of its own, each header
declares only its own module's functions and the modules include each other in no cycle, so the
includes show the calls (one header declaring everything has no cycle and hides them all).

Run by tests/run.sh's lint suite, so by make check: python3 -m unittest tests.lint.test_gateway_layers
"""

import os
import re
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GATEWAY = os.path.join(ROOT, "src", "gateway")
INCLUDE = re.compile(r'^\s*#\s*include\s+"gateway/([A-Za-z0-9_/]+)\.h"', re.M)
ORDER_LINE = re.compile(r"^\s*gateway layers:\s*(.+)$", re.M)
# A declaration at the start of a line: "type gw_name(" (struct members and macros are indented).
DECLARED = r"^(?!typedef|#|static)[A-Za-z][^;{{(]*?\b((?:{prefixes})[a-z0-9_]+)\s*\("
TOP = ("gateway",)  # gateway.c and gateway.h: gw_serve, the one thing `sipp serve` calls
OWN_HEADERS = {"api/web_assets"}  # headers a folder keeps beside its face (generated tables)


def rooms_in_order():
    """['base', 'http', 'kinds', 'fleet', 'api', 'top'] from docs/architecture.md."""
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as fh:
        m = ORDER_LINE.search(fh.read())
    assert m, "docs/architecture.md has no 'gateway layers: ...' line"
    return [r.strip().rstrip("/") for r in m.group(1).split("<")]


def room_of(module):
    """The room of a module or header named by its path under src/gateway/, without extension."""
    if "/" in module:
        return module.split("/")[0]
    return "top" if module in TOP else "base"


def face(room):
    return f"{room}/{room}"


def gateway_files():
    """{path under src/gateway/ without extension: [texts of its .c and .h]}."""
    files = {}
    for root, dirs, names in os.walk(GATEWAY):
        dirs.sort()
        for name in sorted(names):
            stem, ext = os.path.splitext(name)
            if ext not in (".c", ".h"):
                continue
            rel = os.path.relpath(os.path.join(root, stem), GATEWAY)
            with open(os.path.join(root, name), encoding="utf-8") as fh:
                files.setdefault(rel, []).append((name, fh.read()))
    return files


def include_graph(files):
    """{module: the gateway headers its files include (paths without .h)}, itself left out."""
    return {m: {h for _, text in texts for h in INCLUDE.findall(text) if h != m} for m, texts in files.items()}


def wrong_includes(files, order):
    """'FILE includes HEADER: why' for each include that runs up, or past a folder's face."""
    rank = {r: i for i, r in enumerate(order)}
    bad = []
    for module, texts in sorted(files.items()):
        here = room_of(module)
        for name, text in texts:
            where = os.path.join(os.path.dirname(module), name)
            for h in INCLUDE.findall(text):
                there = room_of(h)
                if rank[there] > rank[here]:
                    bad.append(f"src/gateway/{where} includes gateway/{h}.h: {there} is above {here}")
                elif there not in ("base", "top") and there != here and h != face(there) and h not in OWN_HEADERS:
                    bad.append(f"src/gateway/{where} includes gateway/{h}.h: outside {there}/, include {face(there)}.h")
    return bad


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
    header's module: foo.h's in foo.c, or in the files implemented_in names for it (a name ending in
    '_' stands for every file that starts with it). Used for verify/ and the gateway's base."""
    implemented_in = implemented_in or {}
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


def misplaced_in_faces(files, order):
    """(face header, function) pairs where a folder's face declares a function none of its files define."""
    declared = re.compile(DECLARED.format(prefixes="gw_"), re.M)
    bad = []
    for room in order:
        if room in ("base", "top"):
            continue
        texts = [text for m, ts in files.items() if room_of(m) == room for name, text in ts if name.endswith(".c")]
        for m, ts in files.items():
            if m != face(room):
                continue
            for name, text in ts:
                for fn in declared.findall(text):
                    if not any(defined(fn, t) for t in texts):
                        bad.append((f"{m}.h", fn))
    return bad


class GatewayLayersTest(unittest.TestCase):
    def test_the_checks_can_fail(self):
        # The checkers themselves: a loop is found, a layered graph is not, and an include that runs
        # up or past a face is named.
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"a"}}), ["a", "b", "a"])
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}), ["a", "b", "c", "a"])
        self.assertIsNone(find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}))
        order = rooms_in_order()
        up = {"http/connection": [("connection.c", '#include "gateway/fleet/fleet.h"\n')]}
        self.assertIn("fleet is above http", wrong_includes(up, order)[0])
        past = {"api/openai": [("openai.c", '#include "gateway/http/sse.h"\n')]}
        self.assertIn("include http/http.h", wrong_includes(past, order)[0])

    def test_the_rooms_are_the_folders(self):
        order = rooms_in_order()
        self.assertEqual(order[0], "base")
        self.assertEqual(order[-1], "top")
        folders = sorted(d for d in os.listdir(GATEWAY) if os.path.isdir(os.path.join(GATEWAY, d)))
        self.assertEqual(folders, sorted(order[1:-1]), "src/gateway's folders and the 'gateway layers' line differ")
        for room in order[1:-1]:
            headers = sorted(f for f in os.listdir(os.path.join(GATEWAY, room)) if f.endswith(".h"))
            extra = [h for h in headers if f"{room}/{h[:-2]}" not in OWN_HEADERS]
            self.assertEqual(extra, [f"{room}.h"], f"src/gateway/{room}/ has one header of its own")

    def test_no_include_runs_up_or_past_a_face(self):
        self.assertEqual(wrong_includes(gateway_files(), rooms_in_order()), [])

    def test_every_face_declares_its_folders_functions(self):
        self.assertEqual(misplaced_in_faces(gateway_files(), rooms_in_order()), [])

    def test_the_base_modules_declare_their_own_and_form_no_cycle(self):
        self.assertEqual(misplaced_declarations(GATEWAY), [])
        files = {m: t for m, t in gateway_files().items() if room_of(m) == "base"}
        cycle = find_cycle(include_graph(files))
        self.assertIsNone(cycle, "src/gateway's base modules include each other in a cycle: " + " -> ".join(cycle or []))

    def test_only_the_kinds_and_config_read_a_targets_type(self):
        """Residency, admission, dispatch, metrics and the listings ask a target's kind; its config type
        (GW_TARGET_LOCAL, GW_TARGET_REMOTE) is read where the kind is chosen and where it is parsed."""
        named = re.compile(r"\bGW_TARGET_(LOCAL|REMOTE)\b")
        readers = sorted(m for m, texts in gateway_files().items() for _, text in texts if named.search(text))
        self.assertEqual([m for m in readers if room_of(m) != "kinds" and m != "config"], [])
        self.assertIn("kinds/kind", readers)

    def test_at_most_twenty_c_files_stay_in_src_gateway(self):
        direct = [f for f in os.listdir(GATEWAY) if f.endswith(".c")]
        self.assertLessEqual(len(direct), 20, direct)


if __name__ == "__main__":
    unittest.main()
