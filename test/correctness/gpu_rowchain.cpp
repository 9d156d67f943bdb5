// Every row-wise operator (softmax, log-sum-exp, cross-entropy, LayerNorm, RMSNorm) compiled by
// Neptune's row-chain pattern and run on the GPU, against the fp64 reference: rows of 1 and odd
// lengths (unaligned rows: scalar edges), a warp per row, a block per row, a cluster of blocks per
// row on sm_90a (rows of 100003 to 262144 columns), the chunked form for 131072 columns on sm_80,
// f16 and bf16 inputs, cross-entropy's ignored rows. Outputs are poisoned before each run, so an
// unwritten element fails. Skips (77) without a GPU.
#include <doctest/doctest.h>

#include <algorithm>

#include "Compare.h"
#include "neptune/GpuOperator.h"
#include "neptune/reference/Reference.h"

using namespace neptune;

namespace {

struct Case {
    int64_t rows, cols;
    DType dtype = DType::F16;
    std::string arch = "";  // "": the device's
};

void run(const OperatorSpec &op, const Case &c) {
    OperatorSpec s = op;
    s.dtype = c.dtype;
    const OperatorInstance inst = instantiate(s, c.rows, c.cols);
    INFO(op.name << " " << c.rows << "x" << c.cols << " " << dtype_name(c.dtype) << " "
                 << (c.arch.empty() ? "device arch" : c.arch));
    GpuOptions opt;
    opt.arch = c.arch;
    GpuOperator g(inst, opt);
    const std::vector<HostTensor> in = make_inputs(inst, 23);
    g.set_inputs(in);
    std::vector<HostTensor> out = g.run();
    out = g.run();  // a second launch on the same operator
    // Every row against the reference (the shapes are small enough), within the output type's tolerance
    // or the rounding of the exact answer to it (testing::with_rounding).
    const std::vector<HostTensor> ref = reference::compute(inst, in);
    for (size_t o = 0; o < out.size(); o++) {
        const Tolerance tol = testing::with_rounding(ref[o], tolerance_for(ref[o].desc.dtype));
        testing::check_close(inst.outputs[o].name, out[o], ref[o], tol);
    }
}

}  // namespace

TEST_CASE("gpu row chains: every row-wise operator at odd shapes matches the fp64 reference") {
    const std::vector<Case> cases = {
        {1, 1},
        {7, 7},
        {1000, 1000},
        {3, 8191},
        {5, 4096, DType::BF16},
        {2, 32768},
        {3, 131072},
        {2, 100003},
        {2, 262144, DType::BF16},
        {2, 20000, DType::BF16},
        {3, 131072, DType::F16, "sm_80"},
        {9, 1000, DType::F16, "sm_80"},
        {4, 2050, DType::BF16, "sm_80"},
    };
    for (const char *name : {"softmax", "logsumexp", "cross_entropy", "layernorm", "rmsnorm"})
        for (const Case &c : cases) run(*find_operator(name), c);
}
