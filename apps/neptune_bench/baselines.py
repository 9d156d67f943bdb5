#!/usr/bin/env python3
"""PyTorch baselines on the inputs Neptune's kernels used: for attention, the SDPA backends and
FlexAttention; for the row-wise operators (softmax, logsumexp, cross_entropy, layernorm, rmsnorm),
torch eager and torch.compile of the same expression.

`neptune_bench profile` runs this on the GPU machine as a subprocess:

  python3 baselines.py --op OP --batch B --seq S --inputs DIR [--outputs DIR] [--json FILE]
                       [--repeat N] [--impl sdpa_flash,sdpa_cudnn,sdpa_efficient,flex]
  python3 baselines.py --op OP --batch B --seq S --self-test   [--json FILE] [--repeat N] [--impl ...]
  python3 baselines.py --serve

--neptune [LIB] also time Neptune's AOT kernels (implementation neptune_aot: libneptune_ops.so through
               python/neptune_ops.py, LIB or its default search) in this process, interleaved with the
               PyTorch baselines on the same tensors and checked the same way; the same as adding
               neptune_aot to --impl. Unsupported where the library has no variant with the operator's
               semantics (meta.json's mask, modifier, window, softcap, scale, head dim) or refuses the
               shape (its message is the reason).

--serve        read requests from stdin, one JSON line each: {"argv": [the arguments above]}; answer
               each, after the usual table, with one line "@@neptune-baselines " + JSON {"rc": exit
               status, "result": the --json document or null, "error": why it failed}. torch is
               imported once; compiled state is reset between requests. A CUDA error ends the
               server after its answer (the context is unusable); neptune_bench starts a new one.

--inputs DIR   raw little-endian files: q.bin (fp16 [B,Hq,Sq,D]), k.bin and v.bin (fp16 [B,Hkv,Skv,D]),
               slopes.bin (fp32 [Hq], ALiBi only) and meta.json: {"op", "batch", "seq", "q_heads",
               "kv_heads", "seq_q", "seq_kv", "head_dim", "mask": "none|causal|window", "window",
               "mod": "none|alibi|softcap", "softcap", "scale", "decode": bool}.
--outputs DIR  optional: neptune_out.bin (fp16 [B,Hq,Sq,D]) and reference_rows.json {"rows": [flat
               row index (b*Hq + h)*Sq + i], "values": [[D fp64 values] per row]}. Each baseline's
               output is then checked: max abs and RMS error on the reference rows, and the max abs
               difference from Neptune's output over the whole tensor (the cross-check).
Row-wise operators read instead (meta.json's "family" is "row"): x.bin ([rows, cols] in meta's
"dtype", f16 or bf16), gamma.bin and beta.bin ([cols], the same dtype; LayerNorm, RMSNorm), labels.bin
(int32 [rows]; cross_entropy), and meta.json {"op", "family": "row", "batch" (rows), "seq" (cols),
"dtype", "eps", "out_dtype"}; neptune_out.bin is the operator's first output (y [rows, cols] in
out_dtype, or lse / loss f32 [rows]) and reference_rows.json has one value per row for per-row
outputs. Their unit is TB/s of the operator's bytes (inputs read plus outputs written).
linear_cross_entropy reads (meta.json's "family" is "linear_ce"): h.bin ([tokens, hidden]), weight.bin
([vocab, hidden], both in meta's "dtype") and labels.bin (int32 [tokens]), meta.json {"op", "family",
"batch" (tokens), "seq" (vocab), "hidden", "dtype"}; neptune_out.bin is the loss (f32 [tokens]). The
baselines are F.linear, the logits upcast to f32 and F.cross_entropy(reduction="none"), as training
code writes it, eager and compiled; their unit is TFLOP/s of the product (2 * tokens * vocab * hidden),
and each result also has "peak_extra_bytes": the device memory its call allocates at its peak.
--self-test    make random inputs for --op/--batch/--seq in a temporary directory, an fp64 reference
               for a few rows, and an unfused fp32 torch output standing in for Neptune's; run all.

Semantics (docs/design/operators.md, conventions): s = scale*q.k, then softcap cap*tanh(s/cap), then
ALiBi s + slope_h*(kv-p) with p = Skv - Sq + i (bottom-right aligned), then causal kv <= p or window
p-W < kv <= p; query head h reads KV head h // (Hq/Hkv). A causal mask with Sq = 1 is vacuous and is
not passed (SDPA's is_causal is top-left aligned). SDPA runs only without softcap/ALiBi/window.

Method (docs/design/operators.md, how it is measured): every implementation's output is checked
before timing; warm-up (compile, autotune) is untimed; before every timed call a 256 MB buffer is
written to flush L2, and CUDA events are recorded after the flush, around the call alone;
implementations are interleaved per repeat (rotating order); the median of N repeats is reported
with min and max. FlexAttention's block mask is built once, untimed. Units: prefill TFLOP/s with
FLOPs 4*B*Hq*Sq*Skv*D, halved for causal, 2*B*Hq*Sq*min(Skv,W)*D for window; decode TB/s of K plus V
bytes.

Output: a table on stdout, one row per implementation; with --json FILE also {"op", "batch", "seq",
"unit", "device", "torch", "triton", "cuda", "cudnn", "driver", "sm_clock_mhz": {"before", "after",
"max"}, "date", "repeat", "flush_bytes", "work", "self_test", "results": [{"impl", "median_ms",
"min_ms", "max_ms", "throughput", "ref_max_abs", "ref_rms", "max_abs_vs_neptune", "supported",
"reason", "nonfinite"}]}; a figure not measured, or not finite, is null. With neptune_aot timed, each
other timed result also has "paired_vs_neptune_aot": {"median", "low", "high", "neptune_faster"}: the
median of the per-round ratios (its time / neptune_aot's in the same round), its 95 % bootstrap
interval and the share of rounds Neptune won (printed under the table as "pairs: ...").

Exit status (also "rc" in --serve answers): 0 done (some baselines may be unsupported), 1 bad inputs or a failed self-test (a supported
baseline off the fp64 reference or the stand-in by more than 1e-2, or FlexAttention uncompiled),
2 no torch or no CUDA device (and, as argparse does, a bad command line).
"""
import argparse, datetime, json, math, os, random, statistics, subprocess, sys, tempfile, warnings

ATTENTION_IMPLS = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "flex")
ROW_IMPLS = ("torch_eager", "torch_compile")
IMPLS = ATTENTION_IMPLS + ROW_IMPLS
ROW_OPS = ("softmax", "logsumexp", "cross_entropy", "layernorm", "rmsnorm")
LCE_OPS = ("linear_cross_entropy",)
NEPTUNE_AOT = "neptune_aot"  # by --neptune or --impl: Neptune's AOT kernels through libneptune_ops.so
OPS = {  # for --self-test: q heads, kv heads, mask, modifier, decode (neptune_bench list has the same)
    "prefill_global": (32, 32, "none", "none", False), "prefill_causal": (32, 32, "causal", "none", False),
    "prefill_alibi": (32, 32, "causal", "alibi", False), "prefill_gqa": (64, 8, "causal", "none", False),
    "prefill_softcap": (32, 16, "causal", "softcap", False),
    "prefill_windowed": (32, 8, "window", "softcap", False), "decode_causal": (32, 32, "causal", "none", True),
    "decode_alibi": (32, 32, "causal", "alibi", True), "decode_gqa": (64, 8, "causal", "none", True),
    "decode_softcap": (32, 16, "causal", "softcap", True)}
FLUSH_BYTES, WARMUP, SELF_TEST_TOL = 256 << 20, 5, 1e-2


class InputError(Exception):
    pass


ANSWER = "@@neptune-baselines "


class ArgumentError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """Raises ArgumentError rather than exiting while serving, so one bad request does not end the server."""
    serving = False

    def error(self, message):
        if Parser.serving:
            raise ArgumentError(message)
        super().error(message)


def parse_args(argv):
    if argv == ["--serve"]:
        return None
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--op", required=True, help="operator name (neptune_bench list)")
    ap.add_argument("--batch", type=int, required=True, help="batch B")
    ap.add_argument("--seq", type=int, required=True, help="sequence S (Skv; Sq too for prefill)")
    ap.add_argument("--inputs", metavar="DIR", help="q.bin, k.bin, v.bin, [slopes.bin], meta.json")
    ap.add_argument("--outputs", metavar="DIR", help="neptune_out.bin and reference_rows.json")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--repeat", type=int, default=50, help="timed repeats per implementation (default 50)")
    ap.add_argument("--impl", default=None, help="comma-separated subset of " + ",".join(IMPLS + (NEPTUNE_AOT,)) +
                    " (default: the attention baselines, or torch_eager,torch_compile for row-wise operators)")
    ap.add_argument("--neptune", nargs="?", const="", default=None, metavar="LIB",
                    help="also time Neptune's AOT kernels (neptune_aot) through libneptune_ops.so (LIB, or found)")
    ap.add_argument("--self-test", action="store_true", help="generate inputs and references, then run")
    ap.add_argument("--serve", action="store_true", help="serve requests from stdin (alone; see above)")
    a = ap.parse_args(argv)
    if a.serve:
        ap.error("--serve takes no other arguments (requests carry them)")
    if a.impl is None:
        a.impl = ",".join(ROW_IMPLS if a.op in ROW_OPS + LCE_OPS else ATTENTION_IMPLS)
    a.impl = [s for s in a.impl.split(",") if s]
    bad = [s for s in a.impl if s not in IMPLS + (NEPTUNE_AOT,)]
    if bad or not a.impl:
        ap.error(f"--impl: unknown {bad}; choose from {','.join(IMPLS + (NEPTUNE_AOT,))}")
    if a.neptune is not None and NEPTUNE_AOT not in a.impl:
        a.impl.append(NEPTUNE_AOT)
    if a.repeat < 1:
        ap.error("--repeat must be positive")
    if not a.self_test and not a.inputs:
        ap.error("--inputs DIR is required (or --self-test)")
    if a.self_test and a.op not in OPS and a.op not in ROW_OPS:
        ap.error(f"--self-test knows {', '.join(tuple(OPS) + ROW_OPS)}")
    return a


def read_raw(torch, path, dtype, shape):
    n = math.prod(shape)
    size = torch.tensor([], dtype=dtype).element_size() * n
    if not os.path.isfile(path) or os.path.getsize(path) != size:
        raise InputError(f"{path}: expected {size} bytes ({dtype} {list(shape)})")
    return torch.from_file(path, shared=False, size=n, dtype=dtype).reshape(shape).cuda()


DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


def load_row_case(torch, a, m):
    """A row-wise operator's inputs, Neptune's output and the reference rows (module docstring)."""
    try:
        R, C = int(m["batch"]), int(m["seq"])
        if (m["op"], R, C) != (a.op, a.batch, a.seq):
            raise InputError(f"meta.json is for {m['op']} {R},{C}, not {a.op} {a.batch},{a.seq}")
        if m["op"] not in ROW_OPS:
            raise InputError(f"meta.json: {m['op']!r} is not a row-wise operator ({', '.join(ROW_OPS)})")
        dt, odt = getattr(torch, DTYPES[m["dtype"]]), getattr(torch, DTYPES[m["out_dtype"]])
        m.update(R=R, C=C, eps=float(m.get("eps", 1e-5)))
    except (KeyError, ValueError, TypeError) as e:
        raise InputError(f"{a.inputs}/meta.json: {e!r}")
    rd = lambda name, t, shape, base=a.inputs: read_raw(torch, os.path.join(base, name), t, shape)
    op = m["op"]
    c = {"meta": m, "x": rd("x.bin", dt, (R, C)), "neptune": None, "ref": None}
    if op in ("layernorm", "rmsnorm"):
        c["gamma"] = rd("gamma.bin", dt, (C,))
    if op == "layernorm":
        c["beta"] = rd("beta.bin", dt, (C,))
    if op == "cross_entropy":
        c["labels"] = rd("labels.bin", torch.int32, (R,)).long()
    per_row = op in ("logsumexp", "cross_entropy")
    out_shape, width = ((R,), 1) if per_row else ((R, C), C)
    m["out_dtype_torch"] = torch.float32 if per_row else odt
    if a.outputs:
        c["neptune"] = rd("neptune_out.bin", m["out_dtype_torch"], out_shape, a.outputs)
        with open(os.path.join(a.outputs, "reference_rows.json")) as f:
            r = json.load(f)
        rows, vals = r["rows"], r["values"]
        if len(rows) != len(vals) or any(not 0 <= x < R for x in rows) or any(len(x) != width for x in vals):
            raise InputError(f"{a.outputs}/reference_rows.json: rows out of [0, {R}) or values not [rows][{width}]")
        c["ref"] = (torch.tensor(rows, dtype=torch.long, device="cuda"),
                    torch.tensor(vals, dtype=torch.float64, device="cuda").reshape(-1, width))
    return c


def row_expr(torch, c):
    """The operator as a PyTorch user writes it, on the case's tensors."""
    F, op, m = torch.nn.functional, c["meta"]["op"], c["meta"]
    x = c["x"]
    if op == "softmax":
        return lambda: torch.softmax(x, dim=-1)
    if op == "logsumexp":
        return lambda: torch.logsumexp(x, dim=-1).float()
    if op == "cross_entropy":
        labels = c["labels"]
        return lambda: F.cross_entropy(x, labels, reduction="none").float()
    if op == "layernorm":
        g, b = c["gamma"], c["beta"]
        return lambda: F.layer_norm(x, (m["C"],), g, b, m["eps"])
    g = c["gamma"]
    return lambda: F.rms_norm(x, (m["C"],), g, m["eps"])


def row_impl(torch, c, name):
    fn = lce_expr(torch, c) if c["meta"].get("family") == "linear_ce" else row_expr(torch, c)
    return fn if name == "torch_eager" else torch.compile(fn, dynamic=False)


def load_lce_case(torch, a, m):
    """linear_cross_entropy's inputs, Neptune's loss and the reference rows (module docstring)."""
    try:
        N, V, H = int(m["batch"]), int(m["seq"]), int(m["hidden"])
        if (m["op"], N, V) != (a.op, a.batch, a.seq):
            raise InputError(f"meta.json is for {m['op']} {N},{V}, not {a.op} {a.batch},{a.seq}")
        dt = getattr(torch, DTYPES[m["dtype"]])
        m.update(N=N, V=V, H=H)
    except (KeyError, ValueError, TypeError) as e:
        raise InputError(f"{a.inputs}/meta.json: {e!r}")
    rd = lambda name, t, shape, base=a.inputs: read_raw(torch, os.path.join(base, name), t, shape)
    c = {"meta": m, "h": rd("h.bin", dt, (N, H)), "weight": rd("weight.bin", dt, (V, H)),
         "labels": rd("labels.bin", torch.int32, (N,)).long(), "neptune": None, "ref": None}
    if a.outputs:
        c["neptune"] = rd("neptune_out.bin", torch.float32, (N,), a.outputs)
        with open(os.path.join(a.outputs, "reference_rows.json")) as f:
            r = json.load(f)
        rows, vals = r["rows"], r["values"]
        if len(rows) != len(vals) or any(not 0 <= x < N for x in rows) or any(len(x) != 1 for x in vals):
            raise InputError(f"{a.outputs}/reference_rows.json: rows out of [0, {N}) or values not [rows][1]")
        c["ref"] = (torch.tensor(rows, dtype=torch.long, device="cuda"),
                    torch.tensor(vals, dtype=torch.float64, device="cuda").reshape(-1, 1))
    return c


def lce_expr(torch, c):
    """Linear + cross-entropy as training code writes it: logits materialised, upcast to f32."""
    F, h, w, labels = torch.nn.functional, c["h"], c["weight"], c["labels"]
    return lambda: F.cross_entropy(F.linear(h, w).float(), labels, reduction="none")


def load_case(torch, a):
    try:
        with open(os.path.join(a.inputs, "meta.json")) as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{a.inputs}/meta.json: {e!r}")
    if m.get("family") == "row":
        return load_row_case(torch, a, m)
    if m.get("family") == "linear_ce":
        return load_lce_case(torch, a, m)
    try:
        B, hq, hkv, sq, skv, d = (int(m[k]) for k in ("batch", "q_heads", "kv_heads", "seq_q", "seq_kv", "head_dim"))
        if (m["op"], B, int(m["seq"])) != (a.op, a.batch, a.seq):
            raise InputError(f"meta.json is for {m['op']} {B},{m['seq']}, not {a.op} {a.batch},{a.seq}")
        if m["mask"] not in ("none", "causal", "window") or m["mod"] not in ("none", "alibi", "softcap"):
            raise InputError(f"meta.json: mask {m['mask']!r} or mod {m['mod']!r} unknown")
        if hq % hkv:
            raise InputError(f"q_heads {hq} is not a multiple of kv_heads {hkv}")
        m.update(B=B, hq=hq, hkv=hkv, sq=sq, skv=skv, d=d, scale=float(m["scale"]), W=int(m.get("window") or 0),
                 cap=float(m.get("softcap") or 0), decode=bool(m["decode"]))
        if (m["mask"] == "window" and m["W"] < 1) or (m["mod"] == "softcap" and m["cap"] <= 0):
            raise InputError("meta.json: a window mask needs window >= 1, softcap needs softcap > 0")
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise InputError(f"{a.inputs}/meta.json: {e!r}")
    rd = lambda name, dt, shape, base=a.inputs: read_raw(torch, os.path.join(base, name), dt, shape)
    c = {"meta": m, "q": rd("q.bin", torch.float16, (B, hq, sq, d)), "neptune": None, "ref": None, "lens": None,
         "slopes": rd("slopes.bin", torch.float32, (hq,)) if m["mod"] == "alibi" else None}
    P = int(m.get("page_size") or 0)
    m["page_size"] = P
    if P:
        # A paged cache: the baselines run on its dense copy at the padded shape [B, hkv, pages * P, d]
        # (gathered here, outside the timing), with each sequence's length as a mask.
        if skv % P:
            raise InputError(f"meta.json: seq_kv {skv} is not a whole number of {P}-key pages")
        pt = rd("page_table.bin", torch.int32, (B, skv // P)).long()
        pages = int(pt.max().item()) + 1
        for name in ("k", "v"):
            path = os.path.join(a.inputs, f"{name}_cache.bin")
            n = os.path.getsize(path) // (2 * hkv * P * d) if os.path.isfile(path) else 0
            if n < pages:
                raise InputError(f"{path}: fewer than the {pages} pages the table names")
            cache = rd(f"{name}_cache.bin", torch.float16, (n, hkv, P, d))
            c[name] = cache[pt].permute(0, 2, 1, 3, 4).reshape(B, hkv, skv, d).contiguous()
        c["lens"] = rd("seq_lens.bin", torch.int32, (B,)).long()
        m["held"] = int(c["lens"].sum().item())
        # (query, key) pairs visible, as operator_flops counts them: row i of a sequence holding L keys
        # sees keys up to position L - sq + i.
        m["pairs"] = sum(L * sq if m["mask"] == "none" else sum(min(max(L - sq + i + 1, 0), L) for i in range(sq))
                         for L in c["lens"].tolist())
    else:
        c["k"] = rd("k.bin", torch.float16, (B, hkv, skv, d))
        c["v"] = rd("v.bin", torch.float16, (B, hkv, skv, d))
    if a.outputs:
        c["neptune"] = rd("neptune_out.bin", torch.float16, (B, hq, sq, d), a.outputs)
        with open(os.path.join(a.outputs, "reference_rows.json")) as f:
            r = json.load(f)
        rows, vals = r["rows"], r["values"]
        if len(rows) != len(vals) or any(not 0 <= x < B * hq * sq for x in rows) or any(len(x) != d for x in vals):
            raise InputError(f"{a.outputs}/reference_rows.json: rows out of [0, {B * hq * sq}) or values not [rows][{d}]")
        c["ref"] = (torch.tensor(rows, dtype=torch.long, device="cuda"),
                    torch.tensor(vals, dtype=torch.float64, device="cuda").reshape(-1, d))
    return c


def work(m):
    """(unit, FLOPs or bytes) as docs/design/operators.md counts work; row-wise operators in bytes."""
    if m.get("family") == "linear_ce":
        return "TFLOP/s", 2.0 * m["N"] * m["V"] * m["H"]
    if m.get("family") == "row":
        inb = {"float16": 2, "bfloat16": 2, "float32": 4}[DTYPES[m["dtype"]]]
        outb = {"float16": 2, "bfloat16": 2, "float32": 4}[DTYPES[m["out_dtype"]]]
        R, C, op = m["R"], m["C"], m["op"]
        b = R * C * inb + (C * inb if op in ("layernorm", "rmsnorm") else 0) + (C * inb if op == "layernorm" else 0)
        b += R * 4 if op == "cross_entropy" else 0
        b += R * 4 if op in ("logsumexp", "cross_entropy") else R * C * outb
        return "TB/s", float(b)
    if m["decode"]:  # K and V once; a paged cache's keys are those the sequences hold
        keys = m["held"] if m.get("page_size") else m["B"] * m["skv"]
        return "TB/s", 2.0 * keys * m["hkv"] * m["d"] * 2
    if m.get("page_size"):
        return "TFLOP/s", 4.0 * m["hq"] * m["pairs"] * m["d"]
    if m["mask"] == "window":
        return "TFLOP/s", 2.0 * m["B"] * m["hq"] * m["sq"] * min(m["skv"], m["W"]) * m["d"]
    return "TFLOP/s", 4.0 * m["B"] * m["hq"] * m["sq"] * m["skv"] * m["d"] * (0.5 if m["mask"] == "causal" else 1)


def attend_rows(torch, q, k, v, pos, slope, m, dt):
    """Unfused attention of query rows q [n,D] at absolute positions pos [n] over k, v [Skv,D] in dt."""
    s = (q.to(dt) @ k.to(dt).T) * m["scale"]
    if m["mod"] == "softcap":
        s = m["cap"] * torch.tanh(s / m["cap"])
    rel = torch.arange(k.shape[0], device=q.device)[None, :] - pos[:, None]  # kv - p
    if m["mod"] == "alibi":
        s = s + float(slope) * rel.to(dt)
    if m["mask"] != "none":
        keep = (rel <= 0) & (rel > -m["W"]) if m["mask"] == "window" else rel <= 0
        s = s.masked_fill(~keep, float("-inf"))
    mx = s.amax(-1, keepdim=True)
    p = torch.exp(s - torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx)))
    l = p.sum(-1, keepdim=True)
    return torch.where(l > 0, (p @ v.to(dt)) / l.clamp_min(1e-300), torch.zeros((), dtype=dt, device=q.device))


def visible_keys(c, qi, ki, b=None):
    """Whether query row qi sees key ki in a paged cache's sequence b (all sequences, broadcast over a
    leading batch axis, when b is None): keys below the sequence's length, and with the causal mask
    those up to the row's position, the rows being the sequence's last positions."""
    m, lens = c["meta"], c["lens"] if b is None else c["lens"][b]
    if b is None:
        lens = lens[:, None, None]
    if m["mask"] == "none":
        return ki < lens
    return ki <= qi + lens - m["sq"]


def sdpa_impl(torch, c, name):
    """A callable pinned to one SDPA backend, or a string saying why there is none."""
    from torch.nn.attention import sdpa_kernel, SDPBackend
    m = c["meta"]
    if m["mod"] != "none" or m["mask"] == "window":
        return "SDPA has no softcap/ALiBi/window without a materialised bias"
    causal = m["mask"] == "causal" and m["sq"] > 1 and c["lens"] is None  # Sq = 1: the last position, vacuous
    if causal and m["sq"] != m["skv"]:
        return "SDPA's is_causal is top-left aligned and Sq != Skv"
    backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
               "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION}[name]
    kw = {"is_causal": causal, "scale": m["scale"]}
    if m["hq"] != m["hkv"]:
        kw["enable_gqa"] = True
    if c["lens"] is not None:  # each sequence's visible keys, as a boolean mask [B, 1, Sq, Skv]
        ki, qi = torch.arange(m["skv"], device="cuda"), torch.arange(m["sq"], device="cuda")
        kw["attn_mask"] = visible_keys(c, qi[None, :, None], ki[None, None, :])[:, None]
    q, k, v = c["q"], c["k"], c["v"]

    def run():
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
    return run


def flex_impl(torch, c):
    from torch.nn.attention.flex_attention import flex_attention, create_block_mask
    cfg = torch._dynamo.config  # one shape per process, but allow recompiles and fail loudly past them
    for lim in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(cfg, lim):
            setattr(cfg, lim, max(int(getattr(cfg, lim)), 256))
    if hasattr(cfg, "fail_on_recompile_limit_hit"):
        cfg.suppress_errors, cfg.fail_on_recompile_limit_hit = False, True
    m, slopes = c["meta"], c["slopes"]
    off, cap, mask, W = m["skv"] - m["sq"], m["cap"], m["mask"], m["W"]

    def score_mod(score, b, h, qi, ki):
        if m["mod"] == "softcap":
            score = cap * torch.tanh(score / cap)
        if m["mod"] == "alibi":
            score = score + slopes[h] * (ki - qi - off)
        return score

    def mask_mod(b, h, qi, ki):
        keep = ki <= qi + off
        return keep & (ki > qi + off - W) if mask == "window" else keep

    def length_mod(b, h, qi, ki):  # a paged cache's sequences
        return visible_keys(c, qi, ki, b)

    needed = (mask == "causal" and m["sq"] > 1) or (mask == "window" and (m["sq"] > 1 or m["skv"] > W))
    if c["lens"] is not None:
        bm = create_block_mask(length_mod, m["B"], None, m["sq"], m["skv"], device="cuda")
    else:
        bm = create_block_mask(mask_mod, None, None, m["sq"], m["skv"], device="cuda") if needed else None
    fn = torch.compile(flex_attention, dynamic=False)
    kw = {"score_mod": score_mod if m["mod"] != "none" else None, "block_mask": bm, "scale": m["scale"]}
    if m["hq"] != m["hkv"]:
        kw["enable_gqa"] = True
    q, k, v = c["q"], c["k"], c["v"]
    return lambda: fn(q, k, v, **kw)


def neptune_impl(torch, c, lib_path):
    """Neptune's AOT kernels for the case through libneptune_ops.so (a bound call), or why there are none."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
    if here not in sys.path:
        sys.path.insert(0, here)
    import neptune_ops
    lib = neptune_ops.Library(lib_path or None)
    m = c["meta"]
    want = {"mask": m["mask"], "score_mod": m["mod"], "decode": m["decode"], "head_dim_qk": m["d"]}
    if m["mask"] == "window":
        want["window"] = m["W"]
    if m["mod"] == "softcap":
        want["softcap"] = m["cap"]
    variants = [v for v in lib.variants_of(m["op"]) if v.device == "cuda"]
    fits = [v for v in variants if all(getattr(v, key) == value for key, value in want.items())
            and math.isclose(v.scale, m["scale"], rel_tol=1e-6)]
    if not fits:
        have = "; ".join(f"{v.name}: {v.mask}/{v.score_mod}, head dim {v.head_dim_qk}, scale {v.scale:.6g}" for v in variants)
        return f"libneptune_ops has no GPU variant of {m['op']} with these semantics ({have or 'none'})"
    inputs = [c["q"], c["k"], c["v"]] + ([c["slopes"]] if m["mod"] == "alibi" else [])
    return lib.bind(m["op"], *inputs, out=torch.empty_like(c["q"]))


def finite(x):
    return x if x is not None and math.isfinite(x) else None


def check(torch, out, c):
    r = {"ref_max_abs": None, "ref_rms": None, "max_abs_vs_neptune": None,
         "nonfinite": int((~torch.isfinite(out)).sum().item())}
    if c["ref"] is not None:
        rows, vals = c["ref"]
        diff = out.reshape(-1, vals.shape[1]).index_select(0, rows).double() - vals
        r["ref_max_abs"] = finite(diff.abs().max().item())
        r["ref_rms"] = finite(diff.square().mean().sqrt().item())
    if c["neptune"] is not None:
        a, b, step = out.reshape(-1), c["neptune"].reshape(-1), 1 << 27
        maxes = [(a[i:i + step].float() - b[i:i + step].float()).abs().max() for i in range(0, a.numel(), step)]
        r["max_abs_vs_neptune"] = finite(torch.stack(maxes).max().item())
    return r


def smi(fields):
    try:
        p = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
        return [s.strip() for s in p.stdout.splitlines()[0].split(",")] if p.returncode == 0 else None
    except (OSError, IndexError, subprocess.SubprocessError):
        return None


def sm_clock(torch):
    got = smi("clocks.sm")
    if got:
        return got[0]
    try:
        return str(torch.cuda.clock_rate())
    except Exception:
        return None


def time_all(torch, fns, repeat):
    """Per implementation: milliseconds of each timed call; order rotates per repeat, flush outside events."""
    flush, names, ev = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda"), list(fns), []
    for r in range(repeat):
        for name in names[r % len(names):] + names[:r % len(names)]:
            flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fns[name]()
            e.record()
            ev.append((name, s, e))
    torch.cuda.synchronize()
    ms = {n: [] for n in names}
    for name, s, e in ev:
        ms[name].append(s.elapsed_time(e))
    return ms


def paired(base_ms, neptune_ms, rounds=2000):
    """Two series timed in the same rounds (time_all): the median of the per-round ratios base / neptune
    (above 1: Neptune faster), a 95 % bootstrap interval of that median, and the share of rounds Neptune
    won. A pair shares its clocks and memory state, which drift between rounds by more than two kernels
    at the memory's rate differ."""
    ratios = [b / n for b, n in zip(base_ms, neptune_ms)]
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(rounds))
    return {"median": statistics.median(ratios), "low": meds[int(0.025 * rounds)], "high": meds[int(0.975 * rounds) - 1],
            "neptune_faster": sum(r > 1 for r in ratios) / len(ratios)}


def make_row_self_test(torch, a, root):
    """A row-wise case: random f16 inputs, fp64 reference rows and an fp32 stand-in for Neptune's output."""
    R, C, op = a.batch, a.seq, a.op
    per_row = op in ("logsumexp", "cross_entropy")
    m = {"op": op, "family": "row", "batch": R, "seq": C, "dtype": "f16", "out_dtype": "f32" if per_row else "f16",
         "eps": 1e-5}
    g = torch.Generator(device="cuda").manual_seed(20261204)
    t = {"x": (torch.randn(R, C, generator=g, device="cuda") * 2).half()}
    if op in ("layernorm", "rmsnorm"):
        t["gamma"] = (1 + 0.1 * torch.randn(C, generator=g, device="cuda")).half()
    if op == "layernorm":
        t["beta"] = (0.1 * torch.randn(C, generator=g, device="cuda")).half()
    if op == "cross_entropy":
        t["labels"] = torch.randint(0, C, (R,), generator=g, device="cuda", dtype=torch.int32)
        t["labels"][5::8] = -100  # ignored rows (padding): loss 0
    for n, x in t.items():
        x.cpu().numpy().tofile(os.path.join(root, n + ".bin"))
    with open(os.path.join(root, "meta.json"), "w") as f:
        json.dump(m, f)
    m.update(R=R, C=C)

    def compute(dt):
        x = t["x"].to(dt)
        if op == "softmax":
            return torch.softmax(x, -1)
        if op == "logsumexp":
            return torch.logsumexp(x, -1)
        if op == "cross_entropy":
            lab = t["labels"].long()
            loss = torch.logsumexp(x, -1) - x.gather(1, lab.clamp(min=0)[:, None])[:, 0]
            return torch.where(lab == -100, torch.zeros_like(loss), loss)
        mean = x.mean(-1, keepdim=True) if op == "layernorm" else 0
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + 1e-5) * t["gamma"].to(dt)
        return y + t["beta"].to(dt) if op == "layernorm" else y
    rows = sorted({min(R - 1, round(j * (R - 1) / 23)) for j in range(24)})
    ref = compute(torch.float64)
    vals = ref.reshape(R, -1)[rows].tolist()
    with open(os.path.join(root, "reference_rows.json"), "w") as f:
        json.dump({"rows": rows, "values": vals}, f)
    out = compute(torch.float32)
    (out if per_row else out.half()).cpu().numpy().tofile(os.path.join(root, "neptune_out.bin"))


def make_self_test(torch, a, root):
    """Random inputs, an fp64 reference on sampled rows and an unfused fp32 stand-in for Neptune's output."""
    if a.op in ROW_OPS:
        return make_row_self_test(torch, a, root)
    import numpy as np
    hq, hkv, mask, mod, decode = OPS[a.op]
    B, S, d = a.batch, a.seq, 128
    sq = 1 if decode else S
    m = {"op": a.op, "batch": B, "seq": S, "q_heads": hq, "kv_heads": hkv, "seq_q": sq, "seq_kv": S, "head_dim": d,
         "mask": mask, "window": 4096, "mod": mod, "softcap": 50.0, "scale": 1 / math.sqrt(d), "decode": decode}
    g = torch.Generator(device="cuda").manual_seed(20261129)
    t = {n: torch.randn(B, h, s, d, generator=g, device="cuda").half()
         for n, h, s in (("q", hq, sq), ("k", hkv, S), ("v", hkv, S))}
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / hq) for h in range(hq)], device="cuda")
    for n, x in list(t.items()) + [("slopes", slopes)]:
        x.cpu().numpy().tofile(os.path.join(root, n + ".bin"))
    with open(os.path.join(root, "meta.json"), "w") as f:
        json.dump(m, f)
    mm = dict(m, W=4096, cap=50.0)
    pos = lambda i: torch.as_tensor(i, device="cuda").reshape(-1) + (S - sq)
    total = B * hq * sq
    rows = sorted({min(total - 1, round(j * (total - 1) / 23)) for j in range(24)})
    vals = []
    for r in rows:
        b, h, i = r // (hq * sq), (r // sq) % hq, r % sq
        kv = h // (hq // hkv)
        vals.append(attend_rows(torch, t["q"][b, h, i][None], t["k"][b, kv], t["v"][b, kv], pos(i), slopes[h], mm,
                                torch.float64)[0].tolist())
    with open(os.path.join(root, "reference_rows.json"), "w") as f:
        json.dump({"rows": rows, "values": vals}, f)
    out = torch.empty_like(t["q"])
    for b in range(B):
        for h in range(hq):
            kv = h // (hq // hkv)
            for i in range(0, sq, 4096):
                qs = t["q"][b, h, i:i + 4096]
                out[b, h, i:i + 4096] = attend_rows(torch, qs, t["k"][b, kv], t["v"][b, kv],
                                                    pos(torch.arange(i, i + qs.shape[0])), slopes[h], mm, torch.float32)
    out.cpu().numpy().tofile(os.path.join(root, "neptune_out.bin"))


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def run(torch, a):
    """One request: (exit status, the --json document or None)."""
    tmp = None
    try:
        if a.self_test:
            tmp = tempfile.TemporaryDirectory(prefix="neptune_baselines_")
            make_self_test(torch, a, tmp.name)
            a.inputs = a.outputs = tmp.name
            print(f"self-test: inputs, fp64 reference rows and an unfused fp32 stand-in for Neptune in {tmp.name}")
        c = load_case(torch, a)
    except (InputError, OSError, KeyError, ValueError, TypeError, ImportError) as e:
        print(f"baselines.py: bad inputs: {e!s}", file=sys.stderr)
        return 1, None
    m = c["meta"]
    unit, amount = work(m)
    try:
        import triton
        triton_version = triton.__version__
    except Exception:
        triton_version = None
    try:
        cudnn_version = torch.backends.cudnn.version()
    except Exception:
        cudnn_version = None
    gpu = smi("driver_version,clocks.max.sm") or [None, None]
    fns, results = {}, {}
    for name in a.impl:
        res = results[name] = {"impl": name, "median_ms": None, "min_ms": None, "max_ms": None, "throughput": None,
                               "ref_max_abs": None, "ref_rms": None, "max_abs_vs_neptune": None,
                               "supported": False, "reason": ""}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                row = m.get("family") in ("row", "linear_ce")
                if name == NEPTUNE_AOT:
                    fn = neptune_impl(torch, c, a.neptune) if not row else "neptune_aot covers attention here"
                elif (name in ROW_IMPLS) != row:
                    fn = f"{name} is for {'row-wise operators' if name in ROW_IMPLS else 'attention'}"
                elif row:
                    fn = row_impl(torch, c, name)
                else:
                    fn = flex_impl(torch, c) if name == "flex" else sdpa_impl(torch, c, name)
                if isinstance(fn, str):
                    res["reason"] = fn
                    continue
                res.update(check(torch, fn(), c))  # the first call compiles; its output is checked
                for _ in range(WARMUP):
                    fn()
                torch.cuda.synchronize()
                # The memory one call allocates beyond what is live before it (materialised logits).
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
                fn()
                torch.cuda.synchronize()
                res["peak_extra_bytes"] = torch.cuda.max_memory_allocated() - before
                fns[name], res["supported"] = fn, True
            except Exception as e:
                if cuda_broken(e):
                    raise
                lines = (str(e) or type(e).__name__).strip().splitlines() or [type(e).__name__]
                hint = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()]
                res["reason"] = lines[0][:200] + (f" ({hint[0][:200]})" if hint else "")
                continue
        if name == "flex" and any("without torch.compile" in str(w.message) for w in caught):
            res["reason"] = "WARNING: FlexAttention ran uncompiled (unfused fallback); its time is not representative"
            print(f"baselines.py: {res['reason']}", file=sys.stderr)
    clock_before = sm_clock(torch)
    if fns:
        times = time_all(torch, fns, a.repeat)
        for name, ms in times.items():
            med = statistics.median(ms)
            results[name].update(median_ms=med, min_ms=min(ms), max_ms=max(ms), throughput=amount / (med * 1e-3) / 1e12)
        if NEPTUNE_AOT in times:
            for name, ms in times.items():
                if name != NEPTUNE_AOT:
                    results[name]["paired_vs_neptune_aot"] = paired(ms, times[NEPTUNE_AOT])
    clock_after = sm_clock(torch)
    device = torch.cuda.get_device_name()
    shape = (f"{m['R']} rows x {m['C']} columns, {m['dtype']}" if m.get("family") == "row" else
             f"{m['N']} tokens, vocab {m['V']}, hidden {m['H']}, {m['dtype']}" if m.get("family") == "linear_ce" else
             f"Hq {m['hq']}, Hkv {m['hkv']}, Sq {m['sq']}, Skv {m['skv']}, D {m['d']}, mask {m['mask']}, mod {m['mod']}")
    print(f"{a.op} B={a.batch} S={a.seq} ({shape}) on {device}, driver {gpu[0]}, torch {torch.__version__}, "
          f"triton {triton_version}")
    print(f"median of {a.repeat} interleaved repeats, L2 flushed ({FLUSH_BYTES >> 20} MB) before each; "
          f"SM clock {clock_before} -> {clock_after} MHz (max {gpu[1]})")
    print(f"{'impl':<15}{'median ms':>10}{'min ms':>9}{'max ms':>9}{unit:>9}{'ref max|err|':>13}{'ref rms':>10}"
          f"{'max|d| vs neptune':>18}  note")
    for r in results.values():
        if not r["supported"]:
            print(f"{r['impl']:<15}unsupported: {r['reason']}")
            continue
        note = r["reason"] + (f" {r['nonfinite']} non-finite outputs" if r.get("nonfinite") else "")
        print(f"{r['impl']:<15}{fmt(r['median_ms'], '10.4f')}{fmt(r['min_ms'], '9.4f')}{fmt(r['max_ms'], '9.4f')}"
              f"{fmt(r['throughput'], '9.2f')}{fmt(r['ref_max_abs'], '13.2e')}{fmt(r['ref_rms'], '10.2e')}"
              f"{fmt(r['max_abs_vs_neptune'], '18.2e')}  {note}")
    for r in results.values():
        pr = r.get("paired_vs_neptune_aot")
        if pr:
            print(f"pairs: {r['impl']} / neptune_aot per round, median {pr['median']:.4f} (95 % bootstrap "
                  f"{pr['low']:.4f} to {pr['high']:.4f}); Neptune faster in {100 * pr['neptune_faster']:.0f} % of rounds")
    doc = {"op": a.op, "batch": a.batch, "seq": a.seq, "unit": unit, "device": device, "torch": torch.__version__,
           "triton": triton_version, "cuda": torch.version.cuda, "cudnn": cudnn_version,
           "driver": gpu[0], "sm_clock_mhz": {"before": clock_before, "after": clock_after, "max": gpu[1]},
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "repeat": a.repeat, "flush_bytes": FLUSH_BYTES, "work": amount, "self_test": a.self_test,
           "results": list(results.values())}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
    if tmp is not None:
        tmp.cleanup()
        ok = [r for r in results.values() if r["supported"]]
        bad = [r["impl"] for r in ok if r["nonfinite"] or r["reason"].startswith("WARNING") or any(
            r[k] is None or r[k] > SELF_TEST_TOL for k in ("ref_max_abs", "max_abs_vs_neptune"))]
        print(f"self-test {'FAILED' if bad or not ok else 'passed'}: {len(ok)} baselines ran"
              + (f", out of tolerance {SELF_TEST_TOL:g} or not compiled: {', '.join(bad)}" if bad else ""))
        return (1 if bad or not ok else 0), doc
    return 0, doc


def cuda_broken(e):
    """A CUDA error that leaves the context unusable (an illegal address, a launch failure), not a rejection."""
    text = str(e)
    return "CUDA error" in text or "cudaError" in text or "an illegal memory access" in text or any(
        f"CUDA_ERROR_{x}" in text for x in ("ILLEGAL_ADDRESS", "LAUNCH_FAILED", "ILLEGAL_INSTRUCTION", "MISALIGNED_ADDRESS"))


def open_torch():
    """(torch, None), or (None, (exit status, why)) when there is no torch or no CUDA device."""
    try:
        import torch
    except ImportError as e:
        return None, (2, f"torch is not available ({e}); it needs PyTorch with CUDA")
    if not torch.cuda.is_available():
        return None, (2, f"no CUDA device (torch {torch.__version__}); the baselines need a GPU")
    return torch, None


def serve():
    """Answers requests from stdin until it closes (module docstring, --serve)."""
    Parser.serving = True
    torch, failure = open_torch()
    for line in sys.stdin:
        if not line.strip():
            continue
        answer, fatal = {"rc": 1, "result": None, "error": ""}, False
        try:
            req = json.loads(line)
            a = parse_args([str(x) for x in req["argv"]])
            if a is None:
                raise ArgumentError("a request cannot ask for --serve")
            if failure:
                answer.update(rc=failure[0], error=failure[1])
            else:
                rc, doc = run(torch, a)
                answer.update(rc=rc, result=doc, error="" if rc == 0 else "bad inputs or a failed self-test (above)")
        except (ArgumentError, json.JSONDecodeError, KeyError, TypeError) as e:
            answer.update(rc=2, error=f"bad request: {e}")
        except Exception as e:
            fatal = torch is not None and cuda_broken(e)
            answer.update(rc=1, error=f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
        if torch is not None and not fatal:
            try:
                torch.cuda.synchronize()
                torch._dynamo.reset()
                torch.cuda.empty_cache()
            except Exception as e:
                fatal = True
                answer["error"] += f" (then cleaning up: {e})"
        print(ANSWER + json.dumps(answer), flush=True)
        if fatal:
            print("baselines.py: the CUDA context is unusable; the server stops", file=sys.stderr)
            return 1
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if a is None:
        return serve()
    torch, failure = open_torch()
    if failure:
        print(f"baselines.py: {failure[1]}", file=sys.stderr)
        return failure[0]
    return run(torch, a)[0]


if __name__ == "__main__":
    sys.exit(main())
