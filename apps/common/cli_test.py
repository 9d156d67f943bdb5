#!/usr/bin/env python3
"""The family apps' command lines: --help, and every refusal of bad arguments with its exit status
and message (apps/*/README.md). Usage: cli_test.py ATTENTION LAYERNORM SOFTMAX (the binaries)."""
import os
import subprocess
import sys

failures = []


def run(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def expect(binary, args, status, phrase):
    code, out = run(binary, *args)
    name = os.path.basename(binary) + " " + " ".join(args)
    if code != status or phrase not in out:
        failures.append(f"{name}: exit {code} (expected {status}), output lacks {phrase!r}:\n{out}")


def gpu_present(binary):
    # The apps say which library they ran; a tiny run with --backend auto tells whether a GPU is here.
    code, out = run(binary, "--shape", "2,8", "--repeats", "1", "--warmup", "0")
    return code == 0 and "backend: GPU library" in out


def main():
    attention, layernorm, softmax = sys.argv[1:4]
    for binary in (attention, layernorm, softmax):
        expect(binary, ["--help"], 0, "--backend")
        expect(binary, ["--shape", "0,5"], 2, "expected B,S as two positive integers")
        expect(binary, ["--shape", "12"], 2, "expected B,S")
        expect(binary, ["--backend", "cuda"], 2, "--backend")
        expect(binary, ["--repeats", "0"], 2, "--repeats")
        expect(binary, ["--no-such-option"], 2, "no-such-option")
    expect(attention, ["--mode", "encode"], 2, "--mode")
    expect(attention, ["--heads", "4,3"], 2, "HQ a multiple of HKV")
    expect(attention, ["--mode", "decode", "--heads", "16,4"], 2, "compiled for 8 query heads per KV head")
    expect(softmax, ["--op", "cross_entropy"], 2, "--op")
    expect(layernorm, ["--op", "batchnorm"], 2, "--op")
    if not gpu_present(softmax):
        for binary in (attention, layernorm, softmax):
            expect(binary, ["--backend", "gpu", "--shape", "2,8"], 3, "--backend gpu: no CUDA device")
    # The host libraries run everywhere, and say so.
    expect(softmax, ["--backend", "host", "--shape", "3,5", "--repeats", "1"], 0, "time (host wall clock")
    for f in failures:
        print("FAILED:", f)
    print(f"{len(failures)} failures" if failures else "all app command lines behave")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
