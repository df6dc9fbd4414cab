#!/usr/bin/env python3
"""bench/kv_cache.py: what the KV cache's type costs and saves (sipp_engine_params.cache_type_k/_v).

    kv_cache.py MODEL [--sipp build/bin/sipp] [--types f16,q8_0,q4_0] [--concurrency 4]
                [--ctx-per-slot 4096] [-p 512] [-n 64] [-r 3] [--threads N] [--backend NAME]

For each type T, runs `sipp bench MODEL -ctk T -ctv T --flash-attn on -o json` (flash attention on,
since a quantized V cache needs it, and for f16 too, so that only the cache differs) and prints one
row per type: prefill and decode tokens/s of one stream (pp, tg), and at the concurrency level the
aggregate decode tokens/s and the KV cache's bytes as the engine measured them (kv_mb), with the
ratio to f16's. Bytes and speed live here, not in the tests (tests/integration/test_kv_cache.py
checks correctness only). Prints a Markdown table, or --json.
"""
import argparse
import json
import subprocess
import sys

TIMEOUT_S = 3600


def bench(args, cache_type):
    cmd = [args.sipp, "bench", args.model, "-ctk", cache_type, "-ctv", cache_type, "--flash-attn", "on",
           "-o", "json", "-p", str(args.p), "-n", str(args.n), "-r", str(args.r),
           "--concurrency", str(args.concurrency), "--ctx-per-slot", str(args.ctx_per_slot),
           "--backend", args.backend]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if r.returncode != 0:
        sys.exit(f"kv_cache.py: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    out = json.loads(r.stdout)
    level = out["levels"][-1] if out.get("levels") else {}
    return {"type": cache_type, "pp": out.get("pp", {}).get("mean"), "tg": out.get("tg", {}).get("mean"),
            "concurrency": level.get("concurrency"), "ctx_size": level.get("ctx_size"),
            "aggregate_tokens_per_s": level.get("aggregate_tokens_per_s"), "kv_mb": level.get("kv_mb")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--sipp", default="build/bin/sipp")
    ap.add_argument("--types", default="f16,q8_0,q4_0")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--ctx-per-slot", type=int, default=4096)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [bench(args, t) for t in args.types.split(",")]
    base = next((r["kv_mb"] for r in rows if r["type"] == "f16"), None)
    for r in rows:
        r["kv_vs_f16"] = r["kv_mb"] / base if base and r["kv_mb"] is not None else None
    if args.json:
        print(json.dumps(rows, indent=1))
        return

    def fmt(v, spec):
        return format(v, spec) if v is not None else "-"

    print("| cache (K = V) | pp t/s | tg t/s | slots x ctx | aggregate t/s | KV MiB | KV vs f16 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['type']} | {fmt(r['pp'], '.1f')} | {fmt(r['tg'], '.1f')} | {r['concurrency']} x "
              f"{args.ctx_per_slot} | {fmt(r['aggregate_tokens_per_s'], '.1f')} | {fmt(r['kv_mb'], '.1f')} | "
              f"{fmt(r['kv_vs_f16'], '.2f')} |")


if __name__ == "__main__":
    main()
