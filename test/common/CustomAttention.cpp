#include "CustomAttention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "neptune/HalideCpu.h"

namespace neptune::testing {

CustomAttention::CustomAttention(const Modifier &modifier, int dim) {
    Halide::Var d("d"), e("e"), i("i"), j("j"), h("h"), n("n");
    const Halide::Expr seq_q = q.dim(1).extent(), seq_kv = k.dim(1).extent();
    const Halide::Expr hk = h / (q.dim(2).extent() / k.dim(2).extent());
    Halide::RDom rd(0, dim, "rd");
    Halide::Func qk("qk"), score("score"), row_max("row_max");
    qk(j, i, h, n) = 0.0f;
    qk(j, i, h, n) += Halide::cast<float>(q(rd, i, h, n)) * Halide::cast<float>(k(rd, j, hk, n));
    ScoreArgs args{qk(j, i, h, n) * (1.0f / std::sqrt(float(dim))),
                   seq_kv - seq_q + i,
                   j,
                   h,
                   n,
                   a,
                   b,
                   window,
                   temperature,
                   kv_len};
    score(j, i, h, n) = modifier(args);
    kv = Halide::RDom(0, seq_kv, "kv");
    row_max(i, h, n) = -std::numeric_limits<float>::infinity();
    row_max(i, h, n) = Halide::max(row_max(i, h, n), score(kv, i, h, n));
    const Halide::Expr p = Halide::exp(score(kv, i, h, n) - row_max(i, h, n));
    row_sum = Halide::Func("row_sum");
    row_sum(i, h, n) = 0.0f;
    row_sum(i, h, n) += p;
    acc = Halide::Func("acc");
    acc(e, i, h, n) = 0.0f;
    acc(e, i, h, n) += p * Halide::cast<float>(v(e, kv, hk, n));
    out = Halide::Func("out");
    out(e, i, h, n) = acc(e, i, h, n) / row_sum(i, h, n);  // f32, to compare at fp32's precision
}

FusedReduction CustomAttention::fuse(int chunks) const {
    FusedReduction g = fuse_reduction({acc, row_sum}, Halide::RVar(kv.x));
    if (chunks > 0) return g.split_k_update(chunks, 32);
    return g.rolling_update(64);
}

std::vector<Halide::ImageParam> CustomAttention::params() const { return {q, k, v, a, b, window, temperature, kv_len}; }

std::vector<HostTensor> custom_inputs(const AttentionShape &s) {
    std::vector<HostTensor> t = {HostTensor({"q", DType::F16, {s.batch, s.q_heads, s.seq_q, s.dim}}),
                                 HostTensor({"k", DType::F16, {s.batch, s.kv_heads, s.seq_kv, s.dim}}),
                                 HostTensor({"v", DType::F16, {s.batch, s.kv_heads, s.seq_kv, s.dim}}),
                                 HostTensor({"a", DType::F32, {s.q_heads}}),
                                 HostTensor({"b", DType::F32, {s.q_heads}}),
                                 HostTensor({"window", DType::I32, {s.q_heads}}),
                                 HostTensor({"temperature", DType::F32, {s.batch}}),
                                 HostTensor({"kv_len", DType::I32, {s.batch}})};
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
        t[5].values[size_t(h)] = 24 + 40 * h;
    }
    for (int n = 0; n < s.batch; n++) {
        t[6].values[size_t(n)] = 1.5 - 0.25 * n;
        const int lengths[3] = {s.seq_kv - 29, 5, s.seq_kv};
        t[7].values[size_t(n)] = std::max(1, lengths[n % 3]);
    }
    for (HostTensor &v : t) v.round_to_dtype();
    return t;
}

HostTensor unfused_output(const Modifier &modifier, const AttentionShape &s, const std::vector<HostTensor> &inputs) {
    CustomAttention plain(modifier, s.dim);
    std::vector<Halide::ImageParam> params = plain.params();
    for (size_t n = 0; n < params.size(); n++) params[n].set(to_halide_buffer(inputs.at(n)));
    schedule_reductions_at_root({plain.out});
    Halide::Buffer<float> want = plain.out.realize({s.dim, s.seq_q, s.q_heads, s.batch}, cpu_target());
    HostTensor out(TensorDesc{"out", DType::F32, {s.batch, s.q_heads, s.seq_q, s.dim}});
    for (size_t n = 0; n < out.values.size(); n++) out.values[n] = double(want.data()[n]);
    return out;
}

}  // namespace neptune::testing
