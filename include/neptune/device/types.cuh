#ifndef NEPTUNE_DEVICE_TYPES_CUH
#define NEPTUNE_DEVICE_TYPES_CUH
/** \file
 * The 16-bit element types (fp16, bf16) and their conversions as inline PTX, shared-memory tiles
 * (padded row-major and 128-byte swizzled), and warp/CTA helpers. Like every header of the device
 * library it includes nothing (not even cuda_fp16.h), so NVRTC compiles it without include paths;
 * it needs C++17 and sm_80 or newer. */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "neptune::device needs sm_80 or newer (cp.async, ldmatrix, bf16 mma.sync)"
#endif

// Every device-library function is inlined: fragments then stay in registers across calls.
#define NEPTUNE_DEVICE_INLINE __device__ __forceinline__

namespace neptune::device {

// ---- Element types -------------------------------------------------------------------------------

/** IEEE binary16 storage. Arithmetic happens in f32; these are only the bits in memory. */
struct f16 {
    unsigned short bits;
};
/** bfloat16 storage (the upper half of an f32). */
struct bf16 {
    unsigned short bits;
};
static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2, "16-bit storage types");

/** True for the element types the tiles and ops accept; the ops static_assert it. */
template <typename T>
struct is_element {
    static constexpr bool value = false;
};
template <>
struct is_element<f16> {
    static constexpr bool value = true;
};
template <>
struct is_element<bf16> {
    static constexpr bool value = true;
};

/** f32 -> T, round to nearest even. */
template <typename T>
NEPTUNE_DEVICE_INLINE T from_float(float x);
template <>
NEPTUNE_DEVICE_INLINE f16 from_float<f16>(float x) {
    f16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
    return r;
}
template <>
NEPTUNE_DEVICE_INLINE bf16 from_float<bf16>(float x) {
    bf16 r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
    return r;
}

/** T -> f32 (exact). */
NEPTUNE_DEVICE_INLINE float to_float(f16 x) {
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(x.bits));
    return r;
}
NEPTUNE_DEVICE_INLINE float to_float(bf16 x) { return __uint_as_float(static_cast<unsigned>(x.bits) << 16); }

/** Two f32 -> a packed pair of T, `lo` in bits 0..15: the order of a fragment register, whose
 * lower half holds the element of lower column index. (cvt.rn.*x2.f32 puts its first source in
 * the upper half, hence the swapped operands.) */
template <typename T>
NEPTUNE_DEVICE_INLINE unsigned pack2(float lo, float hi);
template <>
NEPTUNE_DEVICE_INLINE unsigned pack2<f16>(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
template <>
NEPTUNE_DEVICE_INLINE unsigned pack2<bf16>(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/** -infinity, the identity of max and the score of a masked element. */
NEPTUNE_DEVICE_INLINE float neg_inf() { return __int_as_float(static_cast<int>(0xff800000u)); }

/** 2^x by the SFU (ex2.approx.ftz: about 2 ulp, subnormals flushed; 2^-inf = +0). Softmax
 * kernels fold log2(e) into the score scale so that this is their only transcendental. */
NEPTUNE_DEVICE_INLINE float fast_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

/** tanh by the SFU (tanh.approx.f32: relative error below 2^-10.98, about fp16's unit roundoff,
 * which is what the scores of 16-bit inputs carry anyway; FlashAttention's softcap uses it too). One
 * instruction instead of tanhf's dozen; softcap kernels pay it once per score. */
NEPTUNE_DEVICE_INLINE float fast_tanh(float x) {
    float r;
    asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

/** Halide's integer division and modulus (Euclidean: the remainder is never negative, so the
 * quotient floors for a positive divisor), which C's truncating `/` and `%` are not for negative
 * operands: tile bounds such as (p - window - 127) / 128 go negative. A constant power-of-two
 * divisor compiles to shifts. */
NEPTUNE_DEVICE_INLINE int div_euclid(int a, int b) {
    const int q = a / b, r = a % b;
    return r >= 0 ? q : (b > 0 ? q - 1 : q + 1);
}
NEPTUNE_DEVICE_INLINE int mod_euclid(int a, int b) {
    const int r = a % b;
    return r >= 0 ? r : r + (b > 0 ? b : -b);
}

// ---- Warp and CTA helpers ------------------------------------------------------------------------

NEPTUNE_DEVICE_INLINE int warp_id() { return static_cast<int>(threadIdx.x) >> 5; }
/** The device's SM count as the hardware numbers them (%nsmid: at least the SMs present). */
NEPTUNE_DEVICE_INLINE int sm_count() {
    unsigned n;
    asm("mov.u32 %0, %%nsmid;" : "=r"(n));
    return static_cast<int>(n);
}
NEPTUNE_DEVICE_INLINE int lane_id() { return static_cast<int>(threadIdx.x) & 31; }
/** All threads of the CTA (__syncthreads). */
NEPTUNE_DEVICE_INLINE void barrier() { __syncthreads(); }
/** Hardware barrier `id` (1..15; 0 is barrier()'s) among `threads` threads, a multiple of 32:
 * lets a subset of the warps (a warpgroup, the consumers) synchronise without the others. */
NEPTUNE_DEVICE_INLINE void named_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;" : : "r"(id), "r"(threads) : "memory");
}

/** bar.sync / bar.arrive on hardware barrier ID among COUNT threads, with both as immediates (an ID in a
 * register makes ptxas reserve every barrier). arrive signals without waiting: how one warpgroup
 * hands the tensor cores to the next (FlashAttention-3's ping-pong). */
template <int ID, int COUNT>
NEPTUNE_DEVICE_INLINE void barrier_sync() {
    asm volatile("bar.sync %0, %1;" : : "n"(ID), "n"(COUNT) : "memory");
}
template <int ID, int COUNT>
NEPTUNE_DEVICE_INLINE void barrier_arrive() {
    asm volatile("bar.arrive %0, %1;" : : "n"(ID), "n"(COUNT) : "memory");
}

/** A generic pointer into shared memory as the 32-bit shared-window address that cp.async and
 * ldmatrix take. */
NEPTUNE_DEVICE_INLINE unsigned smem_address(const void *p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---- Shared-memory tiles -------------------------------------------------------------------------

/** A ROWS x COLS tile of T in shared memory, row-major with a row pitch of COLS + 8 elements.
 * When COLS is a multiple of 16 (a padded head dimension) the pitch is an odd multiple of 16
 * bytes, so the 8 rows that one ldmatrix 8x8 matrix reads fall in 8 different 16-byte bank groups:
 * no bank conflicts. (COLS = 8 mod 16 is allowed, for copies, but gives a pitch that is an even
 * multiple of 16 bytes and 2- to 8-way conflicts.) The padding is never written. `ptr` is 16-byte
 * aligned. The layout for tiles whose columns are not a multiple of 64; swizzled_tile otherwise. */
template <typename T, int ROWS, int COLS>
struct smem_tile {
    static_assert(is_element<T>::value, "smem_tile: T is f16 or bf16");
    static_assert(ROWS > 0 && COLS > 0 && COLS % 8 == 0, "smem_tile: COLS is a multiple of 8 (16 B chunks)");
    using element = T;
    static constexpr int rows = ROWS;
    static constexpr int cols = COLS;
    static constexpr int pitch = COLS + 8;
    static constexpr int bytes = ROWS * pitch * static_cast<int>(sizeof(T));

    T *ptr;

    NEPTUNE_DEVICE_INLINE T *at(int r, int c) const { return ptr + r * pitch + c; }
};

/** A ROWS x COLS tile of 16-bit T in the layout TMA's 128-byte swizzle writes and wgmma descriptors
 * read: COLS / 64 column blocks of ROWS rows x 128 bytes one after another; in block b, the 16-byte
 * chunk c of row r (columns 64 b + 8 c .. + 7) sits at chunk c ^ (r % 8). Element (r, c):
 *
 *     block 0 (cols 0..63)           block 1 (cols 64..127)
 *     row 0: chunks 0 1 2 3 4 5 6 7   row 0: chunks 0 1 2 ...
 *     row 1: chunks 1 0 3 2 5 4 7 6   ...
 *     row 2: chunks 2 3 0 1 6 7 4 5
 *
 * Rows are unpadded and every 128-byte half-row of K or V lands in one aligned 128-byte segment, so
 * cp.async copies of whole lines stay whole (padded rows split them and turn a third of the L2 lookups
 * into repeats: docs/engineering-log.md, 2026-12-01, the L2 hits of padded shared rows), while
 * the 8 rows of an ldmatrix 8x8 matrix still fall in 8 different bank groups. `ptr` is 1024-byte
 * aligned for TMA (which swizzles absolute addresses) and wgmma descriptors; cp.async, plain stores
 * and ldmatrix use at() and need only 128 bytes for conflict-free access. */
template <typename T, int ROWS, int COLS>
struct swizzled_tile {
    static_assert(is_element<T>::value, "swizzled_tile: T is f16 or bf16");
    static_assert(COLS % 64 == 0 && ROWS % 8 == 0 && ROWS <= 256, "swizzled_tile: 64-column blocks of 8-row groups");
    using element = T;
    static constexpr int rows = ROWS;
    static constexpr int cols = COLS;
    static constexpr int block_bytes = ROWS * 128;
    static constexpr int bytes = (COLS / 64) * block_bytes;

    T *ptr;

    NEPTUNE_DEVICE_INLINE T *at(int r, int c) const {
        const int chunk = ((c & 63) >> 3) ^ (r & 7);
        return ptr + (c >> 6) * (ROWS * 64) + r * 64 + chunk * 8 + (c & 7);
    }
};

}  // namespace neptune::device

#endif
