#include "neptune/CheckRows.h"

#include <algorithm>

namespace neptune {

std::vector<RowRun> choose_rows(const OperatorInstance &inst, double work_budget) {
    const double per_row = std::max(1.0, operator_flops(inst) / double(inst.rows));
    const double per_row_ref =  // the reference also does the work a fused kernel skips (masked keys)
        inst.spec.family == Family::Attention
            ? 2.0 * double(attention_keys(inst)) * (inst.spec.attention.head_dim_qk + inst.spec.attention.head_dim_v)
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
            total = merge(total,
                          compare(actual[o].values, expected[o].values, r.first * inner, (r.first + r.second) * inner));
        out.push_back({inst.outputs[o].name, total});
    }
    return out;
}

std::vector<double> rounding_rel_rms(const OperatorInstance &inst, const std::vector<RowRun> &runs,
                                     const std::vector<HostTensor> &expected) {
    std::vector<double> out;
    for (size_t o = 0; o < inst.outputs.size(); o++) {
        const int64_t inner = inst.outputs[o].numel() / inst.rows;
        ErrorStats total;
        for (const RowRun &r : runs)
            total = merge(total, rounding_error(expected[o], r.first * inner, (r.first + r.second) * inner));
        out.push_back(total.rel_rms());
    }
    return out;
}

}  // namespace neptune
