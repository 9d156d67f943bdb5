#ifndef NEPTUNE_DEVICE_WARP_ROWS_CUH
#define NEPTUNE_DEVICE_WARP_ROWS_CUH
/** \file
 * Warp-rows register tiles: small f32 tiles of R <= 16 rows for CUDA-core work that no
 * tensor-core instruction touches (split-K's combine, a strip of R rows at a time). Lane l holds
 * columns 128 q + 4 l + e (e < 4) of every row, so one row moves as one 16-byte access per lane;
 * their row vectors hold row l % R in lane l: one instruction computes all R rows, and a map reads
 * row r from lane r by a shuffle. */
#include "neptune/device/types.cuh"

namespace neptune::device {

/** R rows x 128 Q columns; v[r][q][e] is row r, column warp_rows_col(q, e) of the calling lane. */
template <int R, int Q>
struct warp_rows_tile {
    static_assert(R > 0 && R <= 16 && Q > 0, "warp_rows_tile: 1 to 16 rows, positive columns");
    float v[R][Q][4];
};

/** One f32 per row of a warp_rows_tile<R, *>: lane l holds row l % R. */
template <int R>
struct warp_rows_vec {
    static_assert(R > 0 && R <= 16, "warp_rows_vec: 1 to 16 rows");
    float v;
};

NEPTUNE_DEVICE_INLINE int warp_rows_col(int q, int e) { return 128 * q + 4 * lane_id() + e; }
/** The row that the calling lane holds of a warp_rows_vec<R>. */
template <int R>
NEPTUNE_DEVICE_INLINE int warp_rows_vec_row() {
    return lane_id() % R;
}

template <int R, int Q>
NEPTUNE_DEVICE_INLINE void fill(warp_rows_tile<R, Q> &t, float x) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int q = 0; q < Q; ++q)
#pragma unroll
            for (int e = 0; e < 4; ++e) t.v[r][q][e] = x;
}
template <int R>
NEPTUNE_DEVICE_INLINE void fill(warp_rows_vec<R> &v, float x) {
    v.v = x;
}

/** Row r of v in every lane. */
template <int R>
NEPTUNE_DEVICE_INLINE float row_of(const warp_rows_vec<R> &v, int r) {
    return __shfl_sync(0xffffffffu, v.v, r);
}

/** Where the warp-rows loads read: Global by ld.global.cg (the data may come from other blocks of this
 * launch: a folded combine's workspace, in L2), Generic by plain loads (a cluster block's shared
 * memory, mapped by cluster_map, which ld.global does not reach). */
enum class Load { Global, Generic };

template <Load L, typename T>
NEPTUNE_DEVICE_INLINE T load_from(const T *p) {
    if constexpr (L == Load::Global)
        return __ldcg(p);
    else
        return *p;
}

/** Rows [row0, row0 + R) of g (f32, row_stride apart) into t: row row0 + r and column c where
 * row0 + r < valid_rows and c < valid_cols, zero elsewhere, loaded as L says. g and row_stride keep
 * every row 16-byte aligned; each lane's four columns of a row are one float4. WHOLE_FOURS says
 * valid_cols is a multiple of 4 (no row ends inside a lane's four), which spares the element-wise
 * edge loads. */
template <bool WHOLE_FOURS, Load L = Load::Global, int R, int Q>
NEPTUNE_DEVICE_INLINE void load_warp_rows(warp_rows_tile<R, Q> &t, const float *g, long long row_stride, int row0,
                                          int valid_rows, int valid_cols) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const float *row = g + (long long)(row0 + r) * row_stride;
        const bool row_ok = row0 + r < valid_rows;
#pragma unroll
        for (int q = 0; q < Q; ++q) {
            const int c = warp_rows_col(q, 0);
            const float4 x = row_ok && c + 4 <= valid_cols ? load_from<L>(reinterpret_cast<const float4 *>(row + c))
                                                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            t.v[r][q][0] = x.x, t.v[r][q][1] = x.y, t.v[r][q][2] = x.z, t.v[r][q][3] = x.w;
            if constexpr (!WHOLE_FOURS) {  // a row that ends inside the lane's four columns
                const bool edge = row_ok && c < valid_cols && c + 4 > valid_cols;
#pragma unroll
                for (int e = 0; e < 3; ++e)
                    if (edge && c + e < valid_cols) t.v[r][q][e] = load_from<L>(row + c + e);
            }
        }
    }
}

/** Rows row0 + r < valid_rows and columns c < valid_cols of t, converted to T, into g (row_stride
 * apart); nothing else is written. Column pairs go out as one 32-bit store (T of 16 bits) or one
 * 64-bit store (f32): the alignment store_acc needs, g 4-byte (8-byte for f32) aligned, row_stride even. */
template <typename T, int R, int Q>
NEPTUNE_DEVICE_INLINE void store_warp_rows(T *g, long long row_stride, const warp_rows_tile<R, Q> &t, int row0,
                                           int valid_rows, int valid_cols) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
        if (row0 + r >= valid_rows) continue;
        T *row = g + (long long)(row0 + r) * row_stride;
#pragma unroll
        for (int q = 0; q < Q; ++q)
#pragma unroll
            for (int e = 0; e < 4; e += 2) {
                const int c = warp_rows_col(q, e);
                const float x0 = t.v[r][q][e], x1 = t.v[r][q][e + 1];
                if (c + 1 < valid_cols) {
                    if constexpr (is_element<T>::value) {
                        *reinterpret_cast<unsigned *>(row + c) = pack2<T>(x0, x1);
                    } else {
                        *reinterpret_cast<float2 *>(row + c) = make_float2(x0, x1);
                    }
                } else if (c < valid_cols) {
                    if constexpr (is_element<T>::value)
                        row[c] = from_float<T>(x0);
                    else
                        row[c] = x0;
                }
            }
    }
}

/** g[row0 + i] (row_stride apart) for the rows row0 + i < valid_rows, `fill` for the others, loaded as L says. */
template <Load L = Load::Global, int R>
NEPTUNE_DEVICE_INLINE void load_warp_rows_vec(warp_rows_vec<R> &v, const float *g, long long row_stride, int row0,
                                              int valid_rows, float fill) {
    const int row = row0 + warp_rows_vec_row<R>();
    v.v = row < valid_rows ? load_from<L>(g + (long long)row * row_stride) : fill;
}

/** g[row0 + i] = row i of v for the rows row0 + i < valid_rows, by the lane that holds it. */
template <int R>
NEPTUNE_DEVICE_INLINE void store_rows(float *g, const warp_rows_vec<R> &v, int row0, int valid_rows) {
    const int row = row0 + warp_rows_vec_row<R>();
    if (lane_id() < R && row < valid_rows) g[row] = v.v;
}

}  // namespace neptune::device

#endif
