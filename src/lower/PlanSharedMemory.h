#ifndef NEPTUNE_LOWER_PLAN_SHARED_MEMORY_H
#define NEPTUNE_LOWER_PLAN_SHARED_MEMORY_H
/** \file
 * Shared-memory planning: sizes the kernel by its shared layout (tir/SharedLayout.h), with the Q tile
 * aliased onto a pipeline buffer that is not written before Q moves to registers. */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards: kernel.shared_bytes is set (tiles, barriers and alignment slack). Requires pipeline_loads
 * or specialize_warps. Throws CompileError when the
 * kernel needs more than the 227 KB a block may have on sm_90.
 * Loaded once before the loop and converted to registers before it, Q shares the last stage of a
 * pipelined tile of the same size: the loop writes that stage only after its first barrier (not in
 * warp-specialized kernels, where wgmma reads Q from shared memory in every iteration). */
tir::Kernel plan_shared_memory(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
