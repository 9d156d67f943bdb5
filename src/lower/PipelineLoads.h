#ifndef NEPTUNE_LOWER_PIPELINE_LOADS_H
#define NEPTUNE_LOWER_PIPELINE_LOADS_H
/** \file
 * Software pipelining of the KV loop's loads: each tile's K and V copies are issued one iteration
 * ahead with cp.async into the other of `stages` shared buffers. */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards: every TileLoad into a shared tile inside a CarriedLoop has copy = CpAsync and
 * stage = 0 (the emitter rotates buffers by iteration); kernel.pipeline_stages = stages. The emitter
 * issues iteration begin's copies before the loop and, at each load, waits for this iteration's
 * copy and issues the next one. Loads outside loops stay synchronous.
 * Requires: build_tile_program. Leaves: kernels without loops over shared loads, and warp-specialized
 * kernels (specialize_warps pipelines their TMA copies). */
tir::Kernel pipeline_loads(const tir::Kernel &k, int stages);

}  // namespace neptune::internal

#endif
