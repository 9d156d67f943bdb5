// The C ABI of include/neptune/runtime/NeptuneRuntime.h over the CUDA driver API. libcuda.so.1 is
// opened at run time, so binaries build and start on machines without a GPU; cuda.h supplies only
// types, constants and (through decltype) the exact signatures of the entry points.
#include "neptune/runtime/NeptuneRuntime.h"

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

// The driver entry points Neptune uses. cuda.h #defines several API names to versioned symbols
// (cuMemAlloc -> cuMemAlloc_v2, cuEventElapsedTime -> cuEventElapsedTime_v2, ...); the names below
// go through those macros, so both the signature and the symbol looked up are the versioned ones.
#define NEPTUNE_CU_FUNCTIONS(X) \
    X(cuInit)                   \
    X(cuGetErrorName)           \
    X(cuGetErrorString)         \
    X(cuDeviceGetCount)         \
    X(cuDeviceGet)              \
    X(cuDeviceGetName)          \
    X(cuDeviceGetAttribute)     \
    X(cuDeviceTotalMem)         \
    X(cuDevicePrimaryCtxRetain) \
    X(cuCtxGetCurrent)          \
    X(cuCtxSetCurrent)          \
    X(cuCtxGetDevice)           \
    X(cuCtxSynchronize)         \
    X(cuModuleLoadDataEx)       \
    X(cuModuleUnload)           \
    X(cuModuleGetFunction)      \
    X(cuFuncGetAttribute)       \
    X(cuFuncSetAttribute)       \
    X(cuLaunchKernel)           \
    X(cuLaunchKernelEx)         \
    X(cuMemAlloc)               \
    X(cuMemFree)                \
    X(cuMemcpyHtoD)             \
    X(cuMemcpyDtoH)             \
    X(cuMemcpyDtoD)             \
    X(cuMemcpyDtoDAsync)        \
    X(cuMemsetD8)               \
    X(cuEventCreate)            \
    X(cuEventRecord)            \
    X(cuEventSynchronize)       \
    X(cuEventElapsedTime)       \
    X(cuEventDestroy)           \
    X(cuTensorMapEncodeTiled)   \
    X(cuPointerGetAttribute)

// Two levels, so that the argument is macro-expanded (to its versioned name) before stringizing.
#define NEPTUNE_STRINGIZE(x) NEPTUNE_STRINGIZE_EXPANDED(x)
#define NEPTUNE_STRINGIZE_EXPANDED(x) #x

struct neptune_function {
    CUfunction handle = nullptr;
    std::string name;
    // The function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as Neptune last set it; raised
    // under `raise_lock` only, read without it on the fast path.
    std::atomic<unsigned> dynamic_smem_limit{48 * 1024};
    std::mutex raise_lock;
};

struct neptune_module {
    CUmodule handle = nullptr;
    std::mutex lock;
    std::map<std::string, std::unique_ptr<neptune_function>> functions;
};

namespace {

struct Driver {
#define NEPTUNE_CU_MEMBER(fn) decltype(&::fn) fn = nullptr;
    NEPTUNE_CU_FUNCTIONS(NEPTUNE_CU_MEMBER)
#undef NEPTUNE_CU_MEMBER
};

/** Written once under std::call_once in neptune_init, read-only afterwards. */
struct State {
    Driver cu;
    CUcontext context = nullptr;
    CUdevice device = 0;
    int smem_optin = 0;
    int init_code = NEPTUNE_OK;
    std::string init_message;
};

State &state() {
    static State s;
    return s;
}

std::once_flag init_once;
std::atomic<bool> init_done{false};
thread_local std::string last_error;

int fail(int code, std::string message) {
    last_error = std::move(message);
    return code;
}

/** "CUDA_ERROR_INVALID_VALUE (invalid argument)". */
std::string describe(CUresult r) {
    const Driver &cu = state().cu;
    const char *name = nullptr, *text = nullptr;
    if (cu.cuGetErrorName) cu.cuGetErrorName(r, &name);
    if (cu.cuGetErrorString) cu.cuGetErrorString(r, &text);
    std::string s = name ? name : "CUresult " + std::to_string(static_cast<int>(r));
    return s + " (" + (text ? text : "unknown error") + ")";
}

std::string cuda_message(const char *call, CUresult r, const std::string &what = "") {
    return std::string(call) + " failed" + (what.empty() ? "" : " for " + what) + ": " + describe(r);
}

int cuda_fail(const char *call, CUresult r, const std::string &what = "") {
    return fail(NEPTUNE_ERROR_CUDA, cuda_message(call, r, what));
}

int invalid(const std::string &message) { return fail(NEPTUNE_ERROR_INVALID_ARGUMENT, message); }

CUdeviceptr device_ptr(const void *p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

std::string kernel_label(const neptune_function *f) { return "kernel '" + f->name + "'"; }

/** The body of neptune_init's one-time part; returns a code and fills `message` on failure. */
int initialize(State &s, std::string &message) {
    // RTLD_GLOBAL: Halide's CUDA runtime looks for cuInit in the process before opening a driver of
    // its own, so it then uses this one.
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        const char *why = dlerror();
        message = std::string("cannot open libcuda.so.1 (is the NVIDIA driver installed?): ") + (why ? why : "");
        return NEPTUNE_ERROR_NO_DRIVER;
    }
    Driver &cu = s.cu;
#define NEPTUNE_CU_LOAD(fn) cu.fn = reinterpret_cast<decltype(cu.fn)>(dlsym(lib, NEPTUNE_STRINGIZE(fn)));
    NEPTUNE_CU_FUNCTIONS(NEPTUNE_CU_LOAD)
#undef NEPTUNE_CU_LOAD
    // cuEventElapsedTime_v2 arrived with driver 12.8; older drivers have only the (same-signature) original.
    if (!cu.cuEventElapsedTime)
        cu.cuEventElapsedTime = reinterpret_cast<decltype(cu.cuEventElapsedTime)>(dlsym(lib, "cuEventElapsedTime"));
#define NEPTUNE_CU_REQUIRE(fn)                                                                               \
    if (!cu.fn) {                                                                                            \
        message = "libcuda.so.1 lacks " NEPTUNE_STRINGIZE(fn) " (the NVIDIA driver is too old for CUDA 13)"; \
        return NEPTUNE_ERROR_NO_DRIVER;                                                                      \
    }
    NEPTUNE_CU_FUNCTIONS(NEPTUNE_CU_REQUIRE)
#undef NEPTUNE_CU_REQUIRE

    if (CUresult r = cu.cuInit(0)) {
        message = cuda_message("cuInit", r);
        if (r == CUDA_ERROR_NO_DEVICE) {
            message += ": no CUDA device is visible";
            return NEPTUNE_ERROR_NO_DEVICE;
        }
        return NEPTUNE_ERROR_CUDA;
    }
    int count = 0;
    if (CUresult r = cu.cuDeviceGetCount(&count)) {
        message = cuda_message("cuDeviceGetCount", r);
        return NEPTUNE_ERROR_CUDA;
    }
    if (count == 0) {
        message = "cuDeviceGetCount found no CUDA device";
        return NEPTUNE_ERROR_NO_DEVICE;
    }
    // A context already current on this thread (PyTorch's, the application's) wins; otherwise
    // device 0's primary context, the one the runtime API and Halide use too. It stays retained
    // for the life of the process.
    CUcontext current = nullptr;
    if (CUresult r = cu.cuCtxGetCurrent(&current)) {
        message = cuda_message("cuCtxGetCurrent", r);
        return NEPTUNE_ERROR_CUDA;
    }
    if (current) {
        if (CUresult r = cu.cuCtxGetDevice(&s.device)) {
            message = cuda_message("cuCtxGetDevice", r);
            return NEPTUNE_ERROR_CUDA;
        }
        s.context = current;
    } else {
        if (CUresult r = cu.cuDeviceGet(&s.device, 0)) {
            message = cuda_message("cuDeviceGet", r, "device 0");
            return NEPTUNE_ERROR_CUDA;
        }
        if (CUresult r = cu.cuDevicePrimaryCtxRetain(&s.context, s.device)) {
            message = cuda_message("cuDevicePrimaryCtxRetain", r, "device 0");
            return NEPTUNE_ERROR_CUDA;
        }
        if (CUresult r = cu.cuCtxSetCurrent(s.context)) {
            message = cuda_message("cuCtxSetCurrent", r);
            return NEPTUNE_ERROR_CUDA;
        }
    }
    if (CUresult r =
            cu.cuDeviceGetAttribute(&s.smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, s.device)) {
        message = cuda_message("cuDeviceGetAttribute", r, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
        return NEPTUNE_ERROR_CUDA;
    }
    return NEPTUNE_OK;
}

/** Raises f's dynamic shared memory limit to `bytes` if it is below, after checking the device's
 * opt-in limit; the driver rejects launches above 48 KiB without the raise. */
int raise_dynamic_smem(neptune_function *f, unsigned bytes) {
    State &s = state();
    std::lock_guard<std::mutex> hold(f->raise_lock);
    if (bytes <= f->dynamic_smem_limit.load()) return NEPTUNE_OK;
    int static_smem = 0;
    if (CUresult r = s.cu.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f->handle))
        return cuda_fail("cuFuncGetAttribute", r, kernel_label(f) + " (SHARED_SIZE_BYTES)");
    if (static_cast<long long>(bytes) + static_smem > s.smem_optin)
        return invalid(kernel_label(f) + " asks for " + std::to_string(bytes) + " bytes of dynamic shared memory (+" +
                       std::to_string(static_smem) + " static); the device allows at most " +
                       std::to_string(s.smem_optin) + " bytes per block (opt-in limit)");
    if (CUresult r = s.cu.cuFuncSetAttribute(f->handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                             static_cast<int>(bytes)))
        return cuda_fail("cuFuncSetAttribute", r,
                         kernel_label(f) + " (MAX_DYNAMIC_SHARED_SIZE_BYTES = " + std::to_string(bytes) + ")");
    // Prefer the largest shared-memory carveout: otherwise the driver may keep L1 large and fit fewer
    // blocks per SM than shared memory allows (ncu showed 2 blocks of 68 KB on an H200).
    if (CUresult r = s.cu.cuFuncSetAttribute(f->handle, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100))
        return cuda_fail("cuFuncSetAttribute", r, kernel_label(f) + " (PREFERRED_SHARED_MEMORY_CARVEOUT = 100)");
    f->dynamic_smem_limit.store(bytes);
    return NEPTUNE_OK;
}

}  // namespace

extern "C" {

const char *neptune_last_error(void) { return last_error.c_str(); }

int neptune_init(void) {
    State &s = state();
    std::call_once(init_once, [&s] {
        s.init_code = initialize(s, s.init_message);
        init_done.store(true, std::memory_order_release);
    });
    if (s.init_code != NEPTUNE_OK) return fail(s.init_code, s.init_message);
    // Every thread needs a current context; a thread without one gets Neptune's, one with its own keeps it.
    CUcontext current = nullptr;
    if (CUresult r = s.cu.cuCtxGetCurrent(&current)) {
        // At exit the driver shuts down before the destructors of objects made before it started
        // (Halide's JIT pipelines and buffers), which still ask for the context to free their kernels
        // and memory: a code of its own lets them give up silently. No message: this thread's
        // last_error may be destroyed by then (thread-local objects go before static ones).
        if (r == CUDA_ERROR_DEINITIALIZED) return NEPTUNE_ERROR_SHUT_DOWN;
        return cuda_fail("cuCtxGetCurrent", r);
    }
    if (!current) {
        if (CUresult r = s.cu.cuCtxSetCurrent(s.context)) return cuda_fail("cuCtxSetCurrent", r);
    }
    return NEPTUNE_OK;
}

int neptune_cuda_available(void) { return neptune_init() == NEPTUNE_OK ? 1 : 0; }

int neptune_get_context(void **context) {
    if (!context) return invalid("neptune_get_context: context is NULL");
    *context = nullptr;
    if (int rc = neptune_init()) return rc;
    *context = state().context;
    return NEPTUNE_OK;
}

void *neptune_context_if_initialized(void) {
    // init_done is set after the once-call finished, so init_code and context are final when read.
    const State &s = state();
    return init_done.load(std::memory_order_acquire) && s.init_code == NEPTUNE_OK ? s.context : nullptr;
}

int neptune_check_device_pointer(const void *dptr) {
    if (!dptr) return invalid("neptune_check_device_pointer: the pointer is NULL");
    if (int rc = neptune_init()) return rc;
    CUcontext owner = nullptr;
    if (CUresult r = state().cu.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, device_ptr(dptr)))
        return invalid(cuda_message("cuPointerGetAttribute", r, "CONTEXT") + ": not CUDA device memory");
    if (owner != state().context)
        return invalid("device memory at " + std::to_string(reinterpret_cast<uintptr_t>(dptr)) +
                       " belongs to another CUDA context than Neptune's (a runtime that made its own context)");
    return NEPTUNE_OK;
}

int neptune_get_device_info(neptune_device_info *info) {
    if (!info) return invalid("neptune_get_device_info: info is NULL");
    if (int rc = neptune_init()) return rc;
    const State &s = state();
    neptune_device_info d;
    std::memset(&d, 0, sizeof d);
    if (CUresult r = s.cu.cuDeviceGetName(d.name, static_cast<int>(sizeof d.name), s.device))
        return cuda_fail("cuDeviceGetName", r);
    const struct {
        int *value;
        CUdevice_attribute attribute;
        const char *label;
    } attributes[] = {
        {&d.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT"},
        {&d.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "COMPUTE_CAPABILITY_MAJOR"},
        {&d.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "COMPUTE_CAPABILITY_MINOR"},
        {&d.max_shared_per_block_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
         "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"},
        {&d.l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2_CACHE_SIZE"},
    };
    for (const auto &a : attributes)
        if (CUresult r = s.cu.cuDeviceGetAttribute(a.value, a.attribute, s.device))
            return cuda_fail("cuDeviceGetAttribute", r, a.label);
    if (CUresult r = s.cu.cuDeviceTotalMem(&d.total_memory, s.device)) return cuda_fail("cuDeviceTotalMem", r);
    *info = d;
    return NEPTUNE_OK;
}

int neptune_module_load(const void *image, neptune_module **out) {
    if (!image || !out) return invalid("neptune_module_load: image or out is NULL");
    *out = nullptr;
    if (int rc = neptune_init()) return rc;
    // The JIT's error log says which PTX line failed, which the bare error code does not.
    char log[4096] = {0};
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof log))};
    auto m = std::make_unique<neptune_module>();
    if (CUresult r = state().cu.cuModuleLoadDataEx(&m->handle, image, 2, options, values))
        return fail(NEPTUNE_ERROR_CUDA,
                    cuda_message("cuModuleLoadDataEx", r) + (log[0] ? std::string("\n") + log : ""));
    *out = m.release();
    return NEPTUNE_OK;
}

int neptune_module_unload(neptune_module *module) {
    if (!module) return invalid("neptune_module_unload: module is NULL");
    std::unique_ptr<neptune_module> owned(module);  // freed whatever the driver says
    if (int rc = neptune_init()) return rc;
    if (CUresult r = state().cu.cuModuleUnload(module->handle)) return cuda_fail("cuModuleUnload", r);
    return NEPTUNE_OK;
}

int neptune_module_get_function(neptune_module *module, const char *name, neptune_function **out) {
    if (!module || !name || !out) return invalid("neptune_module_get_function: module, name or out is NULL");
    *out = nullptr;
    if (int rc = neptune_init()) return rc;
    std::lock_guard<std::mutex> hold(module->lock);
    std::unique_ptr<neptune_function> &slot = module->functions[name];
    if (!slot) {
        auto f = std::make_unique<neptune_function>();
        f->name = name;
        if (CUresult r = state().cu.cuModuleGetFunction(&f->handle, module->handle, name)) {
            module->functions.erase(name);
            const std::string message = cuda_message("cuModuleGetFunction", r, kernel_label(f.get()));
            if (r == CUDA_ERROR_NOT_FOUND)
                return invalid(message +
                               "; the module has no such kernel (C++ kernels have mangled names "
                               "unless declared extern \"C\")");
            return fail(NEPTUNE_ERROR_CUDA, message);
        }
        slot = std::move(f);
    }
    *out = slot.get();
    return NEPTUNE_OK;
}

int neptune_launch(neptune_function *f, const unsigned grid[3], const unsigned block[3], unsigned dynamic_smem_bytes,
                   void *stream, void **args) {
    if (!f || !grid || !block) return invalid("neptune_launch: function, grid or block is NULL");
    if (int rc = neptune_init()) return rc;
    if (dynamic_smem_bytes > f->dynamic_smem_limit.load()) {
        if (int rc = raise_dynamic_smem(f, dynamic_smem_bytes)) return rc;
    }
    if (CUresult r = state().cu.cuLaunchKernel(f->handle, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                               dynamic_smem_bytes, static_cast<CUstream>(stream), args, nullptr)) {
        const std::string dims = " (grid " + std::to_string(grid[0]) + "x" + std::to_string(grid[1]) + "x" +
                                 std::to_string(grid[2]) + ", block " + std::to_string(block[0]) + "x" +
                                 std::to_string(block[1]) + "x" + std::to_string(block[2]) + ", " +
                                 std::to_string(dynamic_smem_bytes) + " bytes dynamic shared memory)";
        return cuda_fail("cuLaunchKernel", r, kernel_label(f) + dims);
    }
    return NEPTUNE_OK;
}

int neptune_launch_cluster(neptune_function *f, const unsigned grid[3], const unsigned block[3],
                           const unsigned cluster[3], unsigned dynamic_smem_bytes, void *stream, void **args) {
    if (!f || !grid || !block || !cluster)
        return invalid("neptune_launch_cluster: function, grid, block or cluster is NULL");
    if (cluster[0] * cluster[1] * cluster[2] == 1)
        return neptune_launch(f, grid, block, dynamic_smem_bytes, stream, args);
    auto dims = [&] {  // for messages only: no strings on the launch path
        return " (grid " + std::to_string(grid[0]) + "x" + std::to_string(grid[1]) + "x" + std::to_string(grid[2]) +
               ", clusters of " + std::to_string(cluster[0]) + "x" + std::to_string(cluster[1]) + "x" +
               std::to_string(cluster[2]) + ", block " + std::to_string(block[0]) + "x" + std::to_string(block[1]) +
               "x" + std::to_string(block[2]) + ", " + std::to_string(dynamic_smem_bytes) +
               " bytes dynamic shared memory)";
    };
    for (int d = 0; d < 3; d++)
        if (cluster[d] == 0 || grid[d] % cluster[d])
            return invalid("neptune_launch_cluster: " + kernel_label(f) + dims() +
                           ": the clusters must divide the grid");
    if (int rc = neptune_init()) return rc;
    if (dynamic_smem_bytes > f->dynamic_smem_limit.load()) {
        if (int rc = raise_dynamic_smem(f, dynamic_smem_bytes)) return rc;
    }
    // Load balancing rather than the default spread: clusters of 4 one-warp decode blocks (128 of them
    // at decode_causal 4,8192) took 143.4 us spread and 138.1 balanced (the fold without clusters:
    // 137.9); clusters of 2 the same either way (docs/engineering-log.md, 2026-12-04, the cluster merge).
    CUlaunchAttribute attrs[2] = {};
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[0].value.clusterDim.x = cluster[0];
    attrs[0].value.clusterDim.y = cluster[1];
    attrs[0].value.clusterDim.z = cluster[2];
    attrs[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
    attrs[1].value.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING;
    CUlaunchConfig config{};
    config.gridDimX = grid[0], config.gridDimY = grid[1], config.gridDimZ = grid[2];
    config.blockDimX = block[0], config.blockDimY = block[1], config.blockDimZ = block[2];
    config.sharedMemBytes = dynamic_smem_bytes;
    config.hStream = static_cast<CUstream>(stream);
    config.attrs = attrs;
    config.numAttrs = 2;
    if (CUresult r = state().cu.cuLaunchKernelEx(&config, f->handle, args, nullptr))
        return cuda_fail("cuLaunchKernelEx", r, kernel_label(f) + dims());
    return NEPTUNE_OK;
}

int neptune_tensor_map_encode(void *map, const void *base, int element_bytes, int rank, const unsigned long long *dims,
                              const unsigned long long *strides, const unsigned box[2], int l2_promotion_bytes) {
    if (!map || !base || !dims || !strides || !box) return invalid("neptune_tensor_map_encode: a NULL argument");
    if (rank < 2 || rank > 5)
        return invalid("neptune_tensor_map_encode: the rank is 2 to 5, not " + std::to_string(rank));
    CUtensorMapL2promotion promotion;
    switch (l2_promotion_bytes) {
    case 0: promotion = CU_TENSOR_MAP_L2_PROMOTION_NONE; break;
    case 64: promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_64B; break;
    case 128: promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B; break;
    case 256: promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B; break;
    default:
        return invalid("neptune_tensor_map_encode: the L2 promotion is 0, 64, 128 or 256 bytes, not " +
                       std::to_string(l2_promotion_bytes));
    }
    if (reinterpret_cast<uintptr_t>(map) % 64)
        return invalid("neptune_tensor_map_encode: the map is not 64-byte aligned");
    if (element_bytes != 2) return invalid("neptune_tensor_map_encode: only 16-bit elements are supported");
    bool aligned = reinterpret_cast<uintptr_t>(base) % 16 == 0;
    for (int d = 0; d + 1 < rank; d++) aligned = aligned && strides[d] % 16 == 0 && strides[d] > 0;
    if (!aligned)
        return invalid("neptune_tensor_map_encode: the base and the strides must be positive multiples of 16 bytes");
    if (box[0] * unsigned(element_bytes) != 128 || box[1] == 0 || box[1] > 256)
        return invalid(
            "neptune_tensor_map_encode: boxes are 64 elements (128 bytes, the swizzle's span) by 1 to 256 rows");
    if (int rc = neptune_init()) return rc;
    const State &s = state();
    cuuint64_t global_dim[5], global_strides[4];
    cuuint32_t box_dim[5], element_strides[5];
    std::string shape;
    for (int d = 0; d < rank; d++) {
        global_dim[d] = dims[d];
        if (d + 1 < rank) global_strides[d] = strides[d];
        box_dim[d] = d < 2 ? box[d] : 1;
        element_strides[d] = 1;
        shape += (d ? " x " : "") + std::to_string(dims[d]);
    }
    // 128-byte swizzle, the layout wgmma descriptors read; out-of-bounds elements are zeros.
    if (CUresult r = s.cu.cuTensorMapEncodeTiled(
            static_cast<CUtensorMap *>(map), CU_TENSOR_MAP_DATA_TYPE_UINT16, cuuint32_t(rank), const_cast<void *>(base),
            global_dim, global_strides, box_dim, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
        return cuda_fail(
            "cuTensorMapEncodeTiled", r,
            "a " + shape + " tensor with boxes of " + std::to_string(box[0]) + " x " + std::to_string(box[1]));
    return NEPTUNE_OK;
}

int neptune_malloc(void **dptr, size_t bytes) {
    if (!dptr) return invalid("neptune_malloc: dptr is NULL");
    *dptr = nullptr;
    if (bytes == 0) return invalid("neptune_malloc: cannot allocate 0 bytes");
    if (int rc = neptune_init()) return rc;
    CUdeviceptr p = 0;
    if (CUresult r = state().cu.cuMemAlloc(&p, bytes))
        return cuda_fail("cuMemAlloc", r, std::to_string(bytes) + " bytes");
    *dptr = reinterpret_cast<void *>(static_cast<uintptr_t>(p));
    return NEPTUNE_OK;
}

int neptune_free(void *dptr) {
    if (!dptr) return NEPTUNE_OK;
    if (int rc = neptune_init()) return rc;
    if (CUresult r = state().cu.cuMemFree(device_ptr(dptr))) return cuda_fail("cuMemFree", r);
    return NEPTUNE_OK;
}

int neptune_memcpy_htod(void *dst_device, const void *src_host, size_t bytes) {
    if (bytes == 0) return NEPTUNE_OK;
    if (!dst_device || !src_host) return invalid("neptune_memcpy_htod: dst or src is NULL");
    if (int rc = neptune_init()) return rc;
    if (CUresult r = state().cu.cuMemcpyHtoD(device_ptr(dst_device), src_host, bytes))
        return cuda_fail("cuMemcpyHtoD", r, std::to_string(bytes) + " bytes");
    return NEPTUNE_OK;
}

int neptune_memcpy_dtoh(void *dst_host, const void *src_device, size_t bytes) {
    if (bytes == 0) return NEPTUNE_OK;
    if (!dst_host || !src_device) return invalid("neptune_memcpy_dtoh: dst or src is NULL");
    if (int rc = neptune_init()) return rc;
    if (CUresult r = state().cu.cuMemcpyDtoH(dst_host, device_ptr(src_device), bytes))
        return cuda_fail("cuMemcpyDtoH", r, std::to_string(bytes) + " bytes");
    return NEPTUNE_OK;
}

int neptune_memcpy_dtod(void *dst_device, const void *src_device, size_t bytes) {
    if (bytes == 0) return NEPTUNE_OK;
    if (!dst_device || !src_device) return invalid("neptune_memcpy_dtod: dst or src is NULL");
    if (int rc = neptune_init()) return rc;
    if (CUresult r = state().cu.cuMemcpyDtoD(device_ptr(dst_device), device_ptr(src_device), bytes))
        return cuda_fail("cuMemcpyDtoD", r, std::to_string(bytes) + " bytes");
    return NEPTUNE_OK;
}

int neptune_memcpy_dtod_async(void *dst_device, const void *src_device, size_t bytes, void *stream) {
    if (bytes == 0) return NEPTUNE_OK;
    if (!dst_device || !src_device) return invalid("neptune_memcpy_dtod_async: dst or src is NULL");
    if (int rc = neptune_init()) return rc;
    if (CUresult r = state().cu.cuMemcpyDtoDAsync(device_ptr(dst_device), device_ptr(src_device), bytes,
                                                  static_cast<CUstream>(stream)))
        return cuda_fail("cuMemcpyDtoDAsync", r, std::to_string(bytes) + " bytes");
    return NEPTUNE_OK;
}

int neptune_memset_d8(void *dst_device, unsigned char value, size_t bytes) {
    if (bytes == 0) return NEPTUNE_OK;
    if (!dst_device) return invalid("neptune_memset_d8: dst is NULL");
    if (int rc = neptune_init()) return rc;
    if (CUresult r = state().cu.cuMemsetD8(device_ptr(dst_device), value, bytes))
        return cuda_fail("cuMemsetD8", r, std::to_string(bytes) + " bytes");
    return NEPTUNE_OK;
}

int neptune_synchronize(void) {
    if (int rc = neptune_init()) return rc;
    if (CUresult r = state().cu.cuCtxSynchronize()) return cuda_fail("cuCtxSynchronize", r);
    return NEPTUNE_OK;
}

int neptune_event_create(void **event) {
    if (!event) return invalid("neptune_event_create: event is NULL");
    *event = nullptr;
    if (int rc = neptune_init()) return rc;
    CUevent e = nullptr;
    if (CUresult r = state().cu.cuEventCreate(&e, CU_EVENT_DEFAULT)) return cuda_fail("cuEventCreate", r);
    *event = e;
    return NEPTUNE_OK;
}

int neptune_event_record(void *event, void *stream) {
    if (!event) return invalid("neptune_event_record: event is NULL");
    if (int rc = neptune_init()) return rc;
    if (CUresult r = state().cu.cuEventRecord(static_cast<CUevent>(event), static_cast<CUstream>(stream)))
        return cuda_fail("cuEventRecord", r);
    return NEPTUNE_OK;
}

int neptune_event_elapsed_ms(void *start, void *end, float *ms) {
    if (!start || !end || !ms) return invalid("neptune_event_elapsed_ms: start, end or ms is NULL");
    if (int rc = neptune_init()) return rc;
    const Driver &cu = state().cu;
    if (CUresult r = cu.cuEventSynchronize(static_cast<CUevent>(end))) return cuda_fail("cuEventSynchronize", r);
    if (CUresult r = cu.cuEventElapsedTime(ms, static_cast<CUevent>(start), static_cast<CUevent>(end)))
        return cuda_fail("cuEventElapsedTime", r);
    return NEPTUNE_OK;
}

int neptune_event_destroy(void *event) {
    if (!event) return invalid("neptune_event_destroy: event is NULL");
    if (int rc = neptune_init()) return rc;
    if (CUresult r = state().cu.cuEventDestroy(static_cast<CUevent>(event))) return cuda_fail("cuEventDestroy", r);
    return NEPTUNE_OK;
}

}  // extern "C"
