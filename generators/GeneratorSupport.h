#ifndef NEPTUNE_GENERATORS_GENERATOR_SUPPORT_H
#define NEPTUNE_GENERATORS_GENERATOR_SUPPORT_H
/** \file
 * What Neptune's generators share: the element-type and backend parameters, inputs and outputs
 * declared from an operator's tensors (neptune/Operators.h), and the ways an operator is compiled
 * into the library:
 *   gpu          Neptune's kernels as extern stages (neptune/GpuPipeline.h);
 *   host         the fused CPU form for the host (checkable on any machine);
 *   unfused      attention: the plain algorithm, no directive, on Halide's CUDA backend (every
 *                reduction its own kernels, the scores materialised): the "no fusion" ablation;
 *   halide_cuda  row-wise families: the fused CPU form on Halide's CUDA backend, one thread per row:
 *                the ablation of Neptune's kernels (and Performer's GPU form, which they do not lower).
 * No I/O, references or benchmarks here (docs/design/style.md, generators and apps). */
#include <string>
#include <vector>

#include "Halide.h"
#include "neptune/GpuPipeline.h"
#include "neptune/Error.h"
#include "neptune/Operators.h"

namespace neptune::generators {

enum class Backend { Gpu, Host, Unfused, HalideCuda };

inline const std::map<std::string, Backend> &backend_names() {
    static const std::map<std::string, Backend> m = {{"gpu", Backend::Gpu},
                                                     {"host", Backend::Host},
                                                     {"unfused", Backend::Unfused},
                                                     {"halide_cuda", Backend::HalideCuda}};
    return m;
}

/** f16 or bf16 from a Halide::Type GeneratorParam; throws CompileError otherwise. */
DType element_type(const Halide::Type &t, const std::string &generator);

/** Inputs and outputs of `spec` for Generator::configure(): names, types and dimensions of
 * instantiate(spec).inputs and .outputs (dimensions reversed into Halide's innermost-first order). */
struct Signature {
    std::vector<Halide::GeneratorInput<Halide::Buffer<>> *> inputs;
    std::vector<Halide::GeneratorOutput<Halide::Buffer<>> *> outputs;
};

/** Declares the signature; call it from the Generator's configure(). */
Signature declare_signature(Halide::Internal::GeneratorBase &generator, const OperatorSpec &spec);

/** Throws CompileError naming `generator` unless `target` can run `backend` (gpu, unfused: CUDA). */
void require_cuda_target(const Halide::Target &target, const std::string &generator, const char *backend = "gpu");

/** The parameters every Neptune generator has, and its signature. */
template <typename G>
class NeptuneGenerator : public Halide::Generator<G> {
public:
    template <typename T>
    using GeneratorParam = Halide::GeneratorParam<T>;

    GeneratorParam<Backend> backend{"backend", Backend::Gpu, backend_names()};
    GeneratorParam<Halide::Type> dtype{"dtype", Halide::Float(16)};

protected:
    /** Throws CompileError unless the target can run this backend (gpu or unfused: CUDA). */
    void require_cuda() {
        require_cuda_target(this->get_target(), this->name(),
                            backend == Backend::Unfused      ? "unfused"
                            : backend == Backend::HalideCuda ? "halide_cuda"
                                                             : "gpu");
    }
    Signature sig_;
};

/** `outputs`, which read a fused group (fuse_reduction applied), compiled for `backend`: host, the
 * group's fused CPU form (lower_to_cpu; schedule them with schedule_host); gpu, Neptune's kernels as
 * extern stages of the pipeline (one kernel writing every output) (extern_stages with `options`, its user_context from the target).
 * Throws CompileError naming `generator` for gpu without a CUDA target, and for unfused (which
 * only the attention generators offer: they skip the directive). Call it from generate():
 * the stage replaces the output Func, which Halide allows only while outputs are being defined. */
std::vector<Halide::Func> lower_fused(const std::vector<Halide::Func> &outputs, Backend backend,
                                      const Halide::Target &target, ExternOptions options,
                                      const std::string &generator);
/** The same for a group with one output. */
Halide::Func lower_fused(const Halide::Func &output, Backend backend, const Halide::Target &target,
                         ExternOptions options, const std::string &generator);

/** What attention's buffers must agree on, checked by the library on every call before any work
 * (Generator::add_requirement: halide_error_code_requirement_failed and a message): q and k share
 * the head dim, v has k's keys and heads, q, k and v share the batch, and k's heads divide q's.
 * Halide's bounds checks catch buffers too small; these catch the rest, which would otherwise be
 * read in part (a k with more heads than q, or a longer head dim) and give a wrong answer.
 * `In` is a generator input of 4-D buffers, q(d, i, h, b) and k, v(d, j, hkv, b). */
template <typename In>
void require_attention_shapes(Halide::Internal::GeneratorBase &g, const In &q, const In &k, const In &v) {
    const Halide::Expr hq = q.dim(2).extent(), hkv = k.dim(2).extent();
    g.add_requirement(hkv > 0 && hq % hkv == 0, "q's heads must be a multiple of k's; q has", hq, "and k", hkv);
    g.add_requirement(k.dim(0).extent() == q.dim(0).extent(), "k's head dim must be q's; q has", q.dim(0).extent(),
                      "and k", k.dim(0).extent());
    g.add_requirement(v.dim(1).extent() == k.dim(1).extent() && v.dim(2).extent() == hkv,
                      "v must have k's keys and heads; k has", k.dim(1).extent(), "keys and", hkv, "heads, v",
                      v.dim(1).extent(), "and", v.dim(2).extent());
    g.add_requirement(k.dim(3).extent() == q.dim(3).extent() && v.dim(3).extent() == q.dim(3).extent(),
                      "q, k and v must have one batch; q has", q.dim(3).extent(), ", k", k.dim(3).extent(), ", v",
                      v.dim(3).extent());
}

/** The inputs as Funcs, and their extents, for algorithms::build_from. */
std::vector<Halide::Func> input_funcs(const Signature &s);
Halide::Expr input_extent(const Signature &s, size_t input, int dim);

/** Schedules the fused CPU form (lower_to_cpu's result) for the host: reductions at root, the
 * output's outermost dimension in parallel. */
void schedule_host(const Halide::Func &output);

/** A pure Func computed at root over GPU blocks and threads: 1-D in 64-thread blocks, 2-D (and
 * more) in 16 x 16 tiles of its two innermost dimensions, the outer ones fused into blocks. */
void schedule_gpu_pointwise(Halide::Func f);

/** Schedules the fused CPU form for Halide's CUDA backend: every reduction at root with its pure
 * dimensions over GPU blocks and threads (the carried loop over tiles runs in each thread), pure
 * Funcs inlined, the output tiled over blocks and threads. */
void schedule_cuda(const Halide::Func &output);

}  // namespace neptune::generators

#endif
