#ifndef NEPTUNE_TEST_DEVICE_OP_KERNELS_CUH
#define NEPTUNE_TEST_DEVICE_OP_KERNELS_CUH
/** \file
 * Small kernels that each exercise a few neptune::device ops on data from global memory, for the
 * GPU test (device_ops.cu) and the compile checks. Device code only. */
#include "neptune/device/neptune_device.cuh"

namespace neptune::device_test {

namespace nd = neptune::device;

/** std::conditional without the standard library (NVRTC compiles this file without one). */
template <bool B, class X, class Y>
struct pick {
    using type = X;
};
template <class X, class Y>
struct pick<false, X, Y> {
    using type = Y;
};

/** A shared-memory pattern that no test input contains. */
constexpr unsigned short poison_bits = 0xbeef;

/** Loads g into s with threads 0 .. THREADS-1 (cp.async, waited for, or plain stores), then a barrier. */
template <int THREADS, bool ASYNC, class Tile>
__device__ void load_and_wait(Tile s, const typename Tile::element *g, long long row_stride, int valid_rows,
                              int valid_cols) {
    if constexpr (ASYNC) {
        nd::load_tile_async<THREADS>(s, g, row_stride, valid_rows, valid_cols);
        nd::cp_async_commit();
        nd::cp_async_wait<0>();
    } else {
        nd::load_tile_sync<THREADS>(s, g, row_stride, valid_rows, valid_cols);
    }
    nd::barrier();
}

/** Each of WARPS warps computes its 16 MT rows of c = 1 + a b^T (AB false: b holds [n][k]) or
 * c = 1 + a b (AB true: b holds [k][n]). a is (16 MT WARPS) x (16 KT) row-major; b is read at
 * (b_row0, b_col0) inside a larger row-major tile with 16 spare rows and columns (SWIZZLED: tiles
 * in swizzled_tile's layout, loaded by cp.async; b's columns rounded up to whole 64-column blocks,
 * plus one spare block for mma_ab, whose b_col0 is 0 or 64). c32 and c16 are (16 MT WARPS) x (8 NT)
 * row-major. */
template <typename T, int WARPS, int MT, int NT, int KT, bool AB, bool SWIZZLED = false>
struct mma_shape {
    static constexpr int m = 16 * MT * WARPS, k = 16 * KT, n = 8 * NT;
    static constexpr int b_rows = (AB ? k : n) + 16;
    static constexpr int b_cols = !SWIZZLED ? (AB ? n : k) + 16 : AB ? (n + 63) / 64 * 64 + 64 : k;
    using a_tile = typename pick<SWIZZLED, nd::swizzled_tile<T, m, k>, nd::smem_tile<T, m, k>>::type;
    using b_tile =
        typename pick<SWIZZLED, nd::swizzled_tile<T, b_rows, b_cols>, nd::smem_tile<T, b_rows, b_cols>>::type;
    static constexpr int a_elems = a_tile::bytes / int(sizeof(T)), b_elems = b_tile::bytes / int(sizeof(T));
};

template <typename T, int WARPS, int MT, int NT, int KT, bool AB, bool SWIZZLED = false>
__global__ void mma_kernel(const T *a, const T *b, float *c32, T *c16, int b_row0, int b_col0) {
    using shape = mma_shape<T, WARPS, MT, NT, KT, AB, SWIZZLED>;
    __shared__ __align__(1024) T a_buf[shape::a_elems];
    __shared__ __align__(1024) T b_buf[shape::b_elems];
    const typename shape::a_tile a_s{a_buf};
    const typename shape::b_tile b_s{b_buf};
    // The swizzled tiles by cp.async (decode's path), the padded ones by plain stores.
    load_and_wait<32 * WARPS, SWIZZLED>(a_s, a, shape::k, shape::m, shape::k);
    load_and_wait<32 * WARPS, SWIZZLED>(b_s, b, shape::b_cols, shape::b_rows, shape::b_cols);

    const int row0 = 16 * MT * nd::warp_id();
    nd::a_tile<T, MT, KT> a_frag;
    nd::load_a(a_frag, a_s, row0);
    nd::acc_tile<MT, NT> c;
    nd::fill(c, 1.0f);  // mma accumulates onto what is there
    if constexpr (AB)
        nd::mma_ab(c, a_frag, b_s, b_row0, b_col0);
    else
        nd::mma_abt(c, a_frag, b_s, b_row0);
    nd::store_acc_f32(c32, shape::n, c, row0, shape::m, shape::n);
    nd::store_acc(c16, shape::n, c, row0, shape::m, shape::n);
}

/** Poisons a ROWS x COLS tile (padding included), loads g into it with threads 0 .. THREADS-1 of
 * the CTA (launch more to check that the others stay out), and copies the whole padded tile to out. */
template <typename T, int THREADS, int ROWS, int COLS, bool ASYNC>
__global__ void load_kernel(const T *g, long long row_stride, int valid_rows, int valid_cols, T *out) {
    using tile = nd::smem_tile<T, ROWS, COLS>;
    constexpr int n = ROWS * tile::pitch;
    __shared__ __align__(16) T buf[n];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i].bits = poison_bits;
    nd::barrier();
    load_and_wait<THREADS, ASYNC>(tile{buf}, g, row_stride, valid_rows, valid_cols);
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[i];
}

/** As load_kernel for a swizzled tile, which has no padding: the tile is read back through at(),
 * row-major ROWS x COLS, so a layout that maps two elements to one place or leaves one out shows. */
template <typename T, int THREADS, int ROWS, int COLS, bool ASYNC>
__global__ void load_swizzled_kernel(const T *g, long long row_stride, int valid_rows, int valid_cols, T *out) {
    using tile = nd::swizzled_tile<T, ROWS, COLS>;
    __shared__ __align__(1024) T buf[ROWS * COLS];
    for (int i = threadIdx.x; i < ROWS * COLS; i += blockDim.x) buf[i].bits = poison_bits;
    nd::barrier();
    const tile s{buf};
    load_and_wait<THREADS, ASYNC>(s, g, row_stride, valid_rows, valid_cols);
    for (int i = threadIdx.x; i < ROWS * COLS; i += blockDim.x) out[i] = *s.at(i / COLS, i % COLS);
}

/** One warp, an MT x NT accumulator read from `in` ((16 MT) x (8 NT) row-major, -inf entries
 * allowed) through map's coordinates:
 *   m_out = row_max(m_init, in),  l_raw_out = row_sum(l_init, in),
 *   p_out = 2^(in - m) (m = m_out, or 0 where m_out = -inf),  l_out = row_sum(l_init, p). */
template <int MT, int NT>
__global__ void reduce_kernel(const float *in, const float *m_init, const float *l_init, float *m_out, float *l_raw_out,
                              float *p_out, float *l_out) {
    constexpr int N = 8 * NT;
    nd::acc_tile<MT, NT> c;
    nd::map(c, [&](float, int r, int col) { return in[r * N + col]; });
    nd::row_vec<MT> m, l_raw, l;
    nd::map_vec(m, [&](float, int r) { return m_init[r]; });
    nd::map_vec(l, [&](float, int r) { return l_init[r]; });
    nd::copy(l_raw, l);
    nd::row_max(m, c);
    nd::row_sum(l_raw, c);
    nd::row_vec<MT> bias = m;
    nd::map_vec(bias, [](float x, int) { return x == nd::neg_inf() ? 0.0f : x; });
    nd::map_rows(c, bias, [](float x, float b) { return nd::fast_exp2(x - b); });
    nd::row_sum(l, c);
    nd::store_rows(m_out, m, 0, 16 * MT);
    nd::store_rows(l_raw_out, l_raw, 0, 16 * MT);
    nd::store_rows(l_out, l, 0, 16 * MT);
    nd::store_acc_f32(p_out, N, c, 0, 16 * MT, N);
}

/** One warp, (16 MT) x (8 NT) row-major outputs:
 *   mapped     = 0.5 + r * 8 NT + col, from map(fill(0.5)) with the coordinates it passes;
 *   round_trip = acc_to_a(in) times the identity by mma_ab, which must equal T(in): the
 *                converted fragments are valid A operands for the same rows and columns. */
template <typename T, int MT, int NT>
__global__ void layout_kernel(const float *in, float *mapped, float *round_trip) {
    constexpr int N = 8 * NT;
    __shared__ __align__(16) T eye_buf[N * (N + 8)];
    const nd::smem_tile<T, N, N> eye{eye_buf};
    for (int i = threadIdx.x; i < N * N; i += blockDim.x)
        *eye.at(i / N, i % N) = nd::from_float<T>(i / N == i % N ? 1.0f : 0.0f);
    nd::barrier();

    nd::acc_tile<MT, NT> c;
    nd::fill(c, 0.5f);
    nd::map(c, [](float x, int r, int col) { return x + static_cast<float>(r * N + col); });
    nd::store_acc_f32(mapped, N, c, 0, 16 * MT, N);

    nd::map(c, [&](float, int r, int col) { return in[r * N + col]; });
    nd::a_tile<T, MT, NT / 2> a;
    nd::acc_to_a(a, c);
    nd::acc_tile<MT, NT> d;
    nd::fill(d, 0.0f);
    nd::mma_ab(d, a, eye, 0, 0);
    nd::store_acc_f32(round_trip, N, d, 0, 16 * MT, N);
}

/** One warp stores the accumulator read from `in` ((16 MT) x (8 NT) row-major) at row0 of
 * out16 and out32 (row stride `row_stride`) and its row maxima at row0 of rows_out, all masked
 * by valid_rows and valid_cols. */
template <typename T, int MT, int NT>
__global__ void store_kernel(const float *in, T *out16, float *out32, float *rows_out, long long row_stride, int row0,
                             int valid_rows, int valid_cols) {
    nd::acc_tile<MT, NT> c;
    nd::map(c, [&](float, int r, int col) { return in[r * 8 * NT + col]; });
    nd::store_acc(out16, row_stride, c, row0, valid_rows, valid_cols);
    nd::store_acc_f32(out32, row_stride, c, row0, valid_rows, valid_cols);
    nd::row_vec<MT> m;
    nd::fill(m, nd::neg_inf());
    nd::row_max(m, c);
    nd::store_rows(rows_out, m, row0, valid_rows);
}

/** One warp: a warp_rows_tile<R, Q> at row row0 of `in` (f32, row_stride apart) and its row vector
 * from in_rows, loaded under (load_rows, load_cols) (WHOLE_FOURS: load_cols a multiple of 4), the
 * vector's missing rows -7; then t = t * row r of the vector + col / 1024 (the shuffle a map reads
 * rows by, and the lane's columns), the vector plus 1; stored under (store_rows, store_cols) as T,
 * as f32, and the vector. */
template <typename T, int R, int Q, bool WHOLE_FOURS>
__global__ void warp_rows_kernel(const float *in, const float *in_rows, T *out16, float *out32, float *rows_out,
                                 long long row_stride, int row0, int load_rows, int load_cols, int store_rows,
                                 int store_cols) {
    nd::warp_rows_tile<R, Q> t;
    nd::load_warp_rows<WHOLE_FOURS>(t, in, row_stride, row0, load_rows, load_cols);
    nd::warp_rows_vec<R> v;
    nd::load_warp_rows_vec(v, in_rows, 1, row0, load_rows, -7.0f);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int q = 0; q < Q; ++q)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                t.v[r][q][e] = t.v[r][q][e] * nd::row_of(v, r) + float(nd::warp_rows_col(q, e)) / 1024.0f;
    v.v += 1.0f;
    nd::store_warp_rows(out16, row_stride, t, row0, store_rows, store_cols);
    nd::store_warp_rows(out32, row_stride, t, row0, store_rows, store_cols);
    nd::store_rows(rows_out, v, row0, store_rows);
}

}  // namespace neptune::device_test

#endif
