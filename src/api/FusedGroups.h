#ifndef NEPTUNE_API_FUSED_GROUPS_H
#define NEPTUNE_API_FUSED_GROUPS_H
/** \file
 * The fused groups that Neptune's directives recorded, as the backends consume them: the CPU form
 * (lower_to_cpu) and the extern stages (neptune/GpuPipeline.h). */
#include <utility>
#include <vector>

#include "Halide.h"
#include "frontend/FusedPlan.h"

namespace neptune::internal {

struct FusedGroup {
    FusionRequest request;
    FusedPlan plan;
};

/** The recorded groups, not yet lowered, that have a stage among the Funcs `outputs` reach (the
 * outputs included), in the order the directives were called; each is marked lowered, so one
 * group is lowered by one backend once. */
std::vector<FusedGroup> claim_fused_groups(const std::vector<Halide::Func> &outputs);

}  // namespace neptune::internal

#endif
