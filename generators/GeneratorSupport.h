#ifndef NEPTUNE_GENERATORS_GENERATOR_SUPPORT_H
#define NEPTUNE_GENERATORS_GENERATOR_SUPPORT_H
/** \file
 * What Neptune's generators share: the element-type and backend parameters, inputs and outputs
 * declared from an operator's tensors (neptune/Operators.h), and the three ways a fused group is
 * compiled into the library:
 *   gpu   attention: Neptune's kernels as an extern stage (neptune/Compile.h);
 *         other families: the fused CPU form scheduled for Halide's CUDA backend;
 *   host  the fused CPU form for the host (checkable on any machine).
 * No I/O, references or benchmarks here (STYLE.md §2.11). */
#include <string>
#include <vector>

#include "Halide.h"
#include "neptune/Error.h"
#include "neptune/Operators.h"

namespace neptune::generators {

enum class Backend { Gpu, Host };

inline const std::map<std::string, Backend> &backend_names() {
    static const std::map<std::string, Backend> m = {{"gpu", Backend::Gpu}, {"host", Backend::Host}};
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

/** The parameters every Neptune generator has, and its signature. */
template <typename G>
class NeptuneGenerator : public Halide::Generator<G> {
public:
    template <typename T>
    using GeneratorParam = Halide::GeneratorParam<T>;

    GeneratorParam<Backend> backend{"backend", Backend::Gpu, backend_names()};
    GeneratorParam<Halide::Type> dtype{"dtype", Halide::Float(16)};

protected:
    /** Throws CompileError unless the target can run backend=gpu. */
    void require_cuda() {
        if (!this->get_target().has_feature(Halide::Target::CUDA))
            throw CompileError(this->name() + ": backend=gpu needs a CUDA target (e.g. ...-cuda-cuda_capability_86)");
    }
    Signature sig_;
};

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
