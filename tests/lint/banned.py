#!/usr/bin/env python3
"""tests/lint/banned.py: calls sipp's C sources may not make (curl's checksrc is the model).

strcpy, strcat, sprintf and vsprintf write without a bound; atoi, atol and atoll cannot report a
malformed or out-of-range number; gets cannot be used safely at all. Each has a bounded or checked
replacement, named in the message. Comments and string literals are not looked at.

In src/gateway/ and src/cli/ the JSON forms of the chat parser and of a request's log-probabilities
are banned too: they read the parsed answer and the logprobs typed (sipp_chat_parser_feed_deltas,
sipp_request_logprobs), so no streamed token crosses a JSON parse inside sipp.

Usage: banned.py [FILE...]; with no files, every tracked .c, .h and .cpp file under src/, tools/ and
bindings/*/src. Prints each call found as FILE:LINE and one closing line "lint: N passed, M failed"
(one per file); exits 1 when a file fails. Run by tests/run.sh (SIPP_TEST_ONLY=lint) and make check.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csource  # noqa: E402

BANNED = {
    'strcpy': 'sipp_strlcpy (util.h), or memcpy with a checked length',
    'strcat': 'snprintf at the end of what is there, or a sipp_buf',
    'sprintf': 'snprintf with the buffer\'s size, checking the result',
    'vsprintf': 'vsnprintf with the buffer\'s size',
    'atoi': 'strtol with an end pointer and a range check',
    'atol': 'strtol with an end pointer and a range check',
    'atoll': 'strtoll with an end pointer and a range check',
    'gets': 'fgets',
}
CALL = re.compile(r'(?<![A-Za-z0-9_.>])(' + '|'.join(BANNED) + r')\s*\(')
# sipp's own layers above libsipp read a chat's answer typed (issue 45): the parser's JSON forms exist
# for the bindings, and printing JSON in one layer to parse it in the next is what they replace.
TYPED = {
    'sipp_chat_parser_feed': 'sipp_chat_parser_feed_deltas (typed sipp_chat_delta)',
    'sipp_chat_parser_message': 'sipp_chat_parser_content, _reasoning and _tool_call',
    'sipp_request_logprobs_json': 'sipp_request_logprobs (typed), or util/logprobs_json.h to render them',
}
TYPED_DIRS = ('src/gateway/', 'src/cli/')
TYPED_CALL = re.compile(r'(?<![A-Za-z0-9_.>])(' + '|'.join(TYPED) + r')\s*\(')


def tracked_sources():
    out = subprocess.run(['git', 'ls-files', '--', 'src', 'tools', 'bindings/*/src'], capture_output=True,
                         text=True, check=True).stdout.split()
    return [f for f in out if f.endswith(('.c', '.h', '.cpp'))]


def check(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        text = csource.blank(f.read())
    found = []
    typed = os.path.relpath(os.path.abspath(path), ROOT).startswith(TYPED_DIRS) or '/gateway/' in path
    for no, line in enumerate(text.split('\n'), 1):
        for m in CALL.finditer(line):
            found.append(f'{path}:{no}: {m.group(1)}() is banned; use {BANNED[m.group(1)]}')
        for m in TYPED_CALL.finditer(line) if typed else ():
            found.append(f'{path}:{no}: {m.group(1)}() makes JSON for the bindings; here use {TYPED[m.group(1)]}')
    return found


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv):
    root = ROOT
    files = argv[1:]
    if not files:
        os.chdir(root)
        files = tracked_sources()
    passed = failed = 0
    for path in files:
        found = check(path)
        for msg in found:
            print(msg)
        if found:
            failed += 1
        else:
            passed += 1
    print(f'lint: {passed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
