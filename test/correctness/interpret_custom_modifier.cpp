// Score modifiers of a user's own (README: "Add your own generator"; tutorial lesson 10) through the
// tile backend, before any GPU run: attention written in plain Halide with the modifier in its score
// Func, fused by rolling_update (or split_k_update for one query row), lowered for sm_80 (mma.sync)
// and sm_90a (wgmma, TMA, warp specialization), run in the tile-IR interpreter, and compared with the
// same algorithm unfused on Halide's CPU backend. The modifiers and masks read the row, the column
// and 1-D inputs, f32 and int32, over the query heads and over the batch.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "CustomAttention.h"
#include "core/SplitChunks.h"
#include "lower/Lower.h"
#include "tir/Interpreter.h"

using namespace neptune;
using namespace neptune::testing;
using Halide::Expr;

namespace {

enum class Fusion { Rolling, SplitK };

void check(const Modifier &modifier, const AttentionShape &s, GpuArch arch, Fusion fusion = Fusion::Rolling) {
    INFO(arch_name(arch) << (fusion == Fusion::SplitK ? " split-K" : " rolling") << " B=" << s.batch
                         << " H=" << s.q_heads << "/" << s.kv_heads << " Sq=" << s.seq_q << " Skv=" << s.seq_kv
                         << " D=" << s.dim);
    std::vector<HostTensor> in = custom_inputs(s);
    const HostTensor want = unfused_output(modifier, s, in);  // the oracle

    // The fused group's tile program in the interpreter.
    CustomAttention fused(modifier, s.dim);
    const bool split_k = fusion == Fusion::SplitK;
    const int chunks = 3;
    const FusedReduction group = fused.fuse(split_k ? chunks : 0);
    internal::LowerOptions lo =
        internal::default_lower_options(arch, DType::F16, s.dim, s.dim, split_k, s.q_heads / s.kv_heads);
    if (split_k) lo.block_n = 32;
    const tir::Program program = internal::lower_to_tiles(group.plan(), {fused.out}, lo);
    HostTensor got(want.desc);
    std::fill(got.values.begin(), got.values.end(), NAN);  // unwritten elements fail
    tir::LaunchArgs args;
    for (HostTensor &t : in) args.tensors[t.desc.name] = &t;
    args.tensors["out"] = &got;
    args.ints = {
        {"batch", s.batch}, {"q_heads", s.q_heads}, {"kv_heads", s.kv_heads}, {"seq_q", s.seq_q}, {"seq_kv", s.seq_kv}};
    if (split_k) internal::set_split_k_params(args.ints, chunks);
    tir::bind_dense_strides(program, args.ints);
    std::vector<HostTensor> workspaces;
    workspaces.reserve(program.workspaces.size());
    for (const tir::Workspace &w : program.workspaces) {
        std::map<std::string, Expr> m;
        for (auto &[k, v] : args.ints) m[k] = Expr(int(v));
        const Expr n = Halide::Internal::simplify(Halide::Internal::substitute(m, w.elements));
        workspaces.emplace_back(TensorDesc{w.name, DType::F32, {n.as<Halide::Internal::IntImm>()->value}});
        args.tensors[w.name] = &workspaces.back();
    }
    tir::interpret(program, args);

    const ErrorStats e = compare(got.values, want.values);
    INFO(e.describe(want.desc));
    CHECK(e.nonfinite == 0);
    CHECK(e.rel_rms() < 2e-3);  // the probabilities go to the tensor cores in f16
}

// Lesson 10's: a temperature per head and a logarithmic distance penalty per head.
Expr temperature_log_decay(const ScoreArgs &x) {
    return x.s * x.a(x.h) -
           x.b(x.h) * Halide::log(1.0f + Halide::abs(Halide::cast<float>(x.pos) - Halide::cast<float>(x.j)));
}

// A sigmoid gate on the distance, and a per-head offset: s * sigmoid(a[h] - |pos - j| / 16) + b[h].
Expr sigmoid_gate(const ScoreArgs &x) {
    const Expr dist = Halide::abs(Halide::cast<float>(x.pos - x.j));
    return x.s / (1.0f + Halide::exp(dist * (1.0f / 16.0f) - x.a(x.h))) + x.b(x.h);
}

const float neg_inf = -std::numeric_limits<float>::infinity();

// The keys each batch holds (a padded KV cache): an int32 input over the batch in the mask.
Expr keys_per_batch(const ScoreArgs &x) { return Halide::select(x.j < x.kv_len(x.n), x.s, neg_inf); }

// A causal sliding window as wide as an int32 input over the heads, and a temperature per batch, f32.
Expr window_per_head(const ScoreArgs &x) {
    return Halide::select(x.j <= x.pos && x.j > x.pos - x.window(x.h), x.s * x.temperature(x.n), neg_inf);
}

// A bias from the distance to the batch's last key (int32 over the batch) at an f32 rate per head, and
// a mask comparing that distance in f32 with an f32 input over the batch.
Expr distance_to_last_key(const ScoreArgs &x) {
    const Expr dist = Halide::cast<float>(x.kv_len(x.n) - x.j);
    return Halide::select(dist > -64.0f * x.temperature(x.n), x.s - 0.05f * x.a(x.h) * Halide::abs(dist), neg_inf);
}

}  // namespace

TEST_CASE("interpret custom modifier: a per-head temperature and log-distance decay, as lesson 10 builds it") {
    for (GpuArch arch : {GpuArch::Sm80, GpuArch::Sm90a}) {
        check(temperature_log_decay, {2, 4, 2, 200, 200, 64}, arch);  // partial last tile, GQA
        check(temperature_log_decay, {1, 4, 2, 77, 200, 64}, arch);  // queries at the last positions
    }
}

TEST_CASE("interpret custom modifier: a sigmoid gate on the distance with a per-head offset") {
    for (GpuArch arch : {GpuArch::Sm80, GpuArch::Sm90a}) check(sigmoid_gate, {1, 2, 2, 130, 130, 128}, arch);
}

TEST_CASE("interpret custom modifier: masks and modifiers reading int32 and f32 inputs over the batch and heads") {
    // Batches hold seq_kv - 29, 5 and seq_kv keys: a partial tile, one tile, all of them.
    for (GpuArch arch : {GpuArch::Sm80, GpuArch::Sm90a}) {
        INFO("keys per batch");
        check(keys_per_batch, {3, 4, 2, 150, 200, 64}, arch);
        check(keys_per_batch, {3, 8, 2, 1, 300, 64}, arch, Fusion::SplitK);
        INFO("a window per head");
        check(window_per_head, {2, 4, 2, 150, 200, 64}, arch);
        check(window_per_head, {2, 4, 2, 1, 300, 64}, arch, Fusion::SplitK);
        INFO("a distance to the batch's last key");
        check(distance_to_last_key, {3, 2, 2, 100, 200, 64}, arch);
        check(distance_to_last_key, {3, 4, 1, 1, 300, 64}, arch, Fusion::SplitK);
    }
}
