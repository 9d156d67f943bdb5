#ifndef NEPTUNE_GENERATORS_ROWWISE_GENERATOR_H
#define NEPTUNE_GENERATORS_ROWWISE_GENERATOR_H
/** \file
 * The generator of a row-wise family (softmax, log-sum-exp and cross-entropy, LayerNorm and RMSNorm,
 * Performer): generate() defines the plain algorithm and applies the family's Neptune schedule
 * (fuse_reduction with the rolling or split-K update). backend=gpu: the fused group becomes an extern
 * stage running Neptune's row-chain kernels (every output of the group written by one kernel);
 * backend=halide_cuda: the group's fused CPU form (lower_to_cpu) scheduled on Halide's CUDA backend,
 * one thread per row, the benchmark's ablation baseline; backend=host: that form on the host.
 * A family G supplies `OperatorSpec spec()` from its own parameters. */
#include "GeneratorSupport.h"
#include "neptune/Directives.h"
#include "neptune/Error.h"
#include "neptune/algorithms/Algorithms.h"
#include "neptune/algorithms/Schedules.h"

namespace neptune::generators {

template <typename G>
class RowwiseGenerator : public NeptuneGenerator<G> {
public:
    using NeptuneGenerator<G>::backend;
    using NeptuneGenerator<G>::dtype;
    template <typename T>
    using GeneratorParam = Halide::GeneratorParam<T>;

    /** Positions per tile of the fused reduction; chunks > 0 selects the split-K update. */
    GeneratorParam<int> tile{"tile", 64};
    GeneratorParam<int> chunks{"chunks", 0};

    void configure() { this->sig_ = declare_signature(*this, self().spec()); }

    void generate() {
        spec_ = self().spec();
        const Signature &sig = this->sig_;
        funcs_ =
            algorithms::build_from(spec_, input_funcs(sig), [&](size_t i, int d) { return input_extent(sig, i, d); });
        std::vector<Halide::Func> outputs = funcs_.outputs;
        if (backend == Backend::Gpu) {
            // The extern stages replace the outputs, which Halide allows only while they are defined.
            this->require_cuda();
            algorithms::fuse_operator(spec_, funcs_, choice());
            ExternOptions o;
            o.user_context = this->get_target().has_feature(Halide::Target::UserContext);
            outputs = extern_stages(funcs_.outputs, o);
        }
        for (size_t o = 0; o < outputs.size(); o++) *sig.outputs[o] = outputs[o];
    }

    void schedule() {
        if (backend == Backend::Gpu) return;  // the extern stages are scheduled already
        if (backend == Backend::Unfused)
            throw CompileError(this->name() +
                               ": backend=unfused is offered by the attention generators; the row-wise ones offer "
                               "gpu, halide_cuda and host");
        algorithms::fuse_operator(spec_, funcs_, choice());
        const std::vector<Halide::Func> fused = lower_to_cpu(funcs_.outputs);
        for (size_t o = 0; o < fused.size(); o++) {
            if (fused[o].name() != funcs_.outputs[o].name())
                throw InternalError(this->name() + ": an output is itself a fused stage");
            if (backend == Backend::Host) {
                schedule_host(fused[o]);
            } else {
                this->require_cuda();
                schedule_cuda(fused[o]);
            }
        }
    }

protected:
    /** The spec's common part: the element type; a family sets name, family and the rest. */
    OperatorSpec base_spec(Family f) {
        OperatorSpec s;
        s.name = this->name();
        s.family = f;
        s.dtype = element_type(dtype, this->name());
        return s;
    }

private:
    G &self() { return *static_cast<G *>(this); }
    algorithms::FusionChoice choice() const {
        algorithms::FusionChoice c;
        c.variant = chunks > 0 ? algorithms::FusionVariant::SplitK : algorithms::FusionVariant::Rolling;
        c.tile = tile;
        c.chunks = std::max(int(chunks), 1);
        return c;
    }
    OperatorSpec spec_;
    algorithms::OperatorFuncs funcs_;
};

}  // namespace neptune::generators

#endif
