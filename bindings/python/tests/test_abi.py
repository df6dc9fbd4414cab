"""The ctypes structures match include/sipp.h: sizes, field offsets and enum values.

ctypes cannot read a C header, so sipp/_native.py repeats every structure. This test compiles a C
program against the real header that prints sizeof and offsetof for each, and compares. A field
added to the header without the same change in _native.py fails here instead of corrupting memory.
"""

import ctypes
import os
import shutil
import subprocess
import unittest

import _support  # noqa: F401  (sets the import path)
from sipp import _errors, _native

INCLUDE = os.path.join(_support.REPO, "include")


class AbiTest(unittest.TestCase):
    def test_structures_match_header(self):
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if not cc:
            self.skipTest("no C compiler (cc) to read include/sipp.h with")
        lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "sipp.h"', "int main(void) {"]
        expected = {}
        for cls, cname in _native.C_STRUCTS.items():
            lines.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
            expected[cname] = ctypes.sizeof(cls)
            for fname, _ in cls._fields_:
                lines.append(f'printf("{cname}.{fname} %zu\\n", offsetof({cname}, {fname}));')
                expected[f"{cname}.{fname}"] = getattr(cls, fname).offset
        enums = {"SIPP_ERR_INTERNAL": len(_errors.STATUS_CLASSES) - 1, "SIPP_ERR_CANCELLED": _native.STATUS_CANCELLED,
                 "SIPP_FINISH_ERROR": _native.FINISH_ERROR, "SIPP_SEED_RANDOM": _native.SEED_RANDOM,
                 "SIPP_ERROR_SIZE": _native.ERROR_SIZE}
        for name, value in enums.items():
            lines.append(f'printf("{name} %llu\\n", (unsigned long long){name});')
            expected[name] = value
        lines += ["return 0;", "}"]
        tmp = _support.tmpdir()
        src, exe = os.path.join(tmp, "abi.c"), os.path.join(tmp, "abi")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        r = subprocess.run([cc, "-std=c11", "-I", INCLUDE, src, "-o", exe], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, f"the layout probe does not compile: {r.stderr}")
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
        actual = {k: int(v) for k, v in (line.split() for line in out.splitlines())}
        diffs = [f"{k}: C {actual[k]}, ctypes {expected[k]}" for k in expected if actual.get(k) != expected[k]]
        self.assertEqual(diffs, [], "sipp/_native.py no longer matches include/sipp.h; update its structures")

    def test_status_classes_match_names(self):
        lib = _native.library()
        for code, cls in enumerate(_errors.STATUS_CLASSES):
            if cls is not None:
                self.assertEqual(_native.text(lib.status_name(code)), cls.status)


if __name__ == "__main__":
    unittest.main()
