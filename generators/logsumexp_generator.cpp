// Log-sum-exp over the last axis of x [rows, cols] (variant=lse, f32 output lse [rows]) and the
// cross-entropy of logits x with int32 labels [rows] (variant=cross_entropy, f32 loss [rows]; a
// label outside [0, cols) is a run-time error). The row max and the sum of exponentials are fused.
#include "RowwiseGenerator.h"

namespace neptune::generators {

class LogSumExp : public RowwiseGenerator<LogSumExp> {
public:
    GeneratorParam<Family> variant{
        "variant", Family::LogSumExp, {{"lse", Family::LogSumExp}, {"cross_entropy", Family::CrossEntropy}}};

    OperatorSpec spec() { return base_spec(variant); }
};

}  // namespace neptune::generators

HALIDE_REGISTER_GENERATOR(neptune::generators::LogSumExp, logsumexp)
