// Every operator fused by its Neptune schedule and lowered to the CPU form, rolling and split-K,
// against the unfused algorithm (relative RMS within fp32 rounding) and the fp64 reference, on odd
// shapes with tiles that do not divide them: sequence 1, 7, 1000, 8191; batch 3; head dims 64/96/128;
// fully masked rows; rows whose maximum rises across tiles.
#include <doctest/doctest.h>

#include "SmallShapes.h"
#include "neptune/Check.h"

using namespace neptune;

namespace {

using Case = testing::ShapeCase;

void run(const OperatorSpec &op, const Case &c, const FusedVariant &v) {
    const OperatorInstance inst = instantiate(testing::shrink(op, c, 16, 4, 24, 40), c.batch, c.seq);
    CheckOptions opt;
    opt.style = c.style;
    opt.work_budget = 3e7;
    const FusedCheckResult r = check_fused_on_cpu(inst, v, opt);
    REQUIRE(r.rows_checked > 0);
    for (size_t o = 0; o < r.vs_unfused.size(); o++) {
        INFO(op.name << " B=" << c.batch << " S=" << c.seq << " D=" << c.head_dim << " seq_q=" << c.seq_q << " "
                     << v.name() << ", output " << r.vs_unfused[o].output
                     << "\n  vs unfused: " << r.vs_unfused[o].error.describe(inst.outputs[o])
                     << "\n  vs fp64:    " << r.vs_reference[o].error.describe(inst.outputs[o]) << "\n"
                     << r.plan);
        CHECK(r.vs_unfused[o].error.nonfinite == 0);
        CHECK(r.vs_unfused[o].error.rel_rms() <= fused_rel_rms_bound);
        CHECK(tolerance_for(DType::F32).accepts(r.vs_reference[o].error));
    }
}

const std::vector<FusedVariant> variants = {{false, 16, 1}, {true, 16, 3}, {false, 64, 1}};

}  // namespace

TEST_CASE("fused: attention operators, rolling and split-K, match the unfused algorithm and fp64") {
    const std::vector<Case> cases = {{1, 1},
                                     {3, 7, 64},
                                     {1, 1000, 96, DType::BF16, InputStyle::RisingScores},
                                     {2, 33, 128, DType::F16, InputStyle::Normal, 40, 5}};
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention) continue;
        for (const Case &c : cases) {
            if (op.attention.decode && c.seq_q) continue;
            for (const FusedVariant &v : variants) run(op, c, v);
        }
    }
}

TEST_CASE("fused: attention at sequence 8191 (sampled rows), rolling and split-K") {
    for (const char *name : {"prefill_causal", "decode_gqa", "prefill_windowed", "prefill_alibi", "decode_alibi"})
        for (const FusedVariant &v : {FusedVariant{false, 128, 1}, FusedVariant{true, 64, 7}})
            run(*find_operator(name), {1, 8191, 64, DType::F16, InputStyle::RisingScores}, v);
}

TEST_CASE("fused: row-wise operators and Performer match the unfused algorithm and fp64") {
    const std::vector<Case> cases = {{1, 1}, {3, 7}, {4, 1000, 128, DType::BF16}};
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family == Family::Attention) continue;
        for (const Case &c : cases)
            for (const FusedVariant &v : variants) run(op, c, v);
    }
}
