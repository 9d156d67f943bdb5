// libneptune_ops_jit.so: compiles one operator of the suite for the C ABI when no AOT variant of
// libneptune_ops.so serves a call (ops/JitCompiler.h). The operator is built exactly as its generator
// builds its GPU library (the plain algorithm from ImageParams, the family's fusion directive, the
// fused group as an extern stage with each GPU family's own tiles), but at the call's element type,
// head dims and grouping, and compiled by NVRTC for the one GPU family of the caller's device. The
// result is the stage's descriptor, which the ops library caches and launches itself; it must be the
// whole operator: one stage reading the operator's inputs and writing its one output.
#include <cstdlib>
#include <cstring>
#include <string>

#include "Halide.h"
#include "extern/StageParts.h"
#include "interop/Descriptor.h"
#include "neptune/Error.h"
#include "neptune/GpuPipeline.h"
#include "neptune/NeptuneOps.h"
#include "neptune/Operators.h"
#include "neptune/algorithms/Algorithms.h"
#include "neptune/algorithms/Schedules.h"
#include "ops/JitCompiler.h"

namespace neptune::ops {

namespace {

char *copy_out(const std::string &s) {
    char *p = static_cast<char *>(std::malloc(s.size() + 1));
    if (p) std::memcpy(p, s.c_str(), s.size() + 1);
    return p;
}

DType dtype_of(int code, const std::string &op) {
    switch (code) {
    case NEPTUNE_OPS_F16: return DType::F16;
    case NEPTUNE_OPS_BF16: return DType::BF16;
    default: throw CompileError(op + ": the operators of the suite take f16 or bf16 tensors");
    }
}

/** The operator's spec as its generator would set it for this request. */
OperatorSpec spec_for(const neptune_ops_jit_request &r) {
    const std::string op = r.op;
    std::optional<OperatorSpec> found = find_operator(op);
    if (!found) throw CompileError("unknown operator '" + op + "'");
    OperatorSpec s = *found;
    s.dtype = dtype_of(r.dtype, op);
    switch (s.family) {
    case Family::Attention:
        s.attention.head_dim_qk = r.head_dim_qk;
        s.attention.head_dim_v = r.head_dim_v > 0 ? r.head_dim_v : r.head_dim_qk;
        // Head counts are run-time extents; decode kernels are compiled for the grouping.
        s.attention.q_heads = s.attention.decode ? std::max(r.group, 1) : 1;
        s.attention.kv_heads = 1;
        return s;
    default:
        if (row_wise(s.family)) return s;
        throw CompileError(op + ": the tile backend does not lower this operator; its GPU form is the AOT library");
    }
}

/** The generator's fusion directive for the family (generators/attention_generator.cpp and
 * generators/RowwiseGenerator.h): the kernels take their own tiles and chunk counts. */
algorithms::FusionChoice choice_for(const OperatorSpec &s) {
    algorithms::FusionChoice c;
    const bool decode = s.family == Family::Attention && s.attention.decode;
    c.variant = decode ? algorithms::FusionVariant::SplitK : algorithms::FusionVariant::Rolling;
    c.tile = decode ? 32 : 64;
    c.chunks = decode ? 4 : 1;
    return c;
}

std::string compile(const neptune_ops_jit_request &r) {
    const OperatorSpec s = spec_for(r);
    algorithms::OperatorFuncs f = algorithms::build(s);
    algorithms::fuse_operator(s, f, choice_for(s));
    ExternOptions o;
    o.aot = false;
    o.jit_arch = r.arch;
    if (s.family == Family::Attention) {
        o.head_dim_qk = s.attention.head_dim_qk;
        o.head_dim_v = s.attention.head_dim_v;
        o.group = s.attention.decode ? std::max(r.group, 1) : 0;
        o.family_tile = true;
    }
    const size_t first = extern_stages_built().size();
    const std::vector<Halide::Func> stages = extern_stages(f.outputs, o);
    const size_t built = extern_stages_built().size() - first;
    if (stages.size() != 1 || built != 1 || !stages[0].function().has_extern_definition())
        throw CompileError(s.name + ": the operator is not one fused group writing one output");
    interop::GroupDescriptor d = interop::read_descriptor(extern_stages_built()[first].descriptor);
    for (const Halide::ImageParam &p : f.inputs) {
        bool read = false;
        for (const interop::TensorSpec &t : d.buffers) read = read || (!t.output && t.name == p.name());
        if (!read) throw CompileError(s.name + ": the fused group does not read the input " + p.name() + " itself");
    }
    // The ops library reports a stage's errors through Halide's error handler, as an AOT stage does.
    d.jit = false;
    return interop::write_descriptor(d);
}

}  // namespace

}  // namespace neptune::ops

extern "C" {

__attribute__((visibility("default"))) int neptune_ops_jit_version(void) { return NEPTUNE_OPS_JIT_VERSION; }

__attribute__((visibility("default"))) int neptune_ops_jit_compile_kernels(const char *source, const char *arch,
                                                                           const char *name, char **image, size_t *size,
                                                                           char **message) {
    if (!image || !size || !message) return 1;
    *image = *message = nullptr;
    *size = 0;
    if (!source || !arch || !name) {
        *message = neptune::ops::copy_out("incomplete request");
        return 1;
    }
    return neptune::internal::jit_kernel_compiler(source, arch, name, image, size, message);
}

__attribute__((visibility("default"))) int neptune_ops_jit_compile(const neptune_ops_jit_request *request,
                                                                   char **descriptor, char **message) {
    if (!descriptor || !message) return 1;
    *descriptor = *message = nullptr;
    try {
        if (!request || !request->op || !request->arch) throw std::invalid_argument("incomplete request");
        *descriptor = neptune::ops::copy_out(neptune::ops::compile(*request));
        return *descriptor ? 0 : 1;
    } catch (const neptune::CompileError &e) {
        *message = neptune::ops::copy_out(e.what());
    } catch (const Halide::CompileError &e) {
        *message = neptune::ops::copy_out(std::string("Halide: ") + e.what());
    } catch (const neptune::InternalError &e) {
        *message = neptune::ops::copy_out(e.what());  // already says it is Neptune's
    } catch (const std::exception &e) {
        *message = neptune::ops::copy_out(std::string("Neptune internal error: ") + e.what());
    } catch (...) { *message = neptune::ops::copy_out("Neptune internal error: an unknown exception"); }
    return 1;
}

}  // extern "C"
