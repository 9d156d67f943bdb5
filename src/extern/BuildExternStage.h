#ifndef NEPTUNE_EXTERN_BUILD_EXTERN_STAGE_H
#define NEPTUNE_EXTERN_BUILD_EXTERN_STAGE_H
/** \file
 * One fused group as extern stages: the group cut out of the pipeline at its outputs
 * (IsolateGroup.h), refused with the reason when the tile backend does not lower it, and built by
 * its pattern's builder (PatternStages.h). */
#include <vector>

#include "Halide.h"
#include "api/FusedGroups.h"
#include "extern/PatternStages.h"
#include "neptune/GpuPipeline.h"

namespace neptune::internal {

/** Throws CompileError, `where` first, when the tile backend does not lower `plan` with these outputs:
 * lower/Lower.h's lowering_refusal, and what to do instead. */
void refuse_unlowerable(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const std::string &where);

/** The group's stages for `outputs` (the Funcs outside the group that read its stages), one Func per
 * output in that order. Throws CompileError naming the directive for groups the tile backend cannot
 * lower (that reason first) and for what the pattern's builder refuses. */
BuiltStages build_extern_stages(const FusedGroup &group, const std::vector<Halide::Func> &outputs,
                                const ExternOptions &options);

}  // namespace neptune::internal

#endif
