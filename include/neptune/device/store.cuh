#ifndef NEPTUNE_DEVICE_STORE_CUH
#define NEPTUNE_DEVICE_STORE_CUH
/** \file
 * Masked stores of warp register tiles to global memory: accumulators as T or f32, and row
 * vectors (the running max and sum a split-K kernel hands to its combine step), and the arrival
 * count that lets the last block of a split-K group combine the group's partials itself. */
#include "neptune/device/tile.cuh"
#include "neptune/device/types.cuh"

namespace neptune::device {

/** Calls f(row, col, x0, x1, both) for each pair of horizontally adjacent elements of c that
 * lie in bounds: rows row0 + r < valid_rows, columns col < valid_cols; `both` says whether col + 1
 * is also in bounds (only x0 is stored otherwise). row is row0 + r, r warp-relative. */
template <int MT, int NT, class F>
NEPTUNE_DEVICE_INLINE void for_each_valid_pair(const acc_tile<MT, NT> &c, int row0, int valid_rows, int valid_cols,
                                               F f) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = row0 + frag_row(m, 2 * h);
            if (row >= valid_rows) continue;
#pragma unroll
            for (int n = 0; n < NT; ++n) {
                const int col = frag_col(n, 0);
                if (col < valid_cols) f(row, col, c.v[m][n][2 * h], c.v[m][n][2 * h + 1], col + 1 < valid_cols);
            }
        }
}

/** Rows [row0, row0 + 16 MT) of c, converted to T: warp-relative row r and column col go to
 * g[(row0 + r) * row_stride + col] where row0 + r < valid_rows and col < valid_cols; nothing else
 * is written. Column pairs go out as one 32-bit store: g is 4-byte aligned and row_stride even. */
template <typename T, int MT, int NT>
NEPTUNE_DEVICE_INLINE void store_acc(T *g, long long row_stride, const acc_tile<MT, NT> &c, int row0, int valid_rows,
                                     int valid_cols) {
    for_each_valid_pair(c, row0, valid_rows, valid_cols, [&](int row, int col, float x0, float x1, bool both) {
        T *p = g + row * row_stride + col;
        if (both)
            *reinterpret_cast<unsigned *>(p) = pack2<T>(x0, x1);
        else
            *p = from_float<T>(x0);
    });
}

/** store_acc in f32 (split-K partial outputs); for the 8-byte pair stores g is 8-byte aligned
 * and row_stride even. */
template <int MT, int NT>
NEPTUNE_DEVICE_INLINE void store_acc_f32(float *g, long long row_stride, const acc_tile<MT, NT> &c, int row0,
                                         int valid_rows, int valid_cols) {
    struct alignas(8) pair {
        float x0, x1;
    };
    for_each_valid_pair(c, row0, valid_rows, valid_cols, [&](int row, int col, float x0, float x1, bool both) {
        float *p = g + row * row_stride + col;
        if (both)
            *reinterpret_cast<pair *>(p) = pair{x0, x1};
        else
            *p = x0;
    });
}

/** g[row0 + i] = the value of warp-relative row i of r, for the rows with row0 + i < valid_rows;
 * written once per row, by lane 0 of the quad that holds it (the quad's four copies are equal). */
template <int MT>
NEPTUNE_DEVICE_INLINE void store_rows(float *g, const row_vec<MT> &r, int row0, int valid_rows) {
    if ((lane_id() & 3) != 0) return;
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = row0 + frag_row(m, 2 * h);
            if (row < valid_rows) g[row] = r.v[m][h];
        }
}

/** Counts this block's arrival in *counter; true in every thread of the block that arrives
 * `arrivals`-th, which also resets the counter to 0 for the next launch. Call once per block, from
 * every thread. The memory model's release/acquire pattern, as a semaphore between blocks: the block
 * barrier orders every thread's earlier global writes before thread 0's acq_rel atomic (a barrier is
 * cumulative), which publishes them; the last block's thread 0 acquires the others' writes through the
 * same atomic and its barrier passes them on to the block. No fence.sc: the block that arrives last
 * is the split-K kernel's tail, and each fence there is a global round trip the kernel waits for. */
NEPTUNE_DEVICE_INLINE bool last_arrival(unsigned *counter, unsigned arrivals) {
    __shared__ unsigned last;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned before;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(before) : "l"(counter) : "memory");
        last = before + 1u == arrivals;
        // No block of this launch touches the counter after the last arrival; the next launch is ordered
        // after this one by the stream.
        if (last) asm volatile("st.relaxed.gpu.global.u32 [%0], 0;\n" ::"l"(counter) : "memory");
    }
    __syncthreads();
    return last;
}

}  // namespace neptune::device

#endif
