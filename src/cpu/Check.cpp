#include "neptune/Check.h"

#include <algorithm>

#include "neptune/HalideCpu.h"
#include "neptune/Directives.h"
#include "neptune/algorithms/Algorithms.h"
#include "neptune/algorithms/Schedules.h"
#include "neptune/reference/Reference.h"

namespace neptune {

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
