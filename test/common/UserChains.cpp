#include "UserChains.h"

#include <algorithm>
#include <cmath>

namespace neptune::testing {

namespace {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

Halide::Type halide_type(DType t) {
    switch (t) {
    case DType::F16: return Halide::Float(16);
    case DType::BF16: return Halide::BFloat(16);
    case DType::I32: return Halide::Int(32);
    default: return Halide::Float(32);
    }
}

Expr f32(const Expr &e) { return Halide::cast<float>(e); }

// Values in [-3, 3) from a fixed sequence, rounded to the tensor's type; maxima rise along the
// reduced axis in every other row so that a running maximum is repaired.
HostTensor values(const TensorDesc &d, uint64_t seed) {
    HostTensor t(d);
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (double &v : t.values) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v = double(s >> 40) / double(1ull << 24) * 6.0 - 3.0;
    }
    t.round_to_dtype();
    return t;
}

HostTensor output(const std::string &name, DType t, std::vector<int64_t> shape) {
    return HostTensor(TensorDesc{name, t, std::move(shape)});
}

// Softmax and log-sum-exp of the n values at x[base + k * stride], k < n, into y (same positions) and *lse.
void softmax_ref(const std::vector<double> &x, size_t base, size_t stride, int64_t n, std::vector<double> &y,
                 double *lse) {
    double m = -INFINITY, s = 0;
    for (int64_t k = 0; k < n; k++) m = std::max(m, x[base + size_t(k) * stride]);
    for (int64_t k = 0; k < n; k++) s += std::exp(x[base + size_t(k) * stride] - m);
    for (int64_t k = 0; k < n; k++) y[base + size_t(k) * stride] = std::exp(x[base + size_t(k) * stride] - m) / s;
    *lse = m + std::log(s);
}

}  // namespace

UserChain middle_softmax(int64_t d, int64_t n, int64_t b, DType dtype) {
    UserChain c;
    c.name = "softmax over a middle axis";
    Halide::ImageParam x(halide_type(dtype), 3, "ms_x");
    Var dv("d"), nv("n"), bv("b");
    Halide::RDom rn(0, x.dim(1).extent(), "rn");
    Func mx("ms_max"), sm("ms_sum"), y("ms_y"), lse("ms_lse");
    mx(dv, bv) = Halide::Float(32).min();
    mx(dv, bv) = Halide::max(mx(dv, bv), f32(x(dv, rn, bv)));
    sm(dv, bv) = 0.0f;
    sm(dv, bv) += Halide::exp(f32(x(dv, rn, bv)) - mx(dv, bv));
    y(dv, nv, bv) = Halide::cast(halide_type(dtype), Halide::exp(f32(x(dv, nv, bv)) - mx(dv, bv)) / sm(dv, bv));
    lse(dv, bv) = mx(dv, bv) + Halide::log(sm(dv, bv));
    c.group = std::make_shared<FusedReduction>(fuse_reduction(sm, Halide::RVar(rn.x)));
    c.params = {x};
    c.outputs = {y, lse};
    HostTensor xs = values({"ms_x", dtype, {b, n, d}}, 1);
    for (int64_t p = 0; p < b; p += 2)
        for (int64_t k = 0; k < n; k++)
            for (int64_t i = 0; i < d; i++) xs.values[size_t((p * n + k) * d + i)] += 6.0 * double(k) / double(n);
    xs.round_to_dtype();
    HostTensor ys = output("ms_y", dtype, {b, n, d}), ls = output("ms_lse", DType::F32, {b, d});
    for (int64_t p = 0; p < b; p++)
        for (int64_t i = 0; i < d; i++)
            softmax_ref(xs.values, size_t(p * n * d + i), size_t(d), n, ys.values, &ls.values[size_t(p * d + i)]);
    c.inputs = {xs};
    c.expected = {ys, ls};
    c.ints = {{"rows", d}, {"cols", n}, {"planes", b}};
    return c;
}

UserChain middle_layernorm(int64_t d, int64_t n, int64_t b) {
    UserChain c;
    c.name = "LayerNorm over a middle axis";
    Halide::ImageParam x(Halide::Float(16), 3, "ml_x"), gamma(Halide::Float(16), 1, "ml_gamma"),
        beta(Halide::Float(16), 1, "ml_beta");
    Var dv("d"), nv("n"), bv("b");
    Halide::RDom rn(0, x.dim(1).extent(), "rn");
    const Expr count = f32(x.dim(1).extent());
    Func sum_x("ml_sum"), mean("ml_mean"), m2("ml_m2"), inv("ml_inv"), y("ml_y");
    sum_x(dv, bv) = 0.0f;
    sum_x(dv, bv) += f32(x(dv, rn, bv));
    mean(dv, bv) = sum_x(dv, bv) / count;
    m2(dv, bv) = 0.0f;
    m2(dv, bv) += (f32(x(dv, rn, bv)) - mean(dv, bv)) * (f32(x(dv, rn, bv)) - mean(dv, bv));
    inv(dv, bv) = 1.0f / Halide::sqrt(m2(dv, bv) / count + 1e-5f);
    y(dv, nv, bv) = Halide::cast<Halide::float16_t>((f32(x(dv, nv, bv)) - mean(dv, bv)) * inv(dv, bv) * f32(gamma(nv)) +
                                                    f32(beta(nv)));
    c.group = std::make_shared<FusedReduction>(fuse_reduction(m2, Halide::RVar(rn.x)));
    c.params = {x, gamma, beta};
    c.outputs = {y};
    HostTensor xs = values({"ml_x", DType::F16, {b, n, d}}, 2), gs = values({"ml_gamma", DType::F16, {n}}, 3),
               bs = values({"ml_beta", DType::F16, {n}}, 4);
    HostTensor ys = output("ml_y", DType::F16, {b, n, d});
    for (int64_t p = 0; p < b; p++)
        for (int64_t i = 0; i < d; i++) {
            auto at = [&](int64_t k) { return size_t((p * n + k) * d + i); };
            double s = 0, q = 0;
            for (int64_t k = 0; k < n; k++) s += xs.values[at(k)];
            const double mu = s / double(n);
            for (int64_t k = 0; k < n; k++) q += (xs.values[at(k)] - mu) * (xs.values[at(k)] - mu);
            const double r = 1.0 / std::sqrt(q / double(n) + 1e-5);
            for (int64_t k = 0; k < n; k++)
                ys.values[at(k)] = (xs.values[at(k)] - mu) * r * gs.values[size_t(k)] + bs.values[size_t(k)];
        }
    c.inputs = {xs, gs, bs};
    c.expected = {ys};
    c.ints = {{"rows", d}, {"cols", n}, {"planes", b}};
    return c;
}

UserChain softmax_4d(int64_t cols, int64_t q, int64_t h, int64_t b) {
    UserChain c;
    c.name = "softmax over the last axis of a 4-D tensor";
    Halide::ImageParam x(Halide::Float(16), 4, "s4_x");
    Var cv("c"), qv("q"), hv("h"), bv("b");
    Halide::RDom rc(0, x.dim(0).extent(), "rc");
    Func mx("s4_max"), sm("s4_sum"), y("s4_y"), lse("s4_lse");
    mx(qv, hv, bv) = Halide::Float(32).min();
    mx(qv, hv, bv) = Halide::max(mx(qv, hv, bv), f32(x(rc, qv, hv, bv)));
    sm(qv, hv, bv) = 0.0f;
    sm(qv, hv, bv) += Halide::exp(f32(x(rc, qv, hv, bv)) - mx(qv, hv, bv));
    y(cv, qv, hv, bv) =
        Halide::cast<Halide::float16_t>(Halide::exp(f32(x(cv, qv, hv, bv)) - mx(qv, hv, bv)) / sm(qv, hv, bv));
    lse(qv, hv, bv) = mx(qv, hv, bv) + Halide::log(sm(qv, hv, bv));
    c.group = std::make_shared<FusedReduction>(fuse_reduction(sm, Halide::RVar(rc.x)));
    c.params = {x};
    c.outputs = {y, lse};
    const HostTensor xs = values({"s4_x", DType::F16, {b, h, q, cols}}, 5);
    HostTensor ys = output("s4_y", DType::F16, {b, h, q, cols}), ls = output("s4_lse", DType::F32, {b, h, q});
    for (int64_t r = 0; r < b * h * q; r++)
        softmax_ref(xs.values, size_t(r * cols), 1, cols, ys.values, &ls.values[size_t(r)]);
    c.inputs = {xs};
    c.expected = {ys, ls};
    c.ints = {{"rows", q}, {"cols", cols}, {"rows2", h}, {"rows3", b}};
    return c;
}

UserChain cross_entropy_3d(int64_t cols, int64_t q, int64_t b) {
    UserChain c;
    c.name = "cross-entropy over 3-D logits with an ignore index";
    Halide::ImageParam x(Halide::Float(16), 3, "ce_logits"), labels(Halide::Int(32), 2, "ce_labels");
    Var qv("q"), bv("b");
    Halide::RDom rc(0, x.dim(0).extent(), "rc");
    Func mx("ce_max"), sm("ce_sum"), loss("ce_loss");
    mx(qv, bv) = Halide::Float(32).min();
    mx(qv, bv) = Halide::max(mx(qv, bv), f32(x(rc, qv, bv)));
    sm(qv, bv) = 0.0f;
    sm(qv, bv) += Halide::exp(f32(x(rc, qv, bv)) - mx(qv, bv));
    const Expr label = labels(qv, bv);
    loss(qv, bv) = Halide::select(
        label == -100, 0.0f,
        mx(qv, bv) + Halide::log(sm(qv, bv)) - f32(x(Halide::clamp(label, 0, x.dim(0).extent() - 1), qv, bv)));
    c.group = std::make_shared<FusedReduction>(fuse_reduction(sm, Halide::RVar(rc.x)));
    c.params = {x, labels};
    c.outputs = {loss};
    const HostTensor xs = values({"ce_logits", DType::F16, {b, q, cols}}, 6);
    HostTensor ls(TensorDesc{"ce_labels", DType::I32, {b, q}});
    for (int64_t r = 0; r < b * q; r++) ls.values[size_t(r)] = r % 5 == 3 ? -100 : double((r * 7919) % cols);
    HostTensor out = output("ce_loss", DType::F32, {b, q});
    std::vector<double> scratch(xs.values.size());
    for (int64_t r = 0; r < b * q; r++) {
        double lse = 0;
        softmax_ref(xs.values, size_t(r * cols), 1, cols, scratch, &lse);
        const double l = ls.values[size_t(r)];
        out.values[size_t(r)] = l == -100 ? 0.0 : lse - xs.values[size_t(r * cols + int64_t(l))];
    }
    c.inputs = {xs, ls};
    c.expected = {out};
    c.ints = {{"rows", q}, {"cols", cols}, {"rows2", b}};
    return c;
}

UserChain row_entropy(int64_t cols, int64_t r) {
    UserChain c;
    c.name = "a row's entropy";
    Halide::ImageParam x(Halide::Float(16), 2, "en_x");
    Var rv("r");
    Halide::RDom rc(0, x.dim(0).extent(), "rc");
    Func mx("en_max"), sm("en_sum"), t("en_dot"), h("en_entropy");
    mx(rv) = Halide::Float(32).min();
    mx(rv) = Halide::max(mx(rv), f32(x(rc, rv)));
    sm(rv) = 0.0f;
    sm(rv) += Halide::exp(f32(x(rc, rv)) - mx(rv));
    t(rv) = 0.0f;
    t(rv) += Halide::exp(f32(x(rc, rv)) - mx(rv)) * f32(x(rc, rv));
    h(rv) = Halide::log(sm(rv)) + mx(rv) - t(rv) / sm(rv);
    c.group = std::make_shared<FusedReduction>(fuse_reduction(std::vector<Func>{sm, t}, Halide::RVar(rc.x)));
    c.params = {x};
    c.outputs = {h};
    const HostTensor xs = values({"en_x", DType::F16, {r, cols}}, 7);
    HostTensor out = output("en_entropy", DType::F32, {r});
    for (int64_t i = 0; i < r; i++) {
        const double *v = &xs.values[size_t(i * cols)];
        double m = -INFINITY, s = 0, e = 0;
        for (int64_t k = 0; k < cols; k++) m = std::max(m, v[k]);
        for (int64_t k = 0; k < cols; k++) s += std::exp(v[k] - m);
        for (int64_t k = 0; k < cols; k++) e -= std::exp(v[k] - m) / s * (v[k] - m - std::log(s));
        out.values[size_t(i)] = e;
    }
    c.inputs = {xs};
    c.expected = {out};
    c.ints = {{"rows", r}, {"cols", cols}};
    return c;
}

}  // namespace neptune::testing
