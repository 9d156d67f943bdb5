#ifndef NEPTUNE_LOWER_BUILD_ROW_CHAIN_H
#define NEPTUNE_LOWER_BUILD_ROW_CHAIN_H
/** \file
 * The row-chain pattern: a fused group whose stages all reduce one axis of one input x (softmax,
 * log-sum-exp, cross-entropy, LayerNorm, RMSNorm, and chains over a middle axis), a row being one
 * value of each other variable, with outputs per row (lse(r), loss(r)) or per element (y(c, r)).
 * Each block owns whole rows, laid out as row strips: a warp or the block per row with 16-byte
 * vectors per thread when the reduced axis is innermost; 32 consecutive rows per block, a column at
 * a time, when it is not. See docs/design/lowering.md, "Patterns". */
#include <map>
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
    // Blocks per row (sm_90 clusters, up to 8): block q of a row holds its q-th cols() columns, or
    // when chunked (a split row) loops over the q-th run of its chunks.
    int cluster = 1;
    int min_blocks = 0;  // blocks per SM the register allocation must allow (0: no bound)
    // The reduced axis is not innermost: rows_per_block consecutive rows on consecutive threads,
    // threads_per_row (1 to 32) per row, each holding `vectors` single columns (vector 1).
    bool strided = false;
    int cols() const { return threads_per_row * vector * vectors; }
};

/** The shape Neptune picks for rows of `cols` elements of `dtype` (0: unknown, the chunked form that
 * takes any length). Rows that fit (up to 32 elements per thread, 64 of 16 bits in rows past 16384)
 * stay on chip and x is read once: up to 256 16-byte columns per warp one warp per row, four rows per
 * block; longer rows a block per row, up to 1024 threads; on sm_90a rows of up to eight such blocks a
 * cluster of blocks per row; longer still, the chunked form over 16384-column chunks. */
RowChainShape default_row_chain_shape(GpuArch arch, DType dtype, int64_t cols);
/** What decides a chain's kernel shape beside its row length. */
struct RowChainForm {
    // The chunked form reads x once (every output per row and every stage online: log-sum-exp's
    // and cross-entropy's): long rows take that form, not a cluster, which pays synchronisation
    // for no saved traffic.
    bool streams = false;
    bool strided = false;  // the reduced axis is not x's innermost: the strided layout
};
/** As above for a chain of the given form over `rows` rows (0: unknown). Strided: 32 rows per block
 * and the fewest threads per row (a power of two up to 32) that hold up to 32 columns each; longer
 * rows loop over 512-column chunks. Few long rows on sm_90a split (splits_rows). */
RowChainShape default_row_chain_shape(GpuArch arch, DType dtype, int64_t cols, const RowChainForm &form,
                                      int64_t rows = 0);
/** Rows of a chain split over a cluster's blocks: at most this many rows... */
constexpr int64_t kSplitRows = 64;
/** ...longer than this: past a block's (streaming chains) or a cluster's row (the others, which read
 * x once while the row fits on chip and twice split). */
int64_t split_above(const RowChainForm &form);
/** Whether `rows` rows of `cols` columns split: on sm_90a, few long rows leave most SMs idle with a
 * block (or a cluster holding the row) per row; split, each of 8 blocks of a cluster takes a run of
 * the row's chunks and their states are combined with the derived repair (split-K). */
bool splits_rows(GpuArch arch, const RowChainForm &form, int64_t rows, int64_t cols);
/** The split shape: 8 blocks per row of 512 threads over 16-byte vectors, chunked. */
RowChainShape split_row_chain_shape(DType dtype);
/** The strided layout's shape for rows of `cols` elements (0: any; default_row_chain_shape). */
RowChainShape strided_row_chain_shape(int64_t cols);
/** The shape with `threads` per row (a power of two from 32 to 1024) and `cluster` blocks per row (1
 * to 8; above 1, sm_90a): a warp per row takes four rows per block; rows longer than 32 elements per
 * thread (64 of 16 bits) loop over chunks (with a cluster, split). */
RowChainShape row_chain_shape(DType dtype, int64_t cols, int threads, int cluster = 1);

/** x of a chain that is a matrix product x(c, r) = sum_k a(k, r) * b(k, c) of two 2-D inputs of one
 * 16-bit type: a[rows, depth] and b[cols, depth] (a language model's hidden states and vocabulary
 * weights). Row strips do not lower it; the matmul-fed pattern does. */
struct MatmulProduct {
    std::string a, b;
    DType dtype = DType::F16;  // I32 when the operands are not both f16 or both bf16 (refused)
};

/** A row chain over a matrix product as the row-chain analysis gives it, for the matmul-fed
 * pattern's builder. Expressions are over placeholders: the element of the product at the column
 * (`kChainX`), the column (`kChainCol`), the row (`kChainRow`), the product at the g-th gathered
 * column (`kChainGather` + g: cross-entropy's logit of the label), the stages by their names (row
 * values), inputs with a value per row read at the row, and extents as `<input>.extent.<d>`. */
struct MatmulChainForm {
    MatmulProduct product;
    struct Stage {
        const FusedStage *st;
        std::string name;  // readable, unique; the stage's value in the expressions
        Halide::Expr raw;  // the term, producers as the plan's symbols (the repair's variables)
    };
    std::vector<Stage> stages;  // dependence order
    struct Output {
        std::string tensor;
        DType dtype;
        Halide::Expr value;  // per row; NaN where a requirement of the algorithm fails
    };
    std::vector<Output> outputs;
    std::vector<Halide::Expr> gathers;  // the gathered columns, over the row's placeholders
    std::map<std::string, DType> row_inputs;  // inputs with a value per row (labels)
};
constexpr const char *kChainX = "x_t";
constexpr const char *kChainCol = "rc.col";
constexpr const char *kChainRow = "rc.flat";
constexpr const char *kChainGather = "rc.gather.";

/** The plan's chain over a matrix product; CompileError naming the construct when it is not one. */
MatmulChainForm matmul_chain_form(const FusedPlan &plan, const std::vector<Halide::Func> &outputs);

/** The plan's row chain's form (see default_row_chain_shape). */
RowChainForm row_chain_form(const FusedPlan &plan, const std::vector<Halide::Func> &outputs);

/** Why the plan is not a row chain, in words a user can act on; empty when it is. */
std::string row_chain_mismatch(const FusedPlan &plan, const std::vector<Halide::Func> &outputs);

/** The row-chain program (one kernel): the int parameters are x's extents, "cols" the reduced axis's
 * and "rows", "rows2", ... the others' (those above a reduced middle axis "planes", "planes2", ...),
 * x dense; the tensors are the group's inputs and outputs by their Halide names, each with its
 * dimensions' names. Throws CompileError naming the Func and construct it cannot lower. */
tir::Program build_row_chain(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, GpuArch arch,
                             const RowChainShape &shape);

}  // namespace neptune::internal

#endif
