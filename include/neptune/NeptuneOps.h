#ifndef NEPTUNE_NEPTUNE_OPS_H
#define NEPTUNE_NEPTUNE_OPS_H
/** \file
 * The operator suite as a C ABI (libneptune_ops.so), for C and for other languages (Python through
 * ctypes: python/neptune_ops.py). Every operator of the suite that has an AOT library is one entry;
 * the library holds a table of compiled variants (the AOT libraries of generators/: operator, where
 * its tensors live, element type, head dims, head grouping) that the caller can list, and a call
 * picks the variant that fits its tensors. No libHalide and no CUDA toolkit are needed at run time;
 * the CUDA driver is opened on the first GPU call.
 *
 * A GPU call that no compiled variant takes (another head dim that is a multiple of 8, bf16, another
 * grouping; the attention and row-wise families but Performer) gets a variant compiled on first use
 * by libneptune_ops_jit.so, opened from beside this library (or NEPTUNE_OPS_JIT) only then, and kept
 * in a cache on disk (NEPTUNE_CACHE_DIR, else $XDG_CACHE_HOME/neptune, else ~/.cache/neptune) that
 * later processes load from without compiling. Such variants are appended to the table: its count
 * grows, indices already handed out stay valid. Without the compiler library the call is refused
 * (NEPTUNE_OPS_ERROR_UNSUPPORTED) with a message saying how to get it.
 *
 * Tensors are given by shape and strides (outermost dimension first, as PyTorch's), the innermost
 * dimension contiguous; strides of all zeros mean dense and row-major. Attention's q, k, v and out may
 * be any such view, e.g. [B, S, H, D] memory as [B, H, S, D] (torch's .transpose(1, 2)), read and
 * written in place without a copy, as long as every stride is a multiple of 8 elements (16 bytes) and
 * the data starts on 16 bytes; the row-wise kernels of Neptune read x and write y dense. They live on
 * the GPU (NEPTUNE_OPS_CUDA: device pointers of the current CUDA context, which PyTorch shares) or on
 * the host (NEPTUNE_OPS_HOST: the host variants, the fused CPU form). Their shapes are the suite's
 * (docs/design/operators.md): attention q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D], slopes [Hq] (f32, ALiBi
 * only) to out [B, Hq, Sq, Dv]; row-wise x [rows, cols].
 *
 * Every function returns NEPTUNE_OPS_OK or a status below, and never crashes on bad arguments: null
 * pointers, wrong ranks, shapes or element types, an operator or head dim with no compiled variant
 * are refused before any work, with a message (neptune_ops_last_error()) naming the operator, the
 * tensor and what was expected. GPU calls are asynchronous on `stream` (a CUstream; NULL is the
 * legacy default stream): errors inside kernels appear at the stream's next synchronization. */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NEPTUNE_OPS_API __attribute__((visibility("default")))
#else
#define NEPTUNE_OPS_API
#endif

/** Raised whenever a struct below or a function's meaning changes; compare with neptune_ops_abi_version().
 * Version 2: neptune_ops_tensor carries strides and its `abi` field. */
#define NEPTUNE_OPS_ABI_VERSION 2

typedef enum neptune_ops_status {
    NEPTUNE_OPS_OK = 0,
    NEPTUNE_OPS_ERROR_ARGUMENT = 1, /* a null pointer, a wrong tensor count, an unknown operator or index */
    NEPTUNE_OPS_ERROR_SHAPE = 2, /* a tensor's rank or extents do not fit the operator or each other */
    NEPTUNE_OPS_ERROR_DTYPE = 3, /* a tensor's element type is not the variant's */
    NEPTUNE_OPS_ERROR_UNSUPPORTED = 4, /* no compiled variant fits: device, head dim, head grouping, size */
    NEPTUNE_OPS_ERROR_DEVICE = 5, /* no CUDA driver or device, or a pointer that is not device memory */
    NEPTUNE_OPS_ERROR_LIBRARY = 6, /* the AOT library refused or failed (its Halide error is in the message) */
    NEPTUNE_OPS_ERROR_INTERNAL = 7 /* a bug in Neptune */
} neptune_ops_status;

typedef enum neptune_ops_dtype {
    NEPTUNE_OPS_F16 = 0,
    NEPTUNE_OPS_BF16 = 1,
    NEPTUNE_OPS_F32 = 2,
    NEPTUNE_OPS_I32 = 3
} neptune_ops_dtype;

typedef enum neptune_ops_device {
    NEPTUNE_OPS_CUDA = 0, /* device memory; the GPU variants */
    NEPTUNE_OPS_HOST = 1 /* host memory; the host variants (the fused CPU form, multi-threaded) */
} neptune_ops_device;

/** A tensor: `ndim` extents and strides, outermost first. */
typedef struct neptune_ops_tensor {
    void *data;
    int32_t dtype; /* neptune_ops_dtype */
    int32_t device; /* neptune_ops_device */
    int32_t ndim; /* 1 .. NEPTUNE_OPS_MAX_DIMS */
    int32_t abi; /* NEPTUNE_OPS_ABI_VERSION: a caller of version 1 (whose tensors have no strides) is refused */
    int64_t shape[4];
    int64_t strides[4]; /* elements between consecutive indices of each dimension; all 0: dense, row-major */
} neptune_ops_tensor;
#define NEPTUNE_OPS_MAX_DIMS 4

/** The message of the calling thread's last failure (never NULL; "" before any). Valid until the
 * thread's next failing call into this library. */
NEPTUNE_OPS_API const char *neptune_ops_last_error(void);

/** NEPTUNE_OPS_ABI_VERSION of the library; the project's version ("0.1.0"). */
NEPTUNE_OPS_API int neptune_ops_abi_version(void);
NEPTUNE_OPS_API const char *neptune_ops_version(void);

/** One compiled variant: an AOT library of generators/ and the operator of the suite it computes.
 * Strings are static. Head dims and grouping are what the variant was compiled for. */
typedef struct neptune_ops_variant {
    const char *name; /* the AOT library, e.g. "prefill_causal", "softmax_host", or a variant compiled on
                         first use: operator, dtype, head dims, grouping, e.g. "decode_gqa_bf16_d64_g4" */
    const char *op; /* the suite's operator, e.g. "prefill_gqa" (neptune_bench list) */
    const char *family; /* "attention", "softmax", "logsumexp", "cross_entropy", "layernorm", "rmsnorm", "performer" */
    const char *kernels; /* what runs: "neptune" (Neptune's kernels: an sm_80 fatbin with compute_90 PTX and an
                              sm_90a cubin, chosen by the device), "halide_cuda" (the fused form on Halide's CUDA
                              backend), "host" (the fused form on the CPU) */
    const char *inputs; /* the input tensors in call order, comma-separated: "q,k,v", "q,k,v,slopes", "x" */
    const char *outputs; /* the output tensors: "out", "y", "lse", "loss" */
    const char *signature; /* shapes and types, e.g. "q[B,Hq,Sq,128] f16, k[B,Hkv,Skv,128] f16, ... -> out[...] f16" */
    int32_t device; /* neptune_ops_device of every tensor */
    int32_t dtype; /* neptune_ops_dtype of q/k/v or x (and of the output, except f32 statistics) */
    int32_t head_dim_qk, head_dim_v; /* attention: compiled; 0 otherwise (Performer's are run-time) */
    int32_t group; /* query heads per KV head compiled for; 0: any (prefill, and non-attention) */
    int32_t decode; /* 1: one query row per (batch, head), Sq = 1 (split-K over the keys) */
    const char *mask; /* "none", "causal", "window"; "" for non-attention */
    int32_t window; /* keys a query sees with mask "window", itself included */
    const char *score_mod; /* "none", "alibi", "softcap"; "" for non-attention */
    double softcap; /* the cap of score_mod "softcap" */
    double scale; /* the score scale (1/sqrt(head_dim_qk)); 0 for non-attention */
    double eps; /* LayerNorm and RMSNorm; 0 otherwise */
} neptune_ops_variant;

/** The number of compiled variants (never fails), and variant `index` (0 <= index < count). */
NEPTUNE_OPS_API int neptune_ops_num_variants(void);
NEPTUNE_OPS_API int neptune_ops_get_variant(int index, neptune_ops_variant *out);

/** Sets *index to the variant of `op` that takes `inputs` (their device, dtype, head dims and
 * grouping; the first that fits, in table order). Without one, the message says which variants of
 * `op` exist and why none fits. The inputs' shapes are checked too. */
NEPTUNE_OPS_API int neptune_ops_select(const char *op, const neptune_ops_tensor *inputs, int num_inputs, int *index);

/** Fills outputs[i].dtype, .device, .ndim, .abi, .shape and .strides (0: dense; not .data) for variant `index` on `inputs`,
 * after checking them as a call would: what to allocate before neptune_ops_run. */
NEPTUNE_OPS_API int neptune_ops_output_shapes(int index, const neptune_ops_tensor *inputs, int num_inputs,
                                              neptune_ops_tensor *outputs, int num_outputs);

/** Runs variant `index` on `inputs` into `outputs` (all allocated, in the variant's order), on
 * `stream` for GPU variants (ignored on the host, where the call returns when done). */
NEPTUNE_OPS_API int neptune_ops_run(int index, const neptune_ops_tensor *inputs, int num_inputs,
                                    const neptune_ops_tensor *outputs, int num_outputs, void *stream);

/** neptune_ops_select, then neptune_ops_run: the variant of `op` that fits the inputs. */
NEPTUNE_OPS_API int neptune_ops_call(const char *op, const neptune_ops_tensor *inputs, int num_inputs,
                                     const neptune_ops_tensor *outputs, int num_outputs, void *stream);

/* ---- One entry per operator of the suite (neptune_ops_call with its name and tensors). ---------- */

#define NEPTUNE_OPS_ATTENTION(op)                                                                  \
    NEPTUNE_OPS_API int neptune_ops_##op(const neptune_ops_tensor *q, const neptune_ops_tensor *k, \
                                         const neptune_ops_tensor *v, const neptune_ops_tensor *out, void *stream)
#define NEPTUNE_OPS_ATTENTION_ALIBI(op)                                                                 \
    NEPTUNE_OPS_API int neptune_ops_##op(const neptune_ops_tensor *q, const neptune_ops_tensor *k,      \
                                         const neptune_ops_tensor *v, const neptune_ops_tensor *slopes, \
                                         const neptune_ops_tensor *out, void *stream)
NEPTUNE_OPS_ATTENTION(prefill_global);
NEPTUNE_OPS_ATTENTION(prefill_causal);
NEPTUNE_OPS_ATTENTION_ALIBI(prefill_alibi);
NEPTUNE_OPS_ATTENTION(prefill_gqa);
NEPTUNE_OPS_ATTENTION(prefill_softcap);
NEPTUNE_OPS_ATTENTION(prefill_windowed);
NEPTUNE_OPS_ATTENTION(decode_causal);
NEPTUNE_OPS_ATTENTION_ALIBI(decode_alibi);
NEPTUNE_OPS_ATTENTION(decode_gqa);
NEPTUNE_OPS_ATTENTION(decode_softcap);
#undef NEPTUNE_OPS_ATTENTION
#undef NEPTUNE_OPS_ATTENTION_ALIBI

/** Attention over a paged KV cache (compiled on first use): q [B, Hq, Sq, D] (decode: Sq = 1), k_cache
 * and v_cache [pages, Hkv, P, D], page_table [B, max_pages] i32 (sequence b's pages in order),
 * seq_lens [B] i32 (its keys; its queries are the last Sq positions), out like q. P is a multiple of
 * the kernels' KV tile (64 keys serve every variant). */
#define NEPTUNE_OPS_PAGED(op)                                                                                     \
    NEPTUNE_OPS_API int neptune_ops_##op(const neptune_ops_tensor *q, const neptune_ops_tensor *k_cache,          \
                                         const neptune_ops_tensor *v_cache, const neptune_ops_tensor *page_table, \
                                         const neptune_ops_tensor *seq_lens, const neptune_ops_tensor *out,       \
                                         void *stream)
NEPTUNE_OPS_PAGED(decode_paged);
NEPTUNE_OPS_PAGED(prefill_paged);
#undef NEPTUNE_OPS_PAGED

/** Row-wise: x [rows, cols]; softmax y [rows, cols]; logsumexp lse [rows] f32; cross_entropy with
 * labels [rows] i32 in [0, cols) to loss [rows] f32; layernorm with gamma, beta [cols]; rmsnorm with
 * gamma [cols]; y in x's type. Performer: q, k, v [B, H, S, D], features [F, D] f32, out [B, H, S, Dv]. */
NEPTUNE_OPS_API int neptune_ops_softmax(const neptune_ops_tensor *x, const neptune_ops_tensor *y, void *stream);
NEPTUNE_OPS_API int neptune_ops_logsumexp(const neptune_ops_tensor *x, const neptune_ops_tensor *lse, void *stream);
NEPTUNE_OPS_API int neptune_ops_cross_entropy(const neptune_ops_tensor *x, const neptune_ops_tensor *labels,
                                              const neptune_ops_tensor *loss, void *stream);
NEPTUNE_OPS_API int neptune_ops_layernorm(const neptune_ops_tensor *x, const neptune_ops_tensor *gamma,
                                          const neptune_ops_tensor *beta, const neptune_ops_tensor *y, void *stream);
NEPTUNE_OPS_API int neptune_ops_rmsnorm(const neptune_ops_tensor *x, const neptune_ops_tensor *gamma,
                                        const neptune_ops_tensor *y, void *stream);
NEPTUNE_OPS_API int neptune_ops_performer(const neptune_ops_tensor *q, const neptune_ops_tensor *k,
                                          const neptune_ops_tensor *v, const neptune_ops_tensor *features,
                                          const neptune_ops_tensor *out, void *stream);

/** The GPU the CUDA variants run on (the current context's device, else device 0). */
typedef struct neptune_ops_device_info {
    char name[256];
    int32_t cc_major, cc_minor;
    int32_t sm_count;
    int32_t l2_bytes;
    int64_t total_memory;
} neptune_ops_device_info;

/** NEPTUNE_OPS_ERROR_DEVICE, with the driver's reason, where there is no driver or no device. */
NEPTUNE_OPS_API int neptune_ops_get_device_info(neptune_ops_device_info *out);

/** Waits for all work of the CUDA context (for callers without a CUDA runtime of their own). */
NEPTUNE_OPS_API int neptune_ops_synchronize(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif
