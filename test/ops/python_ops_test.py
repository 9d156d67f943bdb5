#!/usr/bin/env python3
"""python/neptune_ops.py on libneptune_ops.so: loading, the variant table, the checks and their
exceptions, and the host variants' numerics against references computed here in plain Python (host
arrays through __array_interface__, so no numpy or torch is needed). With torch and a GPU, also the
GPU variants on CUDA tensors, on a stream of torch's, against torch's own attention and softmax.

    python3 python_ops_test.py BUILD/src/ops/libneptune_ops.so
"""
import contextlib, ctypes, io, math, random, shutil, struct, subprocess, sys, unittest

import neptune_ops

LIB = None
AOT_VARIANTS = 0  # the table as loaded, before any test's call compiles a variant on first use


class HostArray:
    """A dense host array with the array interface: little-endian f2, f4 or i4 values in a ctypes buffer."""
    FORMATS = {"<f2": "e", "<f4": "f", "<i4": "i"}

    def __init__(self, shape, typestr="<f2", values=None, strides=None):
        self.shape, self.typestr, self.fmt = tuple(shape), typestr, self.FORMATS[typestr]
        self.n = math.prod(self.shape)
        self.size = struct.calcsize(self.fmt)
        self.buf = ctypes.create_string_buffer(self.n * self.size)
        self.strides = strides
        if values is not None:
            self.set(values)

    @property
    def __array_interface__(self):
        return {"shape": self.shape, "typestr": self.typestr, "data": (ctypes.addressof(self.buf), False),
                "strides": self.strides, "version": 3}

    def set(self, values):
        struct.pack_into(f"<{self.n}{self.fmt}", self.buf, 0, *values)

    def values(self):
        return list(struct.unpack_from(f"<{self.n}{self.fmt}", self.buf, 0))


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def randn(rng, n, scale=1.0):
    return [f16(rng.gauss(0.0, scale)) for _ in range(n)]


def attention_ref(q, k, v, B, hq, hkv, sq, skv, d, scale, causal=True):
    """Plain fp64 attention, bottom-right aligned causal mask; tensors flat, row-major."""
    out = []
    for b in range(B):
        for h in range(hq):
            g = h // (hq // hkv)
            for i in range(sq):
                qi = q[((b * hq + h) * sq + i) * d:][:d]
                p = skv - sq + i
                s = []
                for j in range(skv):
                    if causal and j > p:
                        continue
                    kj = k[((b * hkv + g) * skv + j) * d:][:d]
                    s.append((j, scale * sum(x * y for x, y in zip(qi, kj))))
                m = max(x for _, x in s)
                w = [(j, math.exp(x - m)) for j, x in s]
                total = sum(x for _, x in w)
                row = [0.0] * d
                for j, x in w:
                    vj = v[((b * hkv + g) * skv + j) * d:][:d]
                    for c in range(d):
                        row[c] += x * vj[c]
                out.extend(r / total for r in row)
    return out


def close(test, got, want, rel, what):
    """Relative RMS error within rel, and every element finite and within 8 rel of the row scale."""
    test.assertEqual(len(got), len(want), what)
    test.assertTrue(all(math.isfinite(x) for x in got), f"{what}: non-finite outputs")
    rms_err = math.sqrt(sum((a - b) ** 2 for a, b in zip(got, want)) / len(want))
    rms_ref = math.sqrt(sum(b * b for b in want) / len(want)) or 1.0
    test.assertLessEqual(rms_err / rms_ref, rel, f"{what}: relative RMS error {rms_err / rms_ref:.2e}")
    worst = max(abs(a - b) / (1 + abs(b)) for a, b in zip(got, want))
    test.assertLessEqual(worst, 8 * rel, f"{what}: worst scaled error {worst:.2e}")


class Table(unittest.TestCase):
    def test_loads_and_speaks_this_abi(self):
        self.assertEqual(LIB.abi_version, neptune_ops.ABI_VERSION)
        self.assertRegex(LIB.version, r"^\d+\.\d+\.\d+$")
        with self.assertRaisesRegex(OSError, "cannot load libneptune_ops.so"):
            neptune_ops.Library("/nonexistent/libneptune_ops.so")

    def test_variants_describe_the_suite(self):
        self.assertEqual(AOT_VARIANTS, 34)  # 32 libraries, and the paged operators listed for first use
        paged = {v.op: v for v in LIB.variants[:AOT_VARIANTS] if v.kernels == "neptune, compiled on first use"}
        self.assertEqual(sorted(paged), ["decode_paged", "prefill_paged"])
        self.assertEqual(paged["decode_paged"].inputs, ("q", "k_cache", "v_cache", "page_table", "seq_lens"))
        self.assertTrue(hasattr(LIB, "decode_paged"))
        self.assertEqual(LIB.ops[:3], ["prefill_global", "prefill_causal", "prefill_alibi"])
        w = {(v.op, v.device): v for v in LIB.variants[:AOT_VARIANTS]}
        win = w[("prefill_windowed", "host")]
        self.assertEqual((win.name, win.mask, win.window, win.score_mod, win.softcap), ("prefill_windowed_host", "window",
                                                                                         4096, "softcap", 50.0))
        self.assertEqual((win.head_dim_qk, win.head_dim_v, win.dtype, win.kernels), (128, 128, "f16", "host"))
        self.assertAlmostEqual(win.scale, 1 / math.sqrt(128), places=12)
        gqa = w[("decode_gqa", "cuda")]
        self.assertEqual((gqa.group, gqa.decode, gqa.kernels, gqa.inputs, gqa.outputs),
                         (8, True, "neptune", ("q", "k", "v"), ("out",)))
        self.assertEqual(w[("prefill_alibi", "cuda")].inputs, ("q", "k", "v", "slopes"))
        self.assertEqual(w[("prefill_gqa", "cuda")].name, "prefill_causal")
        self.assertEqual(w[("layernorm", "cuda")].kernels, "neptune")
        self.assertEqual(w[("cross_entropy", "cuda")].kernels, "neptune")
        self.assertEqual(w[("performer", "cuda")].kernels, "halide_cuda")
        self.assertEqual(w[("layernorm", "host")].eps, 1e-5)
        self.assertEqual(w[("logsumexp", "host")].signature, "x[rows,cols] f16 -> lse[rows] f32")

    def test_only_the_abi_is_exported(self):
        nm = shutil.which("nm")
        if not nm:
            self.skipTest("no nm")
        out = subprocess.run([nm, "-D", "--defined-only", LIB.path], capture_output=True, text=True, check=True).stdout
        names = [line.split()[-1] for line in out.splitlines() if line.strip()]
        self.assertIn("neptune_ops_prefill_causal", names)
        self.assertEqual([n for n in names if not n.startswith("neptune_ops_")], [])

    def test_ops_are_attributes(self):
        self.assertTrue(callable(LIB.decode_softcap))
        with self.assertRaises(AttributeError):
            LIB.no_such_op


class HostNumerics(unittest.TestCase):
    def setUp(self):
        self.rng = random.Random(5)

    def test_softmax(self):
        rows, cols = 3, 50
        x = randn(self.rng, rows * cols, 3.0)
        y = HostArray((rows, cols))
        got = LIB.softmax(HostArray((rows, cols), values=x), out=y).values()
        want = []
        for r in range(rows):
            row = x[r * cols:(r + 1) * cols]
            m = max(row)
            e = [math.exp(v - m) for v in row]
            want.extend(v / sum(e) for v in e)
        close(self, got, want, 1e-3, "softmax")

    def test_logsumexp_in_f32(self):
        rows, cols = 4, 33
        x = randn(self.rng, rows * cols)
        variant = LIB.select("logsumexp", HostArray((rows, cols), values=x))
        self.assertEqual((variant.name, LIB.output_shapes(variant, HostArray((rows, cols)))),
                         ("logsumexp_host", [((rows,), "f32")]))
        got = LIB.run("logsumexp", HostArray((rows, cols), values=x), out=HostArray((rows,), "<f4")).values()
        want = [math.log(sum(math.exp(v) for v in x[r * cols:(r + 1) * cols])) for r in range(rows)]
        close(self, got, want, 1e-4, "logsumexp")

    def test_rmsnorm(self):
        rows, cols = 3, 64
        x, gamma = randn(self.rng, rows * cols), randn(self.rng, cols)
        got = LIB.rmsnorm(HostArray((rows, cols), values=x), HostArray((cols,), values=gamma),
                          out=HostArray((rows, cols))).values()
        want = []
        for r in range(rows):
            row = x[r * cols:(r + 1) * cols]
            inv = 1 / math.sqrt(sum(v * v for v in row) / cols + 1e-5)
            want.extend(v * inv * g for v, g in zip(row, gamma))
        close(self, got, want, 1e-3, "rmsnorm")

    def test_prefill_attention_with_grouped_heads(self):
        B, hq, hkv, s, d = 1, 4, 2, 6, 128
        q, k, v = randn(self.rng, B * hq * s * d), randn(self.rng, B * hkv * s * d), randn(self.rng, B * hkv * s * d)
        args = (HostArray((B, hq, s, d), values=q), HostArray((B, hkv, s, d), values=k), HostArray((B, hkv, s, d), values=v))
        self.assertEqual(LIB.select("prefill_gqa", *args).name, "prefill_causal_host")
        call = LIB.bind("prefill_gqa", *args, out=HostArray((B, hq, s, d)))
        got = call().values()
        self.assertEqual(call().values(), got)  # a bound call runs again, the same
        close(self, got, attention_ref(q, k, v, B, hq, hkv, s, s, d, 1 / math.sqrt(d)), 1e-3, "prefill_gqa")

    def test_attention_reads_views_through_their_strides(self):
        # q, k, v and out as [B, S, H, D] memory (heads 8 elements apart beyond D), described to the
        # library as [B, H, S, D] views by their strides: what layout="bshd" passes for torch tensors.
        B, hq, hkv, s, d, pad = 2, 4, 2, 6, 128, 8
        q, k, v = randn(self.rng, B * hq * s * d), randn(self.rng, B * hkv * s * d), randn(self.rng, B * hkv * s * d)

        def bshd(values, h):
            hs = d + pad
            mem = [float("nan")] * (B * s * h * hs)
            for b in range(B):
                for hh in range(h):
                    for i in range(s):
                        base = (b * s + i) * h * hs + hh * hs
                        mem[base:base + d] = values[((b * h + hh) * s + i) * d:][:d]
            a = HostArray((B * s * h * hs,), values=mem)
            a.shape, a.strides = (B, h, s, d), (s * h * hs * 2, hs * 2, h * hs * 2, 2)
            return a
        out = bshd([float("nan")] * (B * hq * s * d), hq)
        LIB.prefill_gqa(bshd(q, hq), bshd(k, hkv), bshd(v, hkv), out=out)
        mem, hs, got = out.values(), d + pad, []
        for b in range(B):
            for hh in range(hq):
                for i in range(s):
                    base = (b * s + i) * hq * hs + hh * hs
                    got.extend(mem[base:base + d])
        close(self, got, attention_ref(q, k, v, B, hq, hkv, s, s, d, 1 / math.sqrt(d)), 1e-3, "strided prefill_gqa")

    def test_decode_attention_split_over_the_keys(self):
        B, hq, hkv, skv, d = 2, 8, 1, 40, 128
        q, k, v = randn(self.rng, B * hq * d), randn(self.rng, B * hkv * skv * d), randn(self.rng, B * hkv * skv * d)
        got = LIB.decode_gqa(HostArray((B, hq, 1, d), values=q), HostArray((B, hkv, skv, d), values=k),
                             HostArray((B, hkv, skv, d), values=v), out=HostArray((B, hq, 1, d))).values()
        close(self, got, attention_ref(q, k, v, B, hq, hkv, 1, skv, d, 1 / math.sqrt(d)), 1e-3, "decode_gqa")


class Refusals(unittest.TestCase):
    def attention_args(self, kv_batch=1, d=128, typestr="<f2"):
        return (HostArray((1, 2, 5, d), typestr), HostArray((kv_batch, 2, 5, d), typestr), HostArray((1, 2, 5, d), typestr))

    def test_shapes(self):
        with self.assertRaises(neptune_ops.ShapeError) as e:
            LIB.prefill_causal(*self.attention_args(kv_batch=2), out=HostArray((1, 2, 5, 128)))
        self.assertIn("prefill_causal: k has shape [2, 2, 5, 128], expected [1, 2, 5, 128]", str(e.exception))
        self.assertEqual(e.exception.status, 2)
        with self.assertRaisesRegex(neptune_ops.ShapeError, r"output out has shape \[1, 2, 5, 64\]"):
            LIB.prefill_causal(*self.attention_args(), out=HostArray((1, 2, 5, 64)))
        with self.assertRaisesRegex(neptune_ops.ArgumentError, r"softmax: 2 inputs given, expected 1 \(x\)"):
            LIB.softmax(HostArray((2, 3)), HostArray((2, 3)), out=HostArray((2, 3)))

    def test_dtypes_and_compiled_head_dims(self):
        with self.assertRaisesRegex(neptune_ops.DTypeError, "no compiled variant takes q .* f32 on the host.*it takes f16"):
            LIB.prefill_causal(*self.attention_args(typestr="<f4"), out=HostArray((1, 2, 5, 128), "<f4"))
        with self.assertRaisesRegex(neptune_ops.UnsupportedError, "compiled for head dim 128"):
            LIB.prefill_causal(*self.attention_args(d=64), out=HostArray((1, 2, 5, 64)))
        with self.assertRaisesRegex(TypeError, "typestr '<f8'"):
            LIB.softmax(_F8(), out=HostArray((2, 3)))

    def test_what_the_module_refuses_itself(self):
        with self.assertRaisesRegex(ValueError, "x's last dimension is not contiguous"):
            LIB.softmax(HostArray((2, 3), strides=(2, 4)), out=HostArray((2, 3)))
        with self.assertRaisesRegex(ValueError, "layout 'sbhd'; Neptune takes 'bhsd' or 'bshd'"):
            LIB.softmax(HostArray((2, 3)), out=HostArray((2, 3)), layout="sbhd")
        with self.assertRaisesRegex(TypeError, "layout='bshd' needs torch tensors or numpy arrays"):
            LIB.prefill_causal(*[HostArray((1, 5, 2, 128))] * 3, layout="bshd")
        with self.assertRaisesRegex(TypeError, "pass a torch tensor or an array"):
            LIB.softmax([1.0, 2.0], out=HostArray((1, 2)))
        with self.assertRaisesRegex(neptune_ops.ArgumentError, "unknown operator 'nope'"):
            LIB.run("nope", HostArray((2, 3)))

    def test_library_errors_carry_the_runtime_message(self):
        labels = HostArray((2,), "<i4", [0, 7])
        with self.assertRaisesRegex(neptune_ops.LibraryError, "label out of range"):
            LIB.cross_entropy(HostArray((2, 5), values=[0.0] * 10), labels, out=HostArray((2,), "<f4"))

    def test_gpu_variants_without_a_gpu(self):
        if _torch_cuda():
            self.skipTest("a GPU is present")
        with self.assertRaisesRegex(neptune_ops.DeviceError, "no GPU"):
            LIB.device_info()
        # A tensor said to be on the GPU reaches the GPU variant, which refuses without a device.
        t = neptune_ops._Tensor()
        buf = ctypes.create_string_buffer(12)
        t.data, t.dtype, t.device, t.ndim = ctypes.addressof(buf), 0, neptune_ops.CUDA, 2
        t.abi = neptune_ops.ABI_VERSION
        t.shape[0], t.shape[1] = 2, 3
        index = ctypes.c_int(-1)
        arr = (neptune_ops._Tensor * 1)(t)
        self.assertEqual(LIB._lib.neptune_ops_select(b"softmax", arr, 1, ctypes.byref(index)), 0)
        self.assertEqual(LIB.variants[index.value].name, "softmax")
        out = (neptune_ops._Tensor * 1)(t)
        self.assertEqual(LIB._lib.neptune_ops_run(index.value, arr, 1, out, 1, None), 5)
        self.assertIn("softmax runs on the GPU, and there is none", LIB.last_error())


class Baselines(unittest.TestCase):
    """baselines.py --neptune: the option and the choice of variant (the timing itself needs the GPU)."""

    @classmethod
    def setUpClass(cls):
        import os
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "apps", "neptune_bench"))
        import baselines
        cls.b = baselines

    def test_the_option_adds_neptune_aot_to_the_implementations(self):
        base = ["--op", "prefill_causal", "--batch", "1", "--seq", "64", "--self-test"]
        a = self.b.parse_args(base + ["--neptune"])
        self.assertEqual((a.impl, a.neptune), (list(self.b.ATTENTION_IMPLS) + ["neptune_aot"], ""))
        a = self.b.parse_args(base + ["--impl", "flex,neptune_aot", "--neptune", LIB.path])
        self.assertEqual((a.impl, a.neptune), (["flex", "neptune_aot"], LIB.path))
        self.assertIsNone(self.b.parse_args(base).neptune)
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
            self.b.parse_args(base + ["--impl", "neptune_jit"])
        self.assertIn("--impl: unknown ['neptune_jit']", err.getvalue())

    def test_row_operators_default_to_the_torch_baselines(self):
        a = self.b.parse_args(["--op", "softmax", "--batch", "7", "--seq", "100", "--self-test"])
        self.assertEqual(a.impl, ["torch_eager", "torch_compile"])

    def test_row_work_counts_the_bytes_read_and_written(self):
        # softmax 10 x 100 in f16: x read (2000 bytes) and y written (2000); layernorm adds gamma and beta
        # (200 each); cross_entropy reads int32 labels (40) and writes one f32 loss per row (40).
        work = lambda op, out: self.b.work({"family": "row", "op": op, "R": 10, "C": 100, "dtype": "f16",
                                            "out_dtype": out})
        self.assertEqual(work("softmax", "f16"), ("TB/s", 4000.0))
        self.assertEqual(work("layernorm", "f16"), ("TB/s", 4400.0))
        self.assertEqual(work("rmsnorm", "f16"), ("TB/s", 4200.0))
        self.assertEqual(work("cross_entropy", "f32"), ("TB/s", 2080.0))
        self.assertEqual(work("logsumexp", "f32"), ("TB/s", 2040.0))

    def test_a_variant_must_have_the_operators_semantics(self):
        meta = {"op": "prefill_windowed", "mask": "window", "mod": "softcap", "decode": False, "d": 128, "W": 1024,
                "cap": 50.0, "scale": 1 / math.sqrt(128)}
        why = self.b.neptune_impl(None, {"meta": meta}, LIB.path)
        self.assertIsInstance(why, str)
        self.assertIn("no GPU variant of prefill_windowed with these semantics (prefill_windowed: window/softcap, "
                      "head dim 128", why)
        meta.update(op="decode_alibi", mask="causal", mod="alibi", decode=True, W=0, scale=0.125)
        self.assertIn("no GPU variant of decode_alibi", self.b.neptune_impl(None, {"meta": meta}, LIB.path))


class _F8:
    __array_interface__ = {"shape": (2, 3), "typestr": "<f8", "data": (0, False), "version": 3}


def _torch_cuda():
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


@unittest.skipUnless(_torch_cuda(), "needs torch with a CUDA device")
class Gpu(unittest.TestCase):
    def test_attention_on_a_stream_of_torch(self):
        import torch
        g = torch.Generator(device="cuda").manual_seed(3)
        q = torch.randn(2, 16, 300, 128, device="cuda", generator=g).half()
        k = torch.randn(2, 4, 300, 128, device="cuda", generator=g).half()
        v = torch.randn(2, 4, 300, 128, device="cuda", generator=g).half()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            out = LIB.prefill_gqa(q, k, v)  # on s, torch's current stream here
        s.synchronize()
        want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True,
                                                                enable_gqa=True)
        self.assertEqual(out.shape, q.shape)
        self.assertLess((out.float() - want).abs().max().item(), 1e-2)

    def test_decode_and_softmax(self):
        import torch
        g = torch.Generator(device="cuda").manual_seed(4)
        q = torch.randn(3, 64, 1, 128, device="cuda", generator=g).half()
        k = torch.randn(3, 8, 1000, 128, device="cuda", generator=g).half()
        v = torch.randn(3, 8, 1000, 128, device="cuda", generator=g).half()
        out = LIB.decode_gqa(q, k, v)
        want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=True)
        torch.cuda.synchronize()
        self.assertLess((out.float() - want).abs().max().item(), 1e-2)
        x = torch.randn(64, 1000, device="cuda", generator=g).half()
        y = LIB.softmax(x)
        torch.cuda.synchronize()
        self.assertLess((y.float() - torch.softmax(x.float(), -1)).abs().max().item(), 1e-3)

    def test_layouts_and_views_without_copies(self):
        import torch
        g = torch.Generator(device="cuda").manual_seed(5)
        for dtype, d in ((torch.float16, 128), (torch.bfloat16, 64)):
            q = torch.randn(2, 300, 16, d, device="cuda", generator=g).to(dtype)  # [B, S, H, D]
            k = torch.randn(2, 300, 4, d, device="cuda", generator=g).to(dtype)
            v = torch.randn(2, 300, 4, d, device="cuda", generator=g).to(dtype)
            want = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float(), is_causal=True,
                enable_gqa=True)
            out = LIB.prefill_gqa(q, k, v, layout="bshd")
            torch.cuda.synchronize()
            self.assertEqual(out.shape, q.shape)  # returned in the inputs' layout
            self.assertLess((out.transpose(1, 2).float() - want).abs().max().item(), 2e-2)
            # The same memory as [B, H, S, D] views (torch's transpose) in the default layout.
            out2 = LIB.prefill_gqa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
            torch.cuda.synchronize()
            self.assertLess((out2.float() - want).abs().max().item(), 2e-2)
        # A view that starts 2 bytes into its memory: vector copies need rows on 16 bytes.
        x = torch.randn(4, 100, 8, 64, device="cuda", generator=g).half()[:, :, :, 1:41]
        with self.assertRaisesRegex(neptune_ops.NeptuneOpsError, "does not start on 16 bytes"):
            LIB.prefill_causal(x, x, x, layout="bshd")

    def test_host_memory_said_to_be_on_the_gpu_is_refused(self):
        t = neptune_ops._Tensor()
        buf = ctypes.create_string_buffer(1 * 1 * 2 * 128 * 2)
        t.data, t.dtype, t.device, t.ndim = ctypes.addressof(buf), 0, neptune_ops.CUDA, 4
        t.abi = neptune_ops.ABI_VERSION
        for i, e in enumerate((1, 1, 2, 128)):
            t.shape[i] = e
        arr, out, index = (neptune_ops._Tensor * 3)(t, t, t), (neptune_ops._Tensor * 1)(t), ctypes.c_int(-1)
        self.assertEqual(LIB._lib.neptune_ops_select(b"prefill_causal", arr, 3, ctypes.byref(index)), 0)
        self.assertEqual(LIB._lib.neptune_ops_run(index.value, arr, 3, out, 1, None), 5)
        self.assertIn("prefill_causal: q:", LIB.last_error())


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    LIB = neptune_ops.Library(sys.argv.pop(1))
    AOT_VARIANTS = len(LIB.variants)
    unittest.main(verbosity=2)
