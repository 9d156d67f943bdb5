#ifndef NEPTUNE_LOWER_SWIZZLE_SHARED_TILES_H
#define NEPTUNE_LOWER_SWIZZLE_SHARED_TILES_H
/** \file
 * Shared tiles that cp.async and plain stores fill (mma.sync kernels: decode, prefill before sm_90a)
 * take the 128-byte swizzled layout instead of padded rows. Padding shifts every other 256-byte row
 * of K and V by 16 bytes, so each 128-byte line that a warp copies lands across two 128-byte
 * segments of shared memory; the copy is then split, and a third of the L2 sector lookups repeat
 * ones already made (hit rate 34 %, DRAM at 83 % of peak in decode: docs/engineering-log.md, 2026-12-01, the L2 hits of
 * padded shared rows). The swizzle keeps ldmatrix free of bank conflicts without padding. */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards: in a kernel of mma.sync dots, every shared tile of 16-bit elements whose columns are a
 * multiple of 64 and rows a multiple of 8 is SharedSwizzled128; other shared tiles (head dims 80,
 * 96, ...) stay padded row-major. Kernels of wgmma dots are returned unchanged (select_mma already
 * swizzled their tiles, which specialize_warps then fills by TMA). Requires: select_mma. */
tir::Kernel swizzle_shared_tiles(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
