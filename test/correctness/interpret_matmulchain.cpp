// Linear + cross-entropy through the matmul-fed pattern, executed by the tile-IR interpreter on the
// CPU, against the fp64 reference (the logits h * weight^T computed in fp64, then log-sum-exp and
// the label's loss): tokens 1, 7 and 300 (a masked last row tile), vocabularies 1, 7, 1000 and 1031
// (partial column tiles), hidden sizes that are and are not multiples of the 64-column chunk, one
// block per row tile and the vocabulary split over chunks, mma.sync (sm_80) and wgmma with TMA and
// producer warps (sm_90a), f16 and bf16, ignored rows, and an out-of-range label.
#include <doctest/doctest.h>

#include <cmath>

#include "Compare.h"
#include "lower/Patterns.h"
#include "neptune/HostTensor.h"
#include "neptune/algorithms/Schedules.h"
#include "neptune/reference/Reference.h"
#include "suite/LowerOperator.h"
#include "tir/Interpreter.h"

using namespace neptune;

namespace {

struct Case {
    int64_t tokens, vocab;
    int hidden;
    GpuArch arch = GpuArch::Sm80;
    int chunks = 1;  // the vocabulary split over this many blocks per row tile
    DType dtype = DType::F16;
};

OperatorInstance instance(const Case &c) {
    OperatorSpec spec = *find_operator("linear_cross_entropy");
    spec.hidden = c.hidden;
    spec.dtype = c.dtype;
    return instantiate(spec, c.tokens, c.vocab);
}

std::vector<HostTensor> interpret(const OperatorInstance &inst, const Case &c, std::vector<HostTensor> &in) {
    internal::LoweringChoices choices;
    choices.arch = c.arch;
    choices.vocab_chunks = c.chunks;
    const internal::OperatorLowering l = internal::lower_operator(inst, choices);
    REQUIRE(l.program.kernels.size() == (c.chunks > 1 ? 2u : 1u));
    std::vector<HostTensor> out = make_outputs(inst);
    for (HostTensor &t : out) std::fill(t.values.begin(), t.values.end(), NAN);  // unwritten elements fail
    std::vector<HostTensor> ws;
    for (const tir::Workspace &w : l.program.workspaces) {
        int64_t n = 1;
        for (const auto &[k, v] : l.ints) n = k == "chunks" ? v : n;
        ws.emplace_back(TensorDesc{w.name, DType::F32, {n * c.tokens}});
    }
    tir::LaunchArgs args;
    for (HostTensor &t : in) args.tensors[t.desc.name] = &t;
    for (HostTensor &t : out) args.tensors[t.desc.name] = &t;
    for (HostTensor &t : ws) args.tensors[t.desc.name] = &t;
    args.ints = l.ints;
    tir::interpret(l.program, args);
    return out;
}

void run(const Case &c) {
    const OperatorInstance inst = instance(c);
    const std::string arch = arch_name(c.arch), dtype = dtype_name(c.dtype);
    INFO(c.tokens << " tokens, vocab " << c.vocab << ", hidden " << c.hidden << ", " << arch << ", " << c.chunks
                  << " chunks, " << dtype);
    std::vector<HostTensor> in = make_inputs(inst, 11);
    const std::vector<HostTensor> out = interpret(inst, c, in);
    const std::vector<HostTensor> ref = reference::compute(inst, in);
    for (size_t o = 0; o < out.size(); o++) {
        const TensorDesc &d = inst.outputs[o];
        const ErrorStats e = compare(out[o].values, ref[o].values);
        INFO(d.name << ": " << e.describe(d));
        CHECK(tolerance_for(d.dtype).accepts(e));
    }
}

}  // namespace

TEST_CASE("interpret linear + cross-entropy: odd shapes, one block per row tile") {
    for (const Case &c : std::vector<Case>{{1, 1, 64}, {7, 7, 72}, {7, 1000, 64}, {300, 1031, 136}, {5, 300, 64}})
        run(c);
    run({7, 1000, 128, GpuArch::Sm80, 1, DType::BF16});
}

TEST_CASE("interpret linear + cross-entropy: the vocabulary split over chunks") {
    run({7, 1000, 64, GpuArch::Sm80, 3});
    run({300, 1031, 72, GpuArch::Sm80, 8});  // more chunks than some rows' tiles: empty chunks combine as identities
    run({1, 300, 64, GpuArch::Sm80, 2});
}

TEST_CASE("interpret linear + cross-entropy: wgmma, TMA and producer warps (sm_90a)") {
    run({7, 1000, 128, GpuArch::Sm90a});
    run({200, 1031, 64, GpuArch::Sm90a, 4, DType::BF16});
    run({7, 1000, 72, GpuArch::Sm90a, 2});  // not a multiple of 64: mma.sync with cp.async on sm_90a
}

TEST_CASE("linear + cross-entropy: the matmul-fed pattern matches, the logits are never stored") {
    const OperatorInstance inst = instance({8, 256, 64});
    const algorithms::OperatorFuncs funcs = algorithms::build(inst.spec);
    const auto groups = algorithms::fuse_operator(inst.spec, funcs, algorithms::FusionChoice{});
    const internal::PatternMatch m = internal::match_pattern(groups.at(0).plan(), funcs.outputs);
    REQUIRE(m);
    CHECK(m.kind == internal::PatternKind::MatmulChain);
    const internal::OperatorLowering l = internal::lower_operator(inst);
    for (const tir::Kernel &k : l.program.kernels)
        for (const tir::TensorParam &t : k.tensors)
            if (t.output) CHECK((t.name == "loss" || t.name == "lse" || t.name.rfind("ws_", 0) == 0));
}

TEST_CASE("interpret linear + cross-entropy: ignored rows lose 0, an out-of-range label gives NaN") {
    const Case c{9, 100, 64};
    const OperatorInstance inst = instance(c);
    std::vector<HostTensor> in = make_inputs(inst, 3);
    HostTensor &labels = in.at(2);
    REQUIRE(labels.desc.name == "labels");
    labels.values[0] = 100;  // one past the vocabulary
    labels.values[1] = kIgnoreIndex;
    labels.values[2] = 99;
    const std::vector<HostTensor> out = interpret(inst, c, in);
    CHECK(std::isnan(out[0].values[0]));
    CHECK(out[0].values[1] == 0.0);
    CHECK(std::isfinite(out[0].values[2]));
    CHECK(std::isfinite(out[1].values[1]));  // an ignored row still has its log-sum-exp
}
