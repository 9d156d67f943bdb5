#include "extern/StageParts.h"

#include <cstdlib>
#include <cstring>
#include <future>
#include <new>

#include "interop/ExternEntry.h"
#include "neptune/Error.h"

namespace neptune::internal {

namespace HI = Halide::Internal;

std::vector<ArchTarget> stage_targets(const ExternOptions &o) {
    if (o.aot) {
        // Hopper first: its cubin runs only on compute capability 9.0. The sm_80 set's cubin serves
        // 8.x and its compute_90 PTX every later GPU (the driver compiles it).
        return {{GpuArch::Sm90a, "sm_90a", {"sm_90a"}, 90, 90},
                {GpuArch::Sm80, "sm_80", {"sm_80", "compute_90"}, 80, 1000}};
    }
    std::string digits = o.jit_arch.substr(o.jit_arch.rfind('_') + 1);
    const bool hopper = !digits.empty() && digits.back() == 'a';
    if (hopper) digits.pop_back();
    const int cc = std::atoi(digits.c_str());
    if (cc < 80)
        throw CompileError("ExternOptions::jit_arch " + o.jit_arch + ": Neptune's kernels need sm_80 or later");
    return {{hopper ? GpuArch::Sm90a : GpuArch::Sm80, o.jit_arch, {o.jit_arch}, cc, cc}};
}

DType dtype_of(const Halide::Type &t) {
    if (t.is_bfloat() && t.bits() == 16) return DType::BF16;
    if (t.is_float() && t.bits() == 16) return DType::F16;
    if (t.is_float() && t.bits() == 32) return DType::F32;
    return DType::I32;
}

interop::TensorSpec tensor_spec(const std::string &name, const Halide::Type &t, bool output,
                                std::vector<std::string> dims) {
    interop::TensorSpec s;
    s.name = name;
    s.output = output;
    s.type_code = int(t.code());
    s.bits = t.bits();
    s.dims = std::move(dims);
    return s;
}

std::string stage_name(const Halide::Func &output) { return output.name().substr(0, output.name().find('$')); }

namespace {

// Just in time: NVRTC's cubin for `arch`, with ptxas's report in the log.
NvrtcOptions jit_options(const std::string &arch) {
    NvrtcOptions no;
    no.arch = arch;
    no.cubin = true;
    no.headers = device_headers();
    no.extra = {"--ptxas-options=-v"};
    return no;
}

}  // namespace

CompiledModule compile_stage(const std::string &cuda, const std::string &stem, const ArchTarget &target, bool aot) {
    if (aot) return nvcc_fatbin(cuda, stem, target.codes, device_headers());
    return nvrtc_compile(cuda, stem, jit_options(target.lowering));
}

bool defers_sets(size_t sets, bool aot) { return !aot && sets > 1; }

std::vector<CompiledModule> compile_sets(const std::vector<std::string> &sources, const std::vector<std::string> &stems,
                                         const std::vector<ArchTarget> &targets, bool aot) {
    std::vector<std::future<CompiledModule>> running;
    for (size_t i = 0; i < sources.size(); i++)
        running.push_back(
            std::async(std::launch::async, [&, i] { return compile_stage(sources[i], stems[i], targets[i], aot); }));
    std::vector<CompiledModule> modules;
    for (std::future<CompiledModule> &m : running) modules.push_back(m.get());
    return modules;
}

namespace {

char *copy_out(const std::string &s) {
    char *p = static_cast<char *>(std::malloc(s.size() + 1));
    if (p) std::memcpy(p, s.data(), s.size() + 1);
    return p;
}

}  // namespace

int jit_kernel_compiler(const char *source, const char *arch, const char *name, char **image, size_t *size,
                        char **message) {
    *image = *message = nullptr;
    *size = 0;
    try {
        const CompiledModule m = nvrtc_compile(source, name, jit_options(arch));
        *image = static_cast<char *>(std::malloc(m.cubin.size()));
        if (!*image) throw std::bad_alloc();
        std::memcpy(*image, m.cubin.data(), m.cubin.size());
        *size = m.cubin.size();
        return 0;
    } catch (const std::exception &e) { *message = copy_out(e.what()); } catch (...) {
        *message = copy_out("an unknown exception");
    }
    return 1;
}

Halide::Func define_stage(const std::string &name, const std::string &descriptor,
                          const std::vector<Halide::Expr> &scalars,
                          const std::vector<Halide::ExternFuncArgument> &inputs, int num_buffers,
                          const Halide::Type &type, const std::vector<std::string> &vars,
                          const std::vector<Halide::Expr> &extents, const ExternOptions &opt) {
    if (scalars.size() > size_t(interop::extern_scalars))
        throw InternalError(name + ": too many kernel int parameters");
    // An AOT pipeline has a user context only with Target::UserContext; elsewhere Halide passes none.
    // One parameter for every stage: Halide refuses two of the same name in a pipeline.
    static const Halide::Expr pipeline_context = Halide::user_context_value();
    const Halide::Expr user_context = !opt.aot || opt.user_context
                                          ? pipeline_context
                                          : Halide::reinterpret(Halide::Handle(), Halide::cast<uint64_t>(0));
    std::vector<Halide::ExternFuncArgument> args = {user_context, Halide::Expr(descriptor),
                                                    HI::make_device_interface_call(Halide::DeviceAPI::CUDA)};
    for (size_t s = 0; s < size_t(interop::extern_scalars); s++)
        args.push_back(s < scalars.size() ? scalars[s] : Halide::Expr(0));
    args.insert(args.end(), inputs.begin(), inputs.end());
    std::vector<Halide::Var> vs;
    for (const std::string &a : vars) vs.push_back(Halide::Var(a));
    Halide::Func ext(name);
    ext.define_extern(interop::extern_function_name(num_buffers), args, {type}, vs, Halide::NameMangling::Default,
                      Halide::DeviceAPI::CUDA);
    // At root: the stage computes whole outputs anyway, and Halide 21 crashes compiling a GPU loop
    // that reads an extern stage left at the default (inline) level.
    ext.compute_root();
    for (size_t k = 0; k < vs.size(); k++) ext.bound(vs[k], 0, extents.at(k));
    return ext;
}

size_t primary_output(const std::vector<Halide::Func> &outputs) {
    size_t primary = 0;
    for (size_t i = 1; i < outputs.size(); i++)
        if (outputs[i].dimensions() > outputs[primary].dimensions()) primary = i;
    return primary;
}

void keep_secondary_outputs(interop::GroupDescriptor &d, const std::vector<SecondaryOutput> &outputs) {
    for (const SecondaryOutput &o : outputs) {
        std::string elements = o.dims.back();
        for (size_t k = o.dims.size() - 1; k-- > 0;) elements = "(* " + o.dims[k] + " " + elements + ")";
        for (interop::KernelSet &s : d.sets) s.workspaces.push_back({o.tensor, elements, false, o.type.bytes(), true});
    }
}

Halide::Func copy_stage(const SecondaryOutput &out, const Halide::Func &stage, const interop::TensorSpec &stage_buffer,
                        const std::string &group_descriptor, const std::vector<std::string> &scalar_names,
                        const std::vector<Halide::Expr> &scalars, const ExternOptions &opt, ExternStageInfo *info) {
    interop::GroupDescriptor c;
    c.name = stage_name(out.output);
    c.jit = !opt.aot;
    c.scalars = scalar_names;
    interop::TensorSpec read = stage_buffer;
    read.output = false;
    c.buffers = {read, tensor_spec(out.tensor, out.type, true, out.dims)};
    c.copy_of_group = interop::read_descriptor(group_descriptor).id;
    c.copy_of_workspace = out.tensor;
    info->name = c.name;
    info->descriptor = interop::write_descriptor(c);
    info->extern_function = interop::extern_function_name(2);
    return define_stage(c.name, info->descriptor, scalars, {Halide::ExternFuncArgument(stage)}, 2, out.type,
                        out.output.function().args(), out.extents, opt);
}

}  // namespace neptune::internal
