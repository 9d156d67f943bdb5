#!/usr/bin/env python3
"""The README's results table, made from committed paired result files.

A paired result file is what `apps/neptune_bench/baselines.py --neptune --json FILE` writes: Neptune's
AOT kernel and a baseline timed in alternating rounds on the same inputs, in one process. For each
(operator, batch, sequence) the newest file (by its "date" field) gives one row per baseline: both
medians, Neptune's throughput, the ratio of the two medians, and the median of the per-round ratios
with its 95 % interval, as the file records it. Every ratio compares figures of the same file.

  scripts/results_table.py                     print the table (docs/paired/*.json)
  scripts/results_table.py --check README.md   exit 1 with a diff when the README's table differs
  scripts/results_table.py --write README.md   replace the README's table
  scripts/results_table.py FILE...             use these files instead of docs/paired/*.json

The table sits between the lines <!-- results:begin --> and <!-- results:end -->.
Exit status: 0 done or the table matches, 1 the table differs, 2 bad arguments or unreadable files."""
import argparse, difflib, glob, json, os, sys

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
NEPTUNE = "neptune_aot"
NAMES = {"sdpa_cudnn": "cuDNN (SDPA)", "sdpa_flash": "FlashAttention-2 (SDPA)",
         "sdpa_efficient": "xFormers (SDPA)", "flex": "FlexAttention"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class BadFile(Exception):
    pass


def load(path):
    try:
        with open(path) as f:
            d = json.load(f)
        for key in ("op", "batch", "seq", "unit", "work", "date", "device", "results"):
            if key not in d:
                raise BadFile(f"{path}: no \"{key}\"")
        return d
    except (OSError, ValueError) as e:
        raise BadFile(f"{path}: {e}")


def newest(files):
    """The newest file per (op, batch, seq): a later measurement of the same point replaces an earlier one."""
    best = {}
    for d in files:
        key = (d["op"], d["batch"], d["seq"])
        if key not in best or d["date"] > best[key]["date"]:
            best[key] = d
    return [best[k] for k in sorted(best)]


def throughput(work, ms):
    """work (FLOPs or bytes) in ms, as T per second (TFLOP/s or TB/s)."""
    return work / (ms * 1e-3) / 1e12


def rows(d):
    """One row per baseline with a paired comparison against Neptune in this file."""
    by_impl = {r["impl"]: r for r in d["results"]}
    nep = by_impl.get(NEPTUNE)
    if nep is None or nep.get("median_ms") is None:
        raise BadFile(f"{d['op']} {d['batch']},{d['seq']}: no {NEPTUNE} median")
    out = []
    for r in d["results"]:
        pr = r.get("paired_vs_neptune_aot")
        if r["impl"] == NEPTUNE or not pr or r.get("median_ms") is None:
            continue
        out.append({
            "op": d["op"], "shape": f"{d['batch']}, {d['seq']}", "baseline": NAMES.get(r["impl"], r["impl"]),
            "neptune_us": nep["median_ms"] * 1e3, "base_us": r["median_ms"] * 1e3,
            "neptune_tp": throughput(d["work"], nep["median_ms"]), "unit": d["unit"],
            "ratio": r["median_ms"] / nep["median_ms"],
            "paired": pr["median"], "low": pr["low"], "high": pr["high"], "won": pr["neptune_faster"],
            "rounds": d.get("repeat"), "date": d["date"][:10]})
    return out


def table(files):
    data = newest(files)
    lines = ["| operator | B, S | Neptune | baseline | baseline / Neptune (medians) "
             "| per-round ratio, median (95 % interval) | Neptune won | date |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for d in data:
        for r in rows(d):
            lines.append(
                f"| {r['op']} | {r['shape']} | {r['neptune_us']:.1f} us, {r['neptune_tp']:.2f} {r['unit']} "
                f"| {r['baseline']} {r['base_us']:.1f} us | {r['ratio']:.3f} "
                f"| {r['paired']:.4f} ({r['low']:.4f} to {r['high']:.4f}) | {100 * r['won']:.0f} % of {r['rounds']} rounds | {r['date']} |")
    devices = sorted({d["device"] for d in data})
    setup = sorted({f"driver {d.get('driver')}, CUDA {d.get('cuda')}, cuDNN {d.get('cudnn')}, "
                    f"PyTorch {d.get('torch')}" for d in data})
    lines += ["", f"{', '.join(devices)}; {'; '.join(setup)}. f16, head dim 128; B is the batch, S the "
              "sequence (the key length for decode). L2 flushed before every timed call. Ratios above 1: "
              "Neptune faster."]
    return "\n".join(lines) + "\n"


def splice(text, tbl, path):
    if BEGIN not in text or END not in text:
        raise BadFile(f"{path}: no {BEGIN} ... {END} lines")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + tbl + END + tail


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("files", nargs="*", help="paired result files (default: docs/paired/*.json)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--check", metavar="README", help="compare the table in README with the files")
    group.add_argument("--write", metavar="README", help="replace the table in README")
    a = ap.parse_args(argv)
    paths = a.files or sorted(glob.glob(os.path.join(ROOT, "docs", "paired", "*.json")))
    try:
        if not paths:
            raise BadFile("no result files")
        tbl = table([load(p) for p in paths])
        if not (a.check or a.write):
            sys.stdout.write(tbl)
            return 0
        path = a.check or a.write
        with open(path) as f:
            text = f.read()
        new = splice(text, tbl, path)
    except (BadFile, OSError) as e:
        print(f"results_table.py: {e}", file=sys.stderr)
        return 2
    if a.write:
        if new != text:
            with open(path, "w") as f:
                f.write(new)
        return 0
    if new == text:
        return 0
    sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                               path, "scripts/results_table.py"))
    print(f"results_table.py: the table in {path} differs from the result files; "
          f"run scripts/results_table.py --write {path}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
