#ifndef NEPTUNE_LOWER_BUILD_ROW_CHAIN_H
#define NEPTUNE_LOWER_BUILD_ROW_CHAIN_H
/** \file
 * The row-chain pattern: a fused group whose stages all reduce over the innermost axis of one input
 * x(c, r) (softmax, log-sum-exp, cross-entropy, LayerNorm, RMSNorm), with outputs per row (lse(r),
 * loss(r)) or per element (y(c, r)). Each block owns whole rows, laid out as row strips (a warp or
 * the block per row, 16-byte vectors per thread); see docs/design/lowering.md, "Patterns". */
#include <string>
#include <vector>

#include "lower/Lower.h"

namespace neptune::internal {

/** The kernel shape of a row chain. */
struct RowChainShape {
    int rows_per_block = 4;  // rows of a block: one warp each when threads_per_row is 32
    int threads_per_row = 32;  // a warp, or the whole block (then rows_per_block is 1); a power of two
    int vector = 8;  // consecutive columns per thread and load: 16 bytes of input
    int vectors = 4;  // vectors per thread and row strip: the strip holds threads * vector * vectors columns
    bool chunked = false;  // the row does not fit the strip: loop over column chunks
    int cluster = 1;  // blocks per row (sm_90 clusters, up to 8): block q of a row holds its q-th cols() columns
    int min_blocks = 0;  // blocks per SM the register allocation must allow (0: no bound)
    int cols() const { return threads_per_row * vector * vectors; }
};

/** The shape Neptune picks for rows of `cols` elements of `dtype` (0: unknown, the chunked form that
 * takes any length). Rows that fit (up to 32 elements per thread, 64 of 16 bits in rows past 16384)
 * stay on chip and x is read once: up to 256 16-byte columns per warp one warp per row, four rows per
 * block; longer rows a block per row, up to 1024 threads; on sm_90a rows of up to eight such blocks a
 * cluster of blocks per row; longer still, the chunked form over 16384-column chunks. */
RowChainShape default_row_chain_shape(GpuArch arch, DType dtype, int64_t cols);
/** As above for a chain whose chunked form `streams` (reads x once: every output per row and every
 * stage online, log-sum-exp's and cross-entropy's): long rows take that form, not a cluster, which
 * pays synchronisation for no saved traffic. */
RowChainShape default_row_chain_shape(GpuArch arch, DType dtype, int64_t cols, bool streams);
/** The shape with `threads` per row (a power of two from 32 to 1024) and `cluster` blocks per row (1
 * to 8; above 1, sm_90a): a warp per row takes four rows per block; rows longer than 32 elements per
 * thread (64 of 16 bits) loop over chunks. */
RowChainShape row_chain_shape(DType dtype, int64_t cols, int threads, int cluster = 1);

/** Whether the chunked form of the plan's row chain reads x once (see default_row_chain_shape). */
bool row_chain_streams(const FusedPlan &plan, const std::vector<Halide::Func> &outputs);

/** Why the plan is not a row chain, in words a user can act on; empty when it is. */
std::string row_chain_mismatch(const FusedPlan &plan, const std::vector<Halide::Func> &outputs);

/** The row-chain program (one kernel): the int parameters are "rows" and "cols" (x's extents, x
 * read as rows x cols elements, rows contiguous); the tensors are the group's inputs and outputs by
 * their Halide names. Throws CompileError naming the Func and construct it cannot lower. */
tir::Program build_row_chain(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, GpuArch arch,
                             const RowChainShape &shape);

}  // namespace neptune::internal

#endif
