// Every operator fused by its Neptune schedule and lowered to the CPU form, rolling and split-K,
// against the unfused algorithm (relative RMS within fp32 rounding) and the fp64 reference, on odd
// shapes with tiles that do not divide them: sequence 1, 7, 1000, 8191; batch 3; head dims 64/96/128;
// fully masked rows; rows whose maximum rises across tiles.
#include <doctest/doctest.h>

#include "neptune/Check.h"

using namespace neptune;

namespace {

struct Case {
    int64_t batch, seq;
    int head_dim = 128;
    DType dtype = DType::F16;
    InputStyle style = InputStyle::Normal;
    int64_t seq_q = 0;
    int window = 0;
};

OperatorSpec scaled(const OperatorSpec &op, const Case &c) {
    OperatorSpec s = op;
    s.dtype = c.dtype;
    AttentionSpec &a = s.attention;
    const int group = a.q_heads / a.kv_heads;
    a.kv_heads = std::max(1, a.kv_heads / 16);
    a.q_heads = a.kv_heads * std::min(group, 4);
    a.head_dim_qk = c.head_dim;
    a.head_dim_v = c.head_dim == 96 ? 64 : c.head_dim;
    a.seq_q = c.seq_q;
    if (c.window) a.window = c.window;
    s.features = 24;
    s.matmul_n = 40;
    return s;
}

void run(const OperatorSpec &op, const Case &c, const FusedVariant &v) {
    const OperatorInstance inst = instantiate(scaled(op, c), c.batch, c.seq);
    CheckOptions opt;
    opt.style = c.style;
    opt.work_budget = 3e7;
    const FusedCheckResult r = check_fused_on_cpu(inst, v, opt);
    REQUIRE(r.rows_checked > 0);
    for (size_t o = 0; o < r.vs_unfused.size(); o++) {
        INFO(op.name << " B=" << c.batch << " S=" << c.seq << " D=" << c.head_dim << " seq_q=" << c.seq_q << " "
                     << v.name() << ", output " << r.vs_unfused[o].output << "\n  vs unfused: "
                     << r.vs_unfused[o].error.describe(inst.outputs[o]) << "\n  vs fp64:    "
                     << r.vs_reference[o].error.describe(inst.outputs[o]) << "\n" << r.plan);
        CHECK(r.vs_unfused[o].error.nonfinite == 0);
        CHECK(r.vs_unfused[o].error.rel_rms() <= fused_rel_rms_bound);
        CHECK(tolerance_for(DType::F32).accepts(r.vs_reference[o].error));
    }
}

const std::vector<FusedVariant> variants = {{false, 16, 1}, {true, 16, 3}, {false, 64, 1}};

}  // namespace

TEST_CASE("fused: attention operators, rolling and split-K, match the unfused algorithm and fp64") {
    const std::vector<Case> cases = {{1, 1}, {3, 7, 64}, {1, 1000, 96, DType::BF16, InputStyle::RisingScores},
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
