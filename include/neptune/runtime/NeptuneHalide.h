#ifndef NEPTUNE_RUNTIME_NEPTUNE_HALIDE_H
#define NEPTUNE_RUNTIME_NEPTUNE_HALIDE_H
/** \file
 * Neptune's kernels inside Halide pipelines, at run time (libHalide-free: only Halide's runtime
 * headers). A fused reduction group becomes an extern stage of the pipeline (neptune/GpuPipeline.h);
 * its calls land in this library (neptune_halide_interop), which answers Halide's bounds queries,
 * validates the buffers, and launches the group's kernels on the buffers' device memory.
 *
 * One context. Halide's CUDA runtime makes its own context by default; Neptune launches in the
 * device's primary context. So that device buffers cross between the two without copies:
 *  - AOT: this library defines halide_cuda_acquire_context, halide_cuda_release_context and
 *    halide_cuda_get_stream, which override the Halide runtime's weak definitions whenever an AOT
 *    library with a Neptune stage is linked (the same object holds the extern entry points). A
 *    program whose only Halide CUDA pipelines have no Neptune stage can pull them in with
 *    `-Wl,-u,neptune_halide_acquire_context`.
 *  - JIT: neptune::compile_gpu installs the functions below as the pipeline's JIT handlers
 *    (neptune::share_cuda_context does so for any Halide::Pipeline).
 * Both run kernels on one stream of that context, the calling thread's (neptune_halide_set_stream;
 * the legacy default stream unless set), so Halide's stages and Neptune's are ordered without
 * events. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct halide_buffer_t;

/** Neptune's context for Halide (neptune_init() first); an error is reported with halide_error. */
int neptune_halide_acquire_context(void *user_context, void **cuda_context, bool create);
int neptune_halide_release_context(void *user_context);
/** The stream Halide's kernels and copies use: the calling thread's, as Neptune's launches. */
int neptune_halide_get_stream(void *user_context, void *cuda_context, void **stream);
/** Makes `stream` (a CUstream of Neptune's context; NULL the legacy default stream) the one the
 * calling thread's pipelines run on, Halide's stages and Neptune's alike; returns the previous one.
 * Split-K workspaces are kept per stream, so pipelines on different streams may overlap. */
void *neptune_halide_set_stream(void *stream);

/** One call of an extern stage, after the stage has filled the bounds of query buffers. */
typedef struct neptune_halide_trace_event {
    const char *stage; /* the fused group's output Func */
    int bounds_query; /* 1: a bounds query (no work done), 0: a run */
    int result; /* what the stage returns to Halide: 0 or a halide_error_code_t */
    int num_buffers; /* inputs, then outputs, as the stage's descriptor lists them */
    struct halide_buffer_t *const *buffers;
    const char *const *buffer_names;
    const int32_t *scalars; /* the problem's extents (batch, heads, sequences) ... */
    const char *const *scalar_names;
    int num_scalars;
    const char *kernel_set; /* runs: the set launched, e.g. "sm_80 (sm_80,compute_90)"; queries: "" */
} neptune_halide_trace_event;

typedef void (*neptune_halide_trace_fn)(const neptune_halide_trace_event *event);
/** Calls `fn` for every extern-stage call from now on (NULL: stop); returns the previous one. For
 * tests and debugging: it runs inside the pipeline, on the pipeline's thread. */
neptune_halide_trace_fn neptune_halide_set_trace(neptune_halide_trace_fn fn);

/** How a JIT stage reports an error into the pipeline's user context (installed by compile_gpu). */
typedef void (*neptune_halide_error_fn)(void *user_context, const char *message);
void neptune_halide_set_jit_error_reporter(neptune_halide_error_fn fn);

/** Compiles CUDA C++ `source` (emitted by Neptune, including only its device library) for the GPU
 * family `arch` ("sm_90a", "sm_80"); `name` names the program in messages. Returns 0 with *image
 * and *size (a cubin the driver loads), or non-zero with *message; both are allocated with malloc
 * and freed by the caller. */
typedef int (*neptune_halide_kernel_compiler_fn)(const char *source, const char *arch, const char *name, char **image,
                                                 size_t *size, char **message);
/** Installs the compiler of kernel sets compiled on first use (a just-in-time stage's ladder of row
 * shapes or decode's tunings: a call takes one set, so each is compiled when a call first takes it);
 * returns the previous one. neptune::compile_gpu installs NVRTC's, and libneptune_ops its compiler
 * library's behind a persistent cache. A stage whose set has no image fails with a message while
 * none is installed; AOT libraries hold every image and need none. */
neptune_halide_kernel_compiler_fn neptune_halide_set_kernel_compiler(neptune_halide_kernel_compiler_fn fn);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif
