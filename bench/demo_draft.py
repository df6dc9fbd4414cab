#!/usr/bin/env python3
"""bench/demo_draft.py: speculative decoding with a trained pair, sipp-demo and its draft
(models/sipp-demo.gguf and models/sipp-demo-draft.gguf, tools/train/demo-model.sh), whose acceptance
comes from what both learnt rather than from one being a copy of the other's layers.

    bench/demo_draft.py [--rounds 3] [--threads 2] [--tokens 64] [--peer]

One `sipp serve` runs three targets on the same model: plain; draft (the draft, draft_max 8, the
default draft_cutoff = "auto"); draft_off (the draft proposing draft_max every step). Two kinds of
held-out prompt, written from a corpus seed no training phase used (tools/train/corpus.py):

  - chat: questions in the corpus's shapes (greetings, sums, JSON answers), greedy, each answer to
    its end (a short one: the model stops at <|im_end|>);
  - prose: the first words of KJV passages and fortunes no phase trained on, continued on
    /v1/completions for --tokens tokens (ignore_eos).

Each round sends every prompt to each target one after another; a configuration's rate is its
generated tokens over its wall time (prefill included, the same prompt for every target), and the
ratios are medians over rounds of per-round ratios. The acceptance is the draft_off target's
accepted / proposed tokens (usage.sipp), over every prompt and for chat and prose apart.

--peer adds llama-server from the same pinned source (deps/build-source.sh peer) on the same pair:
one plain and one with `--model-draft --spec-type draft-simple --spec-draft-n-max 8` (it always
drafts, as draft_off does), sent the same requests in the same rounds; its acceptance is its
`timings.draft_n_accepted / draft_n`. Loopback only.
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tools", "train"))
import corpus  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
sys.path.insert(0, os.path.join(REPO, "bench"))
import speculative as spec  # noqa: E402  (peer_bin: the peer's llama-server, built from the pinned source)

SIPP = os.path.join(REPO, "build", "bin", "sipp")
MODEL = os.path.join(REPO, "models", "sipp-demo.gguf")
DRAFT = os.path.join(REPO, "models", "sipp-demo-draft.gguf")
DRAFT_MAX = 8
HELD_OUT_SEED = 1000  # no phase of tools/train/demo-model.sh uses it
CHAT_PROMPTS = 12
PROSE_PROMPTS = 4
PROSE_WORDS = 12
CHAT_TOKENS = 48
READY_TIMEOUT_S = 120
REQUEST_TIMEOUT_S = 600
TARGETS = ("plain", "draft", "draft_off")


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"{path}: HTTP {r.status} {out[:300]!r}")
    return json.loads(out)


def wait_ready(port, proc, path="/ready"):
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited {proc.returncode} before it was ready")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("sipp serve not ready in time")


def held_out_chats():
    """User questions of the corpus's shapes, from a seed no training phase used: a few may repeat a
    trained question word for word (there are only so many greetings), none repeats a dialogue."""
    import random
    rng = random.Random(HELD_OUT_SEED)
    out = []
    while len(out) < CHAT_PROMPTS:
        kind = len(out) % 3
        if kind == 0:
            out.append([{"role": "user", "content": rng.choice(corpus.GREETINGS + corpus.FACTS)[0]}])
        elif kind == 1:
            a, b = rng.randint(0, 9), rng.randint(0, 9)
            out.append([{"role": "user", "content": f"What is {a}+{b}?"}])
        else:
            name, age = rng.choice(corpus.NAMES), rng.randint(1, 90)
            out.append([{"role": "system", "content": corpus.JSON_SYSTEM},
                        {"role": "user", "content": f"Make a person named {name} who is {age} years old."}])
    return out


def held_out_prose():
    seen = set()
    for phase in corpus.DEMO_CORPORA.values():
        seen.update(corpus.build(**phase))
    pool = [p for p in corpus.kjv_passages() + corpus.fortunes() if p not in seen]
    if len(pool) < PROSE_PROMPTS:
        sys.exit("bench/demo_draft.py: the prose prompts need Debian's bible-kjv and fortunes-min (make setup)")
    step = len(pool) // PROSE_PROMPTS
    return [" ".join(pool[i * step].split()[:PROSE_WORDS]) for i in range(PROSE_PROMPTS)]


def run(port, target, chats, prose, tokens):
    """(generated tokens, seconds, {kind: [proposed, accepted]}) over every prompt, one after
    another; kind is chat or prose. A sipp target's counts are its usage.sipp; llama-server's
    (target None) its timings."""
    n = seconds = 0
    drafts = {"chat": [0, 0], "prose": [0, 0]}
    jobs = [("chat", "/v1/chat/completions", dict(messages=m, max_tokens=CHAT_TOKENS)) for m in chats]
    jobs += [("prose", "/v1/completions", dict(prompt=p, max_tokens=tokens, ignore_eos=True)) for p in prose]
    for kind, path, body in jobs:
        t0 = time.monotonic()
        out = post(port, path, dict(body, model=target or "peer", temperature=0))
        seconds += time.monotonic() - t0
        n += out["usage"]["completion_tokens"]
        if target:
            drafts[kind][0] += out["usage"]["sipp"]["draft_tokens"]
            drafts[kind][1] += out["usage"]["sipp"]["accepted_tokens"]
        else:
            drafts[kind][0] += out.get("timings", {}).get("draft_n", 0)
            drafts[kind][1] += out.get("timings", {}).get("draft_n_accepted", 0)
    return n, seconds, drafts


def peer_servers(args, tmp):
    """llama-server plain and with the draft, each on its own port: {name: (port, process)}."""
    try:
        peer = spec.peer_bin()
    except subprocess.CalledProcessError as e:
        sys.exit(f"bench/demo_draft.py: the peer build failed:\n{e.stderr[-2000:]}")
    servers = {}
    for name, extra in (("peer_plain", []), ("peer_draft", ["--model-draft", DRAFT, "--spec-type", "draft-simple",
                                                            "--spec-draft-n-max", str(DRAFT_MAX)])):
        port = free_port()
        proc = subprocess.Popen([os.path.join(peer, "llama-server"), "-m", MODEL, "-t", str(args.threads), "-c", "2048",
                                 "-np", "1", "--port", str(port), "--host", "127.0.0.1", "--jinja", *extra],
                                env=dict(os.environ, LD_LIBRARY_PATH=peer), stdout=subprocess.DEVNULL,
                                stderr=open(os.path.join(tmp, name + ".log"), "w"))
        servers[name] = (port, proc)
    for name, (port, proc) in servers.items():
        wait_ready(port, proc, "/health")
    return servers


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64, help="tokens of each prose continuation")
    ap.add_argument("--peer", action="store_true", help="add llama-server plain and --model-draft on the same pair")
    args = ap.parse_args()
    for path in (SIPP, MODEL, DRAFT):
        if not os.path.isfile(path):
            sys.exit(f"bench/demo_draft.py: {path} is missing (make; models/ is committed)")
    chats, prose = held_out_chats(), held_out_prose()
    common = f'model = "{MODEL}"\nthreads = {args.threads}\nparallel = 1\nctx_size = 2048\n'
    with tempfile.TemporaryDirectory(prefix="sipp-demo-draft-") as tmp:
        cfg = os.path.join(tmp, "demo-draft.toml")
        with open(cfg, "w") as f:
            f.write(f'[[targets]]\nname = "plain"\ntype = "local"\n{common}\n'
                    f'[[targets]]\nname = "draft"\ntype = "local"\n{common}draft_model = "{DRAFT}"\n'
                    f'draft_max = {DRAFT_MAX}\n\n'
                    f'[[targets]]\nname = "draft_off"\ntype = "local"\n{common}draft_model = "{DRAFT}"\n'
                    f'draft_max = {DRAFT_MAX}\ndraft_cutoff = "off"\n')
        port = free_port()
        proc = subprocess.Popen([SIPP, "serve", "--config", cfg, "--port", str(port)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        servers = {}
        try:
            wait_ready(port, proc)
            where = {t: (port, t) for t in TARGETS}
            if args.peer:
                servers = peer_servers(args, tmp)
                where.update({name: (p, None) for name, (p, _) in servers.items()})
            for t, (p, model) in where.items():  # load each and warm it
                run(p, model, chats[:1], prose[:1], 8)
            rates = {t: [] for t in where}
            totals = {t: {"chat": [0, 0], "prose": [0, 0]} for t in where}
            for _ in range(args.rounds):
                for t, (p, model) in where.items():
                    n, s, drafts = run(p, model, chats, prose, args.tokens)
                    rates[t].append(n / s)
                    for kind, (proposed, accepted) in drafts.items():
                        totals[t][kind][0] += proposed
                        totals[t][kind][1] += accepted
        finally:
            for p in [proc] + [pr for _, pr in servers.values()]:
                p.terminate()
                p.wait(30)

    def ratio(a, b):
        return statistics.median(x / y for x, y in zip(rates[a], rates[b]))

    def acceptance(t, kinds=("chat", "prose")):
        proposed = sum(totals[t][k][0] for k in kinds)
        accepted = sum(totals[t][k][1] for k in kinds)
        return f"{accepted / proposed:.0%} of {proposed}" if proposed else "none proposed"

    print(f"# sipp-demo + sipp-demo-draft, {len(chats)} chat and {len(prose)} prose held-out prompts, "
          f"{args.rounds} rounds, -t {args.threads}, draft_max {DRAFT_MAX}, load average {os.getloadavg()[0]:.1f}")
    print("| acceptance (draft_off) | acceptance (auto) | plain tok/s | draft tok/s (auto / off) | "
          "draft / plain (auto / off) |")
    print("|---|---|---|---|---|")
    print(f"| {acceptance('draft_off')} | {acceptance('draft')} | {statistics.median(rates['plain']):.1f} | "
          f"{statistics.median(rates['draft']):.1f} / {statistics.median(rates['draft_off']):.1f} | "
          f"{ratio('draft', 'plain'):.2f} / {ratio('draft_off', 'plain'):.2f} |")
    print(f"\nacceptance of draft_off by kind: chat {acceptance('draft_off', ('chat',))}, "
          f"prose {acceptance('draft_off', ('prose',))}")
    if args.peer:
        print("\n| llama-server plain tok/s | llama-server draft tok/s | its draft / its plain | its acceptance "
              "(chat / prose) | sipp plain / llama-server plain | sipp draft (auto / off) / llama-server draft |")
        print("|---|---|---|---|---|---|")
        print(f"| {statistics.median(rates['peer_plain']):.1f} | {statistics.median(rates['peer_draft']):.1f} | "
              f"{ratio('peer_draft', 'peer_plain'):.2f} | {acceptance('peer_draft', ('chat',))} / "
              f"{acceptance('peer_draft', ('prose',))} | {ratio('plain', 'peer_plain'):.2f} | "
              f"{ratio('draft', 'peer_draft'):.2f} / {ratio('draft_off', 'peer_draft'):.2f} |")


if __name__ == "__main__":
    main()
