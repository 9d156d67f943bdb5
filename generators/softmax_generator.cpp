// Softmax over the last axis of x [rows, cols] (y in x's type), with the row max and the sum of
// exponentials fused (the sum's repair exp(m - m') derived by Neptune). Rows and columns are
// run-time extents. with_lse=true: the row's log-sum-exp too (f32), written by the same kernel.
#include "RowwiseGenerator.h"

namespace neptune::generators {

class Softmax : public RowwiseGenerator<Softmax> {
public:
    GeneratorParam<bool> with_lse{"with_lse", false};

    OperatorSpec spec() {
        OperatorSpec s = base_spec(Family::Softmax);
        s.row_stats = with_lse ? RowStats::Lse : RowStats::None;
        return s;
    }
};

}  // namespace neptune::generators

HALIDE_REGISTER_GENERATOR(neptune::generators::Softmax, softmax)
