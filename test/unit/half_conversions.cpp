// The 16-bit conversions of neptune/Half.h against Halide's own float16_t and bfloat16_t.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "Halide.h"
#include "neptune/Half.h"

using namespace neptune;

TEST_CASE("half: every f16 bit pattern survives f16 -> float -> f16, and matches Halide's value") {
    for (uint32_t bits = 0; bits < 65536; bits++) {
        const float f = f16_to_float(uint16_t(bits));
        const Halide::float16_t h = Halide::float16_t::make_from_bits(uint16_t(bits));
        if (std::isnan(f)) {
            REQUIRE(h.is_nan());
            continue;
        }
        REQUIRE(f == float(h));
        REQUIRE(float_to_f16(f) == bits);
    }
}

TEST_CASE("half: float -> f16 rounds to nearest even like Halide, over normals, subnormals, ties and overflow") {
    std::mt19937 rng(7);
    std::uniform_int_distribution<uint32_t> any;
    std::vector<float> values = {0.0f,     -0.0f,    65504.0f,   65519.9f,           65520.0f,           1e-8f,
                                 2.98e-8f, 5.96e-8f, 6.1035e-5f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, INFINITY,
                                 -INFINITY};
    for (int i = 0; i < 200000; i++) {
        float f = bits_float(any(rng));
        if (std::isnan(f)) continue;
        values.push_back(f);
        values.push_back(std::ldexp(float(i % 4096) / 4096.0f + 1.0f, int(i % 40) - 26));  // the f16 range
    }
    for (float f : values) {
        INFO("value " << f);
        REQUIRE(float_to_f16(f) == Halide::float16_t(f).to_bits());
    }
}

TEST_CASE("half: float -> bf16 rounds to nearest even like Halide, and every bf16 pattern round-trips") {
    std::mt19937 rng(11);
    std::uniform_int_distribution<uint32_t> any;
    for (int i = 0; i < 200000; i++) {
        const float f = bits_float(any(rng));
        if (std::isnan(f)) continue;
        INFO("value " << f);
        REQUIRE(float_to_bf16(f) == Halide::bfloat16_t(f).to_bits());
    }
    for (uint32_t bits = 0; bits < 65536; bits++) {
        const float f = bf16_to_float(uint16_t(bits));
        if (!std::isnan(f)) REQUIRE(float_to_bf16(f) == bits);
    }
}
