#include "lower/LowerOperator.h"

#include "lower/Lower.h"
#include "neptune/Error.h"
#include "neptune/algorithms/Schedules.h"

namespace neptune::internal {

OperatorLowering lower_operator(const OperatorInstance &inst, int warps, int block_n, int chunks, int min_blocks) {
    const OperatorSpec &spec = inst.spec;
    if (spec.family != Family::Attention)
        throw CompileError(spec.name + ": the tile backend lowers attention operators for now");
    const AttentionSpec &a = spec.attention;
    const int group = a.q_heads / a.kv_heads;
    LowerOptions lo = default_lower_options(GpuArch::Sm80, spec.dtype, a.head_dim_qk, a.head_dim_v, a.decode, group);
    lo.block_n = block_n;
    lo.min_blocks_per_sm = min_blocks;
    if (warps) lo.warps = warps;
    if (a.decode && group > 16 * lo.warps)
        throw CompileError(spec.name + ": " + std::to_string(group) + " query heads per KV head need " +
                           std::to_string((group + 15) / 16) + " warps");
    if (a.head_dim_qk % 8 || a.head_dim_v % 8)
        throw CompileError(spec.name + ": head dims must be multiples of 8 (16-byte copies)");

    algorithms::OperatorFuncs funcs = algorithms::build(spec);
    algorithms::FusionChoice choice;
    choice.tile = block_n;
    OperatorLowering out;
    out.ints = {{"batch", inst.batch}, {"q_heads", a.q_heads}, {"kv_heads", a.kv_heads},
                {"seq_q", inst.input("q").shape[2]}, {"seq_kv", inst.input("k").shape[2]}};
    if (a.decode) {
        choice.variant = algorithms::FusionVariant::SplitK;
        choice.chunks = chunks;
        out.ints["chunks"] = chunks;
    }
    const std::vector<FusedReduction> groups = algorithms::fuse_operator(spec, funcs, choice);
    out.program = lower_to_tiles(groups.at(0).plan(), funcs.outputs, lo);
    return out;
}

}  // namespace neptune::internal
