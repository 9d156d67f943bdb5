#ifndef NEPTUNE_ALGORITHMS_SCHEDULES_H
#define NEPTUNE_ALGORITHMS_SCHEDULES_H
/** \file
 * The Neptune schedule of each operator of the suite: which reductions are
 * fused over which reduction variable, and with which variant. */
#include <vector>

#include "neptune/Directives.h"
#include "neptune/algorithms/Algorithms.h"

namespace neptune::algorithms {

enum class FusionVariant { Rolling, SplitK };

struct FusionChoice {
    FusionVariant variant = FusionVariant::Rolling;
    int tile = 64;
    int chunks = 4;  // split-K
};

/** Applies fuse_reduction and the chosen variant to the stages of `funcs`:
 *  attention: {acc, row_sum (, ent_num, max_prob_acc)} with row_max over kv;
 *  softmax, log-sum-exp, cross-entropy: row_sum with row_max over the columns;
 *  LayerNorm: m2 with sum_x (and the matmul, with both) over the columns;
 *  RMSNorm: sum_sq (and the matmul with it) over the columns;
 *  Performer: {kv_sum, k_sum} with k_max over keys, and {num, den} with q_max over features. */
std::vector<FusedReduction> fuse_operator(const OperatorSpec &spec, const OperatorFuncs &funcs,
                                          const FusionChoice &choice);

}  // namespace neptune::algorithms

#endif
