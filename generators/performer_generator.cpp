// Performer (FAVOR+) linear attention: q, k, v [B, H, S, D] and random features [F, D] (f32) to
// out [B, H, S, Dv], with stabilised features; two fused groups (the key statistics over keys, the
// numerator and denominator over features). All extents are run-time.
#include "RowwiseGenerator.h"

namespace neptune::generators {

class Performer : public RowwiseGenerator<Performer> {
public:
    OperatorSpec spec() { return base_spec(Family::Performer); }
};

}  // namespace neptune::generators

HALIDE_REGISTER_GENERATOR(neptune::generators::Performer, performer)
