// LayerNorm (x [rows, cols], gamma and beta [cols]) and RMSNorm (x, gamma) over the last axis, y in
// x's type; the _matmul variants multiply the normalised rows by w [cols, N]. LayerNorm fuses the
// sum of squared deviations with the mean (a multi-moment repair), RMSNorm factors 1/rms past the
// matmul (docs/design/fusion.md, factoring out).
#include "RowwiseGenerator.h"

namespace neptune::generators {

class Norm : public RowwiseGenerator<Norm> {
public:
    GeneratorParam<Family> variant{"variant",
                                   Family::LayerNorm,
                                   {{"layernorm", Family::LayerNorm},
                                    {"rmsnorm", Family::RmsNorm},
                                    {"layernorm_matmul", Family::LayerNormMatmul},
                                    {"rmsnorm_matmul", Family::RmsNormMatmul}}};
    GeneratorParam<float> eps{"eps", 1e-5f};

    OperatorSpec spec() {
        OperatorSpec s = base_spec(variant);
        s.eps = eps;
        return s;
    }
};

}  // namespace neptune::generators

HALIDE_REGISTER_GENERATOR(neptune::generators::Norm, norm)
