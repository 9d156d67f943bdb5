// The benchmark's inputs: N(0, 1) by its moments and tails, reproducible from the seed, independent
// between tensors and seeds, the rising-scores style's ramp, labels in range, and the storage
// formats' round trip (each value once rounded to its type).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "neptune/Half.h"
#include "neptune/HalideCpu.h"
#include "neptune/HostTensor.h"

using namespace neptune;

namespace {

const HostTensor &named(const std::vector<HostTensor> &ts, const std::string &n) {
    for (const HostTensor &t : ts)
        if (t.desc.name == n) return t;
    FAIL("no tensor " << n);
    return ts[0];
}

}  // namespace

TEST_CASE("host tensors: attention inputs are N(0, 1) and reproducible from the seed") {
    // 32 heads x 1024 x 128 = 4M values per tensor, over many of the generator's blocks.
    const OperatorInstance inst = instantiate(*find_operator("prefill_causal"), 1, 1024);
    const std::vector<HostTensor> a = make_inputs(inst, 11), b = make_inputs(inst, 11), c = make_inputs(inst, 12);
    const std::vector<double> &q = named(a, "q").values;
    const double n = double(q.size());
    double s = 0, s2 = 0, s4 = 0;
    int64_t beyond3 = 0;
    for (double v : q) {
        s += v;
        s2 += v * v;
        s4 += v * v * v * v;
        beyond3 += std::fabs(v) > 3 ? 1 : 0;
    }
    const double mean = s / n, var = s2 / n - mean * mean;
    CHECK(std::fabs(mean) < 5.0 / std::sqrt(n));  // 5 sigma of the sample mean
    CHECK(std::fabs(var - 1.0) < 5.0 * std::sqrt(2.0 / n));  // var of s^2 is 2/n for a normal
    CHECK(s4 / n == doctest::Approx(3.0).epsilon(0.02));  // the normal's kurtosis
    CHECK(double(beyond3) / n == doctest::Approx(2.6998e-3).epsilon(0.05));  // P(|z| > 3)
    for (const char *t : {"q", "k", "v"}) CHECK(named(a, t).values == named(b, t).values);
    int64_t same_seed = 0, same_tensor = 0;
    for (size_t i = 0; i < q.size(); i++) {
        same_seed += q[i] == named(c, "q").values[i] ? 1 : 0;
        same_tensor += q[i] == named(a, "k").values[i] ? 1 : 0;
    }
    // Two independent f16 draws are equal about 0.4 % of the time (the density of the rounded values).
    CHECK(double(same_seed) / n < 0.01);
    CHECK(double(same_tensor) / n < 0.01);
    int64_t unrounded = 0;  // the values are already f16's
    for (double v : q) unrounded += v == double(f16_to_float(float_to_f16(float(v)))) ? 0 : 1;
    CHECK(unrounded == 0);
}

TEST_CASE("host tensors: rising scores ramp k along the sequence and lift q; labels stay in range") {
    const OperatorInstance inst = instantiate(*find_operator("prefill_global"), 1, 512);
    const std::vector<HostTensor> x = make_inputs(inst, 3, InputStyle::RisingScores);
    const std::vector<double> &k = named(x, "k").values, &q = named(x, "q").values;
    const int64_t d = inst.input("k").shape[3], seq = 512;
    double first = 0, last = 0, qsum = 0;  // mean of k over the first and last 64 positions
    for (int64_t i = 0; i < int64_t(k.size()); i++) {
        const int64_t pos = (i / d) % seq;
        if (pos < 64) first += k[size_t(i)];
        if (pos >= seq - 64) last += k[size_t(i)];
    }
    for (double v : q) qsum += v;
    const double per = double(k.size()) / seq * 64;
    // The ramp 1.5 pos / seq: mean 1.5 * 31.5 / 512 over the first 64, 1.5 * 479.5 / 512 over the last.
    CHECK(first / per == doctest::Approx(1.5 * 31.5 / 512).epsilon(0.2));
    CHECK(last / per - first / per == doctest::Approx(1.5 * 448.0 / 512).epsilon(0.02));
    CHECK(qsum / double(q.size()) == doctest::Approx(0.3).epsilon(0.02));

    const OperatorInstance ce =
        instantiate(*find_operator("cross_entropy"), 8000, 1000);  // 8000 labels of 1000 classes
    const std::vector<HostTensor> ce_inputs = make_inputs(ce, 4);
    const HostTensor &labels = named(ce_inputs, "labels");
    std::vector<int> seen(1000, 0);
    for (size_t i = 0; i < labels.values.size(); i++) {
        const double v = labels.values[i];
        if (i % 8 == 5) {  // every eighth row ignored
            CHECK(v == kIgnoreIndex);
            continue;
        }
        REQUIRE((v >= 0 && v < 1000 && v == std::floor(v)));
        seen[size_t(v)]++;
    }
    int empty = 0;  // expected 1000 e^-7 = 0.9 classes without a draw
    for (int s : seen) empty += s == 0 ? 1 : 0;
    CHECK(empty < 5);
}

TEST_CASE("host tensors: store then load gives the values rounded once to each storage type") {
    for (DType t : {DType::F16, DType::BF16, DType::F32}) {
        HostTensor h(TensorDesc{"x", t, {3, 1 << 19}});  // 1.5M values: the loops run on several threads
        for (size_t i = 0; i < h.values.size(); i++) h.values[i] = std::sin(double(i)) * 1000.0 / double(1 + i % 97);
        HostTensor rounded = h;
        rounded.round_to_dtype();
        std::vector<uint32_t> storage(h.values.size());
        h.store(storage.data());
        HostTensor back(h.desc);
        back.load(storage.data());
        CHECK(back.values == rounded.values);
    }
}

TEST_CASE("host target: AVX-512 only where the operating system enables its registers") {
    __builtin_cpu_init();
    const bool enabled = __builtin_cpu_supports("avx512f");
    const Halide::Target t = neptune::host_target();
    for (Halide::Target::Feature f : {Halide::Target::AVX512, Halide::Target::AVX512_Skylake,
                                      Halide::Target::AVX512_Cannonlake, Halide::Target::AVX512_Zen4})
        if (!enabled) CHECK_FALSE(t.has_feature(f));
    // Code compiled for it runs (a SIGILL would end the test): 3 * i + 1 over 1000 elements.
    Halide::Func f("f");
    Halide::Var i("i");
    f(i) = 3 * i + 1;
    f.vectorize(i, 16);
    const Halide::Buffer<int> out = f.realize({1000}, neptune::cpu_target());
    for (int k = 0; k < 1000; k++) REQUIRE(out(k) == 3 * k + 1);
}
