#!/usr/bin/env python3
"""bench/plot.py: draws bench/curves.py's curves as SVG, by hand (standard library only, no network).

    plot.py CURVES_JSON OUT_DIR

Writes three figures into OUT_DIR, each with one line per side (sipp, llama.cpp):
- ttft.svg: TTFT (ms, log scale) against prompt length (tokens, log scale);
- decode.svg: aggregate (solid) and per-stream (dashed) decode tokens/s against streams, at
  parallel = streams;
- memory.svg: peak RSS (solid) and KV + compute buffers (dashed), MiB, against ctx_size x parallel.

Before drawing it checks the file: every side must have a point at every prompt length and every
level the run asked for, each with a finite positive value; anything missing or malformed is an
error naming the curve, the side and the point (exit status 1), so a broken run cannot draw a
plausible picture.
"""
import json
import math
import os
import sys

WIDTH, HEIGHT = 720, 400
MARGIN = {"left": 72, "right": 200, "top": 40, "bottom": 56}
Y_TICKS = 5
COLORS = {"sipp": "#1f77b4", "llama.cpp": "#d62728"}
DASH = "6,4"
FONT = "font-family='sans-serif' font-size='12'"

TTFT_FIELDS = ("ttft_ms", "prefill_tokens_per_s")
LEVEL_FIELDS = ("aggregate_tokens_per_s", "per_stream_tokens_per_s", "peak_rss_mb", "kv_mb", "compute_mb", "ctx_size")


class BadCurves(Exception):
    pass


def check(d):
    """The curves a run must have, or BadCurves naming what is missing."""
    for curve, xs_key, x_key, fields in (("ttft", "prompt_lengths", "prompt_tokens", TTFT_FIELDS),
                                         ("concurrency", "levels", "concurrency", LEVEL_FIELDS)):
        c = d.get(curve)
        if not isinstance(c, dict) or not isinstance(c.get(xs_key), list) or not c[xs_key]:
            raise BadCurves(f"no {curve} curve (its {xs_key} list)")
        sides = c.get("sides")
        if not isinstance(sides, dict) or "sipp" not in sides:
            raise BadCurves(f"{curve}: no sipp side")
        for side, points in sides.items():
            by_x = {p.get(x_key): p for p in points if isinstance(p, dict)}
            for x in c[xs_key]:
                if x not in by_x:
                    raise BadCurves(f"{curve}: {side} has no point at {x_key} {x}")
                for f in fields:
                    v = by_x[x].get(f)
                    if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                        raise BadCurves(f"{curve}: {side} at {x_key} {x}: {f} is {v!r}, not a positive number")


def ticks_linear(hi):
    step = 10 ** math.floor(math.log10(hi / Y_TICKS)) if hi > 0 else 1
    for mult in (1, 2, 5, 10):
        if hi / (step * mult) <= Y_TICKS:
            step *= mult
            break
    return [step * i for i in range(int(math.ceil(hi / step)) + 1)]


def ticks_log(lo, hi):
    return [10 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def fmt(v):
    return f"{v:g}" if v < 1e5 else f"{v:.0e}"


def chart(title, xlabel, ylabel, series, xs, log_y):
    """series: [(label, side, dashed, [(x, y)])]; x on a log-2 axis through the ticks xs."""
    ys = [y for s in series for _, y in s[3]]
    yt = ticks_log(min(ys), max(ys)) if log_y else ticks_linear(max(ys) * 1.05)
    y_lo, y_hi = yt[0], yt[-1]
    pw, ph = WIDTH - MARGIN["left"] - MARGIN["right"], HEIGHT - MARGIN["top"] - MARGIN["bottom"]
    lx0, lx1 = math.log2(min(xs)), math.log2(max(xs))

    def px(x):
        return MARGIN["left"] + (0.5 if lx1 == lx0 else (math.log2(x) - lx0) / (lx1 - lx0)) * pw

    def py(y):
        t = (math.log10(y) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) if log_y else \
            (y - y_lo) / (y_hi - y_lo)
        return MARGIN["top"] + (1 - t) * ph

    o = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{HEIGHT}' viewBox='0 0 {WIDTH} {HEIGHT}'>",
         f"<rect width='{WIDTH}' height='{HEIGHT}' fill='white'/>",
         f"<text x='{WIDTH / 2}' y='22' text-anchor='middle' {FONT} font-weight='bold'>{title}</text>"]
    for y in yt:
        o.append(f"<line x1='{MARGIN['left']}' x2='{MARGIN['left'] + pw}' y1='{py(y):.1f}' y2='{py(y):.1f}' "
                 f"stroke='#ddd'/>")
        o.append(f"<text x='{MARGIN['left'] - 6}' y='{py(y) + 4:.1f}' text-anchor='end' {FONT}>{fmt(y)}</text>")
    for x in xs:
        o.append(f"<line x1='{px(x):.1f}' x2='{px(x):.1f}' y1='{MARGIN['top']}' y2='{MARGIN['top'] + ph}' "
                 f"stroke='#eee'/>")
        o.append(f"<text x='{px(x):.1f}' y='{MARGIN['top'] + ph + 18}' text-anchor='middle' {FONT}>{x}</text>")
    o.append(f"<rect x='{MARGIN['left']}' y='{MARGIN['top']}' width='{pw}' height='{ph}' fill='none' stroke='#333'/>")
    o.append(f"<text x='{MARGIN['left'] + pw / 2}' y='{HEIGHT - 12}' text-anchor='middle' {FONT}>{xlabel}</text>")
    o.append(f"<text transform='translate(16 {MARGIN['top'] + ph / 2}) rotate(-90)' text-anchor='middle' {FONT}>"
             f"{ylabel}</text>")
    for i, (label, side, dashed, pts) in enumerate(series):
        color = COLORS.get(side, "#555")
        dash = f" stroke-dasharray='{DASH}'" if dashed else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        o.append(f"<polyline class='series' data-label='{label}' points='{path}' fill='none' stroke='{color}' "
                 f"stroke-width='2'{dash}/>")
        for x, y in pts:
            o.append(f"<circle cx='{px(x):.1f}' cy='{py(y):.1f}' r='3' fill='{color}'/>")
        ly = MARGIN["top"] + 12 + i * 18
        lx = MARGIN["left"] + pw + 10
        o.append(f"<line x1='{lx}' x2='{lx + 24}' y1='{ly}' y2='{ly}' stroke='{color}' stroke-width='2'{dash}/>")
        o.append(f"<text x='{lx + 30}' y='{ly + 4}' {FONT}>{label}</text>")
    o.append("</svg>")
    return "\n".join(o) + "\n"


def figures(d):
    meta = d.get("meta", {})
    note = f"{meta.get('model', '?')}, {meta.get('threads', '?')} threads"
    t, c = d["ttft"], d["concurrency"]
    by = {curve: {side: sorted(pts, key=lambda p: p[x]) for side, pts in d[curve]["sides"].items()}
          for curve, x in (("ttft", "prompt_tokens"), ("concurrency", "concurrency"))}
    ttft = chart(f"TTFT against prompt length ({note})", "prompt tokens", "TTFT ms (log)",
                 [(side, side, False, [(p["prompt_tokens"], p["ttft_ms"]) for p in pts])
                  for side, pts in by["ttft"].items()], t["prompt_lengths"], True)
    decode = chart(f"Decode against streams, parallel = streams ({note})", "streams", "tokens/s",
                   [s for side, pts in by["concurrency"].items() for s in (
                       (f"{side} aggregate", side, False, [(p["concurrency"], p["aggregate_tokens_per_s"]) for p in pts]),
                       (f"{side} per stream", side, True, [(p["concurrency"], p["per_stream_tokens_per_s"]) for p in pts]))],
                   c["levels"], False)
    ctx = [p["ctx_size"] for p in by["concurrency"]["sipp"]]
    memory = chart(f"Memory against ctx_size x parallel ({c.get('ctx_per_slot', '?')} per slot)",
                   "ctx_size x parallel (tokens)", "MiB",
                   [s for side, pts in by["concurrency"].items() for s in (
                       (f"{side} peak RSS", side, False, [(p["ctx_size"], p["peak_rss_mb"]) for p in pts]),
                       (f"{side} KV+compute", side, True, [(p["ctx_size"], p["kv_mb"] + p["compute_mb"]) for p in pts]))],
                   ctx, False)
    return {"ttft.svg": ttft, "decode.svg": decode, "memory.svg": memory}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py CURVES_JSON OUT_DIR")
    src, out = sys.argv[1], sys.argv[2]
    try:
        with open(src) as f:
            d = json.load(f)
        check(d)
    except (OSError, ValueError) as e:
        sys.exit(f"plot: {src}: {e}")
    except BadCurves as e:
        sys.exit(f"plot: {src}: {e} (run bench/curves.py again)")
    os.makedirs(out, exist_ok=True)
    for name, svg in figures(d).items():
        with open(os.path.join(out, name), "w") as f:
            f.write(svg)
    print(f"plot: ttft.svg, decode.svg, memory.svg in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
