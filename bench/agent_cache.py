#!/usr/bin/env python3
"""bench/agent_cache.py: the second turn of a coding agent's conversation re-reads only its new
tokens. An agent resends the whole history every turn (Codex with store: false, Claude Code always);
the engine finds the longest prefix an idle slot holds and evaluates the rest.

    bench/agent_cache.py [--agent claude-code|codex] [--tokens 20000] [--n-embd 256] [--n-layer 4]

The captured request of tests/fixtures/agents/ (the tool-result follow-up: the real system prompt,
tools and turns) is grown to about --tokens prompt tokens with more tool round trips of the same
shape (a command and its output), as a long session is. Turn 1 is that request; turn 2 is turn 1
plus one more round trip (about 150 tokens), as the agent sends it next. Both run with a 1-token
output on a synthetic model (Qwen2.5's vocabulary and template, --n-embd/--n-layer, Q8_0) and a
32k context, one slot; the time of each is the request's wall time, almost all of it prefill.
Printed: prompt tokens, cached (re-used) tokens and milliseconds of each turn, and turn 2's
evaluated tokens. Loopback only.
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import test_api_fields as fields  # noqa: E402
import test_gateway_support as gw  # noqa: E402

CTX = 32768
FIXTURES = {"claude-code": "claude-code-2.1.328-turn2-tool-result.json", "codex": "codex-0.169.0-turn2-tool-result.json"}
TIMEOUT_S = 1800
OUTPUT_LINE = "drwxr-xr-x  2 user user  4096 Dec  2 04:00 src/gateway/module_{i:04d}_{j:03d}.c\n"


def round_trip(agent, i, lines):
    """One more tool call and its output, in the agent's own shape."""
    output = "".join(OUTPUT_LINE.format(i=i, j=j) for j in range(lines))
    if agent == "codex":
        return [{"type": "function_call", "call_id": f"call_bench_{i}", "name": "exec_command",
                 "arguments": json.dumps({"cmd": f"ls -l src/gateway/part{i}"})},
                {"type": "function_call_output", "call_id": f"call_bench_{i}", "output": output}]
    return [{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_bench_{i}", "name": "Bash",
                                               "input": {"command": f"ls -l src/gateway/part{i}"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_bench_{i}", "content": output}]}]


def grow(agent, body, turns, lines):
    b = copy.deepcopy(body)
    key = "input" if agent == "codex" else "messages"
    for i in range(turns):
        b[key].extend(round_trip(agent, i, lines))
    b["stream"] = False
    if agent == "codex":
        b["max_output_tokens"] = 1
    else:
        b["max_tokens"] = 1
    return b


def usage(agent, r):
    u = r["usage"]
    if agent == "codex":
        return u["input_tokens"], u["input_tokens_details"]["cached_tokens"]
    return u["input_tokens"] + u["cache_read_input_tokens"], u["cache_read_input_tokens"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agent", choices=sorted(FIXTURES), default="claude-code")
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    path = os.path.join(gw.tmpdir(), f"agent-cache-{a.n_embd}x{a.n_layer}.gguf")
    if not os.path.exists(path):
        subprocess.run([gw.SYNTH, "--out", path, "--vocab", fields.QWEN_VOCAB, "--chat-template-file",
                        os.path.join(fields.TEMPLATES, "Qwen-Qwen2.5-7B-Instruct.jinja"), "--n-embd", str(a.n_embd),
                        "--n-layer", str(a.n_layer), "--n-head", "8", "--n-head-kv", "4", "--n-ff", str(3 * a.n_embd),
                        "--type", "q8_0"], check=True, capture_output=True)
    with open(os.path.join(ROOT, "tests", "fixtures", "agents", FIXTURES[a.agent])) as f:
        fx = json.load(f)
    headers = {k: v for k, v in fx["headers"].items() if k.lower() not in ("host", "content-length", "connection",
                                                                            "accept-encoding")}
    g = gw.serve_config(gw.local_target("qwen", path=path, parallel=1, ctx=CTX).replace(
        "threads = 1", f"threads = {a.threads}"))
    try:
        # Size the history: count one round trip's tokens, then add as many as the target needs.
        lines = 40
        st, _, r0 = g.json("POST", fx["path"], grow(a.agent, fx["body"], 0, lines), headers, TIMEOUT_S)
        assert st == 200, r0
        base, _ = usage(a.agent, r0)
        st, _, r1 = g.json("POST", fx["path"], grow(a.agent, fx["body"], 1, lines), headers, TIMEOUT_S)
        per_turn = usage(a.agent, r1)[0] - base
        turns = max(0, -(-(a.tokens - base) // per_turn))  # at least --tokens
        g.stop()
        g = gw.serve_config(gw.local_target("qwen", path=path, parallel=1, ctx=CTX).replace(
            "threads = 1", f"threads = {a.threads}"))
        results = []
        for n in (turns, turns + 1):
            body = grow(a.agent, fx["body"], n, lines)
            if n == turns + 1:  # the next turn's new round trip is a short one
                key = "input" if a.agent == "codex" else "messages"
                body[key][-2:] = round_trip(a.agent, n, 2)
            t0 = time.monotonic()
            st, _, r = g.json("POST", fx["path"], body, headers, TIMEOUT_S)
            ms = (time.monotonic() - t0) * 1000
            assert st == 200, r
            prompt, cached = usage(a.agent, r)
            results.append({"prompt_tokens": prompt, "cached_tokens": cached, "evaluated": prompt - cached,
                            "ms": round(ms, 1)})
        print(json.dumps({"agent": a.agent, "model": f"n_embd {a.n_embd}, {a.n_layer} layers, Q8_0, qwen2 vocab",
                          "threads": a.threads, "turn1": results[0], "turn2": results[1]}, indent=1))
    finally:
        g.stop()


if __name__ == "__main__":
    main()
