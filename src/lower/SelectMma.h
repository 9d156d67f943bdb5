#ifndef NEPTUNE_LOWER_SELECT_MMA_H
#define NEPTUNE_LOWER_SELECT_MMA_H
/** \file
 * Choosing the tensor-core instruction of every dot: warpgroup wgmma on sm_90a where the tile
 * shapes allow it, warp-level mma.sync otherwise. */
#include "tir/IR.h"

namespace neptune::internal {

/** Whether wgmma can run a kernel's dots: compute warps in whole warpgroups, 16-bit operands whose
 * shared tiles have a multiple of 64 columns (the 128-byte swizzle's column blocks), and every
 * dot's N (the accumulator's columns) a multiple of 16 up to 256. `why` says what fails. */
bool wgmma_fits(const tir::Kernel &k, std::string *why = nullptr);

/** Whether select_mma made the kernel's dots wgmma dots (the Hopper path: TMA copies follow). */
bool uses_wgmma(const tir::Kernel &k);

/** With `wgmma` false, or for a kernel without dots (split-K's combine), returns k. Otherwise, afterwards: every TileDot has mma = Wgmma; a dot whose
 * A operand was converted from a shared tile reads that tile directly (the Convert and its register
 * value are gone: wgmma reads A through a descriptor); a Fill(acc, 0) right before its dot is
 * folded into the dot (accumulate = false, wgmma's scale-d = 0); every shared tile a dot reads is
 * SharedSwizzled128. Throws CompileError naming the kernel when wgmma_fits fails.
 *   before: q_a = convert(q_s); ...; s = fill(0); s += dot(q_a, k_s^T)
 *   after:  s = dot(q_s, k_s^T)  // wgmma
 * Requires: build_tile_program. Must run before the copy passes (which follow the layouts). */
tir::Kernel select_mma(const tir::Kernel &k, bool wgmma);

}  // namespace neptune::internal

#endif
