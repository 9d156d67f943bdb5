#ifndef NEPTUNE_HALF_H
#define NEPTUNE_HALF_H
/** \file
 * Bit-exact conversions between float and the 16-bit storage types (IEEE
 * binary16 and bfloat16), round to nearest even. Header-only and Halide-free. */
#include <cstdint>
#include <cstring>

namespace neptune {

inline uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

inline float bits_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline uint16_t float_to_bf16(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

inline float bf16_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

inline uint16_t float_to_f16(float f) {
    const uint32_t u = float_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
    if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflows to infinity
    if (a < 0x38800000u) {  // subnormal or zero in f16
        // Add 0.5 (as a float) so the FPU rounds the bits below 2^-24 to nearest even.
        const float r = bits_float(a) + 0.5f;
        return uint16_t(sign | (float_bits(r) - 0x3f000000u));
    }
    const uint32_t mant_odd = (a >> 13) & 1u;
    const uint32_t v = a + 0xc8000fffu + mant_odd;  // rebias exponent, round to nearest even
    return uint16_t(sign | (v >> 13));
}

inline float f16_to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        const float m = float(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
        return sign ? -m : m;
    }
    if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

}  // namespace neptune

#endif
