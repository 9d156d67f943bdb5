#!/usr/bin/env python3
"""Plots and tables from neptune_bench result files (neptune_bench sweep --json, profile --json).

  python3 scripts/plot_sweep.py FILE [FILE ...] --out DIR [--formats png,svg] [--table FILE] [--no-plots]

Files are merged point by point (operator, batch, sequence): a later file's point replaces an
earlier one, except that a failed point never replaces a measured one. So a sweep run in pieces,
or re-run for some points, adds up. The sweeps drawn are those the files define ("sweeps"; the
shapes of docs/design/operators.md when none does): the sequence sweep (batch fixed) and the batch
sweep (sequence fixed).

Writes into DIR, for each sweep: sweep_<name>.png and .svg (one panel per operator, throughput of
each implementation against the swept variable on a log2 axis; TFLOP/s for prefill, TB/s of K and V
for decode), and sweep_tables.md (or --table FILE): per sweep, a table of every point's throughput
per implementation with Neptune's speedup over the best other correct implementation, then the
speedups summarised per operator as geometric means over its points, overall and against compilers
and libraries separately, and the geometric mean over operators (docs/design/operators.md, speedup).

Only results that ran, were judged correct and were timed count; unsupported ones show as "-",
wrong ones as "wrong", failed points as "failed". Needs matplotlib for the plots (scripts/setup.sh
installs it into deps/python, which this script finds by itself); --no-plots writes the table only.
"""
import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LOCAL = os.path.join(os.path.dirname(HERE), "deps", "python")  # scripts/setup.sh's matplotlib
if os.path.isdir(LOCAL) and LOCAL not in sys.path:
    sys.path.append(LOCAL)

SCHEMA = "neptune-bench/1"
DEFAULT_SWEEPS = {"seq": {"batch": 1, "values": [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]},
                  "batch": {"seq": 8192, "values": [1, 2, 4, 8, 16, 32]}}
OPERATORS = ["prefill_global", "prefill_causal", "prefill_alibi", "prefill_gqa", "prefill_softcap",
             "prefill_windowed", "decode_causal", "decode_alibi", "decode_gqa", "decode_softcap"]
IMPLS = ["neptune", "cublas_unfused", "halide_unfused", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "flex"]
COMPILERS = {"flex", "halide_unfused"}
TITLES = {"seq": "Sequence sweep (batch {batch})", "batch": "Batch sweep (sequence {seq})"}
AXIS = {"seq": "sequence length", "batch": "batch"}


class InputError(Exception):
    pass


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE", help="result files of neptune_bench sweep or profile")
    ap.add_argument("--out", required=True, metavar="DIR", help="folder for the plots and the table")
    ap.add_argument("--formats", default="png,svg", help="image formats (default png,svg)")
    ap.add_argument("--table", metavar="FILE", help="the Markdown file (default DIR/sweep_tables.md)")
    ap.add_argument("--no-plots", action="store_true", help="write the table only (no matplotlib needed)")
    a = ap.parse_args(argv)
    a.formats = [f for f in a.formats.split(",") if f]
    if not a.formats or any(f not in ("png", "svg", "pdf") for f in a.formats):
        ap.error("--formats: choose from png, svg, pdf")
    return a


def kind(impl):
    if impl == "neptune":
        return "neptune"
    return "compiler" if impl in COMPILERS else "library"


def load(paths):
    """(sweep definitions, {(op, batch, seq): point}) merged over the files."""
    sweeps, points = {}, {}
    for path in paths:
        try:
            with open(path) as f:
                doc = json.load(f)
        except OSError as e:
            raise InputError(f"{path}: cannot read ({e.strerror})")
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: not JSON ({e})")
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise InputError(f'{path}: not a neptune_bench result file ("schema" is not "{SCHEMA}")')
        for name, d in (doc.get("sweeps") or {}).items():
            if name not in TITLES:
                raise InputError(f"{path}: unknown sweep {name!r}")
            fixed = "batch" if name == "seq" else "seq"
            old = sweeps.get(name)
            if old and old[fixed] == d[fixed]:
                old["values"] = sorted(set(old["values"]) | set(d["values"]))
            else:
                sweeps[name] = {fixed: d[fixed], "values": sorted(d["values"])}
        for i, p in enumerate(doc.get("points", [])):
            try:
                key = (str(p["op"]), int(p["batch"]), int(p["seq"]))
            except (KeyError, TypeError, ValueError) as e:
                raise InputError(f"{path}: point {i} lacks op, batch or seq ({e!r})")
            old = points.get(key)
            if old is None or not (p.get("status") == "failed" and old.get("status") != "failed"):
                points[key] = p
    return sweeps or DEFAULT_SWEEPS, points


def counts(r):
    return bool(r.get("supported")) and r.get("correct", True) and (r.get("median_ms") or 0) > 0


def throughput(p, r):
    return p["work"] / (r["median_ms"] * 1e-3) / 1e12 if counts(r) and p.get("work") else None


def speedups(p):
    """Neptune's speedups at a point: {"overall", "compilers", "libraries"} -> (ratio, vs impl) or None."""
    res = {r["impl"]: r for r in p.get("results", [])}
    n = res.get("neptune")
    out = {"overall": None, "compilers": None, "libraries": None}
    if p.get("status") == "failed" or not n or not counts(n):
        return out
    for group, keep in (("overall", lambda k: True), ("compilers", lambda k: k == "compiler"),
                        ("libraries", lambda k: k == "library")):
        others = [r for name, r in res.items() if name != "neptune" and counts(r) and keep(kind(name))]
        if others:
            best = min(others, key=lambda r: r["median_ms"])
            out[group] = (best["median_ms"] / n["median_ms"], best["impl"])
    return out


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def sweep_points(name, d, points, op):
    """[(x, point)] of `op` on sweep `name`, by x."""
    if name == "seq":
        got = [(s, p) for (o, b, s), p in points.items() if o == op and b == d["batch"] and s in d["values"]]
    else:
        got = [(b, p) for (o, b, s), p in points.items() if o == op and s == d["seq"] and b in d["values"]]
    return sorted(got, key=lambda t: t[0])


def ordered(names, order):
    return [n for n in order if n in names] + sorted(n for n in names if n not in order)


def cell(p, impl):
    if p.get("status") == "failed":
        return "failed"
    r = next((r for r in p.get("results", []) if r["impl"] == impl), None)
    if r is None or not r.get("supported"):
        return "-"
    if not r.get("correct", True):
        return "wrong"
    t = throughput(p, r)
    if t is None:
        return "-"
    return f"{t:.2f}" if p.get("unit") == "TB/s" else f"{t:.1f}"


def ratio(s):
    return f"{s[0]:.2f}x ({s[1]})" if s else "-"


def tables(sweeps, points):
    ops = ordered({k[0] for k in points}, OPERATORS)
    impls = ordered({r["impl"] for p in points.values() for r in p.get("results", [])}, IMPLS)
    lines = ["# neptune_bench sweeps", "",
             "Throughput per implementation (TFLOP/s for prefill by docs/design/operators.md's FLOP count, TB/s "
             "of K and V for decode); the last column is Neptune's speedup, the best other correct implementation's median "
             "time over Neptune's. `-`: unsupported, `wrong`: off the fp64 reference or Neptune beyond 1e-2, "
             "`failed`: the point failed.", ""]
    for name in [n for n in ("seq", "batch") if n in sweeps]:
        d = sweeps[name]
        lines += [f"## {TITLES[name].format(**d)}", "",
                  "| operator | " + AXIS[name] + " | unit | " + " | ".join(impls) + " | Neptune vs best other |",
                  "|---|---:|---|" + "---:|" * len(impls) + "---|"]
        for op in ops:
            for x, p in sweep_points(name, d, points, op):
                lines.append(f"| {op} | {x} | {p.get('unit', '')} | " + " | ".join(cell(p, i) for i in impls) +
                             f" | {ratio(speedups(p)['overall'])} |")
        lines.append("")
    lines += ["## Neptune's speedup per operator", "",
              "Geometric means over the operator's points in these files (each point once): the best other "
              "correct implementation's time over Neptune's, overall, among compilers and among libraries.", "",
              "| operator | points | over the best other | over compilers | over libraries |",
              "|---|---:|---:|---:|---:|"]
    per_op = {g: [] for g in ("overall", "compilers", "libraries")}
    for op in ops:
        sp = [speedups(p) for k, p in sorted(points.items()) if k[0] == op]
        row = [op, str(len(sp))]
        for g in per_op:
            m = geomean([s[g][0] for s in sp if s[g]])
            row.append(f"{m:.2f}x" if m else "-")
            if m:
                per_op[g].append(m)
        lines.append("| " + " | ".join(row) + " |")
    lines.append("| **all operators** (geometric mean) | | " +
                 " | ".join(f"{geomean(per_op[g]):.2f}x" if per_op[g] else "-" for g in per_op) + " |")
    return "\n".join(lines) + "\n"


def plot(sweeps, points, out, formats):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    ops = ordered({k[0] for k in points}, OPERATORS)
    impls = ordered({r["impl"] for p in points.values() for r in p.get("results", [])}, IMPLS)
    style = {i: (f"C{n % 10}", "osD^v<>ph*"[n % 10]) for n, i in enumerate(impls)}
    for name in [n for n in ("seq", "batch") if n in sweeps]:
        d = sweeps[name]
        drawn = [op for op in ops if sweep_points(name, d, points, op)]
        if not drawn:
            continue
        cols = min(5, len(drawn))
        rows = (len(drawn) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows + 0.8), squeeze=False)
        handles = {}
        for k, op in enumerate(drawn):
            ax = axes[k // cols][k % cols]
            pts = sweep_points(name, d, points, op)
            for impl in impls:
                xy = [(x, throughput(p, r)) for x, p in pts for r in p.get("results", [])
                      if r["impl"] == impl and p.get("status") != "failed"]
                xy = [(x, y) for x, y in xy if y is not None]
                if xy:
                    color, marker = style[impl]
                    (h,) = ax.plot([x for x, _ in xy], [y for _, y in xy], color=color, marker=marker, markersize=4,
                                   linewidth=2.2 if impl == "neptune" else 1.2, label=impl)
                    handles[impl] = h
            ax.set_xscale("log", base=2)
            ax.set_xticks([x for x, _ in pts])
            ax.set_xticklabels([str(x) if x < 1024 else f"{x // 1024}k" for x, _ in pts], fontsize=7)
            ax.set_title(op, fontsize=9)
            ax.set_ylabel(pts[0][1].get("unit", ""), fontsize=8)
            ax.set_ylim(bottom=0)
            ax.tick_params(axis="y", labelsize=7)
            ax.grid(True, linewidth=0.3)
        for k in range(len(drawn), rows * cols):
            axes[k // cols][k % cols].axis("off")
        fig.suptitle(TITLES[name].format(**d) + ": throughput, by " + AXIS[name], fontsize=11)
        fig.legend([handles[i] for i in impls if i in handles], [i for i in impls if i in handles],
                   loc="lower center", ncol=min(7, len(handles)), fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, 0.07, 1, 0.95))
        for f in formats:
            path = os.path.join(out, f"sweep_{name}.{f}")
            fig.savefig(path, dpi=150)
            written.append(path)
        plt.close(fig)
    return written


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        sweeps, points = load(a.files)
    except InputError as e:
        print(f"plot_sweep.py: {e}", file=sys.stderr)
        return 1
    if not points:
        print("plot_sweep.py: the files hold no points", file=sys.stderr)
        return 1
    os.makedirs(a.out, exist_ok=True)
    written = []
    if not a.no_plots:
        try:
            written = plot(sweeps, points, a.out, a.formats)
        except ImportError as e:
            print(f"plot_sweep.py: no matplotlib ({e}); run scripts/setup.sh, or pass --no-plots", file=sys.stderr)
            return 2
    table = a.table or os.path.join(a.out, "sweep_tables.md")
    with open(table, "w") as f:
        f.write(tables(sweeps, points))
    written.append(table)
    print(f"{len(points)} points; wrote " + ", ".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
