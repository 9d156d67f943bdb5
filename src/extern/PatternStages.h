#ifndef NEPTUNE_EXTERN_PATTERN_STAGES_H
#define NEPTUNE_EXTERN_PATTERN_STAGES_H
/** \file
 * The extern stages of one isolated group, by the pattern that lowers it (lower/Patterns.h). Each
 * builder lowers the group once per GPU family (and per kernel tuning the launcher picks from),
 * compiles, describes the kernels for the launcher (interop/Descriptor.h) and defines the stages.
 *
 * Attention: buffers q [dqk, seq_q, q_heads, batch], k [dqk, seq_kv, kv_heads, batch], v [dv, ...],
 * 1-D int32 or f32 extras [q_heads] or [batch] (ALiBi slopes, keys per batch), then the output
 * [dv, seq_q, q_heads, batch]; scalars: the kernels' int parameters but "chunks" and "interleave".
 *
 * Row chains: buffers x [cols, rows], 1-D extras [cols] or [rows] (gamma, labels), then the
 * outputs [cols, rows] or [rows]; scalars rows and cols. The row length is a run-time value, so a
 * family's set is a ladder of kernel shapes, each serving rows up to its length (KernelSet::when),
 * all in one image. Several outputs: the first of the highest rank is the stage's buffer; the
 * others are per-thread workspaces that a copy stage per output hands on (Descriptor.h).
 *
 * Buffers are innermost first, dense, min 0; outputs are bound() to their whole extent. */
#include <vector>

#include "Halide.h"
#include "api/FusedGroups.h"
#include "extern/IsolateGroup.h"
#include "neptune/GpuPipeline.h"

namespace neptune::internal {

/** One Func per output of the isolated group (in iso.outputs' order), and what was compiled. */
struct BuiltStages {
    std::vector<Halide::Func> funcs;
    std::vector<ExternStageInfo> infos;
};

/** Throws CompileError naming the directive for several outputs, missing head dims, unknown
 * extents, or more buffers than an entry point takes. */
BuiltStages build_attention_stage(const FusedGroup &g, const IsolatedGroup &iso, const ExternOptions &opt);

/** Throws CompileError naming the directive for inputs of other types than f16, bf16, f32 (x) and
 * int32 or float (extras). */
BuiltStages build_row_chain_stage(const FusedGroup &g, const IsolatedGroup &iso, const ExternOptions &opt);

/** "<directive> (extern stage <name>)": how messages name a group. */
std::string describe_group(const FusedGroup &g, const Halide::Func &output);

}  // namespace neptune::internal

#endif
