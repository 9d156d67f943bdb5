#ifndef NEPTUNE_LOWER_LAY_OUT_COMBINE_H
#define NEPTUNE_LOWER_LAY_OUT_COMBINE_H
/** \file
 * Split-K's combine in warp-rows registers, a strip of 4 rows at a time. The combine merges chunk
 * states with CUDA-core arithmetic alone, yet build_tile_program gives it the partial kernel's mma
 * fragments: there each lane loads its 64 elements of a chunk one scalar at a time, half of every
 * sector unused, and a KV group of 4 query heads leaves the lanes of the 12 missing rows idle. A
 * warp-rows tile moves a row as one float4 per lane (experiments/combine_ceiling.cu: 1.1 us per
 * chunk in fragments against 0.45 in rows of 4, on the H200). Strips, not the 16 rows at once: with
 * 16-row tiles the registers held one row's load in flight at a time (docs/engineering-log.md,
 * 2026-12-02, the combine in strips of warp-rows registers). */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards each combine region of a one-warp kernel is a loop over strips of 4 rows ("strip"),
 * whose body is the region on rows [4 strip, 4 strip + 4) of its 16-row tiles (slices start 4 strip
 * rows later, maps read row + 4 strip), up to the most rows any slice has; its register values are
 * 4-row warp-rows tiles and row vectors. A combine region is a LastArrival's body (the folded
 * combine), or the whole body of a kernel without dots or arrivals (the separate combine kernel); it
 * qualifies when its statements are loads from the program's workspaces (rows 16-byte aligned),
 * stores, fills, maps, row maps, loops and conditions, it reads no register value it did not write
 * first, and it loads no tensor it stores (so its rows are independent and strips may reorder them). Values the kernel also uses outside the region (the
 * partial's state of the same name) are renamed inside it, with the suffix "_c". `enabled` false, or
 * no region qualifies: unchanged. Requires: fold_combine. */
tir::Program lay_out_combine(const tir::Program &p, bool enabled);

}  // namespace neptune::internal

#endif
