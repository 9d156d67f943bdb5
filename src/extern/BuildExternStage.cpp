#include "extern/BuildExternStage.h"

#include "extern/StageParts.h"
#include "lower/Lower.h"
#include "lower/Patterns.h"
#include "neptune/Error.h"

namespace neptune::internal {

std::string describe_group(const FusedGroup &g, const Halide::Func &output) {
    return g.plan.directive + " (extern stage " + stage_name(output) + ")";
}

void refuse_unlowerable(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const std::string &where) {
    const std::string refusal = lowering_refusal(plan, outputs);
    if (!refusal.empty())
        throw CompileError(where + ": " + refusal +
                           ". Run it through lower_to_cpu and Halide's own schedules instead (generators/README.md)");
}

BuiltStages build_extern_stages(const FusedGroup &g, const std::vector<Halide::Func> &outputs,
                                const ExternOptions &opt) {
    for (const Halide::Func &o : outputs)
        if (o.function().outputs() != 1)
            throw CompileError(describe_group(g, o) + ": the output must be a single-valued Func");
    IsolatedGroup iso = isolate_group(g, outputs, opt.extents);
    const std::string where = describe_group(g, outputs.at(0));
    refuse_unlowerable(iso.group.plan, iso.outputs, where);
    const PatternKind kind = match_pattern(iso.group.plan, iso.outputs).kind;
    if (kind == PatternKind::MatmulChain)
        throw CompileError(where +
                           ": a chain over a matrix product (the matmul-fed pattern, e.g. linear + cross-entropy) "
                           "has no extern stage yet; run it through lower_to_cpu and Halide's own schedules, or "
                           "neptune_bench's linear_cross_entropy for Neptune's kernels");
    if (kind == PatternKind::RowChain) return build_row_chain_stage(g, iso, opt);
    return build_attention_stage(g, iso, opt);
}

}  // namespace neptune::internal
