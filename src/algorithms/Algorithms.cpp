#include "neptune/algorithms/Algorithms.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace neptune::algorithms {

using Halide::cast;
using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::RDom;
using Halide::select;
using Halide::Var;

Halide::Type halide_type(DType t) {
    switch (t) {
    case DType::F16: return Halide::Float(16);
    case DType::BF16: return Halide::BFloat(16);
    case DType::F32: return Halide::Float(32);
    case DType::I32: return Halide::Int(32);
    }
    throw std::invalid_argument("unknown element type");
}

Expr neg_inf() { return Expr(-std::numeric_limits<float>::infinity()); }

Expr safe_max(const Expr &row_max) { return select(row_max == neg_inf(), 0.0f, row_max); }

Func OperatorFuncs::stage(const std::string &name) const {
    auto it = stages.find(name);
    if (it == stages.end()) throw std::invalid_argument("no stage called '" + name + "'");
    return it->second;
}

namespace {

Expr f32(const Expr &e) { return cast<float>(e); }

}  // namespace

AttentionFuncs attention(const AttentionSpec &spec, DType out_dtype, const AttentionInputs &in, RowStats row_stats) {
    Var d("d"), e("e"), i("i"), j("j"), h("h"), b("b");
    AttentionFuncs f;
    const Expr hk = h / (in.q_heads / in.kv_heads);  // contiguous GQA groups

    RDom rd(0, in.head_dim_qk, "rd");
    f.qk = Func("qk");
    f.qk(j, i, h, b) = 0.0f;
    f.qk(j, i, h, b) += f32(in.q(rd, i, h, b)) * f32(in.k(rd, j, hk, b));

    // Score modifiers and masks see the scaled score (docs/design/operators.md, conventions).
    const Expr held = in.seq_lens.defined() ? in.seq_lens(b) : in.seq_kv;  // the sequence's keys
    const Expr pos = held - in.seq_q + i;  // bottom-right aligned query position
    Expr s = f.qk(j, i, h, b) * float(spec.score_scale());
    if (spec.mod == ScoreMod::Softcap) {
        const float cap = float(spec.softcap);
        s = cap * Halide::tanh(s / cap);
    } else if (spec.mod == ScoreMod::Alibi) {
        s = s + in.slopes(h) * f32(j - pos);
    }
    Expr visible = Expr(true);
    if (spec.mask == Mask::None && in.seq_lens.defined()) visible = j < held;
    if (spec.mask == Mask::Causal) visible = j <= pos;
    if (spec.mask == Mask::Window) visible = j <= pos && j > pos - spec.window;
    f.score = Func("score");
    f.score(j, i, h, b) = Halide::Internal::is_const_one(visible) ? s : select(visible, s, neg_inf());

    f.kv = RDom(0, in.seq_kv, "kv");
    const Expr kv = f.kv.x;
    f.row_max = Func("row_max");
    f.row_max(i, h, b) = neg_inf();
    f.row_max(i, h, b) = Halide::max(f.row_max(i, h, b), f.score(kv, i, h, b));

    f.prob = Func("prob");
    f.prob(j, i, h, b) = Halide::exp(f.score(j, i, h, b) - safe_max(f.row_max(i, h, b)));

    f.row_sum = Func("row_sum");
    f.row_sum(i, h, b) = 0.0f;
    f.row_sum(i, h, b) += f.prob(kv, i, h, b);

    f.acc = Func("acc");
    f.acc(e, i, h, b) = 0.0f;
    f.acc(e, i, h, b) += f.prob(kv, i, h, b) * f32(in.v(e, kv, hk, b));

    const Expr empty = f.row_sum(i, h, b) == 0.0f;  // every position masked
    f.out = Func("out");
    f.out(e, i, h, b) = cast(halide_type(out_dtype), select(empty, 0.0f, f.acc(e, i, h, b) / f.row_sum(i, h, b)));

    const Expr lse = f.row_max(i, h, b) + Halide::log(f.row_sum(i, h, b));
    if (row_stats != RowStats::None) {
        f.lse = Func("lse");
        f.lse(i, h, b) = select(empty, neg_inf(), lse);
    }
    if (row_stats == RowStats::All) {
        f.ent_num = Func("ent_num");
        f.ent_num(i, h, b) = 0.0f;
        f.ent_num(i, h, b) +=
            select(f.score(kv, i, h, b) > neg_inf(), f.prob(kv, i, h, b) * f.score(kv, i, h, b), 0.0f);

        const Expr safe_sum = select(empty, 1.0f, f.row_sum(i, h, b));
        f.max_prob_acc = Func("max_prob_acc");
        f.max_prob_acc(i, h, b) = 0.0f;  // probabilities are >= 0, and an empty row reports 0
        f.max_prob_acc(i, h, b) = Halide::max(f.max_prob_acc(i, h, b), f.prob(kv, i, h, b) / safe_sum);

        f.entropy = Func("entropy");
        f.entropy(i, h, b) = select(empty, 0.0f, lse - f.ent_num(i, h, b) / f.row_sum(i, h, b));
        f.max_prob = Func("max_prob");
        f.max_prob(i, h, b) = f.max_prob_acc(i, h, b);
    }
    return f;
}

namespace {

DType out_type(const OperatorSpec &spec) { return spec.f32_outputs ? DType::F32 : spec.dtype; }

ImageParam param(const TensorDesc &t) { return ImageParam(halide_type(t.dtype), int(t.shape.size()), t.name); }

void add_attention(const OperatorSpec &spec, const std::vector<Func> &inputs, const ExtentOf &extent,
                   OperatorFuncs &of) {
    AttentionInputs in;
    in.q = inputs[0];
    in.k = inputs[1];
    in.v = inputs[2];
    if (spec.attention.mod == ScoreMod::Alibi) { in.slopes = inputs[3]; }
    in.seq_q = extent(0, 1);
    in.seq_kv = extent(1, 1);
    if (spec.attention.page_size > 0) {
        // Key j of sequence b: row j % P of page page_table(j / P, b), as the caches are laid out
        // ([pages, kv_heads, P, head_dim]); the most keys a sequence holds is the table's width in pages.
        const Func k_cache = inputs[1], v_cache = inputs[2], page_table = inputs[3];
        // The entries past a sequence's pages may hold anything (serving engines leave them unset):
        // the clamp keeps the CPU form, which computes every key before masking, inside the cache.
        // Neptune's kernels read no entry past a sequence's length and drop the clamp.
        const Expr page = extent(1, 1), pages = extent(1, 3);
        Var d("d"), j("j"), hkv("hkv"), b("b");
        const Expr in_page = j % page, page_of = Halide::clamp(page_table(j / page, b), 0, pages - 1);
        in.k = Func("k");
        in.k(d, j, hkv, b) = k_cache(d, in_page, hkv, page_of);
        in.v = Func("v");
        in.v(d, j, hkv, b) = v_cache(d, in_page, hkv, page_of);
        in.seq_lens = inputs[4];
        in.seq_kv = extent(3, 0) * page;
    }
    in.q_heads = extent(0, 2);
    in.kv_heads = extent(1, 2);
    in.head_dim_qk = extent(0, 0);
    AttentionFuncs f = attention(spec.attention, out_type(spec), in, spec.row_stats);
    of.rdoms["kv"] = f.kv;
    of.stages = {{"qk", f.qk},           {"score", f.score}, {"row_max", f.row_max}, {"prob", f.prob},
                 {"row_sum", f.row_sum}, {"acc", f.acc},     {"out", f.out}};
    of.outputs = {f.out};
    if (spec.row_stats != RowStats::None) {
        of.stages["lse"] = f.lse;
        of.outputs.push_back(f.lse);
    }
    if (spec.row_stats == RowStats::All) {
        of.stages.insert({{"ent_num", f.ent_num},
                          {"max_prob_acc", f.max_prob_acc},
                          {"entropy", f.entropy},
                          {"max_prob", f.max_prob}});
        of.outputs.insert(of.outputs.end(), {f.entropy, f.max_prob});
    }
}

// Softmax, log-sum-exp and cross-entropy share the chain row_max -> row_sum.
void add_softmax_family(const OperatorSpec &spec, const std::vector<Func> &inputs, const ExtentOf &extent,
                        OperatorFuncs &of) {
    Var c("c"), r("r");
    Func x = inputs[0];
    RDom rc(0, extent(0, 0), "rc");
    of.rdoms["rc"] = rc;
    Func row_max("row_max"), row_sum("row_sum");
    row_max(r) = neg_inf();
    row_max(r) = Halide::max(row_max(r), f32(x(rc, r)));
    row_sum(r) = 0.0f;
    row_sum(r) += Halide::exp(f32(x(rc, r)) - row_max(r));
    of.stages = {{"row_max", row_max}, {"row_sum", row_sum}};
    Func out;
    if (spec.family == Family::Softmax) {
        out = Func("y");
        out(c, r) = cast(halide_type(out_type(spec)), Halide::exp(f32(x(c, r)) - row_max(r)) / row_sum(r));
    } else {
        Func lse("lse");
        lse(r) = row_max(r) + Halide::log(row_sum(r));
        of.stages["lse"] = lse;
        out = lse;
        if (spec.family == Family::CrossEntropy) {
            Func labels = inputs[1];
            const Expr cols = extent(0, 0);
            // An out-of-range label is a run-time error, never a clamped, silently wrong loss. The
            // check is a stage of its own: inlined on the host; Halide's CUDA schedule computes it
            // on the host too (a CUDA kernel cannot report an error message), and Neptune's kernels
            // give the row a NaN loss. A row labelled kIgnoreIndex (PyTorch's ignore_index, -100)
            // is padding: its loss is 0.
            Func label("label");
            label(r) = Halide::require(
                (labels(r) >= 0 && labels(r) < cols) || labels(r) == kIgnoreIndex, labels(r),
                "cross_entropy: label out of range [0, cols) and not the ignore index -100:", labels(r));
            of.stages["label"] = label;
            out = Func("loss");
            out(r) = Halide::select(label(r) == kIgnoreIndex, 0.0f,
                                    lse(r) - f32(x(Halide::clamp(label(r), 0, cols - 1), r)));
        }
    }
    of.stages[spec.family == Family::Softmax ? "y" : (spec.family == Family::CrossEntropy ? "loss" : "lse")] = out;
    of.outputs = {out};
    if (spec.family == Family::Softmax && spec.row_stats != RowStats::None) {
        // Softmax with its log-sum-exp (what a backward pass or a merge of partial softmaxes reads).
        Func lse("lse");
        lse(r) = row_max(r) + Halide::log(row_sum(r));
        of.stages["lse"] = lse;
        of.outputs.push_back(lse);
    }
}

// LayerNorm: mean -> m2 (sum of squared deviations from the final mean); RMSNorm: sum of squares.
void add_norm_family(const OperatorSpec &spec, const std::vector<Func> &inputs, const ExtentOf &extent,
                     OperatorFuncs &of) {
    Var c("c"), r("r"), n("n");
    Func x = inputs[0], gamma = inputs[1];
    const Expr cols = extent(0, 0);
    RDom rc(0, cols, "rc");
    of.rdoms["rc"] = rc;
    const bool layer = spec.family == Family::LayerNorm || spec.family == Family::LayerNormMatmul;
    Func normed("normed");
    if (layer) {
        Func beta = inputs[2];
        Func sum_x("sum_x"), mean("mean"), m2("m2"), inv_std("inv_std");
        sum_x(r) = 0.0f;
        sum_x(r) += f32(x(rc, r));
        mean(r) = sum_x(r) / f32(cols);
        m2(r) = 0.0f;
        m2(r) += (f32(x(rc, r)) - mean(r)) * (f32(x(rc, r)) - mean(r));
        inv_std(r) = 1.0f / Halide::sqrt(m2(r) / f32(cols) + float(spec.eps));
        normed(c, r) = (f32(x(c, r)) - mean(r)) * inv_std(r) * f32(gamma(c)) + f32(beta(c));
        of.stages = {{"sum_x", sum_x}, {"mean", mean}, {"m2", m2}, {"inv_std", inv_std}};
    } else {
        Func sum_sq("sum_sq"), inv_rms("inv_rms");
        sum_sq(r) = 0.0f;
        sum_sq(r) += f32(x(rc, r)) * f32(x(rc, r));
        inv_rms(r) = 1.0f / Halide::sqrt(sum_sq(r) / f32(cols) + float(spec.eps));
        normed(c, r) = f32(x(c, r)) * inv_rms(r) * f32(gamma(c));
        of.stages = {{"sum_sq", sum_sq}, {"inv_rms", inv_rms}};
    }
    of.stages["normed"] = normed;
    Func y("y");
    if (spec.family == Family::LayerNorm || spec.family == Family::RmsNorm) {
        y(c, r) = cast(halide_type(out_type(spec)), normed(c, r));
    } else {
        Func w = inputs.back();  // w[cols, N] is the Func w(n, c)
        Func mm("matmul");
        mm(n, r) = 0.0f;
        mm(n, r) += normed(rc, r) * f32(w(n, rc));
        of.stages["matmul"] = mm;
        y(n, r) = cast(halide_type(out_type(spec)), mm(n, r));
    }
    of.stages["y"] = y;
    of.outputs = {y};
}

// Performer (FAVOR+): phi(x)_f = exp(w_f . x' - |x'|^2 / 2 - stabiliser), x' = x / D^(1/4).
// Keys share one stabiliser per (b, h), the maximum over keys and features; each query
// row has its own, the maximum over features. Both cancel in num / den, so the output
// equals the unstabilised formula while every exponent stays <= 0.
void add_performer(const OperatorSpec &spec, const std::vector<Func> &inputs, const ExtentOf &extent,
                   OperatorFuncs &of) {
    (void)spec;
    Var d("d"), e("e"), f("f"), i("i"), j("j"), h("h"), b("b");
    Func q = inputs[0], k = inputs[1], v = inputs[2], w = inputs[3];
    const Expr dim = extent(0, 0), seq = extent(1, 1), nf = extent(3, 1);
    const Expr xs = Halide::pow(f32(dim), -0.25f);
    RDom rd(0, dim, "rd"), rf(0, nf, "rf"), rkv(0, seq, "kv");
    of.rdoms["kv"] = rkv;
    of.rdoms["rf"] = rf;

    auto features = [&](Func x, const std::string &tag) {
        Func proj(tag + "_proj"), norm(tag + "_norm"), logit(tag + "_logit");
        proj(f, i, h, b) = 0.0f;
        proj(f, i, h, b) += w(rd, f) * f32(x(rd, i, h, b)) * xs;
        norm(i, h, b) = 0.0f;
        norm(i, h, b) += f32(x(rd, i, h, b)) * xs * f32(x(rd, i, h, b)) * xs;
        logit(f, i, h, b) = proj(f, i, h, b) - norm(i, h, b) / 2;
        of.stages[tag + "_proj"] = proj;
        of.stages[tag + "_norm"] = norm;
        of.stages[tag + "_logit"] = logit;
        return logit;
    };
    Func q_logit = features(q, "q"), k_logit = features(k, "k");

    Func k_row_max("k_row_max"), k_max("k_max"), kv_sum("kv_sum"), k_sum("k_sum");
    k_row_max(j, h, b) = neg_inf();
    k_row_max(j, h, b) = Halide::max(k_row_max(j, h, b), k_logit(rf, j, h, b));
    k_max(h, b) = neg_inf();
    k_max(h, b) = Halide::max(k_max(h, b), k_row_max(rkv, h, b));
    kv_sum(e, f, h, b) = 0.0f;
    kv_sum(e, f, h, b) += Halide::exp(k_logit(f, rkv, h, b) - k_max(h, b)) * f32(v(e, rkv, h, b));
    k_sum(f, h, b) = 0.0f;
    k_sum(f, h, b) += Halide::exp(k_logit(f, rkv, h, b) - k_max(h, b));

    Func q_max("q_max"), num("num"), den("den"), out("out");
    q_max(i, h, b) = neg_inf();
    q_max(i, h, b) = Halide::max(q_max(i, h, b), q_logit(rf, i, h, b));
    num(e, i, h, b) = 0.0f;
    num(e, i, h, b) += Halide::exp(q_logit(rf, i, h, b) - q_max(i, h, b)) * kv_sum(e, rf, h, b);
    den(i, h, b) = 0.0f;
    den(i, h, b) += Halide::exp(q_logit(rf, i, h, b) - q_max(i, h, b)) * k_sum(rf, h, b);
    out(e, i, h, b) = cast(halide_type(out_type(spec)), num(e, i, h, b) / den(i, h, b));

    of.stages.insert({{"k_row_max", k_row_max},
                      {"k_max", k_max},
                      {"kv_sum", kv_sum},
                      {"k_sum", k_sum},
                      {"q_max", q_max},
                      {"num", num},
                      {"den", den},
                      {"out", out}});
    of.outputs = {out};
}

// Linear + cross-entropy: logits = h * weight^T, reduced over the vocabulary by log-sum-exp; the loss
// reads the label's logit. Fused, the logits are never stored: each tile of them lives in registers
// while the row max and the rescaled sum roll over the vocabulary (the derived repair).
void add_linear_cross_entropy(const OperatorSpec &spec, const std::vector<Func> &inputs, const ExtentOf &extent,
                              OperatorFuncs &of) {
    Var v("v"), n("n");
    Func h = inputs[0], weight = inputs[1], labels = inputs[2];
    const Expr hidden = extent(0, 0), vocab = extent(1, 1);
    RDom rk(0, hidden, "rk"), rv(0, vocab, "rv");
    of.rdoms["rk"] = rk;
    of.rdoms["rv"] = rv;
    Func logits("logits"), row_max("row_max"), row_sum("row_sum"), lse("lse"), label("label"), loss("loss");
    logits(v, n) = 0.0f;
    logits(v, n) += f32(h(rk, n)) * f32(weight(rk, v));
    row_max(n) = neg_inf();
    row_max(n) = Halide::max(row_max(n), logits(rv, n));
    row_sum(n) = 0.0f;
    row_sum(n) += Halide::exp(logits(rv, n) - row_max(n));
    lse(n) = row_max(n) + Halide::log(row_sum(n));
    // As cross_entropy's: an out-of-range label is a run-time error (NaN from Neptune's kernels); the
    // ignore index gives a loss of 0.
    label(n) = Halide::require(
        (labels(n) >= 0 && labels(n) < vocab) || labels(n) == kIgnoreIndex, labels(n),
        "linear_cross_entropy: label out of range [0, vocab) and not the ignore index -100:", labels(n));
    loss(n) = Halide::select(label(n) == kIgnoreIndex, 0.0f, lse(n) - logits(Halide::clamp(label(n), 0, vocab - 1), n));
    (void)spec;
    of.stages = {{"logits", logits}, {"row_max", row_max}, {"row_sum", row_sum},
                 {"lse", lse},       {"label", label},     {"loss", loss}};
    of.outputs = {loss, lse};
}

}  // namespace

OperatorFuncs build_from(const OperatorSpec &spec, const std::vector<Func> &inputs, const ExtentOf &extent) {
    OperatorFuncs of;
    if (inputs.size() != instantiate(spec, 1, 1).inputs.size())
        throw std::invalid_argument(spec.name + ": expected " + std::to_string(instantiate(spec, 1, 1).inputs.size()) +
                                    " inputs, got " + std::to_string(inputs.size()));
    switch (spec.family) {
    case Family::Attention: add_attention(spec, inputs, extent, of); break;
    case Family::Softmax:
    case Family::LogSumExp:
    case Family::CrossEntropy: add_softmax_family(spec, inputs, extent, of); break;
    case Family::LayerNorm:
    case Family::LayerNormMatmul:
    case Family::RmsNorm:
    case Family::RmsNormMatmul: add_norm_family(spec, inputs, extent, of); break;
    case Family::Performer: add_performer(spec, inputs, extent, of); break;
    case Family::LinearCrossEntropy: add_linear_cross_entropy(spec, inputs, extent, of); break;
    }
    return of;
}

OperatorFuncs build(const OperatorSpec &spec) {
    std::vector<ImageParam> params;
    for (const TensorDesc &t : instantiate(spec, 1, 1).inputs) params.push_back(param(t));
    OperatorFuncs of = build_from(spec, std::vector<Func>(params.begin(), params.end()),
                                  [&](size_t i, int d) { return params[i].dim(d).extent(); });
    of.inputs = params;
    return of;
}

}  // namespace neptune::algorithms
