#include "neptune/HostTensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "ParallelFor.h"
#include "neptune/Half.h"

namespace neptune {

HostTensor::HostTensor(TensorDesc d) : desc(std::move(d)), values(size_t(desc.numel()), 0.0) {}

namespace {

double round_value(DType t, double v) {
    switch (t) {
    case DType::F16: return f16_to_float(float_to_f16(float(v)));
    case DType::BF16: return bf16_to_float(float_to_bf16(float(v)));
    case DType::F32: return double(float(v));
    case DType::I32: return double(int32_t(v));
    }
    return v;
}

constexpr int64_t grain = 1 << 18;  // elements per thread at least

}  // namespace

void HostTensor::round_to_dtype() {
    internal::parallel_for(int64_t(values.size()), grain, [this](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; i++) values[size_t(i)] = round_value(desc.dtype, values[size_t(i)]);
    });
}

void HostTensor::store(void *dst) const {
    internal::parallel_for(int64_t(values.size()), grain, [this, dst](int64_t b, int64_t e) {
        switch (desc.dtype) {
        case DType::F16:
            for (int64_t i = b; i < e; i++) static_cast<uint16_t *>(dst)[i] = float_to_f16(float(values[size_t(i)]));
            break;
        case DType::BF16:
            for (int64_t i = b; i < e; i++) static_cast<uint16_t *>(dst)[i] = float_to_bf16(float(values[size_t(i)]));
            break;
        case DType::F32:
            for (int64_t i = b; i < e; i++) static_cast<float *>(dst)[i] = float(values[size_t(i)]);
            break;
        case DType::I32:
            for (int64_t i = b; i < e; i++) static_cast<int32_t *>(dst)[i] = int32_t(values[size_t(i)]);
            break;
        }
    });
}

void HostTensor::load(const void *src) {
    internal::parallel_for(int64_t(values.size()), grain, [this, src](int64_t b, int64_t e) {
        switch (desc.dtype) {
        case DType::F16:
            for (int64_t i = b; i < e; i++) values[size_t(i)] = f16_to_float(static_cast<const uint16_t *>(src)[i]);
            break;
        case DType::BF16:
            for (int64_t i = b; i < e; i++) values[size_t(i)] = bf16_to_float(static_cast<const uint16_t *>(src)[i]);
            break;
        case DType::F32:
            for (int64_t i = b; i < e; i++) values[size_t(i)] = static_cast<const float *>(src)[i];
            break;
        case DType::I32:
            for (int64_t i = b; i < e; i++) values[size_t(i)] = static_cast<const int32_t *>(src)[i];
            break;
        }
    });
}

namespace {

// Counter-based random numbers: every block of a tensor seeds its own SplitMix64 stream from (seed,
// tensor, block), so the inputs do not depend on the thread count and all cores make them: the
// sequential mt19937 and double Box-Muller took 50 ns an element, two minutes at batch 32.
constexpr int64_t random_block = 1 << 16;

uint64_t splitmix64(uint64_t &state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

struct BlockRandom {
    uint64_t state;
    BlockRandom(uint64_t seed, uint64_t tensor, uint64_t block) : state(seed) {
        state ^= splitmix64(tensor) + 0x632be59bd9b4e019ull * (block + 1);
        splitmix64(state);
    }
    double uniform() { return double(splitmix64(state) >> 11) * 0x1.0p-53; }  // [0, 1)
    // Box-Muller in float (the values are rounded to f16 or bf16 anyway), both values of each pair.
    double normal() {
        if (has_spare) {
            has_spare = false;
            return spare;
        }
        const uint64_t bits = splitmix64(state);
        const float u1 = float((bits >> 40) + 1) * 0x1.0p-24f, u2 = float((bits >> 16) & 0xffffff) * 0x1.0p-24f;
        const float r = std::sqrt(-2.0f * std::log(u1)), a = 6.2831853f * u2;  // u1 in (0, 1]
        spare = double(r * std::sin(a));
        has_spare = true;
        return double(r * std::cos(a));
    }
    double spare = 0;
    bool has_spare = false;
};

/** Fills t.values[i] = value(rng, i) block by block, in parallel. */
template <typename Value>
void fill_random(HostTensor &t, uint64_t seed, uint64_t tensor, const Value &value) {
    const int64_t n = int64_t(t.values.size()), blocks = (n + random_block - 1) / random_block;
    internal::parallel_for(blocks, 4, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; b++) {
            BlockRandom rng(seed, tensor, uint64_t(b));
            for (int64_t i = b * random_block, e = std::min(n, i + random_block); i < e; i++)
                t.values[size_t(i)] = value(rng, i);
        }
    });
}

}  // namespace

std::vector<HostTensor> make_inputs(const OperatorInstance &inst, uint64_t seed, InputStyle style) {
    std::vector<HostTensor> out;
    for (const TensorDesc &d : inst.inputs) {
        HostTensor t(d);
        const std::string &n = d.name;
        const uint64_t id = out.size();
        if (n == "slopes") {
            // The ALiBi slopes of the original paper: 2^(-8 (h + 1) / H).
            const int64_t h = d.shape[0];
            for (int64_t i = 0; i < h; i++) t.values[size_t(i)] = std::pow(2.0, -8.0 * double(i + 1) / double(h));
        } else if (n == "labels") {
            // Every eighth row ignored (padding), as batches of sequences of different lengths have.
            const double classes = double(inst.seq);
            fill_random(t, seed, id, [classes](BlockRandom &r, int64_t i) {
                const double label = std::floor(r.uniform() * classes);
                return i % 8 == 5 ? double(kIgnoreIndex) : label;
            });
        } else if (n == "page_table") {
            // Pages dealt out in a shuffled order, as a cache allocator hands them out over time: no
            // sequence's pages are contiguous or in order.
            std::vector<int64_t> pages(size_t(t.desc.numel()));
            for (size_t i = 0; i < pages.size(); i++) pages[i] = int64_t(i);
            BlockRandom r(seed, id, 0);
            for (size_t i = pages.size(); i > 1; i--)
                std::swap(pages[i - 1], pages[std::min(i - 1, size_t(r.uniform() * double(i)))]);
            for (size_t i = 0; i < pages.size(); i++) t.values[i] = double(pages[i]);
        } else if (n == "seq_lens") {
            for (int64_t b = 0; b < d.shape[0]; b++) t.values[size_t(b)] = double(paged_seq_len(b, inst.seq));
        } else if (n == "gamma") {
            fill_random(t, seed, id, [](BlockRandom &r, int64_t) { return 1.0 + 0.1 * r.normal(); });
        } else if (n == "beta") {
            fill_random(t, seed, id, [](BlockRandom &r, int64_t) { return 0.1 * r.normal(); });
        } else if (n == "weight") {
            // Logits of a few units: a trained head's spread, so the log-sum-exp is not one logit.
            const double s = 2.5 / std::sqrt(double(d.shape[1]));
            fill_random(t, seed, id, [s](BlockRandom &r, int64_t) { return s * r.normal(); });
        } else if (n == "w") {
            const double s = 1.0 / std::sqrt(double(d.shape[0]));
            fill_random(t, seed, id, [s](BlockRandom &r, int64_t) { return s * r.normal(); });
        } else if (n == "x" && (inst.spec.family == Family::LayerNorm || inst.spec.family == Family::LayerNormMatmul)) {
            // A mean far from zero: one-pass E[x^2] - E[x]^2 would cancel badly here.
            fill_random(t, seed, id, [](BlockRandom &r, int64_t) { return 4.0 + r.normal(); });
        } else if (style == InputStyle::RisingScores && (n == "q" || n == "k")) {
            // q gets a positive mean and k a ramp along the sequence, so q.k grows with kv.
            const int64_t inner = d.shape.back(), seq = d.shape[d.shape.size() - 2];
            const bool is_q = n == "q";
            fill_random(t, seed, id, [=](BlockRandom &r, int64_t i) {
                const int64_t pos = (i / inner) % seq;
                return r.normal() + (is_q ? 0.3 : 1.5 * double(pos) / double(seq));
            });
        } else {
            fill_random(t, seed, id, [](BlockRandom &r, int64_t) { return r.normal(); });
        }
        t.round_to_dtype();
        out.push_back(std::move(t));
    }
    return out;
}

std::vector<HostTensor> make_outputs(const OperatorInstance &inst) {
    std::vector<HostTensor> out;
    for (const TensorDesc &d : inst.outputs) out.emplace_back(d);
    return out;
}

ErrorStats rounding_error(const HostTensor &exact, int64_t begin, int64_t end) {
    if (end < 0) end = int64_t(exact.values.size());
    std::vector<double> rounded(exact.values.begin() + begin, exact.values.begin() + end);
    for (double &v : rounded) v = round_value(exact.desc.dtype, v);
    ErrorStats e = compare(rounded, std::vector<double>(exact.values.begin() + begin, exact.values.begin() + end));
    if (e.worst_index >= 0) e.worst_index += begin;
    return e;
}

ErrorStats compare(const std::vector<double> &actual, const std::vector<double> &expected, int64_t begin, int64_t end) {
    if (actual.size() != expected.size()) throw std::invalid_argument("compare: tensors differ in size");
    if (end < 0) end = int64_t(actual.size());
    ErrorStats s;
    double sum_err = 0, sum_ref = 0;
    for (int64_t i = begin; i < end; i++) {
        const double a = actual[size_t(i)], e = expected[size_t(i)];
        s.count++;
        // An infinite reference value (log-sum-exp of an empty row) must be matched exactly.
        double err = (a == e) ? 0.0 : std::fabs(a - e);
        if (!std::isfinite(a) && a != e) {
            s.nonfinite++;
            err = INFINITY;
        }
        if (std::isfinite(e)) sum_ref += e * e;
        s.max_scaled = std::max(s.max_scaled, err / (1.0 + (std::isfinite(e) ? std::fabs(e) : 0.0)));
        if (std::isfinite(err)) sum_err += err * err;
        if (err > s.max_abs || (s.worst_index < 0 && err == s.max_abs)) {
            s.max_abs = err;
            s.worst_index = i;
            s.worst_actual = a;
            s.worst_expected = e;
        }
    }
    if (s.count > 0) {
        s.rms_abs = std::sqrt(sum_err / double(s.count));
        s.rms_ref = std::sqrt(sum_ref / double(s.count));
    }
    return s;
}

ErrorStats merge(const ErrorStats &a, const ErrorStats &b) {
    if (a.count == 0) return b;
    if (b.count == 0) return a;
    ErrorStats s = (b.max_abs > a.max_abs) ? b : a;
    s.max_scaled = std::max(a.max_scaled, b.max_scaled);
    s.count = a.count + b.count;
    s.nonfinite = a.nonfinite + b.nonfinite;
    auto comb = [&](double x, double y) {
        return std::sqrt((x * x * double(a.count) + y * y * double(b.count)) / double(s.count));
    };
    s.rms_abs = comb(a.rms_abs, b.rms_abs);
    s.rms_ref = comb(a.rms_ref, b.rms_ref);
    return s;
}

Tolerance tolerance_for(DType t) {
    switch (t) {
    case DType::F16: return {1e-3, 4e-3};  // output rounding alone: 2^-12 relative per element
    case DType::BF16: return {8e-3, 3e-2};  // 2^-9 relative per element
    default: return {1e-4, 1e-3};  // f32 statistics of a row
    }
}

std::string index_string(const std::vector<int64_t> &shape, int64_t i) {
    std::vector<int64_t> idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    std::ostringstream os;
    os << "[";
    for (size_t d = 0; d < idx.size(); d++) os << (d ? ", " : "") << idx[d];
    os << "]";
    return os.str();
}

std::string ErrorStats::describe(const TensorDesc &d) const {
    std::ostringstream os;
    os.precision(3);
    os << "max |err| " << max_abs;
    if (worst_index >= 0)
        os << " at " << index_string(d.shape, worst_index) << " (got " << worst_actual << ", want " << worst_expected
           << ")";
    os << ", rms " << rms_abs << " (relative " << rel_rms() << ")";
    if (nonfinite) os << ", " << nonfinite << " non-finite";
    return os.str();
}

}  // namespace neptune
