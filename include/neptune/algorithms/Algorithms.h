#ifndef NEPTUNE_ALGORITHMS_ALGORITHMS_H
#define NEPTUNE_ALGORITHMS_ALGORITHMS_H
/** \file
 * The operator suite as plain Halide algorithms: no schedules, no tiles, no
 * fusion. Every reduction is a named Func over a named RDom, so schedules and
 * Neptune's directives can name them, and every algorithm runs as-is on
 * Halide's CPU backend, which makes it its own reference for fusion.
 *
 * Halide's dimension order is innermost first: a row-major tensor
 * Q[B, H, S, D] is the Func q(d, s, h, b). Inputs are f16 or bf16 and every
 * reduction accumulates in f32. */
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "Halide.h"
#include "neptune/Operators.h"

namespace neptune::algorithms {

/** Halide's type for a Neptune element type. */
Halide::Type halide_type(DType t);

/** -infinity in f32: the identity of max, and the score of a masked position. */
Halide::Expr neg_inf();

/** A row maximum that is safe to subtract inside exp: 0 while the row has seen
 * only masked positions (max == -inf), so exp(-inf - safe) = 0, never NaN. */
Halide::Expr safe_max(const Halide::Expr &row_max);

/** The inputs of an attention algorithm as Funcs, with their extents, so the
 * same algorithm serves ImageParams (JIT) and Generator inputs (AOT). */
struct AttentionInputs {
    Halide::Func q, k, v;  // q(d, i, h, b), k(d, j, hkv, b), v(e, j, hkv, b)
    Halide::Func slopes;  // slopes(h), f32; only read with ScoreMod::Alibi
    Halide::Expr seq_q, seq_kv;  // query rows and keys (with seq_lens: the most a sequence holds)
    Halide::Expr q_heads, kv_heads, head_dim_qk;
    /** seq_lens(b), int32: the keys sequence b holds, where sequences of one batch differ in length
     * (undefined: every sequence holds seq_kv). Its query rows end at position seq_lens(b) - 1, and
     * keys from seq_lens(b) on are masked. */
    Halide::Func seq_lens = Halide::Func();
};

/** The stages of attention, named as in the printed IR:
 *   qk(j, i, h, b)      = sum over rd of q * k                 (the dot, a reduction over the head dim)
 *   score(j, i, h, b)   = mask(modifier(scale * qk))            (-inf where masked)
 *   row_max(i, h, b)    = max over kv of score                  producer
 *   prob(j, i, h, b)    = exp(score - safe_max(row_max))
 *   row_sum(i, h, b)    = sum over kv of prob                   target of row_max
 *   acc(e, i, h, b)     = sum over kv of prob * v               target of row_max
 *   out(e, i, h, b)     = row_sum == 0 ? 0 : acc / row_sum      (cast to the element type)
 * and, with row statistics:
 *   ent_num(i, h, b)    = sum over kv of prob * score           target of row_max
 *   max_prob(i, h, b)   = max over kv of prob / row_sum         target of row_max and row_sum
 *   lse = row_max + log(row_sum); entropy = lse - ent_num / row_sum (-inf and 0 for empty rows). */
struct AttentionFuncs {
    Halide::RDom kv;  // the shared reduction over keys
    Halide::Func qk, score, row_max, prob, row_sum, acc, out;
    Halide::Func lse;  // defined with RowStats::Lse or All
    Halide::Func ent_num, max_prob_acc, entropy, max_prob;  // defined with RowStats::All
};

/** `out_dtype` is the type of `out` (the input type, or f32). */
AttentionFuncs attention(const AttentionSpec &spec, DType out_dtype, const AttentionInputs &in,
                         RowStats row_stats = RowStats::None);

/** An operator of the suite built from ImageParams: inputs and outputs in the
 * order of OperatorInstance, and every named stage. */
struct OperatorFuncs {
    std::vector<Halide::ImageParam> inputs;
    std::vector<Halide::Func> outputs;
    std::map<std::string, Halide::Func> stages;
    std::map<std::string, Halide::RDom> rdoms;  // the reduction domains by name: "kv", "rc", "rf", ...
    Halide::Func stage(const std::string &name) const;  // throws std::invalid_argument for unknown names
};

/** Builds the algorithm of `spec`; extents are run-time (taken from the input buffers). */
OperatorFuncs build(const OperatorSpec &spec);

/** The extent of dimension `dim` (innermost first) of input `input`. */
using ExtentOf = std::function<Halide::Expr(size_t input, int dim)>;

/** The algorithm of `spec` over Funcs (e.g. a Generator's Input<Buffer<>>s), in the order of
 * instantiate(spec).inputs, with their extents; `inputs` of the result stays empty. Throws
 * std::invalid_argument for a wrong number of inputs. */
OperatorFuncs build_from(const OperatorSpec &spec, const std::vector<Halide::Func> &inputs, const ExtentOf &extent);

}  // namespace neptune::algorithms

#endif
