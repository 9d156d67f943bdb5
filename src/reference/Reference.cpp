#include "neptune/reference/Reference.h"

#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace neptune::reference {

namespace {

constexpr double neg_inf = -std::numeric_limits<double>::infinity();

const HostTensor &find(const std::vector<HostTensor> &ts, const std::string &name) {
    for (const HostTensor &t : ts)
        if (t.desc.name == name) return t;
    throw std::invalid_argument("reference: no tensor called " + name);
}

HostTensor &find(std::vector<HostTensor> &ts, const std::string &name) {
    for (HostTensor &t : ts)
        if (t.desc.name == name) return t;
    throw std::invalid_argument("reference: no tensor called " + name);
}

// Softmax statistics of a row of scores, skipping excluded (-inf) positions.
struct SoftmaxStats {
    double max = neg_inf, sum = 0;
    bool empty() const { return max == neg_inf; }
};

SoftmaxStats row_stats(const std::vector<double> &s) {
    SoftmaxStats st;
    for (double x : s) st.max = std::max(st.max, x);
    if (st.empty()) return st;
    for (double x : s)
        if (x != neg_inf) st.sum += std::exp(x - st.max);
    return st;
}

void attention_row(const OperatorInstance &in, const std::vector<HostTensor> &inputs, std::vector<HostTensor> &outputs,
                   int64_t row) {
    const AttentionSpec &a = in.spec.attention;
    const bool paged = a.page_size > 0;
    const int64_t sq = in.input("q").shape[2], dqk = a.head_dim_qk, dv = a.head_dim_v;
    const int64_t i = row % sq, h = (row / sq) % a.q_heads, b = row / (sq * a.q_heads);
    const int64_t hk = h / (a.q_heads / a.kv_heads);
    // The keys of sequence b, and where key j's row of K and V starts.
    const int64_t skv = paged ? int64_t(find(inputs, "seq_lens").values[size_t(b)]) : in.input("k").shape[2];
    auto key_row = [&](int64_t j, int64_t dim) {
        if (!paged) return ((b * a.kv_heads + hk) * skv + j) * dim;
        const int64_t max_pages = in.input("page_table").shape[1];
        const int64_t page = int64_t(find(inputs, "page_table").values[size_t(b * max_pages + j / a.page_size)]);
        return ((page * a.kv_heads + hk) * a.page_size + j % a.page_size) * dim;
    };
    const int64_t p = skv - sq + i;  // bottom-right aligned query position
    const double *q = find(inputs, "q").values.data() + ((b * a.q_heads + h) * sq + i) * dqk;
    const double *k_all = find(inputs, paged ? "k_cache" : "k").values.data();
    const double *v_all = find(inputs, paged ? "v_cache" : "v").values.data();
    const double slope = a.mod == ScoreMod::Alibi ? find(inputs, "slopes").values[size_t(h)] : 0.0;

    std::vector<double> s(size_t(skv), neg_inf);
    for (int64_t j = 0; j < skv; j++) {
        bool visible = true;
        if (a.mask == Mask::Causal) visible = j <= p;
        if (a.mask == Mask::Window) visible = j <= p && j > p - a.window;
        if (!visible) continue;
        double dot = 0;
        const double *k = k_all + key_row(j, dqk);
        for (int64_t d = 0; d < dqk; d++) dot += q[d] * k[d];
        double x = dot * a.score_scale();
        if (a.mod == ScoreMod::Softcap) x = a.softcap * std::tanh(x / a.softcap);
        if (a.mod == ScoreMod::Alibi) x += slope * double(j - p);
        s[size_t(j)] = x;
    }
    const SoftmaxStats st = row_stats(s);
    double *o = find(outputs, "out").values.data() + row * dv;
    for (int64_t d = 0; d < dv; d++) o[d] = 0;
    double entropy = 0, max_prob = 0;
    if (!st.empty()) {
        for (int64_t j = 0; j < skv; j++) {
            if (s[size_t(j)] == neg_inf) continue;
            const double pr = std::exp(s[size_t(j)] - st.max) / st.sum;
            const double *v = v_all + key_row(j, dv);
            for (int64_t d = 0; d < dv; d++) o[d] += pr * v[d];
            entropy -= pr * (s[size_t(j)] - st.max - std::log(st.sum));
            max_prob = std::max(max_prob, pr);
        }
    }
    if (in.spec.row_stats != RowStats::None)
        find(outputs, "lse").values[size_t(row)] = st.empty() ? neg_inf : st.max + std::log(st.sum);
    if (in.spec.row_stats == RowStats::All) {
        find(outputs, "entropy").values[size_t(row)] = entropy;
        find(outputs, "max_prob").values[size_t(row)] = max_prob;
    }
}

// Performer's positive random features of one vector x (FAVOR+):
// phi(x)_f = exp(w_f . x' - |x'|^2 / 2) / sqrt(F), x' = x / D^(1/4). fp64 needs no stabiliser.
std::vector<double> performer_features(const double *x, const std::vector<double> &w, int64_t f_count, int64_t d) {
    const double s = std::pow(double(d), -0.25);
    double norm = 0;
    for (int64_t i = 0; i < d; i++) norm += (x[i] * s) * (x[i] * s);
    std::vector<double> phi(static_cast<size_t>(f_count));
    for (int64_t f = 0; f < f_count; f++) {
        double dot = 0;
        for (int64_t i = 0; i < d; i++) dot += w[size_t(f * d + i)] * x[i] * s;
        phi[size_t(f)] = std::exp(dot - norm / 2) / std::sqrt(double(f_count));
    }
    return phi;
}

struct PerformerSummary {
    std::vector<double> kv;  // [F, Dv]: sum_j phi(k_j)_f v_j
    std::vector<double> z;  // [F]: sum_j phi(k_j)_f
};

PerformerSummary performer_summary(const OperatorInstance &in, const std::vector<HostTensor> &inputs, int64_t bh) {
    const AttentionSpec &a = in.spec.attention;
    const int64_t seq = in.seq, d = a.head_dim_qk, dv = a.head_dim_v, F = in.spec.features;
    const std::vector<double> &w = find(inputs, "features").values;
    const double *k = find(inputs, "k").values.data() + bh * seq * d;
    const double *v = find(inputs, "v").values.data() + bh * seq * dv;
    PerformerSummary s{std::vector<double>(size_t(F * dv), 0.0), std::vector<double>(size_t(F), 0.0)};
    for (int64_t j = 0; j < seq; j++) {
        const std::vector<double> phi = performer_features(k + j * d, w, F, d);
        for (int64_t f = 0; f < F; f++) {
            s.z[size_t(f)] += phi[size_t(f)];
            for (int64_t e = 0; e < dv; e++) s.kv[size_t(f * dv + e)] += phi[size_t(f)] * v[j * dv + e];
        }
    }
    return s;
}

void performer_row(const OperatorInstance &in, const std::vector<HostTensor> &inputs, std::vector<HostTensor> &outputs,
                   int64_t row, const PerformerSummary &sum) {
    const AttentionSpec &a = in.spec.attention;
    const int64_t d = a.head_dim_qk, dv = a.head_dim_v, F = in.spec.features;
    const std::vector<double> phi =
        performer_features(find(inputs, "q").values.data() + row * d, find(inputs, "features").values, F, d);
    double den = 0;
    for (int64_t f = 0; f < F; f++) den += phi[size_t(f)] * sum.z[size_t(f)];
    double *o = find(outputs, "out").values.data() + row * dv;
    for (int64_t e = 0; e < dv; e++) {
        double num = 0;
        for (int64_t f = 0; f < F; f++) num += phi[size_t(f)] * sum.kv[size_t(f * dv + e)];
        o[e] = num / den;
    }
}

// Linear + cross-entropy: the row's logits h[r] * weight^T in fp64, then log-sum-exp and the label's loss.
void linear_cross_entropy_row(const OperatorInstance &in, const std::vector<HostTensor> &inputs,
                              std::vector<HostTensor> &outputs, int64_t r) {
    const int64_t V = in.seq, H = in.spec.hidden;
    const double *h = find(inputs, "h").values.data() + r * H;
    const double *w = find(inputs, "weight").values.data();
    std::vector<double> logits(size_t(V), 0.0);
    for (int64_t v = 0; v < V; v++)
        for (int64_t k = 0; k < H; k++) logits[size_t(v)] += h[k] * w[v * H + k];
    const SoftmaxStats st = row_stats(logits);
    const double lse = st.max + std::log(st.sum);
    const int64_t label = int64_t(find(inputs, "labels").values[size_t(r)]);
    find(outputs, "lse").values[size_t(r)] = lse;
    find(outputs, "loss").values[size_t(r)] = label == kIgnoreIndex ? 0.0 : lse - logits[size_t(label)];
}

void row_op(const OperatorInstance &in, const std::vector<HostTensor> &inputs, std::vector<HostTensor> &outputs,
            int64_t r) {
    const int64_t C = in.seq;
    const double *x = find(inputs, "x").values.data() + r * C;
    const Family fam = in.spec.family;
    if (fam == Family::Softmax || fam == Family::LogSumExp || fam == Family::CrossEntropy) {
        const SoftmaxStats st = row_stats(std::vector<double>(x, x + C));
        const double lse = st.max + std::log(st.sum);
        if (fam == Family::Softmax) {
            double *y = find(outputs, "y").values.data() + r * C;
            for (int64_t c = 0; c < C; c++) y[c] = std::exp(x[c] - st.max) / st.sum;
            if (in.spec.row_stats != RowStats::None) find(outputs, "lse").values[size_t(r)] = lse;
        } else if (fam == Family::LogSumExp) {
            find(outputs, "lse").values[size_t(r)] = lse;
        } else {
            const int64_t label = int64_t(find(inputs, "labels").values[size_t(r)]);
            find(outputs, "loss").values[size_t(r)] = label == kIgnoreIndex ? 0.0 : lse - x[label];
        }
        return;
    }
    // Normalisations: y_c = (x_c - shift) * inv * gamma_c (+ beta_c), optionally times W.
    const std::vector<double> &gamma = find(inputs, "gamma").values;
    const bool layer = fam == Family::LayerNorm || fam == Family::LayerNormMatmul;
    double mean = 0, sq = 0;
    if (layer) {
        for (int64_t c = 0; c < C; c++) mean += x[c];
        mean /= double(C);
        for (int64_t c = 0; c < C; c++) sq += (x[c] - mean) * (x[c] - mean);
    } else {
        for (int64_t c = 0; c < C; c++) sq += x[c] * x[c];
    }
    const double inv = 1.0 / std::sqrt(sq / double(C) + in.spec.eps);
    std::vector<double> n(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; c++) {
        n[size_t(c)] = (x[c] - mean) * inv * gamma[size_t(c)];
        if (layer) n[size_t(c)] += find(inputs, "beta").values[size_t(c)];
    }
    if (fam == Family::LayerNorm || fam == Family::RmsNorm) {
        double *y = find(outputs, "y").values.data() + r * C;
        for (int64_t c = 0; c < C; c++) y[c] = n[size_t(c)];
        return;
    }
    const int64_t N = in.spec.matmul_n;
    const std::vector<double> &w = find(inputs, "w").values;
    double *y = find(outputs, "y").values.data() + r * N;
    for (int64_t j = 0; j < N; j++) {
        double acc = 0;
        for (int64_t c = 0; c < C; c++) acc += n[size_t(c)] * w[size_t(c * N + j)];
        y[j] = acc;
    }
}

}  // namespace

void compute_rows(const OperatorInstance &in, const std::vector<HostTensor> &inputs, std::vector<HostTensor> &outputs,
                  int64_t first, int64_t count) {
    if (first < 0 || count < 0 || first + count > in.rows)
        throw std::invalid_argument("reference: rows out of range for " + in.spec.name);
    std::map<int64_t, PerformerSummary> summaries;  // Performer: one KV summary per (batch, head)
    for (int64_t r = first; r < first + count; r++) {
        switch (in.spec.family) {
        case Family::Attention: attention_row(in, inputs, outputs, r); break;
        case Family::Performer: {
            const int64_t bh = r / in.seq;
            auto it = summaries.find(bh);
            if (it == summaries.end()) it = summaries.emplace(bh, performer_summary(in, inputs, bh)).first;
            performer_row(in, inputs, outputs, r, it->second);
            break;
        }
        case Family::LinearCrossEntropy: linear_cross_entropy_row(in, inputs, outputs, r); break;
        default: row_op(in, inputs, outputs, r); break;
        }
    }
}

std::vector<HostTensor> compute(const OperatorInstance &inst, const std::vector<HostTensor> &inputs) {
    std::vector<HostTensor> out = make_outputs(inst);
    compute_rows(inst, inputs, out, 0, inst.rows);
    return out;
}

}  // namespace neptune::reference
