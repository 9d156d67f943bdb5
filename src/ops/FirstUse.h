#ifndef NEPTUNE_OPS_FIRST_USE_H
#define NEPTUNE_OPS_FIRST_USE_H
/** \file
 * Variants compiled on first use: the descriptor of an operator at a call's element type, head dims
 * and grouping, from the persistent cache or, on a miss, from the compiler library
 * (ops/JitCompiler.h), which is opened only then. A later process finds the descriptor in the cache
 * and loads its image without the compiler.
 *
 * The cache is a directory (NEPTUNE_CACHE_DIR, else $XDG_CACHE_HOME/neptune, else ~/.cache/neptune)
 * holding one JSON file per variant under ops/<identity>/ (and the deferred kernel sets' images under
 * ops/<identity>/kernels/), where the identity is Neptune's version
 * and the compiler library's size and modification time: a rebuilt compiler never reads kernels of
 * an older one. Files are written to a private temporary name and renamed into place, so processes
 * compiling the same variant at once each leave a whole file and readers never see a partial one. */
#include <string>

namespace neptune::ops {

struct FirstUseRequest {
    std::string op;
    int dtype = 0;  // neptune_ops_dtype
    int head_dim_qk = 0, head_dim_v = 0, group = 0;
    std::string arch;  // "sm_90a", "sm_80", ...
};

struct FirstUseVariant {
    std::string descriptor;  // the extern stage's JSON (interop/Descriptor.h)
    std::string cache_file;  // where it is stored
    bool from_cache = false;
};

/** Why no variant could be had: the message names the operator and says what to do. */
struct FirstUseError {
    int status;  // neptune_ops_status
    std::string message;
};

/** The compiler library's path: NEPTUNE_OPS_JIT if set, else libneptune_ops_jit.so beside
 * libneptune_ops.so. */
std::string compiler_path();

/** The cache's root directory (see above). */
std::string cache_root();

/** The variant's descriptor, cached or compiled (then cached). Throws FirstUseError. */
FirstUseVariant first_use_variant(const FirstUseRequest &r);

/** The image of a kernel set the variant's descriptor defers (a row chain's rung of row lengths, a
 * decode tuning; interop::KernelSet::source) for `arch`: from the cache, where it is a file of its
 * own under kernels/ named by the source's content hash, or compiled by the compiler library and
 * stored there, so that a call compiles the one set it takes and later processes none. Throws
 * FirstUseError. */
std::string first_use_kernels(const std::string &source, const std::string &arch, const std::string &name);

}  // namespace neptune::ops

#endif
