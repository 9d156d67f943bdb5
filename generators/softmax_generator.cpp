// Softmax over the last axis of x [rows, cols] (y in x's type), with the row max and the sum of
// exponentials fused (the sum's repair exp(m - m') derived by Neptune). Rows and columns are
// run-time extents. backend=gpu: Halide's CUDA backend runs the fused CPU form.
#include "RowwiseGenerator.h"

namespace neptune::generators {

class Softmax : public RowwiseGenerator<Softmax> {
public:
    OperatorSpec spec() { return base_spec(Family::Softmax); }
};

}  // namespace neptune::generators

HALIDE_REGISTER_GENERATOR(neptune::generators::Softmax, softmax)
