#ifndef NEPTUNE_GENERATORS_ROWWISE_GENERATOR_H
#define NEPTUNE_GENERATORS_ROWWISE_GENERATOR_H
/** \file
 * The generator of a family whose fused groups the tile backend does not lower (softmax, log-sum-exp
 * and cross-entropy, LayerNorm and RMSNorm, Performer): generate() defines the plain algorithm;
 * schedule() applies the family's Neptune schedule (fuse_reduction with the rolling or split-K
 * update), rewrites the groups into their fused CPU form (lower_to_cpu, in place, as schedules do),
 * and schedules that form for Halide's CUDA backend (backend=gpu) or the host (backend=host).
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
        for (size_t o = 0; o < funcs_.outputs.size(); o++) *sig.outputs[o] = funcs_.outputs[o];
    }

    void schedule() {
        algorithms::FusionChoice choice;
        choice.variant = chunks > 0 ? algorithms::FusionVariant::SplitK : algorithms::FusionVariant::Rolling;
        choice.tile = tile;
        choice.chunks = std::max(int(chunks), 1);
        algorithms::fuse_operator(spec_, funcs_, choice);
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
    OperatorSpec spec_;
    algorithms::OperatorFuncs funcs_;
};

}  // namespace neptune::generators

#endif
