#ifndef NEPTUNE_LOWER_PIPELINE_DOTS_H
#define NEPTUNE_LOWER_PIPELINE_DOTS_H
/** \file
 * pipeline_dots: a warp-specialized kernel's mainloop keeps its wgmma in flight across iterations,
 * so the tensor cores always have the next dot queued while the warps wait for the previous one.
 *
 * Afterwards, in each top-level loop whose body has one dot, a wgmma reading ring tiles that the
 * body loads and releases right after it (the matmul-fed pattern's step over depth chunks): the dot
 * is asynchronous; a DotWait(1) after it retires the previous iteration's dot, whose ring buffers are
 * then released; a statement after it that touches the accumulator first waits for it (inside a
 * condition, at the head of the condition's body); after the loop a DotWait(0) retires the last dot
 * and its buffers are released.
 *
 * Requires specialize_warps (the rings); leaves loops of other shapes (attention's two dots, which
 * overlap_dots rotates) as they are.
 *
 *   before:  a = load (ring i); b = load (ring i); x += dot(a, b^T); release b (ring i); release a (ring i)
 *            if (last chunk) { ... reads x ... }
 *   after:   a = load (ring i); b = load (ring i); x += dot(a, b^T) async; wait(1)
 *            if (i > begin) { release b (ring i - 1); release a (ring i - 1) }
 *            if (last chunk) { wait(0) {x}; ... reads x ... }
 *   and after the loop: wait(0) {x}; if (end > begin) { release b (ring end - 1); release a (ring end - 1) } */
#include "tir/IR.h"

namespace neptune::internal {

tir::Kernel pipeline_dots(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
