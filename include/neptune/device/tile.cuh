#ifndef NEPTUNE_DEVICE_TILE_CUH
#define NEPTUNE_DEVICE_TILE_CUH
/** \file
 * Warp-level register tiles in the mma.sync m16n8k16 fragment layouts (f32 accumulators, 16-bit
 * A operands, per-row vectors), and the elementwise maps and row reductions on them. A warp owns
 * 16 * MT consecutive rows of every tile; rows and columns passed to callbacks are warp-relative.
 * Fragment arrays are indexed only by compile-time constants (every loop is unrolled), so they
 * live in registers. */
#include "neptune/device/types.cuh"

namespace neptune::device {

/** f32 C/D fragments of MT x NT m16n8 tiles: 16 * MT rows, 8 * NT columns. Register i of the
 * fragment v[mt][nt] holds row 16 * mt + lane / 4 + 8 * (i / 2), column 8 * nt + 2 * (lane % 4)
 * + i % 2. Ownership of one m16n8 fragment ("lane:registers"):
 *
 *              col 0 1     col 2 3     col 4 5     col 6 7
 *     row  0   L0:v0 v1    L1:v0 v1    L2:v0 v1    L3:v0 v1
 *     row  1   L4:v0 v1    L5:v0 v1    L6:v0 v1    L7:v0 v1
 *      ...
 *     row  7   L28:v0 v1   L29:v0 v1   L30:v0 v1   L31:v0 v1
 *     row  8   L0:v2 v3    L1:v2 v3    L2:v2 v3    L3:v2 v3
 *      ...
 *     row 15   L28:v2 v3   L29:v2 v3   L30:v2 v3   L31:v2 v3
 *
 * So the four lanes of a quad (lane / 4 equal) share two rows, which is what makes row
 * reductions "in-thread, then shuffle over lane ^ 1 and lane ^ 2". */
template <int MT, int NT>
struct acc_tile {
    static_assert(MT > 0 && NT > 0, "acc_tile: positive shape");
    static constexpr int m_tiles = MT;
    static constexpr int n_tiles = NT;
    float v[MT][NT][4];
};

/** One f32 per row of an acc_tile<MT, *>: v[mt][h] belongs to row 16 * mt + lane / 4 + 8 * h.
 * The four lanes of a quad hold the same values (every op here keeps them equal). */
template <int MT>
struct row_vec {
    static_assert(MT > 0, "row_vec: positive shape");
    float v[MT][2];
};

/** A fragments (16-bit T, packed in pairs) of MT x KT m16k16 tiles: 16 * MT rows, 16 * KT
 * columns (the K dimension). Register r of v[mt][kt] holds the pair at row 16 * mt + lane / 4
 * + 8 * (r % 2), columns 16 * kt + 8 * (r / 2) + 2 * (lane % 4) + {0, 1} (lower column in the
 * lower half):
 *
 *                  cols 0..7   cols 8..15
 *     rows 0..7    r0          r2
 *     rows 8..15   r1          r3
 *
 * Within each 8x8 block the lane ownership is that of an acc_tile fragment, so two adjacent
 * m16n8 accumulators convert into one m16k16 A fragment without shuffles (acc_to_a). */
template <typename T, int MT, int KT>
struct a_tile {
    static_assert(is_element<T>::value, "a_tile: T is f16 or bf16");
    static_assert(MT > 0 && KT > 0, "a_tile: positive shape");
    unsigned v[MT][KT][4];
};

/** The warp-relative row of register i (or row-vector half i / 2) of m16 tile mt. */
NEPTUNE_DEVICE_INLINE int frag_row(int mt, int i) { return 16 * mt + (lane_id() >> 2) + 8 * (i >> 1); }
/** The column of register i of n8 tile nt. */
NEPTUNE_DEVICE_INLINE int frag_col(int nt, int i) { return 8 * nt + 2 * (lane_id() & 3) + (i & 1); }

// ---- Fill and copy -------------------------------------------------------------------------------

/** f(c.v[m][n][i], m, n, i) for every register of c, in a fully unrolled loop nest. */
template <int MT, int NT, class F>
NEPTUNE_DEVICE_INLINE void for_each_register(acc_tile<MT, NT> &c, F f) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) f(c.v[m][n][i], m, n, i);
}

template <int MT, int NT>
NEPTUNE_DEVICE_INLINE void fill(acc_tile<MT, NT> &c, float x) {
    for_each_register(c, [=](float &e, int, int, int) { e = x; });
}

template <int MT>
NEPTUNE_DEVICE_INLINE void fill(row_vec<MT> &r, float x) {
#pragma unroll
    for (int m = 0; m < MT; ++m) r.v[m][0] = r.v[m][1] = x;
}

// Plain assignment would do; the named ops let emitted code read as tile operations.
template <int MT, int NT>
NEPTUNE_DEVICE_INLINE void copy(acc_tile<MT, NT> &dst, const acc_tile<MT, NT> &src) {
    dst = src;
}
template <int MT>
NEPTUNE_DEVICE_INLINE void copy(row_vec<MT> &dst, const row_vec<MT> &src) {
    dst = src;
}
template <typename T, int MT, int KT>
NEPTUNE_DEVICE_INLINE void copy(a_tile<T, MT, KT> &dst, const a_tile<T, MT, KT> &src) {
    dst = src;
}

// ---- Maps ----------------------------------------------------------------------------------------

/** c[e] = f(c[e], row, col) for every element, row in [0, 16 MT) and col in [0, 8 NT) warp-relative:
 * score scaling, masks (return neg_inf()), score modifiers. */
template <int MT, int NT, class F>
NEPTUNE_DEVICE_INLINE void map(acc_tile<MT, NT> &c, F f) {
    for_each_register(c, [&](float &e, int m, int n, int i) { e = f(e, frag_row(m, i), frag_col(n, i)); });
}

/** c[e] = f(c[e], r[row of e]): a row vector broadcast along the columns (exp2(s - m), O * alpha,
 * O / l). */
template <int MT, int NT, class F>
NEPTUNE_DEVICE_INLINE void map_rows(acc_tile<MT, NT> &c, const row_vec<MT> &r, F f) {
    for_each_register(c, [&](float &e, int m, int, int i) { e = f(e, r.v[m][i >> 1]); });
}

/** r[i] = f(r[i], row), row warp-relative. */
template <int MT, class F>
NEPTUNE_DEVICE_INLINE void map_vec(row_vec<MT> &r, F f) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) r.v[m][h] = f(r.v[m][h], frag_row(m, 2 * h));
}

/** dst[i] = f(dst[i], a[i]) (alpha = exp2(m_old - m_new), l *= alpha). */
template <int MT, class F>
NEPTUNE_DEVICE_INLINE void map_vec(row_vec<MT> &dst, const row_vec<MT> &a, F f) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) dst.v[m][h] = f(dst.v[m][h], a.v[m][h]);
}

// ---- Row reductions ------------------------------------------------------------------------------

/** Folds each row of c with `op` in-thread (starting from `init`), then across the quad that
 * shares the row (lanes ^ 1, ^ 2), leaving the row's total in all four lanes. */
template <int MT, int NT, class Op>
NEPTUNE_DEVICE_INLINE void quad_reduce_rows(row_vec<MT> &out, const acc_tile<MT, NT> &c, float init, Op op) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float x = init;
#pragma unroll
            for (int n = 0; n < NT; ++n) x = op(x, op(c.v[m][n][2 * h], c.v[m][n][2 * h + 1]));
            x = op(x, __shfl_xor_sync(0xffffffffu, x, 1));
            x = op(x, __shfl_xor_sync(0xffffffffu, x, 2));
            out.v[m][h] = x;
        }
}

/** m = max(m, max over the row's columns of c). -inf entries are the identity; a row of only
 * -inf leaves m unchanged (so -inf when m started at neg_inf()). */
template <int MT, int NT>
NEPTUNE_DEVICE_INLINE void row_max(row_vec<MT> &m, const acc_tile<MT, NT> &c) {
    row_vec<MT> t;
    quad_reduce_rows(t, c, neg_inf(), [](float a, float b) { return fmaxf(a, b); });
    map_vec(m, t, [](float a, float b) { return fmaxf(a, b); });
}

/** l = l + sum over the row's columns of c. The partial sums are combined before l is added, so
 * l counts once, not once per lane; -inf entries make the sum -inf, as in IEEE arithmetic (after
 * exp2 they are zeros). */
template <int MT, int NT>
NEPTUNE_DEVICE_INLINE void row_sum(row_vec<MT> &l, const acc_tile<MT, NT> &c) {
    row_vec<MT> t;
    quad_reduce_rows(t, c, 0.0f, [](float a, float b) { return a + b; });
    map_vec(l, t, [](float a, float b) { return a + b; });
}

}  // namespace neptune::device

#endif
