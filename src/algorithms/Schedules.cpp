#include "neptune/algorithms/Schedules.h"

namespace neptune::algorithms {

namespace {

FusedReduction with_variant(FusedReduction f, const FusionChoice &c) {
    if (c.variant == FusionVariant::Rolling) return f.rolling_update(c.tile);
    return f.split_k_update(c.chunks, c.tile);
}

}  // namespace

std::vector<FusedReduction> fuse_operator(const OperatorSpec &spec, const OperatorFuncs &f, const FusionChoice &c) {
    std::vector<FusedReduction> groups;
    auto group = [&](std::vector<std::string> targets, const std::string &rdom) {
        std::vector<Halide::Func> ts;
        for (const std::string &t : targets) ts.push_back(f.stage(t));
        groups.push_back(with_variant(fuse_reduction(ts, Halide::RVar(f.rdoms.at(rdom).x)), c));
    };
    switch (spec.family) {
    case Family::Attention:
        if (spec.row_stats == RowStats::All) {
            group({"acc", "row_sum", "ent_num", "max_prob_acc"}, "kv");
        } else {
            group({"acc", "row_sum"}, "kv");
        }
        break;
    case Family::Softmax:
    case Family::LogSumExp:
    case Family::CrossEntropy: group({"row_sum"}, "rc"); break;
    case Family::LayerNorm: group({"m2"}, "rc"); break;
    case Family::LayerNormMatmul: group({"m2", "matmul"}, "rc"); break;
    case Family::RmsNorm: group({"sum_sq"}, "rc"); break;
    case Family::RmsNormMatmul: group({"matmul"}, "rc"); break;
    case Family::LinearCrossEntropy: group({"row_sum"}, "rv"); break;
    case Family::Performer:
        group({"kv_sum", "k_sum"}, "kv");
        group({"num", "den"}, "rf");
        break;
    }
    return groups;
}

}  // namespace neptune::algorithms
