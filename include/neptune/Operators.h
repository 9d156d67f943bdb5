#ifndef NEPTUNE_OPERATORS_H
#define NEPTUNE_OPERATORS_H
/** \file
 * The operator suite as data: what each operator computes, its tensors and
 * their shapes, and its cost. Halide-free, so references, the benchmark and
 * the runtime share it without pulling in the compiler. */
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neptune/DType.h"

namespace neptune {

enum class Family {
    Attention,
    Softmax,
    LogSumExp,
    CrossEntropy,
    LayerNorm,
    LayerNormMatmul,
    RmsNorm,
    RmsNormMatmul,
    Performer,
    LinearCrossEntropy
};
/** The label of a cross-entropy row that does not count (padding): its loss is 0. PyTorch's default
 * ignore_index. */
constexpr int kIgnoreIndex = -100;

enum class Mask { None, Causal, Window };
enum class ScoreMod { None, Alibi, Softcap };
/** "none", "causal", "window" and "none", "alibi", "softcap": the names the generators' parameters,
 * the C ABI and the benchmark's files use. */
const char *mask_name(Mask m);
const char *score_mod_name(ScoreMod m);

/** Attention, per (b, h, query row i) at absolute position p = seq_kv - seq_q + i:
 *   s_kv = scale * (q . k_kv), then softcap: cap * tanh(s / cap), then ALiBi: s + slope_h * (kv - p),
 *   then the mask (causal: kv <= p; window W: p - W < kv <= p) excludes positions;
 *   out = softmax_kv(s) . V, and for a row with no visible position out = 0.
 * Query head h reads KV head h / (q_heads / kv_heads). */
struct AttentionSpec {
    int q_heads = 32, kv_heads = 32;
    int head_dim_qk = 128, head_dim_v = 128;
    Mask mask = Mask::None;
    int window = 4096;
    ScoreMod mod = ScoreMod::None;
    double softcap = 50.0;
    bool decode = false;  // seq_q = 1, at the last position
    int64_t seq_q = 0;  // query rows when not decode; 0 = as many as keys. With more rows
        // than keys the first rows sit before position 0: fully masked when causal
    std::optional<double> scale;  // default 1 / sqrt(head_dim_qk)
    /** A paged KV cache: K and V live in pages of `page_size` keys, k_cache and v_cache
     * [pages, kv_heads, page_size, head_dim]; sequence b's key j is in page page_table[b, j / page_size]
     * at row j % page_size, and sequence b holds seq_lens[b] keys, its query rows the last positions
     * (row i at seq_lens[b] - seq_q + i). 0: dense k and v [batch, kv_heads, seq, head_dim]. */
    int page_size = 0;
    int64_t pages = 0;  // a paged cache's pages; 0: max_pages for every sequence, batch * max_pages
    double score_scale() const;
};

/** The keys sequence b of a paged operator holds, of at most `seq` (the benchmark's lengths: full,
 * just short of full, about half, and a few, repeating; at least 1). */
int64_t paged_seq_len(int64_t b, int64_t seq);

/** One operator of the suite. For attention families the benchmark shape
 * B,S is (batch, sequence); for row-wise families it is (rows, columns);
 * for Performer it is (batch, sequence) with `features` random features; for linear + cross-entropy
 * it is (tokens, vocabulary) with `hidden` columns of h. */
/** Per-row outputs an operator returns beside its own: the log-sum-exp (attention and softmax: what
 * a backward pass or a merge of partial results reads), or attention's lse, entropy and largest
 * probability. */
enum class RowStats { None, Lse, All };

struct OperatorSpec {
    std::string name;
    Family family;
    std::string description;
    DType dtype = DType::F16;
    AttentionSpec attention;  // Attention and Performer (heads, head dims)
    int features = 256;  // Performer
    int matmul_n = 1024;  // LayerNormMatmul, RmsNormMatmul: output columns
    int hidden = 4096;  // LinearCrossEntropy: the hidden size, the depth of logits = h * weight^T
    double eps = 1e-5;  // LayerNorm, RmsNorm
    // Per-row outputs beside the operator's own, written by the same kernel.
    RowStats row_stats = RowStats::None;
    bool f32_outputs = false;  // outputs in f32, not the input type (to compare fused and unfused in f32)
};

/** All operators, in the order `neptune_bench list` prints them. */
const std::vector<OperatorSpec> &operator_suite();
/** The operator called `name`, or nullopt. */
std::optional<OperatorSpec> find_operator(const std::string &name);

struct TensorDesc {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;  // outermost first (row-major)
    int64_t numel() const;
};

/** An operator at one shape: every tensor with its extents. The output's
 * leading dimensions (all but the last, or all for per-row statistics) form
 * the operator's "rows": each row is computed independently. */
struct OperatorInstance {
    OperatorSpec spec;
    int64_t batch = 1, seq = 1;  // as given on the command line
    std::vector<TensorDesc> inputs, outputs;
    int64_t rows = 0;  // independent output rows
    int64_t row_block = 1;  // rows that share one (batch, head): a contiguous run never crosses it
    int row_dims = 1;  // leading dims of every output that index rows (3 for attention: B, H, S)
    const TensorDesc &input(const std::string &name) const;
    const TensorDesc &output(const std::string &name) const;
};

/** The instance of `spec` at (batch, seq); throws std::invalid_argument with a message for bad extents. */
OperatorInstance instantiate(const OperatorSpec &spec, int64_t batch, int64_t seq);

/** The most keys one sequence of an attention instance holds: k's rows, or for a paged cache the
 * page table's width in keys. */
int64_t attention_keys(const OperatorInstance &inst);

/** Cost by the conventions of docs/design/operators.md (counting work): attention FLOPs 4*B*Hq*Sq*Skv*D (halved for
 * causal prefill; windowed 2*B*Hq*S*min(S,W)*D); bytes are the compulsory traffic (decode: K and V only). */
double operator_flops(const OperatorInstance &inst);
double operator_bytes(const OperatorInstance &inst);
/** The row-wise reductions over the last axis of x [rows, cols]: softmax, log-sum-exp, cross-entropy,
 * LayerNorm, RMSNorm (the families Neptune's row-chain kernels run). */
bool row_wise(Family f);
/** True when the operator is judged in TB/s (decode and row-wise reductions) rather than TFLOP/s. */
bool memory_bound(const OperatorSpec &spec);

/** Parses "B,S" (two positive integers); throws std::invalid_argument with a message otherwise. */
std::pair<int64_t, int64_t> parse_shape(const std::string &text);

}  // namespace neptune

#endif
