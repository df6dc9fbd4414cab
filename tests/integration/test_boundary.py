"""The library boundary, enforced: libsipp.so exports exactly the SIPP_API functions of sipp.h, the
clients (the sipp binary, sipp-synth, the Node addon) link it instead of the static archive, a call
across the boundary to an internal function fails to link, and the include rule of
docs/architecture.md holds in the source tree."""

import os
import re
import subprocess
import tempfile
import unittest

from tests.integration.common import BUILD, ROOT

HEADER = os.path.join(ROOT, "include", "sipp.h")
LIBSIPP = os.path.join(BUILD, "lib", "libsipp.so")
# (binary, whether it calls libsipp): sipp-synth writes GGUF with ggml's gguf API alone, so the
# linker (--as-needed) records no dependency on the libsipp.so it is linked with.
CLIENT_BINARIES = [(os.path.join(BUILD, "bin", "sipp"), True), (os.path.join(BUILD, "bin", "sipp-synth"), False),
                   (os.path.join(ROOT, "bindings", "node", "build", "sipp.node"), True)]

# The include rule (docs/architecture.md).
CLIENT_DIRS = ("src/cli/", "src/gateway/", "bindings/")
CLIENT_MAY_INCLUDE = re.compile(r"^(sipp\.h|util/[\w.]+\.h|cli/[\w.]+\.h|gateway/((http|kinds|fleet|api)/)?[\w.]+\.h)$")
LLAMA_HEADER = re.compile(r"^(llama|ggml|gguf)[\w.-]*\.h$|^(common|chat|json-schema-to-grammar)[\w./-]*\.h$")
# src/wasm: the browser runtime's stand-ins for engine files it cannot compile (chat library, OpenSSL)
LLAMA_DIRS = ("src/engine/", "src/model/", "src/backend/", "src/store/", "src/chat/", "src/speech/", "src/wasm/")
INTERNAL_DIRS = ("store/", "model/", "engine/", "backend/", "verify/", "chat/", "speech/")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def api_functions():
    """The names sipp.h declares with SIPP_API."""
    with open(HEADER) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)
    names = set()
    for decl in re.findall(r"SIPP_API\b([^;{]*?)\(", text):
        m = re.search(r"(\w+)\s*$", decl)
        if m:
            names.add(m.group(1))
    return names


def exported(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def defined(path):
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3 and line.split()[1] in "Tt"}


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def tracked_c_files():
    out = subprocess.run(["git", "ls-files", "-z", "--", "*.c", "*.h", "*.cpp"], cwd=ROOT, capture_output=True,
                         check=True).stdout
    return [f for f in out.decode().split("\0") if f]


def includes(path, quoted=None):
    """The headers a file includes; quoted=True: only "...", False: only <...>."""
    with open(os.path.join(ROOT, path), errors="replace") as f:
        found = [(m.group(1) == '"', m.group(2)) for m in INCLUDE.finditer(f.read())]
    return [name for q, name in found if quoted is None or q == quoted]


class ExportsTest(unittest.TestCase):
    def test_libsipp_exports_exactly_the_api(self):
        api = api_functions()
        self.assertGreater(len(api), 40, "sipp.h parsed to too few SIPP_API functions")
        got = exported(LIBSIPP)
        self.assertEqual(sorted(got - api), [], "exported by libsipp.so but not SIPP_API in sipp.h")
        self.assertEqual(sorted(api - got), [], "SIPP_API in sipp.h but not exported by libsipp.so")

    def test_clients_link_the_shared_library(self):
        api = api_functions()
        for binary, calls in CLIENT_BINARIES:
            with self.subTest(binary=os.path.relpath(binary, ROOT)):
                self.assertTrue(os.path.exists(binary), binary)
                if calls:
                    self.assertIn("libsipp.so", needed(binary))
                self.assertEqual(sorted(defined(binary) & api), [], "a copy of libsipp is linked in statically")

    def test_a_call_across_the_boundary_fails_to_link(self):
        # The same program links when it calls only the API: the failure is the boundary's.
        programs = {
            "inside": ("#include \"sipp.h\"\nint main(void) { return sipp_version()[0] == 0; }\n", True),
            "across": ("#include \"sipp.h\"\nvoid sipp_store_now(char out[32]);\n"
                       "int main(void) { char t[32]; sipp_store_now(t); return 0; }\n", False),
        }
        with tempfile.TemporaryDirectory() as tmp:
            for name, (source, links) in programs.items():
                with self.subTest(program=name):
                    src = os.path.join(tmp, name + ".c")
                    with open(src, "w") as f:
                        f.write(source)
                    p = subprocess.run(["cc", "-std=c11", "-I" + os.path.join(ROOT, "include"), src, "-o",
                                        os.path.join(tmp, name), "-L" + os.path.dirname(LIBSIPP), "-lsipp",
                                        "-Wl,-rpath," + os.path.dirname(LIBSIPP)], capture_output=True, text=True)
                    if links:
                        self.assertEqual(p.returncode, 0, p.stderr)
                    else:
                        self.assertNotEqual(p.returncode, 0, "an internal function linked from libsipp.so")
                        self.assertIn("sipp_store_now", p.stderr)


class IncludeRuleTest(unittest.TestCase):
    def test_clients_include_only_sipp_h_and_util(self):
        offenders = []
        for f in tracked_c_files():
            if not f.startswith(CLIENT_DIRS):
                continue
            offenders += [f"{f}: {inc}" for inc in includes(f, quoted=True) if not CLIENT_MAY_INCLUDE.match(inc)]
            offenders += [f"{f}: <{inc}>" for inc in includes(f, quoted=False)
                          if LLAMA_HEADER.match(inc) or inc.startswith(INTERNAL_DIRS)]
        self.assertEqual(offenders, [], "clients include more than sipp.h and util/")

    def test_only_engine_backend_store_and_chat_include_llama_cpp(self):
        offenders = []
        for f in tracked_c_files():
            if f.startswith(LLAMA_DIRS) or not (f.startswith("src/") or f.startswith("bindings/")):
                continue
            offenders += [f"{f}: {inc}" for inc in includes(f) if LLAMA_HEADER.match(inc)]
        self.assertEqual(offenders, [], "llama.cpp headers outside src/engine, src/model, src/backend, src/store, src/chat, src/speech, src/wasm")

    def test_util_stands_alone(self):
        # libsipp-util.a is linked by clients beside libsipp.so: it may not need libsipp's insides.
        offenders = []
        for f in tracked_c_files():
            if f.startswith("src/util/"):
                offenders += [f"{f}: {inc}" for inc in includes(f)
                              if inc.startswith(INTERNAL_DIRS) or LLAMA_HEADER.match(inc)]
        self.assertEqual(offenders, [])


if __name__ == "__main__":
    unittest.main()
