#!/usr/bin/env python3
"""bench/curves.py: how cost grows with work, for sipp and for llama.cpp's own tools, in one run.

    curves.py --sipp build/bin/sipp --model M [--peer-bin DIR] [--sipp-lib DIR] [--threads 2]
              [--rounds 1] [--quick | --full] [--out build/bench/curves]

Three curves, each measured on both sides with the rounds interleaved (sipp, then the peer, point by
point) so that a shared machine's drift hits both alike:
- TTFT against prompt length: `sipp bench --prompt-lengths` (a prompt of L random tokens, one token
  generated, on a one-slot engine) against llama-bench's pp of the same lengths (TTFT = L / pp rate).
- Decode against concurrency, c streams at parallel = c: `sipp bench --concurrency c` (an engine of c
  slots, c requests at once, each its own prompt and exactly TG generated tokens) against
  llama-batched-bench -npl c with the same context. Aggregate = generated tokens over the level's
  wall time (llama-batched-bench: pl x tg / t); per stream = the requests' own decode rates averaged
  (llama-batched-bench: S_TG / pl).
- Memory against ctx_size x parallel: the same processes, one per level and side, each loading the
  model and running its level; the peak RSS the kernel reports for it (wait4), and the KV and
  compute buffers as llama.cpp allocated them (sipp's engine memory; the peer's own log, -v).

A point's value is the median over rounds. Writes curves.json (the points and the run's conditions:
time, load average, CPU) and curves.csv (one row per point) under --out; bench/plot.py draws them.
Without --peer-bin only sipp's curves are measured (and said so in the JSON). Any failed process or
missing point fails the run with the command that failed.
"""
import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.support.cpu import amx_host  # noqa: E402

RUN_TIMEOUT_S = 3600
CTX_MARGIN = 16  # as sipp bench's

# name: prompt lengths, concurrency levels, (prompt, generated) tokens per stream, context per slot
SIZES = {
    "quick": {"lengths": [16, 64], "levels": [1, 2, 4], "pp": 8, "tg": 8, "ctx_per_slot": 64},
    "default": {"lengths": [128, 512, 2048], "levels": [1, 2, 4, 8, 16], "pp": 16, "tg": 32, "ctx_per_slot": 512},
    "full": {"lengths": [128, 512, 2048, 8192], "levels": [1, 2, 4, 8, 16], "pp": 16, "tg": 64,
             "ctx_per_slot": 2048},
}
MIB_PER_KIB = 1024.0
BUFFER_RE = re.compile(r"(KV|compute|output) buffer size =\s*([0-9.]+) MiB")


class RunFailed(Exception):
    pass


def measured(cmd, env, tmp):
    """Runs cmd with stdout/stderr in files; returns (stdout, stderr, peak RSS MiB) of that one process."""
    out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
    with open(out_path, "w") as out_f, open(err_path, "w") as err_f:
        p = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, env={**os.environ, **(env or {})})
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                raise RunFailed(f"timed out after {RUN_TIMEOUT_S} s: {' '.join(cmd)}")
            time.sleep(0.05)
        p.returncode = os.waitstatus_to_exitcode(status)
    with open(out_path) as f:
        out = f.read()
    with open(err_path) as f:
        err = f.read()
    if p.returncode != 0:
        raise RunFailed(f"exit {p.returncode}: {' '.join(cmd)}\n{err[-2000:]}")
    return out, err, ru.ru_maxrss / MIB_PER_KIB


def median_points(rounds, key):
    """rounds: lists of dicts (one list per round, the same x in each); the median of every field."""
    points = []
    for i, first in enumerate(rounds[0]):
        p = {key: first[key]}
        for field in first:
            if field != key:
                p[field] = statistics.median(r[i][field] for r in rounds)
        points.append(p)
    return points


class Curves:
    def __init__(self, args, size):
        self.a, self.s = args, size
        self.tmp = os.path.join(args.out, "tmp")
        os.makedirs(self.tmp, exist_ok=True)
        self.sipp_env = {}
        if args.sipp_lib:
            lib = os.path.realpath(args.sipp_lib)
            self.sipp_env = {"LD_LIBRARY_PATH": ":".join(filter(None, [lib, args.peer_bin])), "SIPP_ARTIFACT": lib}
        self.peer_env = {"LD_LIBRARY_PATH": args.peer_bin} if args.peer_bin else {}

    def sipp(self, *extra):
        cmd = [self.a.sipp, "bench", self.a.model, "--threads", str(self.a.threads), "-o", "json", *extra]
        out, err, rss = measured(cmd, self.sipp_env, self.tmp)
        return json.loads(out), rss

    def peer(self, tool, *extra):
        cmd = [os.path.join(self.peer_tools(), tool), "-m", self.a.model, "-t", str(self.a.threads), "-fa",
               self.a.peer_fa, *extra]
        return measured(cmd, self.peer_env, self.tmp)

    def peer_tools(self):
        """Where the peer's tools run from. ggml loads the best CPU module found beside the executable;
        on a host with AMX that is the Sapphire Rapids one, whose AMX kernels die of SIGILL (tilezero)
        in the peer's source build on these Xeons, and llama-bench has no --no-repack. So there the
        tools are copied into a folder of their own, beside every CPU module but that one, and ggml
        picks the next best (the module each side ran is in the report's log)."""
        if not amx_host():
            return self.a.peer_bin
        d = os.path.join(self.tmp, "peer-no-amx")
        if not os.path.isdir(d):
            os.makedirs(d)
            for name in os.listdir(self.a.peer_bin):
                src = os.path.join(self.a.peer_bin, name)
                if name in ("llama-bench", "llama-batched-bench"):
                    shutil.copy2(src, d)  # a copy: ggml looks beside the executable's real path
                elif name.startswith("libggml-cpu-") and "sapphirerapids" not in name:
                    os.symlink(src, os.path.join(d, name))
        return d

    def ttft_round(self):
        lengths = self.s["lengths"]
        d, _ = self.sipp("-p", "0", "-n", "0", "-r", str(self.a.reps), "--prompt-lengths", ",".join(map(str, lengths)))
        sipp = [{"prompt_tokens": p["prompt_tokens"], "ttft_ms": p["ttft_ms_p50"],
                 "prefill_tokens_per_s": p["prefill_tokens_per_s"]} for p in d["prompt_curve"]]
        if [p["prompt_tokens"] for p in sipp] != lengths:
            raise RunFailed(f"sipp bench gave prompt lengths {[p['prompt_tokens'] for p in sipp]}, asked {lengths}")
        peer = None
        if self.a.peer_bin:
            out, _, _ = self.peer("llama-bench", "-p", ",".join(map(str, lengths)), "-n", "0", "-r", str(self.a.reps),
                                  "-o", "json")
            rows = {t["n_prompt"]: t["avg_ts"] for t in json.loads(out) if t["n_prompt"] > 0}
            missing = [n for n in lengths if n not in rows]
            if missing:
                raise RunFailed(f"llama-bench gave no pp for prompt lengths {missing}")
            peer = [{"prompt_tokens": n, "ttft_ms": n / rows[n] * 1e3, "prefill_tokens_per_s": rows[n]} for n in lengths]
        return sipp, peer

    def level_round(self, c):
        s = self.s
        ctx = s["ctx_per_slot"] * c
        d, rss = self.sipp("-p", str(s["pp"]), "-n", str(s["tg"]), "-r", "0", "--concurrency", str(c),
                           "--ctx-per-slot", str(s["ctx_per_slot"]))
        if len(d["levels"]) != 1 or d["levels"][0]["concurrency"] != c:
            raise RunFailed(f"sipp bench --concurrency {c} gave levels {d['levels']}")
        lv = d["levels"][0]
        sipp = {"concurrency": c, "ctx_size": ctx, "aggregate_tokens_per_s": lv["aggregate_tokens_per_s"],
                "per_stream_tokens_per_s": lv["per_stream_tokens_per_s"], "ttft_ms": lv["ttft_ms_p50"],
                "peak_rss_mb": rss, "kv_mb": lv["kv_mb"], "compute_mb": lv["compute_mb"]}
        peer = None
        if self.a.peer_bin:
            out, err, rss = self.peer("llama-batched-bench", "-c", str(ctx), "-b", str(self.a.batch), "-ub",
                                      str(self.a.batch), "-npp", str(s["pp"]), "-ntg", str(s["tg"]), "-npl", str(c),
                                      "--output-format", "jsonl", "-v")
            rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            if len(rows) != 1 or rows[0]["pl"] != c:
                raise RunFailed(f"llama-batched-bench -npl {c} gave rows {rows}")
            r = rows[0]
            bufs = {"KV": 0.0, "compute": 0.0, "output": 0.0}
            for kind, mib in BUFFER_RE.findall(err):
                bufs[kind] += float(mib)
            peer = {"concurrency": c, "ctx_size": ctx, "aggregate_tokens_per_s": r["pl"] * r["tg"] / r["t"],
                    "per_stream_tokens_per_s": r["speed_tg"] / r["pl"], "ttft_ms": r["t_pp"] * 1e3,
                    "peak_rss_mb": rss, "kv_mb": bufs["KV"], "compute_mb": bufs["compute"] + bufs["output"]}
        return sipp, peer

    def measure(self):
        sides = ["sipp"] + (["llama.cpp"] if self.a.peer_bin else [])
        ttft = {side: [] for side in sides}
        levels = {side: [] for side in sides}
        for r in range(self.a.rounds):
            print(f"curves: round {r + 1}/{self.a.rounds}: TTFT", file=sys.stderr)
            sipp, peer = self.ttft_round()
            ttft["sipp"].append(sipp)
            if peer:
                ttft["llama.cpp"].append(peer)
            per_round = {side: [] for side in sides}
            for c in self.s["levels"]:
                print(f"curves: round {r + 1}/{self.a.rounds}: {c} streams", file=sys.stderr)
                sipp, peer = self.level_round(c)
                per_round["sipp"].append(sipp)
                if peer:
                    per_round["llama.cpp"].append(peer)
            for side in sides:
                levels[side].append(per_round[side])
        return ({side: median_points(ttft[side], "prompt_tokens") for side in sides},
                {side: median_points(levels[side], "concurrency") for side in sides})


def load_average():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def write_csv(path, result):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["curve", "side", "x", "metric", "value"])
        for curve, x_key in (("ttft", "prompt_tokens"), ("concurrency", "concurrency")):
            for side, points in result[curve]["sides"].items():
                for p in points:
                    for metric, v in p.items():
                        if metric != x_key:
                            w.writerow([curve, side, p[x_key], metric, f"{v:.4f}"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sipp", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--peer-bin", help="llama.cpp's llama-bench and llama-batched-bench (and their libraries)")
    ap.add_argument("--sipp-lib", help="run sipp on these libraries (libllama/libggml under sipp's names)")
    ap.add_argument("--peer-fa", default="auto", help="the peers' -fa (default auto, as sipp's auto)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--reps", type=int, default=1, help="repetitions per TTFT point and round")
    ap.add_argument("--batch", type=int, default=512, help="llama-batched-bench -b/-ub (sipp's engine default)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_const", dest="size", const="quick", help="tiny sizes, for tests")
    g.add_argument("--full", action="store_const", dest="size", const="full", help="up to 8192-token prompts")
    ap.add_argument("--out", default="build/bench/curves")
    a = ap.parse_args()
    size_name = a.size or "default"
    size = SIZES[size_name]
    if a.rounds < 1 or a.reps < 1:
        sys.exit("curves: --rounds and --reps must be at least 1")
    for path, what in ((a.sipp, "--sipp"), (a.model, "--model")):
        if not os.path.exists(path):
            sys.exit(f"curves: {what} {path}: no such file")
    if a.peer_bin and not os.path.exists(os.path.join(a.peer_bin, "llama-batched-bench")):
        sys.exit(f"curves: --peer-bin {a.peer_bin}: no llama-batched-bench there (deps/build-source.sh peer builds it)")
    os.makedirs(a.out, exist_ok=True)
    started, load_before = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), load_average()
    try:
        ttft, levels = Curves(a, size).measure()
    except RunFailed as e:
        sys.exit(f"curves: {e}")
    result = {
        "meta": {"started": started, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "load_average_before": load_before, "load_average_after": load_average(), "cpu": cpu_name(),
                 "nproc": os.cpu_count(), "model": os.path.basename(a.model), "threads": a.threads,
                 "rounds": a.rounds, "size": size_name, "peer_fa": a.peer_fa,
                 "peer": "llama-bench, llama-batched-bench" if a.peer_bin else None,
                 "command": " ".join(sys.argv)},
        "ttft": {"prompt_lengths": size["lengths"], "sides": ttft},
        "concurrency": {"levels": size["levels"], "prompt_tokens": size["pp"], "generated_tokens": size["tg"],
                        "ctx_per_slot": size["ctx_per_slot"], "sides": levels},
    }
    with open(os.path.join(a.out, "curves.json"), "w") as f:
        json.dump(result, f, indent=1)
    write_csv(os.path.join(a.out, "curves.csv"), result)
    print(f"curves: {a.out}/curves.json and curves.csv", file=sys.stderr)


if __name__ == "__main__":
    main()
