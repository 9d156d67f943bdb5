#include "neptune/GpuPipeline.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "api/FusedGroups.h"
#include "extern/BuildExternStage.h"
#include "extern/StageParts.h"
#include "lower/Lower.h"
#include "interop/ExternEntry.h"
#include "neptune/Error.h"
#include "neptune/HalideCpu.h"
#include "neptune/runtime/NeptuneHalide.h"
#include "neptune/runtime/NeptuneRuntime.h"
#include "neptune/CompileCuda.h"

namespace neptune {

namespace HI = Halide::Internal;

namespace {

std::mutex built_lock;
std::vector<ExternStageInfo> &built() {
    static std::vector<ExternStageInfo> b;
    return b;
}

// Errors inside a JIT pipeline go to the pipeline's error handler, so Halide::RuntimeError carries
// them (the user context of a JIT call is always a JITUserContext).
void report_to_jit(void *user_context, const char *message) {
    auto *ctx = static_cast<Halide::JITUserContext *>(user_context);
    if (ctx && ctx->handlers.custom_error) {
        ctx->handlers.custom_error(ctx, message);
    } else {
        std::fprintf(stderr, "%s\n", message);
    }
}

int32_t jit_acquire_context(Halide::JITUserContext *user_context, void **cuda_context, bool create) {
    // create == false is Halide's device_release: no driver start-up and no error report there
    // (NeptuneHalide.h's AOT override does the same).
    if (!create) {
        *cuda_context = neptune_context_if_initialized();
        return 0;
    }
    *cuda_context = nullptr;
    const int rc = neptune_get_context(cuda_context);
    if (rc == NEPTUNE_OK) return 0;
    // After the driver shut down (at exit), Halide's destructors have nothing left to free: no report.
    if (rc == NEPTUNE_ERROR_SHUT_DOWN) return halide_error_code_gpu_device_error;
    const std::string m =
        std::string("Neptune: Halide's CUDA runtime cannot use Neptune's context: ") + neptune_last_error();
    report_to_jit(user_context, m.c_str());
    return halide_error_code_gpu_device_error;
}

int32_t jit_release_context(Halide::JITUserContext *) { return 0; }

int32_t jit_get_stream(Halide::JITUserContext *user_context, void *cuda_context, void **stream) {
    return neptune_halide_get_stream(user_context, cuda_context, stream);
}

Halide::JITExtern jit_extern(int num_buffers) {
    std::vector<Halide::Type> args = {Halide::type_of<void *>(), Halide::type_of<const char *>(),
                                      Halide::type_of<const halide_device_interface_t *>()};
    for (int s = 0; s < interop::extern_scalars; s++) args.push_back(Halide::Int(32));
    for (int b = 0; b < num_buffers; b++) args.push_back(Halide::type_of<halide_buffer_t *>());
    return Halide::JITExtern(Halide::ExternCFunction(interop::extern_function_address(num_buffers),
                                                     Halide::ExternSignature(Halide::Int(32), false, args)));
}

// A user's LoopLevel may only be inspected locked, and locking it would freeze it: inspect a copy.
bool inlined_pure(const HI::Function &f) {
    if (f.has_update_definition() || f.has_extern_definition()) return false;
    Halide::LoopLevel l = Halide::LoopLevel::inlined();
    l.set(f.schedule().compute_level());
    return l.lock().is_inlined();
}

}  // namespace

std::vector<Halide::Func> extern_stages(const std::vector<Halide::Func> &outputs, const ExternOptions &given) {
    ExternOptions options = given;
    if (!options.aot && options.jit_arch.empty()) {
        options.jit_arch = "sm_80";  // for inspection where there is no GPU
        neptune_device_info info{};
        if (neptune_get_device_info(&info) == NEPTUNE_OK) {
            const int cc = info.cc_major * 10 + info.cc_minor;
            options.jit_arch = "sm_" + std::to_string(cc) + (cc == 90 ? "a" : "");
        }
    }
    std::vector<Halide::Func> result = outputs;
    // Every Function the outputs reach: where readers of a group's output are redirected.
    std::map<std::string, HI::Function> env;
    for (const Halide::Func &o : outputs) {
        env.emplace(o.name(), o.function());
        for (auto &[n, fn] : HI::find_transitive_calls(o.function())) env.emplace(n, fn);
    }
    for (const internal::FusedGroup &g : internal::claim_fused_groups(outputs)) {
        // The group's output: the one Func outside the group that reads its stages (attention's out),
        // among the outputs or the Funcs they read.
        std::set<std::string> stages;
        for (const internal::FusedStage &s : g.plan.stages) stages.insert(s.name);
        std::set<std::string> inside = stages;  // the stages and what they read (prob reads row_max)
        for (const internal::FusedStage &s : g.plan.stages)
            for (auto &[n, fn] : HI::find_transitive_calls(s.func.function())) inside.insert(n);
        std::vector<Halide::Func> readers;
        for (auto &[name, fn] : env) {
            if (inside.count(name)) continue;
            for (auto &[callee, unused] : HI::find_direct_calls(fn)) {
                (void)unused;
                if (stages.count(callee)) {
                    readers.push_back(Halide::Func(fn));
                    break;
                }
            }
        }
        // A reader left inline (log-sum-exp under cross-entropy's loss, LayerNorm's normalised row)
        // may be part of the group, as the pure Funcs between the stages and the output are: its own
        // readers then stand for it, up to the outputs or a Func scheduled on its own. Taken where the
        // tile backend lowers the group so (attention's out stays the output under a Halide stage).
        std::vector<Halide::Func> absorbed = readers;
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t i = 0; i < absorbed.size(); i++) {
                const Halide::Func r = absorbed[i];
                const bool named = std::any_of(outputs.begin(), outputs.end(),
                                               [&](const Halide::Func &o) { return o.name() == r.name(); });
                if (named || !inlined_pure(r.function())) continue;
                absorbed.erase(absorbed.begin() + long(i));
                for (auto &[name, fn] : env) {
                    const bool reads = HI::find_direct_calls(fn).count(r.name()) > 0;
                    const bool known = std::any_of(absorbed.begin(), absorbed.end(),
                                                   [&](const Halide::Func &x) { return x.name() == name; });
                    if (reads && !known && !inside.count(name)) absorbed.push_back(Halide::Func(fn));
                }
                changed = true;
                break;
            }
        }
        const auto names = [](const std::vector<Halide::Func> &fs) {
            std::set<std::string> n;
            for (const Halide::Func &f : fs) n.insert(f.name());
            return n;
        };
        if (!absorbed.empty() && names(absorbed) != names(readers) &&
            internal::lowering_refusal(g.plan, absorbed).empty())
            readers = absorbed;
        if (readers.empty())
            throw CompileError(g.plan.directive +
                               ": extern_stages needs the Func that reads the group's stages (its "
                               "epilogue, e.g. attention's out) among the outputs or the Funcs they read");
        // Readers in the order of `outputs` first (the order the user named them), then the rest.
        std::vector<Halide::Func> ordered;
        for (const Halide::Func &o : outputs)
            for (const Halide::Func &r : readers)
                if (r.name() == o.name()) ordered.push_back(r);
        for (const Halide::Func &r : readers)
            if (std::none_of(ordered.begin(), ordered.end(),
                             [&](const Halide::Func &o) { return o.name() == r.name(); }))
                ordered.push_back(r);
        internal::BuiltStages b = internal::build_extern_stages(g, ordered, options);
        for (size_t i = 0; i < ordered.size(); i++) {
            for (auto &[n, fn] : env) {
                if (n == ordered[i].name()) continue;
                HI::Function f = fn;
                f.substitute_calls(ordered[i].function(), b.funcs[i].function());
            }
            for (Halide::Func &r : result)
                if (r.name() == ordered[i].name()) r = b.funcs[i];
        }
        std::lock_guard<std::mutex> hold(built_lock);
        for (const ExternStageInfo &i : b.infos) built().push_back(i);
    }
    return result;
}

const std::vector<ExternStageInfo> &extern_stages_built() {
    std::lock_guard<std::mutex> hold(built_lock);
    return built();
}

namespace {

void set_cuda_handlers(Halide::JITHandlers &h) {
    h.custom_cuda_acquire_context = jit_acquire_context;
    h.custom_cuda_release_context = jit_release_context;
    h.custom_cuda_get_stream = jit_get_stream;
}

}  // namespace

void share_cuda_context(Halide::Pipeline &p) { set_cuda_handlers(p.jit_handlers()); }

void share_cuda_context() {
    // Read the defaults by swapping in empty ones, then put them back with the CUDA hooks replaced.
    Halide::JITHandlers h = HI::JITSharedRuntime::set_default_handlers(Halide::JITHandlers());
    set_cuda_handlers(h);
    HI::JITSharedRuntime::set_default_handlers(h);
}

void prepare_jit(Halide::Pipeline &p) {
    std::map<std::string, Halide::JITExtern> externs = p.get_jit_externs();
    for (int n = 1; n <= interop::max_extern_buffers; n++)
        externs.emplace(interop::extern_function_name(n), jit_extern(n));
    p.set_jit_externs(externs);
    share_cuda_context(p);
    share_cuda_context();
    neptune_halide_set_jit_error_reporter(report_to_jit);
    // Sets compiled on first use (a row chain's ladder, decode's tunings): NVRTC, in this process.
    neptune_halide_set_kernel_compiler(internal::jit_kernel_compiler);
}

Halide::Target gpu_jit_target() {
    return host_target().with_feature(Halide::Target::CUDA).with_feature(Halide::Target::CUDACapability86);
}

GpuPipeline::GpuPipeline(Halide::Pipeline pipeline, std::vector<ExternStageInfo> stages)
    : pipeline_(std::move(pipeline)), stages_(std::move(stages)) {}

void GpuPipeline::realize(Halide::Pipeline::RealizationArg outputs) {
    pipeline_.realize(std::move(outputs), gpu_jit_target());
}

std::string GpuPipeline::tile_program() const {
    std::string s;
    for (const ExternStageInfo &st : stages_)
        for (const ExternStageInfo::KernelSet &k : st.sets)
            s += "// " + st.name + ", " + k.arch +
                 (k.stages ? ", " + std::to_string(k.tile_keys) + "-key tiles, " + std::to_string(k.stages) + " stages"
                           : "") +
                 "\n" + k.tile_program;
    return s;
}

std::string GpuPipeline::cuda_source() const {
    std::string s;
    for (const ExternStageInfo &st : stages_)
        for (const ExternStageInfo::KernelSet &k : st.sets) s += k.cuda;
    return s;
}

std::string GpuPipeline::ptx() const {
    std::string s;
    for (const ExternStageInfo &st : stages_)
        for (const ExternStageInfo::KernelSet &k : st.sets) {
            if (k.cuda.empty()) continue;  // its kernels are in an earlier set's source (a row chain's ladder)
            internal::NvrtcOptions no;
            no.arch = k.arch;
            no.headers = internal::device_headers();
            s += internal::nvrtc_compile(k.cuda, st.name + "_" + k.arch, no).ptx;
        }
    return s;
}

std::string GpuPipeline::ptxas_report() const {
    std::string s;
    for (const ExternStageInfo &st : stages_)
        for (const ExternStageInfo::KernelSet &k : st.sets)
            if (!k.cuda.empty())
                s += internal::nvcc_fatbin(k.cuda, st.name + "_" + k.arch, {k.arch}, internal::device_headers()).log;
    return s;
}

GpuPipeline compile_gpu(const std::vector<Halide::Func> &outputs, ExternOptions options) {
    options.aot = false;
    const size_t first = extern_stages_built().size();
    std::vector<Halide::Func> funcs = extern_stages(outputs, options);
    std::vector<ExternStageInfo> stages(extern_stages_built().begin() + long(first), extern_stages_built().end());
    Halide::Pipeline p(funcs);
    prepare_jit(p);
    return GpuPipeline(p, stages);
}

}  // namespace neptune
