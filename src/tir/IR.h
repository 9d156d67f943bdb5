#ifndef NEPTUNE_TIR_IR_H
#define NEPTUNE_TIR_IR_H
/** \file
 * The tile IR: what one thread block of a fused-reduction kernel does, at the
 * granularity of tiles. A kernel is a list of statements over named values:
 *   tiles       2-D, typed (element type, rows x cols, scope, layout): K and V tiles in
 *               shared memory, score and accumulator tiles in MMA accumulator registers,
 *   row vectors one f32 per tile row (the carried max and sum of online softmax),
 *   scalars     integer Halide Exprs of the block indices, loop variables and the kernel's
 *               scalar parameters (extents).
 * Elementwise maps are Halide Exprs: inside a map, the Variable named after the destination is the
 * element's value, "row" and "col" are its coordinates in the tile, row vectors broadcast along
 * the row, and scalars are the kernel's. So the printed IR reads like the recurrence it computes:
 *   s = dot(q, k^T); s = map(s * 0.088); m' = max(m, row_max(s)); s = map(exp(s - m')) ...
 *
 * The MMA instruction family, the copy mechanism, pipelining depth and warp roles are attributes set
 * by lowering passes (src/lower/), never rediscovered by the emitter: the Hopper path (wgmma, TMA,
 * a producer warpgroup feeding consumer warpgroups) adds attribute values and one statement kind
 * (Release), not a new IR, and the interpreter runs both paths with the same semantics. */
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "Halide.h"
#include "neptune/DType.h"

namespace neptune {

/** Which GPU family a tile program is lowered for: the MMA instructions, copies and warp roles
 * differ (sm_80: mma.sync + cp.async; sm_90a: wgmma + TMA with warp specialization). */
enum class GpuArch { Sm80, Sm90a };
const char *arch_name(GpuArch a);  // "sm_80", "sm_90a": the compilers' spelling

}  // namespace neptune

namespace neptune::tir {

enum class Scope { Global, Shared, Register };
/** Layouts. Shared tiles: SharedSwizzled128 is the layout TMA's 128-byte swizzle writes and wgmma
 * descriptors read: column blocks of 64 16-bit elements, each ROWS x 128 bytes, 16-byte chunk c of
 * row r stored at chunk c ^ (r % 8); cp.async, plain stores and ldmatrix (mma.sync) use it too
 * (swizzle_shared_tiles). SharedRowMajor is padded row-major, for tiles whose columns are not a
 * multiple of 64 (ldmatrix without bank conflicts, at the cost of split copies). Registers: the
 * mma.sync m16n8k16 fragments (docs/design/gpu-families.md, fragment layouts), which are also the per-warp slices of
 * wgmma's m64nN accumulator and register A operand, so maps, row reductions and conversions are the
 * same on both paths; RowVector is their per-row f32. WarpRows is for small f32 tiles that no dot
 * touches, in one-warp kernels (split-K's combine, a strip of rows at a time: lay_out_combine): up to
 * 16 rows, lane l holding columns 128 q + 4 l + e (e < 4) of every row, so a row moves as one 16-byte
 * access per lane; WarpRowVector is its per-row f32, row l % rows in lane l. RowStrip is for row-wise
 * reductions (the row-chain pattern): f32 tiles of a few whole rows (or column chunks of them), each
 * row spread over Kernel::strip_threads threads (a warp, or the whole block), thread t holding
 * vectors of Kernel::strip_vector consecutive columns: columns V (t + T i) + e, e < V, where V is
 * strip_vector and T strip_threads, so a thread's loads are 16-byte vectors and a warp's are
 * coalesced; StripRowVector is its per-row f32, in every thread of the row. Maps read one family. */
enum class Layout {
    Unassigned,
    SharedRowMajor,
    SharedSwizzled128,
    MmaAccumulator,
    MmaOperandA,
    RowVector,
    WarpRows,
    WarpRowVector,
    RowStrip,
    StripRowVector
};
enum class ReduceOp { Max, Sum };
/** How a shared tile is filled: plain loads, cp.async by every thread, or TMA by a producer warp. */
enum class CopyKind { Sync, CpAsync, Tma };
/** The tensor-core instruction of a TileDot: warp-level mma.sync, or warpgroup wgmma (sm_90a). */
enum class MmaKind { MmaSync, Wgmma };
/** WarpgroupTurn: Take waits for this warpgroup's turn, Pass hands it to the next (round robin);
 * Begin gives warpgroup 0 the first turn, End consumes the token left after the last Pass. */
enum class TurnMode { Begin, Take, Pass, End };

/** Why a statement exists, where a later pass must find it: passes look statements up by role,
 * never by their note (a comment) or their position in a body.
 *   ScoreModifier  the map applying the score modifier (scale, softcap, ALiBi) to the scores
 *   Mask           the map setting invisible scores to -inf (skip_masked_tiles narrows around it)
 *   ScoreDot       the dot of the queries with a K tile
 *   ValueLoad      the load of the V tile the value dot reads
 *   ValueDot       the dot of the probabilities with the V tile (overlap_dots rotates around it)
 *   Repair         a rescale of a carried state by its repair (online softmax's exp(m - m'))
 *   Term           a stage's per-element term (the map a reduction or dot consumes)
 *   Epilogue       a map computing an output from the final states */
enum class Role { None, ScoreModifier, Mask, ScoreDot, ValueLoad, ValueDot, Repair, Term, Epilogue };

const char *scope_name(Scope s);
const char *layout_name(Layout l);
const char *role_name(Role r);  // "mask", "value dot", ...; "" for None

struct TileType {
    DType elem = DType::F32;
    int rows = 0, cols = 0;  // cols = 1 for row vectors
    Scope scope = Scope::Register;
    Layout layout = Layout::Unassigned;
    std::string str() const;  // "f16[64 x 128] shared row-major"
};

/** One f32 per row, in either register family. */
inline bool is_row_vector(const TileType &t) {
    return t.layout == Layout::RowVector || t.layout == Layout::WarpRowVector || t.layout == Layout::StripRowVector;
}
/** The warp-rows family (WarpRows tiles and their row vectors) rather than the mma fragments. */
inline bool is_warp_rows(const TileType &t) {
    return t.layout == Layout::WarpRows || t.layout == Layout::WarpRowVector;
}
/** The row-strip family (RowStrip tiles and their row vectors). */
inline bool is_row_strip(const TileType &t) {
    return t.layout == Layout::RowStrip || t.layout == Layout::StripRowVector;
}

/** A global tensor parameter: element type, and the extents that give its rows and columns. The
 * kernel reads it as a 2-D slice per block: base offset (elements) + row index * row stride. */
struct TensorParam {
    std::string name;
    DType elem = DType::F16;
    bool output = false;
    /** A 1-D input read inside maps (ALiBi slopes, a length per batch): the int param that is its
     * extent, as it is read at the query head (q_heads) or the batch index (batch); else empty. */
    std::string extent = {};  // a default: the aggregate initializers elsewhere omit it
    /** The tensor's extents as int params, innermost first, where the pattern states them (row
     * chains: {"cols", "rows"}, {"cols"} or {"rows"}); empty: the pattern's fixed layout. */
    std::vector<std::string> dims = {};
};

/** An attention tensor as [batch, heads, rows, cols] (q: [batch, q_heads, seq_q, head_dim]) over the
 * int params: extents, and strides in elements (cols contiguous), which are the kernel's stride
 * parameters (core/StrideParams.h) so that views of other layouts ([batch, rows, heads, cols]) run
 * without a copy. How TMA addresses it, by (batch, head, row); the interpreter reads it so too. */
struct TensorView {
    Halide::Expr batch, heads, rows, cols;
    Halide::Expr row_stride, head_stride, batch_stride;
};

/** A TMA descriptor the launcher encodes for one kernel parameter: boxes of box_rows x 64 elements
 * of `tensor`'s view (Kernel::views), 128-byte swizzle, zero fill outside, and the bytes the L2
 * fetches per miss (0, 64, 128, 256): wide promotion suits prefill's reuse, not decode's streams. */
struct TensorMap {
    std::string name;  // the kernel parameter, e.g. "k_map"
    std::string tensor;  // the TensorParam it describes
    int box_rows = 0;
    int l2_promotion = 256;
};
/** The promotions TMA descriptors have: 0 (none), 64, 128 or 256 bytes. */
inline bool is_l2_promotion(int bytes) { return bytes == 0 || bytes == 64 || bytes == 128 || bytes == 256; }

/** A scalar the kernel derives once from block indices and parameters, e.g. q0 = blockIdx.x * 64. */
struct ScalarDef {
    std::string name;
    Halide::Expr value;  // Int(32) over the block indices and grid sizes, "sm_count", parameters and earlier scalars
};

#define NEPTUNE_TIR_STMTS(X)                                                                         \
    X(TileLoad) /* global slice -> shared tile (or f32 register tile); beyond valid: zeros */        \
    X(TileStore) /* register tile -> global slice, rows/cols beyond the valid extent untouched */    \
    X(RowLoad) /* global f32 -> row vector; rows beyond valid_rows get `value` */                    \
    X(RowStore) /* row vector -> global, one f32 per valid row */                                    \
    X(Fill) /* tile or row vector := constant */                                                     \
    X(TileMap) /* tile := f(tile element, row vectors, row, col, scalars), in place */               \
    X(RowMap) /* row vector := f(row vectors, row, scalars) */                                       \
    X(TileReduce) /* row vector := op(row vector, reduce_op over each row of a tile) */              \
    X(TileDot) /* acc += a * b or a * b^T on tensor cores */                                         \
    X(Convert) /* the only node that changes a value's layout or scope */                            \
    X(CarriedLoop) /* for var in [begin, end): body, carrying named state across iterations */       \
    X(IfThen) /* tile-skipping and partial-tile conditions */                                        \
    X(Barrier) /* every thread of the block */                                                       \
    X(Release) /* the consumers are done reading a pipelined shared tile's current buffer */         \
    X(DotWait) /* until at most `pending` asynchronous dots are in flight */                         \
    X(WarpgroupTurn) /* compute warpgroups take turns issuing dots (FlashAttention-3's ping-pong) */ \
    X(LastArrival) /* the block that arrives last at a counter runs the body (split-K's combine) */  \
    X(ClusterMerge) /* the cluster's blocks publish their shared tiles; rank 0 runs the body */      \
    X(ClusterReduce) /* row vector := reduce_op over the cluster's blocks of a row vector */

enum class NodeKind {
#define NEPTUNE_NODE_KIND(name) name,
    NEPTUNE_TIR_STMTS(NEPTUNE_NODE_KIND)
#undef NEPTUNE_NODE_KIND
};

struct Node;
using Stmt = std::shared_ptr<const Node>;
using Block = std::vector<Stmt>;

/** One statement. Fields unused by a kind stay empty; the make_* builders below fill exactly the
 * ones each kind reads, and verify() checks them. Semantics (the interpreter and the CUDA emitter
 * implement exactly these):
 *  TileLoad   dst[r][c] = tensor[base + r * row_stride + c * col_stride] for r < valid_rows,
 *             c < valid_cols, else 0 (col_stride 1 unless defined: only row strips stride columns).
 *             dst is a shared tile of the tensor's element type, or an f32 register tile of an f32 tensor,
 *             or a row strip of an f16, bf16 or f32 tensor (the values converted to f32 exactly).
 *  TileStore  tensor[base + r * row_stride + c * col_stride] = round(src[r][c]) for r < valid_rows,
 *             c < valid_cols.
 *  RowLoad    dst[r] = tensor[base + r * row_stride] for r < valid_rows, else `value` (a constant).
 *  RowStore   tensor[base + r] = src[r] for r < valid_rows (f32 tensors; from a strip row vector also
 *             f16 and bf16 tensors, the value rounded to nearest even).
 *  Fill       every element of dst = value (a float constant).
 *  TileMap    dst[r][c] = value, where in `value` a Variable naming a register tile of dst's shape is
 *             that tile's element (r, c), one naming a row vector is its element r, "row" and "col"
 *             are r and c, and other Variables are scalars (ScalarDefs, loop variables, parameters).
 *             All arithmetic in f32; ints converted as Halide converts them. A call to a tensor with
 *             one argument reads its element at that flat index (converted to f32): ALiBi's slopes, a
 *             LayerNorm's gamma[col], cross-entropy's gather x[row * cols + label[row]].
 *  RowMap     dst[r] = value, with row vectors at r, "row" = r, scalars.
 *             Row-strip maps (TileMap and RowMap) may bound the elements they compute: with valid_rows
 *             (valid_cols) defined, elements of rows r >= valid_rows (columns c >= valid_cols) are 0 and
 *             `value` is not evaluated there (so it may read tensors that end at the valid extent).
 *  TileReduce dst[r] = op(dst[r], op over c of src[r][c]), max treating -inf as its identity; over a row
 *             strip with valid_cols defined, only the columns c < valid_cols.
 *             A TileLoad with copy Tma reads by (batch, head, row): element (r, c) is the tensor's view
 *             element (batch, head, row + r, c), zero beyond the view's rows and cols (what TMA's bounds do).
 *  TileDot    acc[m][n] = (accumulate ? acc[m][n] : 0) + sum_k a[m][k] * (transpose_b ? b[n][k] : b[k][n]);
 *             a (a register A operand, or a shared tile for wgmma) and b hold f16/bf16 values, products
 *             and sums in f32.
 *  Convert    dst = src: shared -> MMA operand (same values), or f32 accumulator -> f16/bf16 MMA operand
 *             (rounded to nearest even): how P reaches the second MMA.
 *  CarriedLoop  for (var = begin; var < end; var++) body. IfThen: if (cond) body. Barrier, Release
 *             (src: the tile): no value; Release lets the producer refill the buffer.
 *  Asynchronous dots (async = true, wgmma) take effect at once in these semantics; the program must
 *  then not touch their accumulator, nor write their operands, until a DotWait retires them (the
 *  verifier checks it), so the hardware's later completion gives the same result. Dots retire in
 *  issue order: DotWait(pending = n) retires all but the n most recent. `fenced` names the register
 *  values the retired dots wrote or read, which the emitter keeps the compiler from touching early.
 *  WarpgroupTurn orders the compute warpgroups' dot issues; it has no value.
 *  LastArrival  at the kernel's top level: the block's global writes so far become visible to every
 *             block, then it counts its arrival in tensor[base] (a zeroed workspace word, an unsigned
 *             count); the block whose arrival makes the count `value` resets it to 0 and runs body, which
 *             reads what every arrived block wrote. So the count is 0 again after every launch.
 *  ClusterMerge at the kernel's top level, in a kernel with clusters (Kernel::cluster_x): the shared
 *             tiles every block of the cluster wrote so far become readable by the whole cluster, the
 *             block of rank 0 (block_x % cluster_x) runs body, and no block of the cluster goes on
 *             before body is done (its shared memory stays while body reads it).
 *  ClusterReduce at the kernel's top level, in a kernel with clusters: dst[r] = op over the cluster's
 *             ranks q, in rank order, of src@q[r] (max treating -inf as its identity): every block of
 *             the cluster gets the same value. How a row spread over a cluster's blocks is reduced.
 *             With `value` defined, the reduced term is value[r] with each row vector of `peers`
 *             (src among them) read at rank q and every other one this block's: a state carried from
 *             the block's producers to the cluster's (the split-K form of a repair). Consecutive
 *             cluster reductions share one exchange when none reads another's result at a rank.
 *  Cluster loads: a TileLoad or RowLoad with `rank` defined reads shared f32 tile `src` of the
 *             cluster's block `rank`, not a tensor: dst[r][c] = src@rank[row + r][c] for r < valid_rows,
 *             c < valid_cols, else 0 (RowLoad: dst[r] = src@rank[row + r][0], else `value`). Only inside
 *             a ClusterMerge, where every rank's tile is published.
 *  Convert from an f32 register tile (mma-accumulator or row vector) to a shared f32 tile of its
 *             shape copies the values: how a block publishes its state to its cluster; with valid_rows
 *             defined, only rows r < valid_rows (the others stay as they were). */
struct Node {
    NodeKind kind;
    std::string dst;  // TileLoad, Fill, TileMap, RowMap, TileReduce, TileDot (acc), Convert
    std::string src, a, b;  // TileStore/RowStore/TileReduce/Convert: src; TileDot: a, b
    std::string tensor;  // TileLoad, TileStore, RowStore, LastArrival (the counters)
    Halide::Expr base;  // element offset of the slice's row 0 in the tensor (LastArrival: the counter)
    Halide::Expr row_stride;  // elements between rows (TileLoad, TileStore)
    Halide::Expr col_stride;  // row-strip TileLoad, TileStore: elements between columns (undefined: 1)
    Halide::Expr valid_rows, valid_cols;  // TileLoad/TileStore/RowStore bounds
    Halide::Expr value;  // Fill (constant), TileMap, RowMap: the elementwise expression; LastArrival: the arrivals
    ReduceOp op = ReduceOp::Sum;  // TileReduce
    bool transpose_b = false;  // TileDot: acc += a * b^T
    Halide::Expr batch, head, row;  // TileLoad: the slice as (batch, head, first row) of the tensor's view;
        // cluster loads: `row` is the first row of the shared tile
    Halide::Expr rank;  // cluster loads (TileLoad, RowLoad from shared tile `src`): the block read
    CopyKind copy = CopyKind::Sync;  // TileLoad (set by pipeline_loads or specialize_warps)
    int stage = -1;  // TileLoad in a pipelined loop: which buffer (set by pipeline_loads)
    int multicast = 0;  // TMA ring TileLoad: above 1, the tile is the same in this many blocks of a cluster,
        // and each block's producer copies rows/multicast of it into every block's buffer (multicast_loads)
    Halide::Expr ring;  // TileLoad (Tma) and Release of a ring tile: the load's position in the ring
        // (loads of that tile before it), which picks the buffer and barrier phase
    MmaKind mma = MmaKind::MmaSync;  // TileDot (set by select_mma)
    bool accumulate = true;  // TileDot: false ignores acc's old value (a fused Fill(acc, 0))
    Halide::Expr restart;  // TileDot: where this scalar condition holds, acc's old value is ignored too
        // (a new accumulation starts: wgmma's run-time scale-d, not a Fill that would touch acc)
    bool async = false;  // TileDot: retired by a later DotWait (set by overlap_dots)
    int pending = 0;  // DotWait
    TurnMode turn = TurnMode::Take;  // WarpgroupTurn
    std::vector<std::string> fenced;  // DotWait: registers of the dots it retires
    std::vector<std::string> peers;  // ClusterReduce: the row vectors `value` reads at each rank
    std::string var;  // CarriedLoop
    Halide::Expr begin, end;  // CarriedLoop
    Halide::Expr cond;  // IfThen
    std::vector<std::string> carried;  // CarriedLoop: state live across iterations
    int unroll = 1;  // CarriedLoop: the emitter's #pragma unroll (set by unroll_chunk_loops)
    Block body;  // CarriedLoop, IfThen, LastArrival, ClusterMerge
    std::string note;  // why the statement exists, printed as a comment
    Role role = Role::None;  // where passes must find it (printed beside the note)
};

Stmt make_load(const std::string &dst, const std::string &tensor, Halide::Expr base, Halide::Expr row_stride,
               Halide::Expr valid_rows, Halide::Expr valid_cols);
/** A load that also knows its slice as (batch, head, row) of the tensor's view: what TMA addresses. */
Stmt make_view_load(const std::string &dst, const std::string &tensor, Halide::Expr batch, Halide::Expr head,
                    Halide::Expr row, Halide::Expr base, Halide::Expr row_stride, Halide::Expr valid_rows,
                    Halide::Expr valid_cols);
Stmt make_store(const std::string &src, const std::string &tensor, Halide::Expr base, Halide::Expr row_stride,
                Halide::Expr valid_rows, Halide::Expr valid_cols);
Stmt make_row_load(const std::string &dst, const std::string &tensor, Halide::Expr base, Halide::Expr row_stride,
                   Halide::Expr valid_rows, float fill);
Stmt make_row_store(const std::string &src, const std::string &tensor, Halide::Expr base, Halide::Expr valid_rows);
Stmt make_fill(const std::string &dst, float value);
Stmt make_map(const std::string &dst, Halide::Expr value, const std::string &note = "");
Stmt make_row_map(const std::string &dst, Halide::Expr value, const std::string &note = "");
Stmt make_reduce(const std::string &dst, ReduceOp op, const std::string &src);
/** acc = a * b (^T) + (acc, unless `restart` holds). */
Stmt make_dot(const std::string &acc, const std::string &a, const std::string &b, bool transpose_b,
              Halide::Expr restart = Halide::Expr());
Stmt make_convert(const std::string &dst, const std::string &src);
Stmt make_loop(const std::string &var, Halide::Expr begin, Halide::Expr end, std::vector<std::string> carried,
               Block body);
Stmt make_if(Halide::Expr cond, Block body, const std::string &note = "");
Stmt make_barrier();
Stmt make_release(const std::string &tile, Halide::Expr ring = Halide::Expr());
Stmt make_dot_wait(int pending, std::vector<std::string> fenced);
Stmt make_turn(TurnMode mode);
Stmt make_last_arrival(const std::string &counter, Halide::Expr index, Halide::Expr arrivals, Block body,
                       const std::string &note = "");
Stmt make_cluster_merge(Block body, const std::string &note = "");
/** dst = op over the cluster's blocks of their row vector src (ClusterReduce). */
Stmt make_cluster_reduce(const std::string &dst, ReduceOp op, const std::string &src);
/** dst = op over the cluster's ranks q of `value` with the row vectors `peers` read at q (src the first). */
Stmt make_cluster_reduce(const std::string &dst, ReduceOp op, std::vector<std::string> peers, Halide::Expr value);
/** Rows [row, row + valid_rows) of the shared f32 tile `src` of the cluster's block `rank` into `dst`
 * (a register tile; columns up to valid_cols), or with a row vector `dst` its first column (rows
 * beyond valid get `fill`). */
Stmt make_cluster_load(const std::string &dst, const std::string &src, Halide::Expr rank, Halide::Expr row,
                       Halide::Expr valid_rows, Halide::Expr valid_cols);
Stmt make_cluster_row_load(const std::string &dst, const std::string &src, Halide::Expr rank, Halide::Expr row,
                           Halide::Expr valid_rows, float fill);
/** Whether `n` is a cluster load (a TileLoad or RowLoad from a cluster block's shared tile). */
inline bool is_cluster_load(const Node &n) {
    return (n.kind == NodeKind::TileLoad || n.kind == NodeKind::RowLoad) && n.rank.defined();
}
/** The names statement `n` writes and reads (with `with_body`, its body's too): values, and in a
 * map's expression every Variable (scalars too). A Release writes its tile (the producer may refill
 * the buffer). */
void effects(const Node &n, std::set<std::string> &writes, std::set<std::string> &reads, bool with_body = false);
/** Whether every row of a slice starts at a multiple of `v` elements (vector loads and stores). */
bool rows_aligned(const Halide::Expr &base, const Halide::Expr &row_stride, int v);
struct Kernel;
/** Adds the TMA descriptor "<tensor>_map" for boxes of `box_rows` to k.tensor_maps unless the tensor
 * has one; one per tensor, so a second height is an InternalError. */
void add_tensor_map(Kernel &k, const std::string &tensor, int box_rows, int l2_promotion);
/** `k` with each top-level loop replaced by what `f` returns for it (nothing: the loop stays): how the
 * passes that restructure a kernel's main loop rewrite it. */
Kernel rewrite_top_loops(const Kernel &k, const std::function<Block(const Stmt &)> &f);
struct Program;
/** The stride parameters (core/StrideParams.h) of every kernel's views that `ints` lacks, set to the
 * dense layout's (products of extents, in kStrideUnit elements), the extents evaluated over `ints`:
 * for callers that hold dense tensors (the JIT operator, the interpreter's checks). Throws
 * InternalError when an extent is not a constant under `ints` or cols is not a multiple of the unit. */
void bind_dense_strides(const Program &p, std::map<std::string, int64_t> &ints);
/** A copy of `s` with role `r`. */
Stmt with_role(const Stmt &s, Role r);
/** The index of the first statement of `b` with role `r`, or b.size() when there is none. */
size_t find_role(const Block &b, Role r);
/** A copy of `s` with `f` applied to it (for passes that change attributes). */
Stmt with(const Stmt &s, const std::function<void(Node &)> &f);
/** A copy of `s` with `f` applied to each of its defined expressions (offsets, bounds, values,
 * rows, ring positions, loop bounds, conditions), and to its body's when `with_body`. */
Stmt with_exprs(const Stmt &s, const std::function<Halide::Expr(const Halide::Expr &)> &f, bool with_body);
/** The Int(32) variable `name`: a scalar, int parameter, block index or loop variable. */
Halide::Expr int_var(const std::string &name);

/** One kernel: parameters, launch shape, declared values and the statements of one thread block. */
struct Kernel {
    std::string name;
    std::vector<TensorParam> tensors;
    std::vector<std::string> int_params;  // scalar int parameters (extents), in launch order
    std::vector<std::string> float_params;  // scalar float parameters
    Halide::Expr grid_x, grid_y = 1, grid_z = 1;  // over int_params; y and z 1 unless a builder sets them
    Halide::Expr cluster_x;  // blocks per cluster along x (dividing grid_x); undefined: none
    int warps = 4;  // compute warps, 16 rows each (4 make a wgmma warpgroup)
    int producer_warps = 0;  // warps issuing TMA copies ahead of the compute warps (0: none)
    int producer_registers = 0, consumer_registers = 0;  // setmaxnreg budgets of the two roles (0: none)
    std::vector<TensorMap> tensor_maps;  // TMA descriptors, passed after the tensors
    std::map<std::string, TensorView> views;  // by tensor name: the tensors addressed by (batch, head, row)
    std::vector<ScalarDef> scalars;
    std::map<std::string, TileType> values;  // every tile and row vector
    Block body;
    int shared_bytes = 0;  // set by plan_shared_memory
    int pipeline_stages = 1;  // set by pipeline_loads
    int min_blocks_per_sm = 0;  // __launch_bounds__ occupancy hint (0: none); caps registers
    int strip_threads = 0;  // row-strip kernels: threads holding one row (32: a warp per row; the block)
    int strip_vector = 0;  // row-strip kernels: consecutive columns per thread and vector (16 bytes of input)
    // Row-strip kernels whose columns are strided in memory (a reduction over a middle axis): the
    // block's consecutive threads hold consecutive rows, so a warp's loads of one column are
    // coalesced; thread t of row r is threadIdx.x = t * R + r for R rows per block; vectors of 1.
    bool strip_lanes_along_rows = false;
    int rows() const { return 16 * warps; }
    int threads() const { return 32 * (warps + producer_warps); }
};

/** A tile program: the kernels of one fused group, launched in order (split-K: partials, then the
 * combine), and the f32 workspaces that pass partial states between them. */
struct Workspace {
    std::string name;
    Halide::Expr elements;  // over the first kernel's int_params
    bool zeroed = false;  // zero before the first launch; every launch leaves it zero (arrival counters)
};
/** What fold_combine needs to run a split-K combine inside the partial kernel, in the last block of
 * each group to finish: the group's counter index, the number of groups and of arrivals per group (over
 * the partial's scalars), and the combine kernel's block-dependent scalars (its first row, its rows)
 * rebound over the partial's scalars, so the combine handles exactly that group's rows. */
struct CombineFold {
    Halide::Expr group, groups, arrivals;
    std::map<std::string, Halide::Expr> combine_scalars;
    std::string chunk_var;  // the combine's loop variable over chunks
    Halide::Expr partial_row0;  // the combine's first row of chunk `chunk_var`'s state in the workspaces
};
struct Program {
    GpuArch arch = GpuArch::Sm80;  // what the kernels are compiled for
    std::vector<Kernel> kernels;
    std::vector<Workspace> workspaces;
    std::optional<CombineFold> fold;  // split-K programs of two kernels, set by build_tile_program
};

std::string to_string(const Kernel &k);
std::string to_string(const Program &p);
/** One statement as the kernel listing shows it (no indentation); a loop or if with its body
 * indented below its header unless `with_body` is false. */
std::string to_string(const Stmt &s, bool with_body = true);
/** Checks declarations, scopes and layouts; throws InternalError naming the statement. */
void verify(const Kernel &k);
void verify(const Program &p);

}  // namespace neptune::tir

#endif
