#ifndef NEPTUNE_RUNTIME_NEPTUNE_RUNTIME_H
#define NEPTUNE_RUNTIME_NEPTUNE_RUNTIME_H
/** \file
 * Neptune's CUDA runtime as a C ABI (usable from C, ctypes and C++): module loading, launches,
 * device memory and events over the CUDA driver API, which is opened at run time (libcuda.so.1),
 * never linked. No CUDA header is needed to use it. */
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Every function returns NEPTUNE_OK or one of these negative codes; neptune_last_error() says why,
 * but for NEPTUNE_ERROR_SHUT_DOWN, which comes only at exit and leaves the message as it was. */
enum neptune_status {
    NEPTUNE_OK = 0,
    NEPTUNE_ERROR_NO_DRIVER = -1, /* libcuda.so.1 cannot be opened (or lacks an entry point) */
    NEPTUNE_ERROR_NO_DEVICE = -2, /* the driver sees no CUDA device */
    NEPTUNE_ERROR_CUDA = -3, /* a driver call failed; the message names it and its error */
    NEPTUNE_ERROR_INVALID_ARGUMENT = -4, /* null pointer, zero size, unknown kernel name, too much shared memory */
    NEPTUNE_ERROR_COMPILE = -5, /* NVRTC or nvcc rejected a kernel */
    NEPTUNE_ERROR_SHUT_DOWN = -6 /* the driver has shut down (the process is exiting): nothing left to use or free */
};

/** The message of the calling thread's last failure (never NULL; "" before any failure). It names the
 * failing CUDA call with the error's name and string (e.g. CUDA_ERROR_INVALID_VALUE) and, for
 * launches, the kernel. Valid until the next failing call on this thread. */
const char *neptune_last_error(void);

/** Opens libcuda.so.1, calls cuInit(0) and makes a context current: the one already current on the
 * calling thread if there is one, else device 0's primary context (retained), which Halide's CUDA
 * runtime and PyTorch share. Idempotent and thread-safe; every other call initializes on demand and
 * makes that context current on threads that have none. */
int neptune_init(void);

/** 1 if neptune_init() succeeds (so a device exists), else 0 (neptune_last_error() then says why). Never prints. */
int neptune_cuda_available(void);

/** The CUcontext Neptune launches in (after neptune_init()), for runtimes that must share it, such
 * as Halide's CUDA runtime (see NeptuneHalide.h). */
int neptune_get_context(void **context);

/** Neptune's context if neptune_init() has succeeded, else NULL; never initializes, never calls the
 * driver, never sets neptune_last_error(). For teardown code (Halide's runtime releases its device
 * state from a destructor at exit, when the driver and thread-local state may be gone). */
void *neptune_context_if_initialized(void);

/** NEPTUNE_OK if `dptr` is device memory of Neptune's context; NEPTUNE_ERROR_INVALID_ARGUMENT with a
 * message if it is not device memory, or belongs to another context (another runtime's own context). */
int neptune_check_device_pointer(const void *dptr);

/** The device of Neptune's context. */
typedef struct neptune_device_info {
    char name[256];
    int sm_count;
    int cc_major, cc_minor;
    int max_shared_per_block_optin; /* bytes of shared memory a block may use after opting in */
    int l2_bytes;
    size_t total_memory; /* bytes of device memory */
} neptune_device_info;

int neptune_get_device_info(neptune_device_info *info);

/** A loaded module (cuModuleLoadData) and a kernel in it; both opaque. A function belongs to its
 * module and is freed by neptune_module_unload. */
typedef struct neptune_module neptune_module;
typedef struct neptune_function neptune_function;

/** Loads a NUL-terminated PTX text, a cubin or a fatbin. */
int neptune_module_load(const void *image, neptune_module **out);
int neptune_module_unload(neptune_module *module);
/** Looks a kernel up by its symbol name (the mangled name unless declared extern "C"); an unknown
 * name gives NEPTUNE_ERROR_INVALID_ARGUMENT. Asking twice gives the same function. */
int neptune_module_get_function(neptune_module *module, const char *name, neptune_function **out);

/** Launches f on grid x block threads. `stream` is a CUstream (NULL: the default stream); `args`
 * points to one pointer per kernel parameter (NULL for a kernel without parameters). Above 48 KiB of
 * dynamic shared memory, the function's limit is raised first (once per function and size); a
 * request beyond the device's opt-in limit gives NEPTUNE_ERROR_INVALID_ARGUMENT. Errors name the
 * kernel. Launches are asynchronous: execution errors appear at the next synchronizing call. */
int neptune_launch(neptune_function *f, const unsigned grid[3], const unsigned block[3], unsigned dynamic_smem_bytes,
                   void *stream, void **args);

/** neptune_launch in thread block clusters of cluster[0] x cluster[1] x cluster[2] blocks (sm_90),
 * which must divide the grid; 1 x 1 x 1 is a plain launch. A cluster the device cannot place (too
 * many blocks, too much shared memory for one GPC) is a CUDA error naming the kernel. */
int neptune_launch_cluster(neptune_function *f, const unsigned grid[3], const unsigned block[3],
                           const unsigned cluster[3], unsigned dynamic_smem_bytes, void *stream, void **args);

/** Encodes a TMA descriptor (a CUtensorMap: 128 bytes at `map`, 64-byte aligned) for a tensor of
 * `rank` (2 to 5) dimensions of 16-bit elements at device address `base`: dims[0] contiguous
 * elements per row, dims[1] rows, dims[2..] outer dimensions (heads, batch); strides[d - 1] the bytes
 * between consecutive indices of dimension d >= 1 (multiples of 16, any order: a [batch, seq, heads,
 * dim] tensor is described as [batch, heads, seq, dim] by its strides). Boxes are box[0] = 64
 * elements (the 128-byte swizzle's span) by box[1] rows (1..256), one index of every outer
 * dimension, written to shared memory in the 128-byte swizzle; elements outside the tensor read as
 * zeros. `l2_promotion_bytes` (0, 64, 128 or 256) is how much the L2 fetches from memory per miss of
 * a copy (0: no promotion). The map is passed to a kernel by value (a __grid_constant__ parameter). */
int neptune_tensor_map_encode(void *map, const void *base, int element_bytes, int rank, const unsigned long long *dims,
                              const unsigned long long *strides, const unsigned box[2], int l2_promotion_bytes);

/** Device memory; device pointers travel as `void *` (a CUdeviceptr cast). Freeing NULL does nothing. */
int neptune_malloc(void **dptr, size_t bytes);
int neptune_free(void *dptr);
/** Copies and fill; host copies are synchronous; a size of 0 does nothing. */
int neptune_memcpy_htod(void *dst_device, const void *src_host, size_t bytes);
int neptune_memcpy_dtoh(void *dst_host, const void *src_device, size_t bytes);
/** Device to device, asynchronous on the default stream (what a bandwidth reference times). */
int neptune_memcpy_dtod(void *dst_device, const void *src_device, size_t bytes);
/** Device to device on `stream` (NULL: the default stream), ordered with the kernels launched there. */
int neptune_memcpy_dtod_async(void *dst_device, const void *src_device, size_t bytes, void *stream);
int neptune_memset_d8(void *dst_device, unsigned char value, size_t bytes);
/** Waits for all work in Neptune's context. */
int neptune_synchronize(void);

/** Timing with CUDA events (`void *` is a CUevent; `stream` a CUstream or NULL). elapsed_ms waits
 * for `end` and reports the milliseconds between the two records. */
int neptune_event_create(void **event);
int neptune_event_record(void *event, void *stream);
int neptune_event_elapsed_ms(void *start, void *end, float *ms);
int neptune_event_destroy(void *event);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif
