"""Neptune's operator suite from Python, through ctypes and libneptune_ops.so (include/neptune/NeptuneOps.h).

    import torch, neptune_ops
    ops = neptune_ops.Library()               # finds libneptune_ops.so (see Library)
    out = ops.prefill_causal(q, k, v)         # q [B, Hq, Sq, 128] fp16 on the GPU; out allocated like q
    ops.run("softmax", x, out=y)              # into an existing tensor
    call = ops.bind("decode_gqa", q, k, v, out=o)   # checked once; call() launches again (timing loops)
    for v in ops.variants: print(v.name, v.op, v.device, v.signature)

Tensors are PyTorch tensors (CUDA tensors run the GPU variants on PyTorch's current stream, or the
one given; CPU tensors the host variants) or host arrays with the NumPy array interface (NumPy
arrays, or any object with __array_interface__). Their innermost dimension must be contiguous; the
others may have any strides (the library reads views in place: attention's strides must be multiples
of 8 elements). Attention takes [B, H, S, D] tensors, or with layout="bshd" [B, S, H, D] ones (as
projections leave them: no transpose or copy needed), and returns its output in the same layout:

    out = ops.prefill_causal(q, k, v, layout="bshd")   # q [B, S, Hq, D], k and v [B, S, Hkv, D]

A GPU call that no compiled
variant serves (another head dim, bf16, another grouping) compiles one on first use and keeps it in
the cache (~/.cache/neptune, or $NEPTUNE_CACHE_DIR), so later processes load it at once. The library
checks every call (ranks, shapes, element types, the compiled head dim and grouping, device pointers) and a
refusal raises the exception class of its status (ShapeError, DTypeError, ...), carrying the
library's message. Standard library only; torch and numpy are used when the tensors are theirs.
"""
import ctypes
import os

__all__ = ["Library", "Variant", "NeptuneOpsError", "ArgumentError", "ShapeError", "DTypeError",
           "UnsupportedError", "DeviceError", "LibraryError", "InternalError", "ABI_VERSION"]

ABI_VERSION = 2  # NEPTUNE_OPS_ABI_VERSION this module speaks
LAYOUTS = ("bhsd", "bshd")  # attention's 4-D tensors: [B, H, S, D] (the library's order) or [B, S, H, D]
MAX_DIMS = 4
CUDA, HOST = 0, 1
DTYPES = ("f16", "bf16", "f32", "i32")  # neptune_ops_dtype codes are the indices
DEVICES = ("cuda", "host")


class NeptuneOpsError(Exception):
    """A status other than NEPTUNE_OPS_OK, with the library's message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status, self.message = status, message


class ArgumentError(NeptuneOpsError, ValueError):
    pass


class ShapeError(NeptuneOpsError, ValueError):
    pass


class DTypeError(NeptuneOpsError, TypeError):
    pass


class UnsupportedError(NeptuneOpsError):
    pass


class DeviceError(NeptuneOpsError):
    pass


class LibraryError(NeptuneOpsError):
    pass


class InternalError(NeptuneOpsError):
    pass


_ERRORS = {1: ArgumentError, 2: ShapeError, 3: DTypeError, 4: UnsupportedError, 5: DeviceError, 6: LibraryError,
           7: InternalError}


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("device", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("abi", ctypes.c_int32), ("shape", ctypes.c_int64 * MAX_DIMS),
                ("strides", ctypes.c_int64 * MAX_DIMS)]


class _Variant(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("op", ctypes.c_char_p), ("family", ctypes.c_char_p),
                ("kernels", ctypes.c_char_p), ("inputs", ctypes.c_char_p), ("outputs", ctypes.c_char_p),
                ("signature", ctypes.c_char_p), ("device", ctypes.c_int32), ("dtype", ctypes.c_int32),
                ("head_dim_qk", ctypes.c_int32), ("head_dim_v", ctypes.c_int32), ("group", ctypes.c_int32),
                ("decode", ctypes.c_int32), ("mask", ctypes.c_char_p), ("window", ctypes.c_int32),
                ("score_mod", ctypes.c_char_p), ("softcap", ctypes.c_double), ("scale", ctypes.c_double),
                ("eps", ctypes.c_double)]


class _DeviceInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("cc_major", ctypes.c_int32), ("cc_minor", ctypes.c_int32),
                ("sm_count", ctypes.c_int32), ("l2_bytes", ctypes.c_int32), ("total_memory", ctypes.c_int64)]


class Variant:
    """One compiled variant (neptune_ops_variant): `index` is its place in the library's table."""

    def __init__(self, index, v):
        self.index = index
        text = lambda b: b.decode() if b is not None else ""
        self.name, self.op, self.family, self.kernels = text(v.name), text(v.op), text(v.family), text(v.kernels)
        self.inputs = tuple(text(v.inputs).split(","))
        self.outputs = tuple(text(v.outputs).split(","))
        self.signature = text(v.signature)
        self.device, self.dtype = DEVICES[v.device], DTYPES[v.dtype]
        self.head_dim_qk, self.head_dim_v, self.group, self.decode = v.head_dim_qk, v.head_dim_v, v.group, bool(v.decode)
        self.mask, self.window, self.score_mod = text(v.mask), v.window, text(v.score_mod)
        self.softcap, self.scale, self.eps = v.softcap, v.scale, v.eps

    def __repr__(self):
        return f"Variant({self.name!r} for {self.op!r} on {self.device}: {self.signature})"


_TORCH_DTYPES = {"torch.float16": 0, "torch.bfloat16": 1, "torch.float32": 2, "torch.int32": 3}
_ARRAY_DTYPES = {"<f2": 0, "<f4": 2, "<i4": 3, "=f2": 0, "=f4": 2, "=i4": 3}
_ITEM_BYTES = (2, 2, 4, 4)


def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _describe(x, name):
    """(neptune_ops_tensor, kind, torch device or None) of a torch tensor or an array-interface host array."""
    t = _Tensor()
    if _is_torch(x):
        code = _TORCH_DTYPES.get(str(x.dtype))
        if code is None:
            raise TypeError(f"{name} is {x.dtype}; Neptune takes float16, bfloat16, float32 or int32 tensors")
        if x.device.type not in ("cuda", "cpu"):
            raise TypeError(f"{name} is on {x.device}; Neptune takes CUDA or CPU tensors")
        shape, strides = tuple(x.shape), tuple(x.stride())
        ptr, device, kind = x.data_ptr(), CUDA if x.device.type == "cuda" else HOST, "torch"
    elif hasattr(x, "__array_interface__"):
        ai = x.__array_interface__
        code = _ARRAY_DTYPES.get(ai["typestr"])
        if code is None:
            raise TypeError(f"{name} has typestr {ai['typestr']!r}; Neptune takes little-endian f2, f4 or i4 arrays")
        shape, (ptr, readonly) = tuple(ai["shape"]), ai["data"]
        strides = None
        if ai.get("strides") is not None:  # bytes; None means C-contiguous
            item = _ITEM_BYTES[code]
            if any(b % item for b in ai["strides"]):
                raise ValueError(f"{name} has strides {ai['strides']} bytes, not whole {item}-byte elements")
            strides = tuple(b // item for b in ai["strides"])
        device, kind = HOST, "array"
    else:
        raise TypeError(f"{name} is a {type(x).__name__}; pass a torch tensor or an array with __array_interface__")
    if not 1 <= len(shape) <= MAX_DIMS:
        raise ShapeError(2, f"{name} has {len(shape)} dimensions; Neptune's tensors have 1 to {MAX_DIMS}")
    if strides is not None and len(shape) and shape[-1] > 1 and strides[-1] != 1:
        raise ValueError(f"{name}'s last dimension is not contiguous (strides {strides}); pass a contiguous copy")
    t.data, t.dtype, t.device, t.ndim, t.abi = ptr, code, device, len(shape), ABI_VERSION
    for i, e in enumerate(shape):
        t.shape[i] = e
        t.strides[i] = strides[i] if strides is not None else 0
    return t, kind, (x.device if kind == "torch" else None)


def _swap_seq_heads(x):
    """A 4-D tensor's view with dimensions 1 and 2 swapped (no copy): [B, S, H, D] <-> [B, H, S, D]."""
    if _is_torch(x):
        return x.transpose(1, 2)
    if hasattr(x, "swapaxes"):
        return x.swapaxes(1, 2)
    raise TypeError("layout='bshd' needs torch tensors or numpy arrays (views with swapped axes)")


def _default_paths():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    for p in (os.path.join(here, "libneptune_ops.so"), os.path.join(root, "build", "src", "ops", "libneptune_ops.so"),
              os.path.join(root, ".devrun", "libneptune_ops.so")):
        if os.path.isfile(p):
            yield p
    yield "libneptune_ops.so"  # the loader's path (LD_LIBRARY_PATH)


class Library:
    """libneptune_ops.so loaded: `path`, else $NEPTUNE_OPS_LIB, else next to this module, the build tree
    (build/src/ops), .devrun/ and the loader's path, in that order."""

    def __init__(self, path=None):
        path = path or os.environ.get("NEPTUNE_OPS_LIB")
        candidates = [path] if path else list(_default_paths())
        errors = []
        for p in candidates:
            try:
                self._lib = ctypes.CDLL(p)
                self.path = p
                break
            except OSError as e:
                errors.append(f"{p}: {e}")
        else:
            raise OSError("cannot load libneptune_ops.so (" + "; ".join(errors) + "); build it (ninja -C build) or set "
                          "NEPTUNE_OPS_LIB")
        L = self._lib
        P = ctypes.POINTER
        L.neptune_ops_last_error.restype = ctypes.c_char_p
        L.neptune_ops_version.restype = ctypes.c_char_p
        L.neptune_ops_get_variant.argtypes = [ctypes.c_int, P(_Variant)]
        L.neptune_ops_select.argtypes = [ctypes.c_char_p, P(_Tensor), ctypes.c_int, P(ctypes.c_int)]
        L.neptune_ops_output_shapes.argtypes = [ctypes.c_int, P(_Tensor), ctypes.c_int, P(_Tensor), ctypes.c_int]
        L.neptune_ops_run.argtypes = [ctypes.c_int, P(_Tensor), ctypes.c_int, P(_Tensor), ctypes.c_int, ctypes.c_void_p]
        L.neptune_ops_get_device_info.argtypes = [P(_DeviceInfo)]
        self.abi_version = L.neptune_ops_abi_version()
        if self.abi_version != ABI_VERSION:
            raise OSError(f"{self.path} speaks ABI {self.abi_version}, this module {ABI_VERSION}")
        self.version = L.neptune_ops_version().decode()
        self.variants = []
        self._read_variants()
        self.ops = list(dict.fromkeys(v.op for v in self.variants))

    def _read_variants(self):
        """Appends the variants the library has made since (those compiled on first use)."""
        for i in range(len(self.variants), self._lib.neptune_ops_num_variants()):
            v = _Variant()
            self._check(self._lib.neptune_ops_get_variant(i, ctypes.byref(v)))
            self.variants.append(Variant(i, v))

    def _check(self, status):
        if status == 0:
            return
        message = self._lib.neptune_ops_last_error().decode(errors="replace")
        raise _ERRORS.get(status, NeptuneOpsError)(status, message)

    def last_error(self):
        return self._lib.neptune_ops_last_error().decode(errors="replace")

    def variants_of(self, op):
        return [v for v in self.variants if v.op == op]

    def device_info(self):
        """The GPU's name, compute capability, SM count, L2 and memory bytes; DeviceError without one."""
        d = _DeviceInfo()
        self._check(self._lib.neptune_ops_get_device_info(ctypes.byref(d)))
        return {"name": d.name.decode(), "compute_capability": (d.cc_major, d.cc_minor), "sm_count": d.sm_count,
                "l2_bytes": d.l2_bytes, "total_memory": d.total_memory}

    def synchronize(self):
        self._check(self._lib.neptune_ops_synchronize())

    def select(self, op, *inputs, layout="bhsd"):
        """The Variant of `op` that takes these inputs (checked as a call would)."""
        inputs = self._in_layout(inputs, layout)
        arr, _ = self._tensors(inputs, op_inputs=self._names(op))
        return self._select(op, arr, len(inputs))

    def _select(self, op, arr, n):
        """The Variant of `op` for n described input tensors."""
        index = ctypes.c_int(-1)
        self._check(self._lib.neptune_ops_select(op.encode(), arr, n, ctypes.byref(index)))
        if index.value >= len(self.variants):
            self._read_variants()
        return self.variants[index.value]

    def output_shapes(self, variant, *inputs):
        """[(shape, dtype name)] of the outputs `variant` writes for these inputs."""
        arr, _ = self._tensors(inputs, op_inputs=variant.inputs)
        return self._output_shapes(variant, arr, len(inputs))

    def _output_shapes(self, variant, arr, n):
        outs = (_Tensor * len(variant.outputs))()
        self._check(self._lib.neptune_ops_output_shapes(variant.index, arr, n, outs, len(outs)))
        return [(tuple(o.shape[:o.ndim]), DTYPES[o.dtype]) for o in outs]

    def bind(self, op, *inputs, out=None, stream=None, layout="bhsd"):
        """Checks a call once and returns a function that launches it (again and again) and returns the
        outputs: for timing loops, where ctypes' argument building would otherwise be timed too. With
        out=None the outputs are allocated here (torch.empty like the first input, or numpy.empty).
        layout="bshd": attention's 4-D inputs and outputs are [B, S, H, D] (read and written in place)."""
        inputs = self._in_layout(inputs, layout)
        in_arr, kind = self._tensors(inputs, op_inputs=self._names(op))
        variant = self._select(op, in_arr, len(inputs))
        if out is None:
            out = self._allocate(self._output_shapes(variant, in_arr, len(inputs)), kind, layout)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        out_arr, _ = self._tensors(self._in_layout(outs, layout), op_inputs=variant.outputs)
        if kind[0] == "torch" and kind[1] is not None and kind[1].type == "cuda" and stream is None:
            import torch
            stream = torch.cuda.current_stream(kind[1])
        handle = ctypes.c_void_p(getattr(stream, "cuda_stream", stream) or 0)
        keep = (inputs, outs)  # the tensors outlive the bound call
        run, n_in, n_out, index = self._lib.neptune_ops_run, len(inputs), len(outs), variant.index
        result = outs[0] if len(outs) == 1 and not isinstance(out, (list, tuple)) else outs

        def call():
            self._check(run(index, in_arr, n_in, out_arr, n_out, handle))
            return result
        call.variant, call.keep = variant, keep
        return call

    def run(self, op, *inputs, out=None, stream=None, layout="bhsd"):
        """Runs `op` on `inputs` (its variant chosen by their device, dtype and shapes); returns the output
        (or the list of outputs), allocated unless given as `out`, in the inputs' `layout`."""
        return self.bind(op, *inputs, out=out, stream=stream, layout=layout)()

    def __getattr__(self, name):
        if name.startswith("_") or name not in self.__dict__.get("ops", ()):
            raise AttributeError(name)
        return lambda *inputs, out=None, stream=None, layout="bhsd": self.run(name, *inputs, out=out, stream=stream,
                                                                            layout=layout)

    # ---- helpers ----

    def _names(self, op):
        vs = self.variants_of(op)
        if not vs:
            raise ArgumentError(1, f"unknown operator {op!r}; this library has {', '.join(self.ops)}")
        return vs[0].inputs

    def _tensors(self, xs, op_inputs):
        arr = (_Tensor * max(len(xs), 1))()
        kinds = set()
        device = None
        for i, x in enumerate(xs):
            name = op_inputs[i] if i < len(op_inputs) else f"tensor {i}"
            arr[i], kind, dev = _describe(x, name)
            kinds.add(kind)
            device = device or dev
        if len(kinds) > 1:
            raise TypeError("mixing torch tensors and other arrays in one call")
        return arr, (kinds.pop() if kinds else None, device)

    @staticmethod
    def _in_layout(xs, layout):
        """The tensors as the library takes them: with layout "bshd", 4-D ones as [B, H, S, D] views."""
        if layout not in LAYOUTS:
            raise ValueError(f"layout {layout!r}; Neptune takes {' or '.join(map(repr, LAYOUTS))}")
        if layout == "bhsd":
            return tuple(xs)
        return tuple(_swap_seq_heads(x) if len(getattr(x, "shape", ())) == 4 else x for x in xs)

    def _allocate(self, shapes, kind, layout="bhsd"):
        """Outputs of these [(shape, dtype)] (the library's layout), allocated in `layout`."""
        if layout == "bshd":
            shapes = [((s[0], s[2], s[1], s[3]) if len(s) == 4 else s, d) for s, d in shapes]
        if kind[0] == "torch":
            import torch
            dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "i32": torch.int32}
            return [torch.empty(s, dtype=dt[d], device=kind[1]) for s, d in shapes] if len(shapes) > 1 else \
                torch.empty(shapes[0][0], dtype=dt[shapes[0][1]], device=kind[1])
        try:
            import numpy
        except ImportError:
            raise TypeError("pass out=: numpy is not there to allocate the outputs of host arrays")
        dt = {"f16": numpy.float16, "f32": numpy.float32, "i32": numpy.int32}
        made = [numpy.empty(s, dtype=dt[d]) for s, d in shapes]
        return made if len(made) > 1 else made[0]
