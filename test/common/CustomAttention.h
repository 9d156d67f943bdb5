#ifndef NEPTUNE_TEST_COMMON_CUSTOM_ATTENTION_H
#define NEPTUNE_TEST_COMMON_CUSTOM_ATTENTION_H
/** \file
 * Attention written in plain Halide with a score modifier of the test's own (README: "Add your own
 * generator"; tutorial lesson 10), reading 1-D inputs of both element types over the query heads and
 * over the batch; its inputs; and its output computed unfused on Halide's CPU backend, the oracle
 * the fused kernels are checked against. */
#include <functional>
#include <vector>

#include "Halide.h"
#include "neptune/Directives.h"
#include "neptune/HostTensor.h"

namespace neptune::testing {

/** What a modifier reads: the scaled dot product, the query's position, the key, the query head, the
 * batch index, and the 1-D inputs. */
struct ScoreArgs {
    Halide::Expr s, pos, j, h, n;
    Halide::Func a, b;  // f32 [q_heads]
    Halide::Func window;  // int32 [q_heads]
    Halide::Func temperature;  // f32 [batch]
    Halide::Func kv_len;  // int32 [batch]
};

/** The score of key j for one query: the scaled dot product modified, or -inf where masked. */
using Modifier = std::function<Halide::Expr(const ScoreArgs &)>;

struct AttentionShape {
    int batch, q_heads, kv_heads, seq_q, seq_kv, dim;
};

/** The algorithm's Funcs over f16 q, k, v [dim, seq, heads, batch] (innermost first), with an f32
 * output: acc and row_sum are the targets to fuse over kv.x. */
struct CustomAttention {
    Halide::ImageParam q{Halide::Float(16), 4, "q"}, k{Halide::Float(16), 4, "k"}, v{Halide::Float(16), 4, "v"};
    Halide::ImageParam a{Halide::Float(32), 1, "a"}, b{Halide::Float(32), 1, "b"};
    Halide::ImageParam window{Halide::Int(32), 1, "window"};
    Halide::ImageParam temperature{Halide::Float(32), 1, "temperature"};
    Halide::ImageParam kv_len{Halide::Int(32), 1, "kv_len"};
    Halide::Func out, acc, row_sum;
    Halide::RDom kv;

    CustomAttention(const Modifier &modifier, int dim);
    /** Fuses acc and row_sum over the keys: rolling_update(64) at 0 chunks, else split_k_update(chunks, 32). */
    FusedReduction fuse(int chunks) const;
    /** The inputs in custom_inputs' order. */
    std::vector<Halide::ImageParam> params() const;
};

/** q, k, v (row-major [batch, heads, seq, dim], values in [-2, 2) rounded to f16), a and b (f32 per
 * query head), window (int32 per query head: 24, 64, 104, ...), temperature (f32 per batch) and
 * kv_len (int32 per batch: seq_kv - 29, 5, seq_kv, repeating; at least 1): reproducible. */
std::vector<HostTensor> custom_inputs(const AttentionShape &s);

/** The output [batch, q_heads, seq_q, dim] of the algorithm unfused, on Halide's CPU backend. */
HostTensor unfused_output(const Modifier &modifier, const AttentionShape &s, const std::vector<HostTensor> &inputs);

}  // namespace neptune::testing

#endif
