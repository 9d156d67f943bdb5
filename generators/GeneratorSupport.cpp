#include "GeneratorSupport.h"

#include "neptune/Directives.h"
#include "neptune/Error.h"
#include "neptune/HalideCpu.h"
#include "neptune/algorithms/Algorithms.h"

namespace neptune::generators {

namespace HI = Halide::Internal;

DType element_type(const Halide::Type &t, const std::string &generator) {
    if (t == Halide::Float(16)) return DType::F16;
    if (t == Halide::BFloat(16)) return DType::BF16;
    throw CompileError(generator + ": dtype must be float16 or bfloat16");
}

Signature declare_signature(HI::GeneratorBase &g, const OperatorSpec &spec) {
    const OperatorInstance shape = instantiate(spec, 1, 1);
    Signature s;
    for (const TensorDesc &t : shape.inputs)
        s.inputs.push_back(
            g.add_input<Halide::Buffer<>>(t.name, algorithms::halide_type(t.dtype), int(t.shape.size())));
    for (const TensorDesc &t : shape.outputs)
        s.outputs.push_back(
            g.add_output<Halide::Buffer<>>(t.name, algorithms::halide_type(t.dtype), int(t.shape.size())));
    return s;
}

std::vector<Halide::Func> input_funcs(const Signature &s) {
    std::vector<Halide::Func> f;
    for (auto *in : s.inputs) f.push_back(*in);
    return f;
}

Halide::Expr input_extent(const Signature &s, size_t input, int dim) { return s.inputs.at(input)->dim(dim).extent(); }

void require_cuda_target(const Halide::Target &target, const std::string &generator, const char *backend) {
    if (!target.has_feature(Halide::Target::CUDA))
        throw CompileError(generator + ": backend=" + backend +
                           " needs a CUDA target (e.g. ...-cuda-cuda_capability_86)");
}

std::vector<Halide::Func> lower_fused(const std::vector<Halide::Func> &outputs, Backend backend,
                                      const Halide::Target &target, ExternOptions options,
                                      const std::string &generator) {
    if (backend == Backend::Host) return lower_to_cpu(outputs);
    if (backend == Backend::Unfused)
        throw CompileError(generator +
                           ": backend=unfused (the plain algorithm on Halide's CUDA backend) is offered by "
                           "the attention generators; use gpu or host here");
    if (backend == Backend::HalideCuda)
        throw CompileError(generator +
                           ": backend=halide_cuda (the fused CPU form on Halide's CUDA backend) is offered by the "
                           "row-wise generators; use gpu, unfused or host here");
    require_cuda_target(target, generator);
    options.user_context = target.has_feature(Halide::Target::UserContext);
    return extern_stages(outputs, options);
}

Halide::Func lower_fused(const Halide::Func &output, Backend backend, const Halide::Target &target,
                         ExternOptions options, const std::string &generator) {
    return lower_fused(std::vector<Halide::Func>{output}, backend, target, std::move(options), generator)[0];
}

void schedule_host(const Halide::Func &output) {
    schedule_reductions_at_root({output});
    Halide::Func out = output;
    const std::vector<Halide::Var> args = out.args();
    out.compute_root().parallel(args.back());
}

namespace {

// Pure dimensions over GPU blocks and threads: 1-D rows in 64-thread blocks, 2-D in 16 x 16 tiles,
// further outer dimensions fused into the third block dimension. Extents are run-time: tails are
// guarded.
template <typename Stage>
void gpu_loops(Stage s, const std::vector<Halide::VarOrRVar> &pure, const std::string &tag) {
    const auto guard = Halide::TailStrategy::GuardWithIf;
    if (pure.empty()) return;
    Halide::Var bo(tag + "_bo"), bi(tag + "_bi"), co(tag + "_co"), ci(tag + "_ci"), outer(tag + "_outer");
    if (pure.size() == 1) {
        s.gpu_tile(pure[0], bo, bi, 64, guard);
        return;
    }
    s.gpu_tile(pure[0], pure[1], bo, co, bi, ci, 16, 16, guard);
    if (pure.size() == 2) return;
    Halide::VarOrRVar fused = pure[2];
    for (size_t k = 3; k < pure.size(); k++) {
        Halide::Var f(tag + "_f" + std::to_string(k));
        s.fuse(fused, pure[k], f);
        fused = f;
    }
    s.gpu_blocks(fused);
}

}  // namespace

void schedule_gpu_pointwise(Halide::Func f) {
    std::vector<Halide::VarOrRVar> pure;
    for (const Halide::Var &v : f.args()) pure.push_back(v);
    f.compute_root();
    gpu_loops(f, pure, f.name());
}

namespace {

/** Whether a pure Func checks its values with Halide::require (its message cannot be compiled into a
 * CUDA kernel: Halide stops with an internal error, append_string). */
class FindRequire : public HI::IRGraphVisitor {
public:
    using HI::IRGraphVisitor::visit;
    bool found = false;

private:
    void visit(const HI::Call *c) override {
        found = found || c->is_intrinsic(HI::Call::require);
        HI::IRGraphVisitor::visit(c);
    }
};

bool has_require(const HI::Function &fn) {
    FindRequire f;
    for (const Halide::Expr &e : fn.values()) e.accept(&f);
    return f.found;
}

}  // namespace

void schedule_cuda(const Halide::Func &output) {
    std::map<std::string, HI::Function> env = HI::find_transitive_calls(output.function());
    env.emplace(output.name(), output.function());
    for (auto &[name, fn] : env) {
        if (!fn.has_update_definition() && name != output.name()) {
            // Pure: inlined, except checks of the inputs' values, which run at root on the host.
            if (has_require(fn)) Halide::Func(fn).compute_root();
            continue;
        }
        if (fn.has_extern_definition()) continue;
        Halide::Func f(fn);
        f.compute_root();
        std::vector<Halide::VarOrRVar> pure;
        for (const std::string &a : fn.args()) pure.push_back(Halide::Var(a));
        gpu_loops(f, pure, name + "_s0");
        for (int u = 0; u < int(fn.updates().size()); u++) {
            // The update's pure dimensions go parallel; its reduction variables stay serial per thread.
            std::vector<Halide::VarOrRVar> upure;
            for (const Halide::Expr &a : fn.update(u).args())
                if (const HI::Variable *v = a.as<HI::Variable>(); v && !v->reduction_domain.defined())
                    upure.push_back(Halide::Var(v->name));
            gpu_loops(f.update(u), upure, name + "_s" + std::to_string(u + 1));
        }
    }
}

}  // namespace neptune::generators
