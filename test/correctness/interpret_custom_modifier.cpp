// Score modifiers of a user's own (README: "Add your own generator"; tutorial lesson 10) through the
// tile backend, before any GPU run: attention written in plain Halide with the modifier in its score
// Func, fused by rolling_update, lowered for sm_80 (mma.sync) and sm_90a (wgmma, TMA, warp
// specialization), run in the tile-IR interpreter, and compared with the same algorithm unfused on
// Halide's CPU backend. The modifiers read the row, the column and 1-D inputs over the query heads.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "lower/Lower.h"
#include "neptune/Directives.h"
#include "neptune/HalideCpu.h"
#include "tir/Interpreter.h"

using namespace neptune;
using Halide::Expr;
using Halide::Func;

namespace {

// The score of key j for query i of head h from the scaled dot product, the query's position, and
// the two per-head inputs.
using Modifier = std::function<Expr(Expr scaled, Expr pos, Expr j, Func a, Func b, Expr h)>;

struct Shape {
    int batch, q_heads, kv_heads, seq_q, seq_kv, dim;
};

struct Attention {
    Halide::ImageParam q{Halide::Float(16), 4, "q"}, k{Halide::Float(16), 4, "k"}, v{Halide::Float(16), 4, "v"};
    Halide::ImageParam a{Halide::Float(32), 1, "a"}, b{Halide::Float(32), 1, "b"};
    Func out, acc, row_sum;
    Halide::RDom kv;

    Attention(const Modifier &modifier, int dim) {
        Halide::Var d("d"), e("e"), i("i"), j("j"), h("h"), n("n");
        const Expr seq_q = q.dim(1).extent(), seq_kv = k.dim(1).extent();
        const Expr hk = h / (q.dim(2).extent() / k.dim(2).extent());
        Halide::RDom rd(0, dim, "rd");
        Func qk("qk"), score("score"), row_max("row_max");
        qk(j, i, h, n) = 0.0f;
        qk(j, i, h, n) += Halide::cast<float>(q(rd, i, h, n)) * Halide::cast<float>(k(rd, j, hk, n));
        score(j, i, h, n) = modifier(qk(j, i, h, n) * (1.0f / std::sqrt(float(dim))), seq_kv - seq_q + i, j, a, b, h);
        kv = Halide::RDom(0, seq_kv, "kv");
        row_max = Func("row_max");
        row_max(i, h, n) = -std::numeric_limits<float>::infinity();
        row_max(i, h, n) = Halide::max(row_max(i, h, n), score(kv, i, h, n));
        const Expr p = Halide::exp(score(kv, i, h, n) - row_max(i, h, n));
        row_sum = Func("row_sum");
        row_sum(i, h, n) = 0.0f;
        row_sum(i, h, n) += p;
        acc = Func("acc");
        acc(e, i, h, n) = 0.0f;
        acc(e, i, h, n) += p * Halide::cast<float>(v(e, kv, hk, n));
        out = Func("out");
        out(e, i, h, n) = acc(e, i, h, n) / row_sum(i, h, n);  // f32, to compare at fp32's precision
    }
};

std::vector<HostTensor> inputs(const Shape &s) {
    std::vector<HostTensor> t = {HostTensor({"q", DType::F16, {s.batch, s.q_heads, s.seq_q, s.dim}}),
                                 HostTensor({"k", DType::F16, {s.batch, s.kv_heads, s.seq_kv, s.dim}}),
                                 HostTensor({"v", DType::F16, {s.batch, s.kv_heads, s.seq_kv, s.dim}}),
                                 HostTensor({"a", DType::F32, {s.q_heads}}),
                                 HostTensor({"b", DType::F32, {s.q_heads}})};
    uint64_t x = 12345;
    auto uniform = [&]() {  // a small LCG: reproducible, no dependence on the suite's generators
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return double(x >> 11) / double(1ull << 53) * 2.0 - 1.0;
    };
    for (size_t n = 0; n < 3; n++)
        for (double &v : t[n].values) v = 2.0 * uniform();
    for (int h = 0; h < s.q_heads; h++) {
        t[3].values[size_t(h)] = 0.5 + 0.5 * h;
        t[4].values[size_t(h)] = 0.3 * (h % 3);
    }
    for (HostTensor &v : t) v.round_to_dtype();
    return t;
}

void check(const Modifier &modifier, const Shape &s, GpuArch arch) {
    INFO(arch_name(arch) << " B=" << s.batch << " H=" << s.q_heads << "/" << s.kv_heads << " Sq=" << s.seq_q
                         << " Skv=" << s.seq_kv << " D=" << s.dim);
    std::vector<HostTensor> in = inputs(s);
    const TensorDesc out_desc{"out", DType::F32, {s.batch, s.q_heads, s.seq_q, s.dim}};

    // The unfused algorithm on Halide's CPU backend: the oracle.
    Attention plain(modifier, s.dim);
    std::vector<Halide::ImageParam> params = {plain.q, plain.k, plain.v, plain.a, plain.b};
    for (size_t n = 0; n < params.size(); n++) params[n].set(to_halide_buffer(in[n]));
    schedule_reductions_at_root({plain.out});
    Halide::Buffer<float> want = plain.out.realize({s.dim, s.seq_q, s.q_heads, s.batch}, cpu_target());

    // The fused group's tile program in the interpreter.
    Attention fused(modifier, s.dim);
    FusedReduction group = fuse_reduction({fused.acc, fused.row_sum}, Halide::RVar(fused.kv.x)).rolling_update(64);
    internal::LowerOptions lo = internal::default_lower_options(arch, DType::F16, s.dim, s.dim, false, 1);
    const tir::Program program = internal::lower_to_tiles(group.plan(), {fused.out}, lo);
    HostTensor got(out_desc);
    std::fill(got.values.begin(), got.values.end(), NAN);  // unwritten elements fail
    tir::LaunchArgs args;
    for (HostTensor &t : in) args.tensors[t.desc.name] = &t;
    args.tensors["out"] = &got;
    args.ints = {
        {"batch", s.batch}, {"q_heads", s.q_heads}, {"kv_heads", s.kv_heads}, {"seq_q", s.seq_q}, {"seq_kv", s.seq_kv}};
    tir::interpret(program, args);

    std::vector<double> expected(got.values.size());
    for (size_t n = 0; n < expected.size(); n++) expected[n] = double(want.data()[n]);
    const ErrorStats e = compare(got.values, expected);
    INFO(e.describe(out_desc));
    CHECK(e.nonfinite == 0);
    CHECK(e.rel_rms() < 2e-3);  // the probabilities go to the tensor cores in f16
}

// Lesson 10's: a temperature per head and a logarithmic distance penalty per head.
Expr temperature_log_decay(Expr s, Expr pos, Expr j, Func a, Func b, Expr h) {
    return s * a(h) - b(h) * Halide::log(1.0f + Halide::abs(Halide::cast<float>(pos) - Halide::cast<float>(j)));
}

// A sigmoid gate on the distance, and a per-head offset: s * sigmoid(a[h] - |pos - j| / 16) + b[h].
Expr sigmoid_gate(Expr s, Expr pos, Expr j, Func a, Func b, Expr h) {
    const Expr dist = Halide::abs(Halide::cast<float>(pos - j));
    return s / (1.0f + Halide::exp(dist * (1.0f / 16.0f) - a(h))) + b(h);
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
