#ifndef NEPTUNE_DEVICE_ROW_STRIP_CUH
#define NEPTUNE_DEVICE_ROW_STRIP_CUH
/** \file
 * Row strips: rows of a row-wise reduction held in registers, each row spread over T threads (a
 * warp, or the whole block), thread t of the row holding N vectors of V consecutive columns:
 * columns V (t + T i) + e, e < V. A vector is 16 bytes of the input, so loads are 16-byte and a
 * warp's are coalesced. Reductions over a row: warp shuffles, then (T > 32) one f32 per warp through
 * shared memory. The thread's row in its block is threadIdx.x / T. */
#include "neptune/device/types.cuh"

namespace neptune::device {

/** A thread's part of a strip row: N vectors of V f32 values. */
template <int N, int V>
struct strip {
    float v[N][V];
};
/** A thread's copy of its row's f32 (every thread of the row holds the same value). */
struct strip_row {
    float v;
};

template <typename T>
NEPTUNE_DEVICE_INLINE float element_to_float(T x) {
    return to_float(x);
}
template <>
NEPTUNE_DEVICE_INLINE float element_to_float<float>(float x) {
    return x;
}
template <typename T>
NEPTUNE_DEVICE_INLINE T element_from_float(float x) {
    return from_float<T>(x);
}
template <>
NEPTUNE_DEVICE_INLINE float element_from_float<float>(float x) {
    return x;
}

/** 16 bytes as a vector register and as its elements. */
template <typename E>
union vec16 {
    uint4 u;
    E e[16 / sizeof(E)];
};

/** A strip of f16 or bf16 values kept as loaded, 16 bytes per vector (half the registers of the f32
 * strip), converted where read: for strips only loads write. */
template <int N, typename E>
struct packed_strip {
    vec16<E> raw[N];
};

/** Element (i, e) of a thread's strip, as f32. */
template <int N, int V>
NEPTUNE_DEVICE_INLINE float at(const strip<N, V> &s, int i, int e) {
    return s.v[i][e];
}
template <int N, typename E>
NEPTUNE_DEVICE_INLINE float at(const packed_strip<N, E> &s, int i, int e) {
    return element_to_float<E>(s.raw[i].e[e]);
}

/** The column of vector i, element e, for thread t of its row. */
template <int T, int V>
NEPTUNE_DEVICE_INLINE int strip_col(int t, int i, int e) {
    return V * (t + T * i) + e;
}

/** Loads columns [0, valid_cols) of the row at `src` (zeros beyond, and everywhere when the row is
 * not valid): every 16-byte vector issued before the first is converted, so N loads are in flight. */
template <int T, int N, int V, typename E>
NEPTUNE_DEVICE_INLINE void load_strip(strip<N, V> &dst, const E *__restrict__ src, bool row_valid, int valid_cols,
                                      int t) {
    static_assert(sizeof(E) * V == 16, "load_strip: a vector is 16 bytes");
    const bool aligned = (reinterpret_cast<unsigned long long>(src) & 15) == 0;
    vec16<E> raw[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int c0 = strip_col<T, V>(t, i, 0);
        if (row_valid && aligned && c0 + V <= valid_cols) {
            raw[i].u = __ldg(reinterpret_cast<const uint4 *>(src + c0));
        } else {
#pragma unroll
            for (int e = 0; e < V; ++e)
                raw[i].e[e] = row_valid && c0 + e < valid_cols ? src[c0 + e] : element_from_float<E>(0.0f);
        }
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
#pragma unroll
        for (int e = 0; e < V; ++e) dst.v[i][e] = element_to_float<E>(raw[i].e[e]);
    }
}

/** load_strip into a packed strip: the 16-byte vectors as they are. */
template <int T, int N, int V, typename E>
NEPTUNE_DEVICE_INLINE void load_strip(packed_strip<N, E> &dst, const E *__restrict__ src, bool row_valid,
                                      int valid_cols, int t) {
    static_assert(sizeof(E) * V == 16, "load_strip: a vector is 16 bytes");
    const bool aligned = (reinterpret_cast<unsigned long long>(src) & 15) == 0;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int c0 = strip_col<T, V>(t, i, 0);
        if (row_valid && aligned && c0 + V <= valid_cols) {
            dst.raw[i].u = __ldg(reinterpret_cast<const uint4 *>(src + c0));
        } else {
#pragma unroll
            for (int e = 0; e < V; ++e)
                dst.raw[i].e[e] = row_valid && c0 + e < valid_cols ? src[c0 + e] : element_from_float<E>(0.0f);
        }
    }
}

/** Stores one thread's vector of V values at columns [c0, c0 + V) of the row at `dst`, those below
 * valid_cols, rounded to E: 16-byte stores where the row is aligned and the vector whole, elements
 * otherwise. */
template <int V, typename E>
NEPTUNE_DEVICE_INLINE void store_vector(E *__restrict__ dst, const float (&x)[V], bool row_valid, int valid_cols,
                                        int c0) {
    if (!row_valid) return;
    constexpr int W = 16 / sizeof(E);  // elements per 16-byte store
    const bool aligned = (reinterpret_cast<unsigned long long>(dst) & 15) == 0;
    if constexpr (V % W == 0) {
        if (aligned && c0 + V <= valid_cols) {
#pragma unroll
            for (int w = 0; w < V; w += W) {
                vec16<E> part;
#pragma unroll
                for (int e = 0; e < W; ++e) part.e[e] = element_from_float<E>(x[w + e]);
                *reinterpret_cast<uint4 *>(dst + c0 + w) = part.u;
            }
            return;
        }
    }
#pragma unroll
    for (int e = 0; e < V; ++e)
        if (c0 + e < valid_cols) dst[c0 + e] = element_from_float<E>(x[e]);
}

/** Whether `p` is 16-byte aligned: the fast path of a strip statement reads and writes whole vectors. */
template <typename E>
NEPTUNE_DEVICE_INLINE bool aligned16(const E *p) {
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

/** The last column thread t holds of a strip of N vectors: all its columns are below `cols` when
 * this one is. */
template <int T, int N, int V>
NEPTUNE_DEVICE_INLINE int strip_last_col(int t) {
    return strip_col<T, V>(t, N - 1, V - 1);
}

/** V consecutive elements at `p` (16-byte aligned) as f32, by the widest loads: a 1-D tensor indexed
 * by the column (LayerNorm's gamma and beta) read a vector at a time. */
template <int V, typename E>
NEPTUNE_DEVICE_INLINE void load_cols(float (&dst)[V], const E *__restrict__ p) {
    constexpr int bytes = V * int(sizeof(E));
    if constexpr (bytes % 16 == 0) {
        constexpr int W = 16 / sizeof(E);
#pragma unroll
        for (int w = 0; w < V / W; ++w) {
            vec16<E> r;
            r.u = __ldg(reinterpret_cast<const uint4 *>(p) + w);
#pragma unroll
            for (int e = 0; e < W; ++e) dst[w * W + e] = element_to_float<E>(r.e[e]);
        }
    } else {
#pragma unroll
        for (int e = 0; e < V; ++e) dst[e] = element_to_float<E>(p[e]);
    }
}

/** Stores one thread's vector of V values at columns [c0, c0 + V) of the 16-byte aligned row at
 * `dst`, all in bounds, rounded to E: the fast path of store_vector. */
template <int V, typename E>
NEPTUNE_DEVICE_INLINE void store_whole_vector(E *__restrict__ dst, const float (&x)[V], int c0) {
    constexpr int W = 16 / sizeof(E);
    if constexpr (V % W == 0) {
#pragma unroll
        for (int w = 0; w < V; w += W) {
            vec16<E> part;
#pragma unroll
            for (int e = 0; e < W; ++e) part.e[e] = element_from_float<E>(x[w + e]);
            *reinterpret_cast<uint4 *>(dst + c0 + w) = part.u;
        }
    } else {
#pragma unroll
        for (int e = 0; e < V; ++e) dst[c0 + e] = element_from_float<E>(x[e]);
    }
}

/** Stores columns [0, valid_cols) of the row at `dst` from a thread's values (store_vector). */
template <int T, int N, int V, typename E>
NEPTUNE_DEVICE_INLINE void store_strip(E *__restrict__ dst, const strip<N, V> &src, bool row_valid, int valid_cols,
                                       int t) {
#pragma unroll
    for (int i = 0; i < N; ++i) store_vector<V>(dst, src.v[i], row_valid, valid_cols, strip_col<T, V>(t, i, 0));
}

NEPTUNE_DEVICE_INLINE float reduce_op(bool max, float a, float b) { return max ? fmaxf(a, b) : a + b; }

/** Combines `x` over the T threads of the row (T a power of two from 1 to 1024; T > 32: the whole
 * block is one row). Every thread of the row returns the result. */
template <int T>
NEPTUNE_DEVICE_INLINE float reduce_row(float x, bool max) {
    constexpr int lanes = T < 32 ? T : 32;
#pragma unroll
    for (int o = lanes / 2; o > 0; o /= 2) x = reduce_op(max, x, __shfl_xor_sync(0xffffffffu, x, o));
    if constexpr (T > 32) {
        __shared__ float partial[32];
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        if (lane == 0) partial[warp] = x;
        __syncthreads();
        x = lane < T / 32 ? partial[lane] : (max ? -__int_as_float(0x7f800000) : 0.0f);
#pragma unroll
        for (int o = 16; o > 0; o /= 2) x = reduce_op(max, x, __shfl_xor_sync(0xffffffffu, x, o));
        __syncthreads();  // the next reduction may write partial again
    }
    return x;
}

/** Strips whose columns are strided in memory (a reduction over a middle axis): the block's R
 * consecutive threads hold R consecutive rows, so a warp's loads of one column are contiguous;
 * thread t of its row (threadIdx.x / R) holds columns t + T i, i < N, one per vector. */
template <int T, int N, typename E>
NEPTUNE_DEVICE_INLINE void load_strip_strided(strip<N, 1> &dst, const E *__restrict__ src, bool row_valid,
                                              int valid_cols, int t, long long stride) {
    E raw[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int c = t + T * i;
        raw[i] = row_valid && c < valid_cols ? src[c * stride] : element_from_float<E>(0.0f);
    }
#pragma unroll
    for (int i = 0; i < N; ++i) dst.v[i][0] = element_to_float<E>(raw[i]);
}

/** Stores columns [0, valid_cols) of a strided row (load_strip_strided's layout). */
template <int T, int N, typename E>
NEPTUNE_DEVICE_INLINE void store_strip_strided(E *__restrict__ dst, const strip<N, 1> &src, bool row_valid,
                                               int valid_cols, int t, long long stride) {
    if (!row_valid) return;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int c = t + T * i;
        if (c < valid_cols) dst[c * stride] = element_from_float<E>(src.v[i][0]);
    }
}

/** Combines `x` over the T threads of each of the block's R rows when lanes run along rows (thread
 * t of row r is t * R + r): through shared memory, one f32 per thread. Every thread of the row
 * returns the result. */
template <int T, int R>
NEPTUNE_DEVICE_INLINE float reduce_row_strided(float x, bool max) {
    if constexpr (T == 1) {
        return x;
    } else {
        __shared__ float partial[T][R];
        const int r = threadIdx.x % R, t = threadIdx.x / R;
        partial[t][r] = x;
        __syncthreads();
        x = partial[0][r];
#pragma unroll
        for (int k = 1; k < T; ++k) x = reduce_op(max, x, partial[k][r]);
        __syncthreads();  // the next reduction may write partial again
        return x;
    }
}

}  // namespace neptune::device

#endif
