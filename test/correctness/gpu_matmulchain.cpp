// Linear + cross-entropy compiled by Neptune's matmul-fed pattern and run on the GPU, against the
// fp64 reference (logits h * weight^T in fp64, log-sum-exp and the label's loss): tokens 1, 7, 300
// and 1000 (masked last row tiles), vocabularies 1000, 1031 and 32000 (partial column tiles),
// hidden sizes 64 to 4096 and 136 (not a multiple of the 64-column chunk: mma.sync on any GPU),
// one block per row tile and the vocabulary split over chunks, the device's path (wgmma, TMA and
// producer warps on sm_90) and sm_80's mma.sync with cp.async, f16 and bf16, ignored rows. Both
// outputs are poisoned before each run, so an unwritten row fails. Skips (77) without a GPU.
#include <doctest/doctest.h>

#include "Compare.h"
#include "neptune/GpuOperator.h"
#include "neptune/reference/Reference.h"

using namespace neptune;

namespace {

struct Case {
    int64_t tokens, vocab;
    int hidden;
    int chunks = 0;  // 0: by shape
    DType dtype = DType::F16;
    std::string arch = "";  // "": the device's
};

void run(const Case &c) {
    OperatorSpec s = *find_operator("linear_cross_entropy");
    s.dtype = c.dtype;
    s.hidden = c.hidden;
    const OperatorInstance inst = instantiate(s, c.tokens, c.vocab);
    const std::string dtype = dtype_name(c.dtype), arch = c.arch.empty() ? "device arch" : c.arch;
    INFO(c.tokens << " tokens, vocab " << c.vocab << ", hidden " << c.hidden << ", " << c.chunks << " chunks, " << dtype
                  << ", " << arch);
    GpuOptions opt;
    opt.arch = c.arch;
    opt.chunks = c.chunks;
    GpuOperator g(inst, opt);
    const std::vector<HostTensor> in = make_inputs(inst, 29);
    g.set_inputs(in);
    std::vector<HostTensor> out = g.run();
    out = g.run();  // a second launch on the same operator
    const std::vector<HostTensor> ref = reference::compute(inst, in);
    for (size_t o = 0; o < out.size(); o++) testing::check_close(inst.outputs[o].name, out[o], ref[o]);
}

}  // namespace

TEST_CASE("gpu linear + cross-entropy: odd shapes on the device's path match the fp64 reference") {
    const std::vector<Case> cases = {
        {1, 1000, 64},
        {7, 1031, 128},
        {300, 1031, 128, 3},
        {1000, 5000, 512},
        {64, 32000, 4096},
        {7, 1000, 136},
        {300, 1031, 256, 0, DType::BF16},
        {1000, 5000, 512, 1},
    };
    for (const Case &c : cases) run(c);
}

TEST_CASE("gpu linear + cross-entropy: sm_80's mma.sync path") {
    run({7, 1031, 128, 0, DType::F16, "sm_80"});
    run({300, 5000, 256, 2, DType::BF16, "sm_80"});
}
