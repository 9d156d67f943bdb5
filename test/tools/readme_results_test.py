#!/usr/bin/env python3
"""scripts/results_table.py: (a) the table in README.md is the one the committed result files give,
and (b) the script's arithmetic on hand-made result files, against values computed by hand in the
comments; also the --check / --write round trip and clear errors for bad files.

  python3 test/tools/readme_results_test.py scripts/results_table.py README.md

Exit 0 when all checks pass, 1 on a failure."""
import json, os, subprocess, sys, tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def result_file(op, b, s, unit, work, date, neptune_ms, base_ms, paired, repeat=100):
    return {"op": op, "batch": b, "seq": s, "unit": unit, "device": "Test GPU", "torch": "t", "triton": "x",
            "cuda": "c", "cudnn": 1, "driver": "d", "date": date, "repeat": repeat, "flush_bytes": 0,
            "work": work, "self_test": True,
            "results": [{"impl": "sdpa_cudnn", "median_ms": base_ms, "supported": True,
                         "paired_vs_neptune_aot": paired},
                        {"impl": "neptune_aot", "median_ms": neptune_ms, "supported": True}]}


script, readme = sys.argv[1], sys.argv[2]

# (a) The committed table matches the committed files.
rc, out, err = run("--check", readme)
check(rc == 0, f"README.md's results table matches docs/paired/*.json (rc {rc}):\n{out}{err}")

with tempfile.TemporaryDirectory() as tmp:
    def write(name, d):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            json.dump(d, f)
        return path

    pair = {"median": 1.0125, "low": 1.01, "high": 1.02, "neptune_faster": 0.75}
    # prefill: 2e12 FLOPs in 4 ms is 500 TFLOP/s; cuDNN 5 ms / Neptune 4 ms = 1.250.
    a = write("a.json", result_file("prefill_x", 1, 8192, "TFLOP/s", 2e12, "2026-01-02T00:00:00+00:00",
                                    4.0, 5.0, pair, repeat=40))
    # decode: 1e9 bytes in 0.25 ms is 4 TB/s; 0.2 ms / 0.25 ms = 0.800.
    b = write("b.json", result_file("decode_x", 8, 4096, "TB/s", 1e9, "2026-01-02T00:00:00+00:00",
                                    0.25, 0.2, {"median": 0.8, "low": 0.79, "high": 0.81, "neptune_faster": 0.0}))
    # An older measurement of decode_x 8,4096 (0.5 ms): the newer file b replaces it.
    old = write("old.json", result_file("decode_x", 8, 4096, "TB/s", 1e9, "2026-01-01T00:00:00+00:00",
                                        0.5, 0.2, pair))
    rc, out, err = run(a, b, old)
    check(rc == 0, f"a table from hand-made files (rc {rc}, {err})")
    rows = [l for l in out.splitlines() if l.startswith("| decode_x") or l.startswith("| prefill_x")]
    check(len(rows) == 2, f"one row per point, the newest file only: {rows}")
    dec = next((l for l in rows if l.startswith("| decode_x")), "")
    pre = next((l for l in rows if l.startswith("| prefill_x")), "")
    check("| 8, 4096 | 250.0 us, 4.00 TB/s | cuDNN (SDPA) 200.0 us | 0.800 |" in dec, f"decode row: {dec}")
    check("0.8000 (0.7900 to 0.8100) | 0 % of 100 rounds | 2026-01-02 |" in dec, f"decode pairs: {dec}")
    check("| 1, 8192 | 4000.0 us, 500.00 TFLOP/s | cuDNN (SDPA) 5000.0 us | 1.250 |" in pre, f"prefill row: {pre}")
    check("1.0125 (1.0100 to 1.0200) | 75 % of 40 rounds |" in pre, f"prefill pairs: {pre}")
    check(out.index("| decode_x") < out.index("| prefill_x"), "rows sorted by operator")

    # --check finds a stale table and shows a diff; --write fixes it; --check then passes.
    doc = write("doc.md", None)
    with open(doc, "w") as f:
        f.write("# T\n\n<!-- results:begin -->\n| stale |\n<!-- results:end -->\n\nafter\n")
    rc, out, err = run("--check", doc, a)
    check(rc == 1 and "-| stale |" in out and "--write" in err, f"--check on a stale table (rc {rc})")
    rc, _, err = run("--write", doc, a)
    check(rc == 0, f"--write (rc {rc}, {err})")
    with open(doc) as f:
        text = f.read()
    check(text.startswith("# T\n\n<!-- results:begin -->\n| operator |") and text.endswith(
        "<!-- results:end -->\n\nafter\n") and "| prefill_x |" in text, f"--write keeps the rest: {text!r}")
    rc, out, err = run("--check", doc, a)
    check(rc == 0, f"--check after --write (rc {rc}): {out}{err}")

    # Bad inputs: a clear message and status 2.
    nomark = write("nomark.md", None)
    with open(nomark, "w") as f:
        f.write("# no markers\n")
    rc, _, err = run("--check", nomark, a)
    check(rc == 2 and "results:begin" in err, f"a README without markers (rc {rc}, {err})")
    broken = write("broken.json", {"op": "x"})
    rc, _, err = run(broken)
    check(rc == 2 and "broken.json" in err and "batch" in err, f"a file without batch (rc {rc}, {err})")
    d = result_file("x", 1, 1, "TB/s", 1.0, "2026-01-01", 1.0, 1.0, pair)
    d["results"] = d["results"][:1]
    rc, _, err = run(write("non.json", d))
    check(rc == 2 and "neptune_aot" in err, f"a file without Neptune's time (rc {rc}, {err})")

rc, out, _ = run("--help")
check(rc == 0 and "--check" in out and "--write" in out, "--help")

print(f"{len(failures)} failure(s)" if failures else "all checks passed")
sys.exit(1 if failures else 0)
