// The fp64 references against values derived by hand.
#include <doctest/doctest.h>

#include <cmath>

#include "neptune/reference/Reference.h"

using namespace neptune;

namespace {

OperatorSpec small_attention(Mask mask, int dqk, int dv) {
    OperatorSpec s = *find_operator("prefill_global");
    s.attention.q_heads = s.attention.kv_heads = 1;
    s.attention.head_dim_qk = dqk;
    s.attention.head_dim_v = dv;
    s.attention.mask = mask;
    return s;
}

HostTensor &tensor(std::vector<HostTensor> &ts, const std::string &n) {
    for (HostTensor &t : ts)
        if (t.desc.name == n) return t;
    FAIL("no tensor " << n);
    return ts[0];
}

}  // namespace

TEST_CASE("reference: two keys give the exp-weighted mean of their values") {
    const OperatorInstance in = instantiate(small_attention(Mask::None, 2, 1), 1, 2);
    std::vector<HostTensor> x = make_inputs(in, 1);
    tensor(x, "q").values = {1, 0, 0.5, 0.5};  // two query rows
    tensor(x, "k").values = {2, 0, 0, 1};  // k0 = (2, 0), k1 = (0, 1)
    tensor(x, "v").values = {10, 20};
    const std::vector<HostTensor> out = reference::compute(in, x);
    const double c = 1 / std::sqrt(2.0);
    // row 0: s = (2c, 0); row 1: s = (c, 0.5c)
    const double w0 = std::exp(2 * c) / (std::exp(2 * c) + 1);
    const double w1 = std::exp(c) / (std::exp(c) + std::exp(0.5 * c));
    CHECK(out[0].values[0] == doctest::Approx(10 * w0 + 20 * (1 - w0)).epsilon(1e-14));
    CHECK(out[0].values[1] == doctest::Approx(10 * w1 + 20 * (1 - w1)).epsilon(1e-14));
}

TEST_CASE("reference: causal row 0 and a window of 1 each see exactly one key, and rows before the keys see none") {
    OperatorSpec causal = small_attention(Mask::Causal, 4, 3);
    const OperatorInstance in = instantiate(causal, 1, 5);
    std::vector<HostTensor> x = make_inputs(in, 2);
    std::vector<HostTensor> out = reference::compute(in, x);
    for (int e = 0; e < 3; e++) CHECK(out[0].values[size_t(e)] == tensor(x, "v").values[size_t(e)]);

    OperatorSpec window = small_attention(Mask::Window, 4, 3);
    window.attention.window = 1;
    const OperatorInstance wi = instantiate(window, 1, 5);
    out = reference::compute(wi, x);
    for (int row = 0; row < 5; row++)
        for (int e = 0; e < 3; e++)
            CHECK(out[0].values[size_t(row * 3 + e)] == tensor(x, "v").values[size_t(row * 3 + e)]);

    causal.attention.seq_q = 7;  // rows 0 and 1 sit at positions -2 and -1: nothing visible
    causal.row_stats = RowStats::All;
    const OperatorInstance ci = instantiate(causal, 1, 5);
    std::vector<HostTensor> cx = make_inputs(ci, 3);
    out = reference::compute(ci, cx);
    for (int e = 0; e < 6; e++) CHECK(out[0].values[size_t(e)] == 0.0);
    CHECK(tensor(out, "lse").values[0] == -INFINITY);
    CHECK(tensor(out, "entropy").values[1] == 0.0);
    CHECK(tensor(out, "max_prob").values[1] == 0.0);
    CHECK(out[0].values[2 * 3] == tensor(cx, "v").values[0]);  // row 2 is at position 0: key 0 only
}

TEST_CASE("reference: equal scores give entropy ln n, largest probability 1/n and lse m + ln n") {
    OperatorSpec s = small_attention(Mask::None, 2, 2);
    s.row_stats = RowStats::All;
    const OperatorInstance in = instantiate(s, 1, 4);
    std::vector<HostTensor> x = make_inputs(in, 4);
    for (double &k : tensor(x, "k").values) k = 1.0;  // every key the same: equal scores
    const std::vector<HostTensor> out = reference::compute(in, x);
    for (int row = 0; row < 4; row++) {
        const double q0 = tensor(x, "q").values[size_t(2 * row)], q1 = tensor(x, "q").values[size_t(2 * row + 1)];
        const double score = (q0 + q1) / std::sqrt(2.0);
        CHECK(out[1].values[size_t(row)] == doctest::Approx(score + std::log(4.0)).epsilon(1e-13));
        CHECK(out[2].values[size_t(row)] == doctest::Approx(std::log(4.0)).epsilon(1e-13));
        CHECK(out[3].values[size_t(row)] == doctest::Approx(0.25).epsilon(1e-13));
    }
}

TEST_CASE("reference: softcap, ALiBi and GQA follow their formulas") {
    OperatorSpec s = small_attention(Mask::Causal, 1, 1);
    s.attention.q_heads = 2;
    s.attention.kv_heads = 1;
    s.attention.mod = ScoreMod::Alibi;
    const OperatorInstance in = instantiate(s, 1, 2);
    std::vector<HostTensor> x = make_inputs(in, 5);
    tensor(x, "q").values = {0, 0, 1, 1};  // head 0 rows 0..1, head 1 rows 0..1
    tensor(x, "k").values = {0.5, -0.5};
    tensor(x, "v").values = {1, 3};
    tensor(x, "slopes").values = {0.25, 0.5};
    const std::vector<HostTensor> out = reference::compute(in, x);
    // head 0, row 1 (position 1): s = (0 - 0.25, 0) ; head 1 row 1: s = (0.5 - 0.5, -0.5)
    const double a = std::exp(-0.25) / (std::exp(-0.25) + 1), b = 1 / (1 + std::exp(-0.5));
    CHECK(out[0].values[1] == doctest::Approx(a * 1 + (1 - a) * 3).epsilon(1e-14));
    CHECK(out[0].values[3] == doctest::Approx(b * 1 + (1 - b) * 3).epsilon(1e-14));

    s.attention.mod = ScoreMod::Softcap;
    s.attention.softcap = 0.5;
    const OperatorInstance sc = instantiate(s, 1, 2);
    std::vector<HostTensor> y = make_inputs(sc, 6);
    tensor(y, "q").values = {0, 0, 2, 2};
    tensor(y, "k").values = {3, -1};
    tensor(y, "v").values = {1, 3};
    const std::vector<HostTensor> o2 = reference::compute(sc, y);
    const double s0 = 0.5 * std::tanh(6 / 0.5), s1 = 0.5 * std::tanh(-2 / 0.5);
    const double w = std::exp(s0) / (std::exp(s0) + std::exp(s1));
    CHECK(o2[0].values[3] == doctest::Approx(w * 1 + (1 - w) * 3).epsilon(1e-14));
}

TEST_CASE("reference: softmax, log-sum-exp and cross-entropy of a known row") {
    for (const char *name : {"softmax", "logsumexp", "cross_entropy"}) {
        const OperatorInstance in = instantiate(*find_operator(name), 1, 3);
        std::vector<HostTensor> x = make_inputs(in, 7);
        tensor(x, "x").values = {1, 2, 3};
        if (in.spec.family == Family::CrossEntropy) tensor(x, "labels").values = {1};
        const std::vector<HostTensor> out = reference::compute(in, x);
        const double z = std::exp(1) + std::exp(2) + std::exp(3);
        if (in.spec.family == Family::Softmax) {
            for (int c = 0; c < 3; c++) CHECK(out[0].values[size_t(c)] == doctest::Approx(std::exp(c + 1) / z));
        } else if (in.spec.family == Family::LogSumExp) {
            CHECK(out[0].values[0] == doctest::Approx(std::log(z)));
        } else {
            CHECK(out[0].values[0] == doctest::Approx(std::log(z) - 2));
        }
    }
}

TEST_CASE("reference: LayerNorm and RMSNorm of a known row, and their matmul forms") {
    OperatorSpec ln = *find_operator("layernorm_matmul");
    ln.eps = 0;
    ln.matmul_n = 2;
    const OperatorInstance in = instantiate(ln, 1, 4);
    std::vector<HostTensor> x = make_inputs(in, 8);
    tensor(x, "x").values = {1, 2, 3, 4};
    tensor(x, "gamma").values = {1, 1, 1, 1};
    tensor(x, "beta").values = {0, 0, 0, 0};
    tensor(x, "w").values = {1, 0, 1, 0, 1, 0, 1, 1};  // [4, 2]: column 0 sums all, column 1 takes x3
    const std::vector<HostTensor> out = reference::compute(in, x);
    const double sd = std::sqrt(1.25);
    CHECK(out[0].values[0] == doctest::Approx(0.0).epsilon(1e-14));
    CHECK(out[0].values[1] == doctest::Approx(1.5 / sd).epsilon(1e-14));

    OperatorSpec rms = *find_operator("rmsnorm");
    rms.eps = 0;
    const OperatorInstance ri = instantiate(rms, 1, 2);
    std::vector<HostTensor> rx = make_inputs(ri, 9);
    tensor(rx, "x").values = {3, 4};
    tensor(rx, "gamma").values = {1, 2};
    const std::vector<HostTensor> ro = reference::compute(ri, rx);
    CHECK(ro[0].values[0] == doctest::Approx(3 / std::sqrt(12.5)));
    CHECK(ro[0].values[1] == doctest::Approx(8 / std::sqrt(12.5)));
}

TEST_CASE("reference: Performer with zero projections gives every row the same key-weighted mean of V") {
    OperatorSpec p = *find_operator("performer");
    p.attention.q_heads = p.attention.kv_heads = 1;
    p.attention.head_dim_qk = p.attention.head_dim_v = 4;
    p.features = 8;
    const OperatorInstance in = instantiate(p, 1, 5);
    std::vector<HostTensor> x = make_inputs(in, 10);
    for (double &w : tensor(x, "features").values) w = 0;  // phi(x) = exp(-|x'|^2/2)/sqrt(F): a per-row constant
    const std::vector<HostTensor> out = reference::compute(in, x);
    for (int e = 0; e < 4; e++) {
        // phi(k_j) differs per key, so the mean is weighted by exp(-|k_j'|^2 / 2)
        double num = 0, den = 0;
        for (int j = 0; j < 5; j++) {
            double n2 = 0;
            for (int d = 0; d < 4; d++) n2 += std::pow(tensor(x, "k").values[size_t(j * 4 + d)], 2) / 2.0;
            num += std::exp(-n2 / 2) * tensor(x, "v").values[size_t(j * 4 + e)];
            den += std::exp(-n2 / 2);
        }
        for (int row = 0; row < 5; row++) CHECK(out[0].values[size_t(row * 4 + e)] == doctest::Approx(num / den));
    }
}
