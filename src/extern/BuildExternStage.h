#ifndef NEPTUNE_EXTERN_BUILD_EXTERN_STAGE_H
#define NEPTUNE_EXTERN_BUILD_EXTERN_STAGE_H
/** \file
 * One fused group as an extern stage: the group cut out of the pipeline (IsolateGroup.h), lowered
 * to a tile program once per GPU family, emitted and compiled (nvcc fatbins for AOT, an NVRTC cubin
 * for JIT), described for the run-time launcher (interop/Descriptor.h) and handed to Halide with
 * define_extern. The stage's contract with the launcher, for attention-shaped groups:
 *   buffers  q [dqk, seq_q, q_heads, batch], k [dqk, seq_kv, kv_heads, batch], v [dv, ...],
 *            1-D int32 or f32 extras [q_heads] or [batch] (ALiBi slopes, keys per batch), then
 *            the output [dv, seq_q, q_heads, batch]
 *            (innermost first, dense, min 0; the dims of lower/BuildTileProgram's tensors);
 *   scalars  the kernels' int parameters but "chunks" and "interleave", as int32 Exprs of the pipeline;
 *   bounds   the output is bound() to its whole extent, so intermediate realizations are whole. */
#include "Halide.h"
#include "api/FusedGroups.h"
#include "extern/IsolateGroup.h"
#include "neptune/GpuPipeline.h"

namespace neptune::internal {

/** The device library's headers as (name, contents), embedded at build time (DeviceHeaders.cpp):
 * nvcc and NVRTC compile emitted kernels without the source tree. */
const std::vector<std::pair<std::string, std::string>> &device_headers();

struct BuiltExternStage {
    Halide::Func func;
    ExternStageInfo info;
};

/** Throws CompileError, `where` first, when the tile backend does not lower `plan` with these outputs:
 * lower/Lower.h's lowering_refusal, and what to do instead. */
void refuse_unlowerable(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const std::string &where);

/** The group cut out at `output` (IsolateGroup.h). Throws CompileError naming the directive and the
 * stage, with lower/Lower.h's lowering_refusal and what to do instead, when the tile backend does not
 * lower it, or lowers it as a row chain (whose kernels are not extern stages yet). */
IsolatedGroup isolate_lowerable(const FusedGroup &g, const Halide::Func &output, const ExternOptions &options);

/** Throws CompileError naming the directive for groups the tile backend cannot lower (that reason
 * first), missing head dims, unknown extents, or more buffers than an entry point takes. */
BuiltExternStage build_extern_stage(const FusedGroup &group, const Halide::Func &output, const ExternOptions &options);

}  // namespace neptune::internal

#endif
