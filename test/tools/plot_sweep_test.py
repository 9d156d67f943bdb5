#!/usr/bin/env python3
"""scripts/plot_sweep.py on synthetic result files: merging of pieces, throughputs, Neptune's
speedups and their geometric means in the Markdown table (expected values computed by hand in the
comments), the PNG and SVG files, and clear errors for bad files.

  python3 test/tools/plot_sweep_test.py scripts/plot_sweep.py

Exit 0 when all checks pass, 1 on a failure, 77 (skip) when only the plots could not be checked
because matplotlib is missing (scripts/setup.sh installs it)."""
import json, os, subprocess, sys, tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def res(impl, ms, supported=True, correct=True):
    return {"impl": impl, "supported": supported, "correct": correct, "median_ms": ms if supported else None,
            "min_ms": ms, "max_ms": ms, "reason": "" if supported else "needs the AOT generators"}


def point(op, b, s, unit, work, results, status="ok"):
    return {"op": op, "batch": b, "seq": s, "unit": unit, "work": work, "status": status, "error": "",
            "results": results}


# Piece 1: prefill_causal 1,256 with work 1e12: neptune 2 ms = 500.0 TFLOP/s, sdpa_cudnn 1 ms = 1000.0,
# flex 4 ms = 250.0, sdpa_flash wrong, halide_unfused unsupported. Speedups: overall 1/2 = 0.50x
# (sdpa_cudnn), compilers 4/2 = 2.00x (flex), libraries 0.50x. prefill_causal 1,512 failed here.
A = {"schema": "neptune-bench/1", "sweeps": {"seq": {"batch": 1, "values": [256, 512]}}, "runs": [{}],
     "points": [point("prefill_causal", 1, 256, "TFLOP/s", 1e12,
                      [res("neptune", 2.0), res("halide_unfused", None, supported=False),
                       res("sdpa_flash", 0.5, correct=False), res("sdpa_cudnn", 1.0), res("flex", 4.0)]),
                point("prefill_causal", 1, 512, "TFLOP/s", 2e12, [], status="failed")]}
# Piece 2: prefill_causal 1,512 measured (work 2e12): neptune 1 ms = 2000.0, sdpa_cudnn 2 ms = 1000.0,
# flex 1.5 ms = 1333.3; overall 1.5/1 = 1.50x (flex), compilers 1.50x, libraries 2.00x.
# decode_gqa 2,8192 (work 1e8 bytes): neptune 0.05 ms = 2.00 TB/s, sdpa_cudnn 0.04 ms = 2.50;
# overall and libraries 0.04/0.05 = 0.80x, no compiler. A failed prefill_causal 1,256 must not
# replace piece 1's measurement.
B = {"schema": "neptune-bench/1",
     "sweeps": {"seq": {"batch": 1, "values": [1024]}, "batch": {"seq": 8192, "values": [2]}}, "runs": [{}],
     "points": [point("prefill_causal", 1, 512, "TFLOP/s", 2e12,
                      [res("neptune", 1.0), res("sdpa_cudnn", 2.0), res("flex", 1.5)]),
                point("decode_gqa", 2, 8192, "TB/s", 1e8, [res("neptune", 0.05), res("sdpa_cudnn", 0.04)]),
                point("prefill_causal", 1, 256, "TFLOP/s", 1e12, [], status="failed")]}


def main():
    script = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="plot_sweep_test_")
    a, b = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
    json.dump(A, open(a, "w"))
    json.dump(B, open(b, "w"))
    out = os.path.join(tmp, "out")
    run = lambda *args: subprocess.run([sys.executable, script, *args], capture_output=True, text=True)

    r = run(a, b, "--out", out, "--no-plots")
    check(r.returncode == 0, f"--no-plots run exits 0 ({r.returncode}: {r.stderr})")
    md = open(os.path.join(out, "sweep_tables.md")).read()
    print(md)
    # Columns: neptune, halide_unfused, sdpa_flash, sdpa_cudnn, flex (table order of the implementations).
    for row in ["| prefill_causal | 256 | TFLOP/s | 500.0 | - | wrong | 1000.0 | 250.0 | 0.50x (sdpa_cudnn) |",
                "| prefill_causal | 512 | TFLOP/s | 2000.0 | - | - | 1000.0 | 1333.3 | 1.50x (flex) |",
                "| decode_gqa | 2 | TB/s | 2.00 | - | - | 2.50 | - | 0.80x (sdpa_cudnn) |",
                "## Sequence sweep (batch 1)", "## Batch sweep (sequence 8192)",
                # prefill_causal: overall sqrt(0.5 * 1.5) = 0.87, compilers sqrt(2 * 1.5) = 1.73,
                # libraries sqrt(0.5 * 2) = 1.00; decode_gqa 0.80, -, 0.80; all operators: overall
                # sqrt(0.866 * 0.8) = 0.83, compilers 1.73, libraries sqrt(1.0 * 0.8) = 0.89.
                "| prefill_causal | 2 | 0.87x | 1.73x | 1.00x |",
                "| decode_gqa | 1 | 0.80x | - | 0.80x |",
                "| **all operators** (geometric mean) | | 0.83x | 1.73x | 0.89x |"]:
        check(row in md, f"the table holds {row!r}")
    check(md.count("| prefill_causal | 256 |") == 1, "each point appears once per sweep")

    r = run(a, "--out", out, "--table", os.path.join(tmp, "t.md"), "--no-plots")
    t = open(os.path.join(tmp, "t.md")).read()
    check("| prefill_causal | 512 | TFLOP/s | failed |" in t, "a failed point shows as failed")

    bad = os.path.join(tmp, "bad.json")
    json.dump({"results": []}, open(bad, "w"))
    r = run(bad, "--out", out)
    check(r.returncode == 1 and "not a neptune_bench result file" in r.stderr, f"a foreign file is refused ({r.stderr})")
    r = run(os.path.join(tmp, "missing.json"), "--out", out)
    check(r.returncode == 1 and "cannot read" in r.stderr, f"a missing file is named ({r.stderr})")
    r = run(a, "--out", out, "--formats", "gif")
    check(r.returncode == 2 and "--formats" in r.stderr, "an unknown format is refused")
    check(run("--help").returncode == 0, "--help works")

    try:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(script))), "deps", "python"))
        import matplotlib  # noqa: F401
    except ImportError:
        print("[SKIP] plots not checked: no matplotlib (scripts/setup.sh installs it into deps/python)")
        return 1 if failures else 77
    r = run(a, b, "--out", out)
    check(r.returncode == 0, f"the plotting run exits 0 ({r.stderr})")
    for name in ("sweep_seq", "sweep_batch"):
        png, svg = os.path.join(out, name + ".png"), os.path.join(out, name + ".svg")
        check(os.path.isfile(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", f"{name}.png is a PNG")
        text = open(svg).read() if os.path.isfile(svg) else ""
        check("<svg" in text, f"{name}.svg is an SVG")
    seq_svg = open(os.path.join(out, "sweep_seq.svg")).read()
    check("prefill_causal" in seq_svg and "sdpa_cudnn" in seq_svg, "the sequence plot names its panel and legend")
    check("decode_gqa" not in seq_svg, "decode_gqa has no point on the sequence sweep, hence no panel")
    print("Success!" if not failures else f"{len(failures)} checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
