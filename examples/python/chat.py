#!/usr/bin/env python3
"""Streams a chat answer from a local GGUF model to stdout, with sipp's Python binding.

    SIPP_PYTHON_BACKEND=cpu python3 examples/python/chat.py models/sipp-demo.gguf "Hello!"

SIPP_PYTHON_BACKEND (auto, cpu, vulkan, cuda, metal) picks the backend; the speed and the backend
that ran it are printed on stderr at the end. Ctrl-C stops the answer.
"""

import os
import sys

# the package lives in bindings/python of this repository; an installed one works the same
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python"))

import sipp  # noqa: E402


def main(argv):
    if len(argv) != 3:
        print(f"usage: {argv[0]} MODEL.gguf PROMPT", file=sys.stderr)
        return 2
    model, prompt = argv[1], argv[2]
    try:
        with sipp.Client() as client:
            ep = client.add("local", sipp.local(model, ctx_size=2048, parallel=1))
            messages = [{"role": "user", "content": prompt}]
            with client.chat(messages, endpoint=ep, max_tokens=256, stream=True) as stream:
                try:
                    for piece in stream:
                        sys.stdout.write(piece)
                        sys.stdout.flush()
                except KeyboardInterrupt:
                    stream.cancel()
                    list(stream)
            r = stream.response
            print()
            s = r.stats
            print(f"-- {ep.backend['backend']} ({ep.backend['reason']}) | {r.usage['prompt_tokens']} prompt tokens, "
                  f"{r.usage['completion_tokens']} generated, {s['decode_tokens_per_s']:.1f} tokens/s, "
                  f"ttft {s['ttft_ms']:.0f} ms | finish {r.finish_reason}", file=sys.stderr)
    except sipp.SippError as e:
        print(f"sipp: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
