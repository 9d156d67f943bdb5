#ifndef NEPTUNE_OPS_JIT_COMPILER_H
#define NEPTUNE_OPS_JIT_COMPILER_H
/** \file
 * The interface between libneptune_ops.so and libneptune_ops_jit.so, the compiler it opens on the
 * first call that no AOT variant serves. The ops library stays free of libHalide and NVRTC: it
 * dlopen()s the compiler library (which links both), asks it for the operator at the call's element
 * type, head dims and grouping, and receives the extern stage's descriptor (interop/Descriptor.h),
 * which it stores in its cache and runs through the same launcher as the AOT libraries' stages.
 * Both sides are C so that neither depends on the other's C++ runtime state. */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Raised whenever the request or the descriptor's meaning changes; the ops library refuses a
 * compiler library of another version. Version 2: descriptors mark strided buffers. Version 3: a
 * variant of several kernel sets defers them (KernelSet::source), and the ops library compiles each
 * through neptune_ops_jit_compile_kernels when a call first takes it. */
#define NEPTUNE_OPS_JIT_VERSION 3

typedef struct neptune_ops_jit_request {
    const char *op; /* the suite's operator, e.g. "decode_gqa" */
    int32_t dtype; /* neptune_ops_dtype of the operator's element type */
    int32_t head_dim_qk, head_dim_v; /* attention; 0 otherwise */
    int32_t group; /* decode: query heads per KV head; 0 otherwise */
    const char *arch; /* the GPU family to compile for: "sm_90a", "sm_80", ... */
} neptune_ops_jit_request;

/** 0 and *descriptor (the JSON text) on success; else non-zero and *message. Both strings are
 * allocated with malloc and freed by the caller with free(). */
typedef int (*neptune_ops_jit_compile_fn)(const neptune_ops_jit_request *request, char **descriptor, char **message);
typedef int (*neptune_ops_jit_version_fn)(void);
/** A deferred kernel set's CUDA source compiled for `arch` (NVRTC's cubin), as
 * neptune_halide_kernel_compiler_fn (runtime/NeptuneHalide.h) takes it: 0 and *image / *size, or
 * non-zero and *message, both allocated with malloc. */
typedef int (*neptune_ops_jit_compile_kernels_fn)(const char *source, const char *arch, const char *name, char **image,
                                                  size_t *size, char **message);

#define NEPTUNE_OPS_JIT_COMPILE_SYMBOL "neptune_ops_jit_compile"
#define NEPTUNE_OPS_JIT_VERSION_SYMBOL "neptune_ops_jit_version"
#define NEPTUNE_OPS_JIT_COMPILE_KERNELS_SYMBOL "neptune_ops_jit_compile_kernels"
#define NEPTUNE_OPS_JIT_LIBRARY "libneptune_ops_jit.so"

#ifdef __cplusplus
}  // extern "C"
#endif

#endif
