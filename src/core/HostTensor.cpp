#include "neptune/HostTensor.h"

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>

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

}  // namespace

void HostTensor::round_to_dtype() {
    for (double &v : values) v = round_value(desc.dtype, v);
}

void HostTensor::store(void *dst) const {
    const size_t n = values.size();
    switch (desc.dtype) {
    case DType::F16: {
        auto *p = static_cast<uint16_t *>(dst);
        for (size_t i = 0; i < n; i++) p[i] = float_to_f16(float(values[i]));
        break;
    }
    case DType::BF16: {
        auto *p = static_cast<uint16_t *>(dst);
        for (size_t i = 0; i < n; i++) p[i] = float_to_bf16(float(values[i]));
        break;
    }
    case DType::F32: {
        auto *p = static_cast<float *>(dst);
        for (size_t i = 0; i < n; i++) p[i] = float(values[i]);
        break;
    }
    case DType::I32: {
        auto *p = static_cast<int32_t *>(dst);
        for (size_t i = 0; i < n; i++) p[i] = int32_t(values[i]);
        break;
    }
    }
}

void HostTensor::load(const void *src) {
    const size_t n = values.size();
    switch (desc.dtype) {
    case DType::F16:
        for (size_t i = 0; i < n; i++) values[i] = f16_to_float(static_cast<const uint16_t *>(src)[i]);
        break;
    case DType::BF16:
        for (size_t i = 0; i < n; i++) values[i] = bf16_to_float(static_cast<const uint16_t *>(src)[i]);
        break;
    case DType::F32:
        for (size_t i = 0; i < n; i++) values[i] = static_cast<const float *>(src)[i];
        break;
    case DType::I32:
        for (size_t i = 0; i < n; i++) values[i] = static_cast<const int32_t *>(src)[i];
        break;
    }
}

std::vector<HostTensor> make_inputs(const OperatorInstance &inst, uint64_t seed, InputStyle style) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<HostTensor> out;
    for (const TensorDesc &d : inst.inputs) {
        HostTensor t(d);
        const std::string &n = d.name;
        if (n == "slopes") {
            // The ALiBi slopes of the original paper: 2^(-8 (h + 1) / H).
            const int64_t h = d.shape[0];
            for (int64_t i = 0; i < h; i++) t.values[size_t(i)] = std::pow(2.0, -8.0 * double(i + 1) / double(h));
        } else if (n == "labels") {
            std::uniform_int_distribution<int64_t> pick(0, inst.seq - 1);
            for (double &v : t.values) v = double(pick(rng));
        } else if (n == "gamma") {
            for (double &v : t.values) v = 1.0 + 0.1 * normal(rng);
        } else if (n == "beta") {
            for (double &v : t.values) v = 0.1 * normal(rng);
        } else if (n == "w") {
            const double s = 1.0 / std::sqrt(double(d.shape[0]));
            for (double &v : t.values) v = s * normal(rng);
        } else if (n == "x" && (inst.spec.family == Family::LayerNorm || inst.spec.family == Family::LayerNormMatmul)) {
            // A mean far from zero: one-pass E[x^2] - E[x]^2 would cancel badly here.
            for (double &v : t.values) v = 4.0 + normal(rng);
        } else {
            for (double &v : t.values) v = normal(rng);
        }
        if (style == InputStyle::RisingScores && (n == "q" || n == "k")) {
            // q gets a positive mean and k a ramp along the sequence, so q.k grows with kv.
            const int64_t inner = d.shape.back(), seq = d.shape[d.shape.size() - 2];
            for (size_t i = 0; i < t.values.size(); i++) {
                const int64_t pos = (int64_t(i) / inner) % seq;
                t.values[i] += (n == "q") ? 0.3 : 1.5 * double(pos) / double(seq);
            }
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
    case DType::F16: return {1e-3, 4e-3};   // output rounding alone: 2^-12 relative per element
    case DType::BF16: return {8e-3, 3e-2};  // 2^-9 relative per element
    default: return {1e-4, 1e-3};           // f32 statistics of a row
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
