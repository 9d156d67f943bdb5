// Variants compiled on first use (ops/FirstUse.h): the cache's files and the compiler library.
#include "ops/FirstUse.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>

#include "interop/Descriptor.h"
#include "neptune/NeptuneOps.h"
#include "ops/JitCompiler.h"

#ifndef NEPTUNE_VERSION
#define NEPTUNE_VERSION "unknown"
#endif

namespace neptune::ops {

namespace {

[[noreturn]] void fail(int status, const std::string &message) { throw FirstUseError{status, message}; }

std::string directory_of_this_library() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&compiler_path), &info) == 0 || !info.dli_fname) return ".";
    const std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    return slash == std::string::npos ? "." : self.substr(0, slash);
}

/** mkdir -p; false when a component cannot be made. */
bool make_directories(const std::string &path) {
    for (size_t i = 1; i <= path.size(); i++) {
        if (i < path.size() && path[i] != '/') continue;
        const std::string prefix = path.substr(0, i);
        if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
    return true;
}

const char *dtype_text(int d) {
    switch (d) {
    case NEPTUNE_OPS_F16: return "f16";
    case NEPTUNE_OPS_BF16: return "bf16";
    case NEPTUNE_OPS_F32: return "f32";
    default: return "i32";
    }
}

/** The opened compiler, kept for the process's life (its libHalide state included). */
struct Compiler {
    neptune_ops_jit_compile_fn compile = nullptr;
    neptune_ops_jit_compile_kernels_fn compile_kernels = nullptr;
    std::string path, error;
};

const Compiler &compiler() {
    static const Compiler c = [] {
        Compiler c;
        c.path = compiler_path();
        void *handle = dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            const char *e = dlerror();
            c.error = "cannot open the compiler library " + c.path + " (" + (e ? e : "unknown reason") + ")";
            return c;
        }
        auto version = reinterpret_cast<neptune_ops_jit_version_fn>(dlsym(handle, NEPTUNE_OPS_JIT_VERSION_SYMBOL));
        c.compile = reinterpret_cast<neptune_ops_jit_compile_fn>(dlsym(handle, NEPTUNE_OPS_JIT_COMPILE_SYMBOL));
        c.compile_kernels =
            reinterpret_cast<neptune_ops_jit_compile_kernels_fn>(dlsym(handle, NEPTUNE_OPS_JIT_COMPILE_KERNELS_SYMBOL));
        if (!version || !c.compile || !c.compile_kernels || version() != NEPTUNE_OPS_JIT_VERSION) {
            c.compile = nullptr;
            c.compile_kernels = nullptr;
            c.error = c.path + " is not the compiler library of this Neptune (another version)";
        }
        return c;
    }();
    return c;
}

/** Neptune's version and the compiler library's size and modification time; empty without one. */
std::string compiler_identity(const std::string &path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return "";
    return std::string(NEPTUNE_VERSION) + "-" + std::to_string(uint64_t(st.st_size)) + "-" +
           std::to_string(int64_t(st.st_mtim.tv_sec)) + "." + std::to_string(int64_t(st.st_mtim.tv_nsec));
}

bool read_file(const std::string &path, std::string &text) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    std::ostringstream s;
    s << in.rdbuf();
    text = s.str();
    return !text.empty();
}

/** Writes under a private name and renames it into place (atomic within the directory). */
bool write_file(const std::string &path, const std::string &text) {
    std::random_device rd;
    const std::string tmp = path + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(rd());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) return false;
        out << text;
        if (!out.flush()) {
            std::remove(tmp.c_str());
            return false;
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

std::mutex compile_lock;  // one compilation at a time in a process: libHalide's state is shared

}  // namespace

namespace {

/** The cache's folder for this compiler library; FirstUseError when there is none. */
std::string cache_directory() {
    const std::string path = compiler_path();
    const std::string identity = compiler_identity(path);
    if (identity.empty())
        fail(NEPTUNE_OPS_ERROR_UNSUPPORTED,
             "compiling it on first use needs the compiler library, and there is none at " + path +
                 " (build Neptune with -Dops_jit=enabled, or set NEPTUNE_OPS_JIT to its path)");
    return cache_root() + "/ops/" + identity;
}

}  // namespace

std::string compiler_path() {
    if (const char *p = std::getenv("NEPTUNE_OPS_JIT"); p && *p) return p;
    return directory_of_this_library() + "/" + NEPTUNE_OPS_JIT_LIBRARY;
}

std::string cache_root() {
    if (const char *p = std::getenv("NEPTUNE_CACHE_DIR"); p && *p) return p;
    if (const char *p = std::getenv("XDG_CACHE_HOME"); p && *p) return std::string(p) + "/neptune";
    if (const char *p = std::getenv("HOME"); p && *p) return std::string(p) + "/.cache/neptune";
    return "/tmp/neptune-cache-" + std::to_string(getuid());
}

FirstUseVariant first_use_variant(const FirstUseRequest &r) {
    FirstUseVariant v;
    const std::string dir = cache_directory();
    v.cache_file = dir + "/" + r.op + "-" + dtype_text(r.dtype) + "-d" + std::to_string(r.head_dim_qk) + "x" +
                   std::to_string(r.head_dim_v) + "-g" + std::to_string(r.group) + "-" + r.arch + ".json";
    if (read_file(v.cache_file, v.descriptor)) {
        v.from_cache = true;
        return v;
    }
    std::lock_guard<std::mutex> hold(compile_lock);
    if (read_file(v.cache_file, v.descriptor)) {  // another thread compiled it meanwhile
        v.from_cache = true;
        return v;
    }
    const Compiler &c = compiler();
    if (!c.compile) fail(NEPTUNE_OPS_ERROR_UNSUPPORTED, "compiling it on first use failed: " + c.error);
    const neptune_ops_jit_request request{r.op.c_str(), r.dtype, r.head_dim_qk, r.head_dim_v, r.group, r.arch.c_str()};
    char *descriptor = nullptr, *message = nullptr;
    const int rc = c.compile(&request, &descriptor, &message);
    const std::unique_ptr<char, decltype(&std::free)> d(descriptor, &std::free), m(message, &std::free);
    if (rc != 0 || !descriptor)
        fail(NEPTUNE_OPS_ERROR_UNSUPPORTED,
             std::string("Neptune cannot compile it: ") + (message ? message : "no message"));
    v.descriptor = descriptor;
    // An unwritable cache costs the next process a compilation, not this call its result.
    if (make_directories(dir)) write_file(v.cache_file, v.descriptor);
    return v;
}

std::string first_use_kernels(const std::string &source, const std::string &arch, const std::string &name) {
    const std::string dir = cache_directory() + "/kernels";
    const std::string file = dir + "/" + interop::content_hash(source + '\n' + arch) + "-" + arch + ".cubin";
    std::string image;
    if (read_file(file, image)) return image;
    std::lock_guard<std::mutex> hold(compile_lock);
    if (read_file(file, image)) return image;  // another thread compiled it meanwhile
    const Compiler &c = compiler();
    if (!c.compile_kernels)
        fail(NEPTUNE_OPS_ERROR_UNSUPPORTED, "compiling its kernels on first use failed: " + c.error);
    char *bytes = nullptr, *message = nullptr;
    size_t size = 0;
    const int rc = c.compile_kernels(source.c_str(), arch.c_str(), name.c_str(), &bytes, &size, &message);
    const std::unique_ptr<char, decltype(&std::free)> b(bytes, &std::free), m(message, &std::free);
    if (rc != 0 || !bytes || size == 0)
        fail(NEPTUNE_OPS_ERROR_UNSUPPORTED,
             std::string("Neptune cannot compile its kernels: ") + (message ? message : "no message"));
    image.assign(bytes, size);
    if (make_directories(dir)) write_file(file, image);
    return image;
}

}  // namespace neptune::ops
