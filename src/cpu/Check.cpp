#include "neptune/Check.h"

#include <algorithm>

#include "neptune/HalideCpu.h"
#include "neptune/Directives.h"
#include "neptune/algorithms/Algorithms.h"
#include "neptune/algorithms/Schedules.h"
#include "neptune/reference/Reference.h"

namespace neptune {

std::vector<RowRun> choose_rows(const OperatorInstance &inst, double work_budget) {
    const double per_row = std::max(1.0, operator_flops(inst) / double(inst.rows));
    const double per_row_ref =  // the reference also does the work a fused kernel skips (masked keys)
        inst.spec.family == Family::Attention ? 2.0 * double(inst.input("k").shape[2]) *
                                                    (inst.spec.attention.head_dim_qk + inst.spec.attention.head_dim_v)
                                              : per_row;
    const int64_t budget_rows = std::max<int64_t>(16, int64_t(work_budget / per_row_ref));
    const int64_t blocks = inst.rows / inst.row_block;
    if (budget_rows >= inst.rows) {
        std::vector<RowRun> all;
        for (int64_t b = 0; b < blocks; b++) all.push_back({b * inst.row_block, inst.row_block});
        return all;
    }
    // Runs of `run` rows at `places` positions in each of `nblocks` evenly spaced row blocks.
    const int64_t run = std::max<int64_t>(1, std::min(inst.row_block, budget_rows / 12));
    const int64_t places = inst.row_block > run ? std::min<int64_t>(4, inst.row_block / run) : 1;
    const int64_t nblocks = std::min(blocks, std::max<int64_t>(1, budget_rows / (run * places)));
    std::vector<RowRun> runs;
    for (int64_t k = 0; k < nblocks; k++) {
        const int64_t blk = nblocks == 1 ? 0 : (blocks - 1) * k / (nblocks - 1);
        for (int64_t p = 0; p < places; p++) {
            const int64_t start = places == 1 ? 0 : (inst.row_block - run) * p / (places - 1);
            const RowRun r{blk * inst.row_block + start, run};
            if (runs.empty() || runs.back().first + runs.back().second <= r.first) runs.push_back(r);
        }
    }
    return runs;
}

std::vector<OutputCheck> compare_rows(const OperatorInstance &inst, const std::vector<RowRun> &runs,
                                      const std::vector<HostTensor> &actual, const std::vector<HostTensor> &expected) {
    std::vector<OutputCheck> out;
    for (size_t o = 0; o < inst.outputs.size(); o++) {
        const int64_t inner = inst.outputs[o].numel() / inst.rows;
        ErrorStats total;
        for (const RowRun &r : runs)
            total = merge(total, compare(actual[o].values, expected[o].values, r.first * inner,
                                         (r.first + r.second) * inner));
        out.push_back({inst.outputs[o].name, total});
    }
    return out;
}

std::string FusedVariant::name() const {
    return split_k ? "split-K, " + std::to_string(chunks) + " chunks, tile " + std::to_string(tile)
                   : "rolling, tile " + std::to_string(tile);
}

FusedCheckResult check_fused_on_cpu(const OperatorInstance &given, const FusedVariant &variant,
                                    const CheckOptions &options) {
    OperatorSpec spec = given.spec;
    spec.f32_outputs = true;
    const OperatorInstance inst = instantiate(spec, given.batch, given.seq);
    FusedCheckResult result;
    result.runs = choose_rows(inst, options.work_budget);
    const std::vector<HostTensor> inputs = make_inputs(inst, options.seed, options.style);

    algorithms::OperatorFuncs plain = algorithms::build(spec), fused = algorithms::build(spec);
    algorithms::FusionChoice choice;
    choice.variant = variant.split_k ? algorithms::FusionVariant::SplitK : algorithms::FusionVariant::Rolling;
    choice.tile = variant.tile;
    choice.chunks = variant.chunks;
    for (const FusedReduction &g : algorithms::fuse_operator(spec, fused, choice)) result.plan += g.describe();
    const std::vector<Halide::Func> lowered = lower_to_cpu(fused.outputs);

    HalideCpuRunner plain_runner(inst, plain.inputs, plain.outputs), fused_runner(inst, fused.inputs, lowered);
    plain_runner.set_inputs(inputs);
    fused_runner.set_inputs(inputs);
    std::vector<HostTensor> a = make_outputs(inst), f = make_outputs(inst), ref = make_outputs(inst);
    for (const RowRun &r : result.runs) {
        plain_runner.run_rows(a, r.first, r.second);
        fused_runner.run_rows(f, r.first, r.second);
        reference::compute_rows(inst, inputs, ref, r.first, r.second);
        result.rows_checked += r.second;
    }
    result.vs_reference = compare_rows(inst, result.runs, f, ref);
    result.unfused_vs_reference = compare_rows(inst, result.runs, a, ref);
    result.vs_unfused = compare_rows(inst, result.runs, f, a);
    return result;
}

CheckResult check_algorithm_on_cpu(const OperatorInstance &inst, const CheckOptions &options) {
    CheckResult result;
    result.runs = choose_rows(inst, options.work_budget);
    const std::vector<HostTensor> inputs = make_inputs(inst, options.seed, options.style);

    algorithms::OperatorFuncs funcs = algorithms::build(inst.spec);
    HalideCpuRunner runner(inst, funcs.inputs, funcs.outputs);
    runner.set_inputs(inputs);
    std::vector<HostTensor> actual = make_outputs(inst), expected = make_outputs(inst);
    for (const RowRun &r : result.runs) {
        runner.run_rows(actual, r.first, r.second);
        reference::compute_rows(inst, inputs, expected, r.first, r.second);
        result.rows_checked += r.second;
    }
    result.outputs = compare_rows(inst, result.runs, actual, expected);
    return result;
}

}  // namespace neptune
