#ifndef NEPTUNE_COMPILE_CUDA_H
#define NEPTUNE_COMPILE_CUDA_H
/** \file
 * Compiling CUDA C++ to PTX or cubin: NVRTC in process (JIT), nvcc with ptxas's resource report
 * (AOT and inspection), and a cache that compiles a kernel once and loads it through the runtime's
 * C ABI. With NEPTUNE_DUMP_CUDA=<dir> set, every compilation leaves <dir>/<name>.cu, .ptx (when
 * produced) and .log behind. The CUDA toolchain's API (src/toolchain/, library neptune_toolchain);
 * public because apps and generators compile CUDA of their own with it (neptune_bench's baselines,
 * neptune_gen's resource reports). */
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "neptune/runtime/NeptuneRuntime.h"

namespace neptune::internal {

/** NVRTC or nvcc rejected the source; what() holds the compiler's log. */
class CompileFailure : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/** A runtime C ABI call failed; `code` is its NEPTUNE_ERROR_*, what() its neptune_last_error(). */
class RuntimeFailure : public std::runtime_error {
public:
    RuntimeFailure(int code, const std::string &message) : std::runtime_error(message), code(code) {}
    int code;
};

struct NvrtcOptions {
    /** sm_XX, compute_XX or XX, with an optional a/f suffix (sm_90a). The prefix does not choose the
     * output: `cubin` does (cubin for sm_XX, else PTX for compute_XX). */
    std::string arch = "sm_90";
    bool cubin = false;
    std::vector<std::string> include_dirs;
    /** (name, contents): in-memory headers the source can #include by name. */
    std::vector<std::pair<std::string, std::string>> headers;
    /** More NVRTC options, passed last (e.g. "--ptxas-options=-v", "-DTILE=64"). */
    std::vector<std::string> extra;
};

struct CompiledModule {
    std::string ptx;  // NUL-free PTX text (PTX compilations)
    std::vector<char> cubin;  // ELF image (cubin compilations)
    std::string log;  // the compiler's messages, warnings, ptxas report
};

/** Compiles `source` with NVRTC, always with -std=c++17, --gpu-architecture, -default-device and
 * -lineinfo, and the toolkit's include directory after options.include_dirs (for cuda_fp16.h and
 * cuda_bf16.h, which NVRTC lacks). `program_name` names the program in diagnostics and dump files.
 * Throws CompileFailure (with NVRTC's log) when the source does not compile. */
CompiledModule nvrtc_compile(const std::string &source, const std::string &program_name,
                             const NvrtcOptions &options = {});

/** Compiles `source` with nvcc (CUDA_PATH/bin or /usr/local/cuda/bin) to a cubin for `arch` (sm_XX,
 * compute_XX or XX, sm_90a allowed) in a temporary directory, with -O3 -std=c++17 -Xptxas -v; `log`
 * holds nvcc's output including ptxas's resource report. Throws CompileFailure with that output. */
CompiledModule nvcc_compile(const std::string &source, const std::string &name, const std::string &arch,
                            const std::vector<std::string> &include_dirs = {});

/** Compiles `source` with nvcc into one fat binary holding an image per entry of `codes`: sm_XX (or
 * sm_90a) for a cubin, compute_XX for PTX the driver JIT-compiles on newer GPUs. `headers` are
 * (name, contents) pairs written beside the source, as NVRTC's in-memory headers are. -O3 -std=c++17
 * -Xptxas -v: `log` holds ptxas's resource report of every cubin. The image is in `cubin` (a fatbin
 * loads through neptune_module_load like a cubin). Throws CompileFailure with nvcc's output. */
CompiledModule nvcc_fatbin(const std::string &source, const std::string &name, const std::vector<std::string> &codes,
                           const std::vector<std::pair<std::string, std::string>> &headers = {});

/** One kernel's resources as ptxas -v reports them; -1 where the report does not say. */
struct ResourceUsage {
    int registers = -1;
    int shared_bytes = -1;  // static shared memory; 0 when the kernel's report lists none
    int spill_stores = -1;
    int spill_loads = -1;
    int stack_bytes = -1;
};

/** Reads the entries of `kernel_name` from ptxas -v output. The name matches a reported symbol
 * exactly or after demangling (with or without namespaces and parameters). */
ResourceUsage parse_ptxas_report(const std::string &log, const std::string &kernel_name);

/** Compiles each (source, options) once with NVRTC to a cubin for the current device and keeps the
 * loaded module until destruction. Thread-safe; compilations are serialized. */
class ModuleCache {
public:
    ModuleCache() = default;
    ModuleCache(const ModuleCache &) = delete;
    ModuleCache &operator=(const ModuleCache &) = delete;
    ~ModuleCache();

    /** The kernel `kernel_name` (its symbol: declare kernels extern "C" or pass the mangled name) of
     * `source`. options.arch is replaced by the device's sm_XY, keeping an a/f suffix when its digits
     * match the device. Throws CompileFailure, or RuntimeFailure when the device, the load or the
     * lookup fails. */
    neptune_function *get(const std::string &source, const std::string &kernel_name, const NvrtcOptions &options = {});

private:
    std::mutex lock;
    neptune_device_info device{};  // queried on the first get(); cc_major == 0 until then
    std::unordered_map<std::string, neptune_module *> modules;  // key: options and source, verbatim
};

}  // namespace neptune::internal

#endif
