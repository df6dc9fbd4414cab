#!/usr/bin/env python3
"""bench/agents.py: what a coding agent waits for, on sipp and on llama-server at the same commit.

    bench/agents.py [--agent codex|claude-code|all] [--rounds 2] [--n-embd 256] [--n-layer 4]
                    [--parallel 2] [--ctx 65536] [--threads 2] [--cache-type q8_0 ...] [--peer-libs]
                    [--function-tools-only]

The captured requests of tests/fixtures/agents/ (Codex CLI on /v1/responses, Claude Code on
/v1/messages: each agent's real first request and its tool-result follow-up) are sent, byte for byte
apart from the user's words and the output cap, to `sipp serve` and to llama-server (`--jinja`, the
peer deps/build-source.sh builds from the pinned source) with the same model, context, slots and
threads. Each round starts both servers fresh and measures, server by server:

  cold     time to first token of the first conversation (nothing cached anywhere; both servers
           have their model loaded: a short request goes first)
  shared   time to first token of a new conversation, while the first one is still generating: its
           instructions and tools are the same as the running one's (every session of an agent sends
           the same ~6-12k tokens first); target <= 0.3x llama-server
  turn 2   time to first token of the first conversation's next request (the tool result
           appended), once it has finished; target <= 1.0x llama-server

The table also gives each server's count of a new conversation's prompt tokens (its usage): a
server that shows the model less has less to evaluate. llama-server drops tools that are not of type
"function" (Codex's namespace tool of multi-agent functions, web_search: about 2,300 tokens) where sipp
renders them; --function-tools-only sends only the function tools, so both evaluate the same prompt.

Time to first token is from sending the request to the first delta event of the stream. The model
is synthetic (Qwen2.5's vocabulary and template, --n-embd/--n-layer, Q8_0), so its text is noise;
an output cap keeps the running conversation going while the new one starts. With --cache-type, the
KV bytes per context token of each type are read from both servers' load logs (llama.cpp's
"CPU KV buffer size = N MiB" line, which sipp prints too at SIPP_LOG=debug, over the context). Loopback only. Prints a
Markdown table of medians and their ratios.
"""
import argparse
import copy
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import test_api_fields as fields  # noqa: E402
import test_gateway_support as gw  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
from tests.support.wait import stop_process, wait_until  # noqa: E402

FIXTURES = {
    "codex": ("codex-0.169.0-turn1.json", "codex-0.169.0-turn2-tool-result.json"),
    "claude-code": ("claude-code-2.1.328-turn1.json", "claude-code-2.1.328-turn2-tool-result.json"),
}
HOP_HEADERS = {"host", "content-length", "connection", "accept-encoding", "transfer-encoding"}
RUNNING_CAP = 400  # tokens the first conversation generates, so it is still running when the second starts
SHORT_CAP = 4
TIMEOUT_S = 1800
READY_TIMEOUT_S = 300
KV_SIZE_RE = re.compile(r"llama_kv_cache: +\S+ KV buffer size = +([0-9.]+) MiB")


def load_fixture(name):
    with open(os.path.join(ROOT, "tests", "fixtures", "agents", name)) as f:
        fx = json.load(f)
    fx["headers"] = {k: v for k, v in fx["headers"].items() if k.lower() not in HOP_HEADERS}
    return fx


def user_words(fx, words):
    """fx's body with the last user text replaced (another conversation of the same agent)."""
    body = copy.deepcopy(fx["body"])
    key = "input" if "input" in body else "messages"
    for item in reversed(body[key]):
        if item.get("role") != "user":
            continue
        content = item["content"]
        if isinstance(content, str):
            item["content"] = words
        else:
            texts = [c for c in content if c.get("type") in ("text", "input_text")]
            texts[-1]["text"] = words
        return body
    raise ValueError("no user message in the fixture")


def capped(body, tokens):
    b = copy.deepcopy(body)
    b["stream"] = True
    b["max_output_tokens" if "input" in b else "max_tokens"] = tokens
    return b


class Stream:
    """One streamed request on its own thread: t_first is the first delta event's time."""

    def __init__(self, port, fx, body):
        self.t0 = time.monotonic()
        self.t_first = None
        self.input_tokens = None  # the prompt's tokens as the server counted them (its usage)
        self.error = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(port, fx, body), daemon=True)
        self.thread.start()

    def _run(self, port, fx, body):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
            c.request("POST", fx["path"], body=json.dumps(body),
                      headers={**fx["headers"], "Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                raise RuntimeError(f"{fx['path']}: HTTP {r.status} {r.read()[:300]!r}")
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data: {"):
                    continue
                event = json.loads(line[6:])
                kind = event.get("type", "")
                holder = event.get("message") or event.get("response")
                usage = holder.get("usage") if isinstance(holder, dict) else None
                if isinstance(usage, dict) and usage.get("input_tokens") is not None:
                    # Anthropic's input_tokens leaves out the tokens read from the cache; the Responses
                    # API's counts them (and has no cache_read_input_tokens)
                    self.input_tokens = sum(usage.get(k) or 0 for k in (
                        "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
                if kind in ("error", "response.failed"):
                    raise RuntimeError(f"{fx['path']}: {kind} event {line[:300]}")
                if self.t_first is None and (kind.endswith(".delta") or kind == "content_block_delta"):
                    self.t_first = time.monotonic()
            c.close()
            if self.t_first is None:
                raise RuntimeError(f"{fx['path']}: no delta in the stream")
        except Exception as e:  # noqa: BLE001 (reported by wait)
            self.error = e
        finally:
            self.done.set()

    def first_token(self, timeout=TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while self.t_first is None and not self.done.is_set() and time.monotonic() < deadline:
            time.sleep(0.005)
        if self.t_first is None:
            self.wait()
            raise RuntimeError("the stream ended before its first token")
        return (self.t_first - self.t0) * 1000

    def wait(self):
        self.thread.join(TIMEOUT_S)
        if self.error:
            raise self.error


def warm(port, fx):
    """One short request, so that sipp (which loads a model on its first request) has its model loaded
    as llama-server has from its start."""
    body = capped(fx["body"], 1)
    key = "input" if "input" in body else "messages"
    body[key] = [{"role": "user", "content": "Hi"}]
    body.pop("tools", None)
    Stream(port, fx, body).wait()


def function_tools_only(fx):
    """fx with only its tools of type "function": llama-server drops the others (Codex's namespace
    tool of 8 functions, web_search) without a word, so its prompt is shorter than the one sipp
    shows the model; with this both servers evaluate the same prompt."""
    fx["body"]["tools"] = [t for t in fx["body"].get("tools", []) if t.get("type") == "function"]
    return fx


def one_round(port, agent, same_tools=False):
    turn1, turn2 = (load_fixture(n) for n in FIXTURES[agent])
    if same_tools:
        turn1, turn2 = function_tools_only(turn1), function_tools_only(turn2)
    warm(port, turn1)
    first = Stream(port, turn1, capped(turn1["body"], RUNNING_CAP))
    cold = first.first_token()
    other = Stream(port, turn1, capped(user_words(turn1, "List the files here, please."), SHORT_CAP))
    shared = other.first_token()
    other.wait()
    first.wait()
    nxt = Stream(port, turn2, capped(turn2["body"], SHORT_CAP))
    t2 = nxt.first_token()
    nxt.wait()
    return {"cold": cold, "shared": shared, "turn2": t2, "tokens": other.input_tokens}


def healthy(port, proc, log):
    """Whether the server answers /health with 200; raises when it has exited."""
    if proc.poll() is not None:
        with open(log, encoding="utf-8", errors="replace") as f:
            raise RuntimeError(f"server exited {proc.returncode}:\n{f.read()[-3000:]}")
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/health")
        return c.getresponse().status == 200
    except OSError:
        return False


def start(cmd, env, port, log):
    with open(log, "w") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        wait_until(lambda: healthy(port, proc, log), READY_TIMEOUT_S, f"{cmd[0]} on port {port} ready")
    except BaseException:
        stop_process(proc)
        raise
    return proc


def peer_libs_env(peer):
    """The environment that runs sipp on the peer's own libllama/libggml and CPU modules (as
    bench/run.sh does), so that a ratio measures sipp and not how the two sets of libraries were
    built: on an AMD EPYC the prebuilt artifact's CPU module ran flash attention over an 11k-token
    context at about half the source build's speed."""
    same = os.path.join(gw.tmpdir(), "peer-libs")
    os.makedirs(same, exist_ok=True)
    links = {"libllama.v0.4.0.so": "libllama.so", "libggml.v0.4.0.so": "libggml.so",
             "libggml-base.so": "libggml-base.so"}
    links.update({n: n for n in os.listdir(peer) if n.startswith("libggml-cpu-") and n.endswith(".so")})
    for name, target in links.items():
        if not os.path.lexists(os.path.join(same, name)):
            os.symlink(os.path.join(peer, target), os.path.join(same, name))
    return {"SIPP_ARTIFACT": same, "LD_LIBRARY_PATH": f"{same}:{peer}"}


SIPP_ENV = {}


def sipp_server(a, model, port, log, cache_type):
    cfg = (f'[[targets]]\nname = "qwen"\ntype = "local"\nmodel = "{model}"\n'
           f'ctx_size = {a.ctx}\nparallel = {a.parallel}\nthreads = {a.threads}\n'
           f'aliases = ["claude-*", "gpt-*"]\n')
    if cache_type:
        cfg += f'cache_type_k = "{cache_type}"\ncache_type_v = "{cache_type}"\n'
    path = os.path.join(gw.tmpdir(), f"agents-bench-{port}.toml")
    with open(path, "w") as f:
        f.write(cfg)
    return start([gw.SIPP, "serve", "--config", path, "--port", str(port)],
                 dict(os.environ, SIPP_LOG="debug", **SIPP_ENV), port, log)


def peer_server(a, peer, model, port, log, cache_type):
    cmd = [os.path.join(peer, "llama-server"), "-m", model, "--jinja", "-c", str(a.ctx), "-np", str(a.parallel),
           "-t", str(a.threads), "--host", "127.0.0.1", "--port", str(port), "-a", "qwen"]
    if cache_type:
        cmd += ["-ctk", cache_type, "-ctv", cache_type, "-lv", "4"]  # -lv 4: its KV buffer line
    return start(cmd, dict(os.environ, LD_LIBRARY_PATH=peer), port, log)


def peer_bin():
    out = subprocess.run(["bash", "deps/build-source.sh", "peer"], cwd=ROOT, capture_output=True, text=True, check=True)
    return os.path.join(out.stdout.strip().splitlines()[-1], "bin")


def make_model(a):
    # trained for the whole context: llama-server cuts -c down to a model's trained context
    path = os.path.join(gw.tmpdir(), f"agents-bench-{a.n_embd}x{a.n_layer}-{a.ctx}.gguf")
    subprocess.run([gw.SYNTH, "--out", path, "--vocab", fields.QWEN_VOCAB, "--chat-template-file",
                    os.path.join(fields.TEMPLATES, "Qwen-Qwen2.5-7B-Instruct.jinja"), "--n-embd", str(a.n_embd),
                    "--n-layer", str(a.n_layer), "--n-head", "8", "--n-head-kv", "4", "--n-ff", str(3 * a.n_embd),
                    "--n-ctx", str(a.ctx), "--type", "q8_0"], check=True, capture_output=True)
    return path


def kv_bytes_per_token(log, ctx):
    """The KV buffers llama.cpp logged allocating (every device's), per context cell."""
    with open(log, encoding="utf-8", errors="replace") as f:
        sizes = [float(m) for m in KV_SIZE_RE.findall(f.read())]
    return sum(sizes) * 1024 * 1024 / ctx if sizes else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agent", choices=sorted(FIXTURES) + ["all"], default="all")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=65536, help="context of all slots together (llama-server's -c)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache-type", action="append", default=[],
                    help="also measure KV bytes per token with this -ctk/-ctv type (repeatable: f16, q8_0, q4_0)")
    ap.add_argument("--peer-libs", action="store_true",
                    help="run sipp on the peer's libraries (sipp's own cost) instead of its prebuilt artifact")
    ap.add_argument("--function-tools-only", action="store_true",
                    help="send only the fixtures' function tools, which llama-server renders; it drops the rest")
    a = ap.parse_args()
    model = make_model(a)
    peer = peer_bin()
    if a.peer_libs:
        SIPP_ENV.update(peer_libs_env(peer))
    agents = sorted(FIXTURES) if a.agent == "all" else [a.agent]
    rows = {}
    for agent in agents:
        for server in ("sipp", "llama-server"):
            rows[(agent, server)] = []
        for r in range(a.rounds):
            for server in ("sipp", "llama-server"):
                port = free_port()
                log = os.path.join(gw.tmpdir(), f"agents-bench-{server}-{agent}-{r}.log")
                proc = (sipp_server(a, model, port, log, None) if server == "sipp"
                        else peer_server(a, peer, model, port, log, None))
                try:
                    res = one_round(port, agent, a.function_tools_only)
                finally:
                    stop_process(proc)
                print(f"bench: {agent} {server} round {r + 1}: " +
                      ", ".join(f"{k} {v:.0f} ms" for k, v in res.items() if k != "tokens") +
                      f" (new conversation: {res['tokens']} prompt tokens)", file=sys.stderr)
                rows[(agent, server)].append(res)
    libs = "the peer's libraries" if a.peer_libs else "its prebuilt artifact"
    tools = "function tools only" if a.function_tools_only else "every tool the agent sent"
    print(f"\nsipp on {libs}; {tools}; model: synthetic qwen2 vocab, n_embd {a.n_embd}, {a.n_layer} layers, Q8_0; ctx {a.ctx}, "
          f"parallel {a.parallel}, threads {a.threads}; medians of {a.rounds} rounds\n")
    print("| agent | a new conversation's prompt tokens, sipp / llama-server |")
    print("|---|---|")
    for agent in agents:
        print(f"| {agent} | {rows[(agent, 'sipp')][0]['tokens']} / {rows[(agent, 'llama-server')][0]['tokens']} |")
    print("\n| agent | measure | sipp ms | llama-server ms | sipp / llama-server |")
    print("|---|---|---|---|---|")
    for agent in agents:
        for k, label in (("cold", "first conversation, cold"), ("shared", "new conversation while one runs"),
                         ("turn2", "turn 2 (tool result)")):
            s = statistics.median(x[k] for x in rows[(agent, "sipp")])
            p = statistics.median(x[k] for x in rows[(agent, "llama-server")])
            print(f"| {agent} | {label} | {s:.0f} | {p:.0f} | {s / p:.3f} |")
    if a.cache_type:
        print("\n| KV type | sipp bytes/token | llama-server bytes/token | sipp / llama-server |")
        print("|---|---|---|---|")
        for t in a.cache_type:
            got = {}
            for server in ("sipp", "llama-server"):
                port = free_port()
                log = os.path.join(gw.tmpdir(), f"agents-bench-kv-{server}-{t}.log")
                proc = sipp_server(a, model, port, log, t) if server == "sipp" else peer_server(a, peer, model, port,
                                                                                              log, t)
                try:
                    warm(port, load_fixture(FIXTURES[agents[0]][0]))  # sipp allocates its KV at the load
                finally:
                    stop_process(proc)
                got[server] = kv_bytes_per_token(log, a.ctx)
            s, p = got["sipp"], got["llama-server"]
            ratio = f"{s / p:.3f}" if s and p else "n/a"
            print(f"| {t} | {s or 'n/a'} | {p or 'n/a'} | {ratio} |")


if __name__ == "__main__":
    main()
