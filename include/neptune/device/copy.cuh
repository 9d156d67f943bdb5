#ifndef NEPTUNE_DEVICE_COPY_CUH
#define NEPTUNE_DEVICE_COPY_CUH
/** \file
 * Global -> shared tile loads by the whole CTA in 16-byte chunks, into either shared layout:
 * asynchronous (cp.async, with commit groups, for pipelined K/V tiles) and synchronous (for tiles
 * loaded once). Both zero-fill what lies outside the valid rows and columns, so partial tiles need
 * no masking afterwards beyond the scores of padded keys. */
#include "neptune/device/types.cuh"

namespace neptune::device {

/** Calls f(r, c) for every 8-element chunk (row r, first column c) of a ROWS x COLS tile, the
 * chunks dealt round-robin to threads 0 .. THREADS-1 (neighbouring threads take neighbouring
 * chunks, so a warp reads whole 128-byte lines). Threads at or beyond THREADS do nothing. */
template <int THREADS, int ROWS, int COLS, class F>
NEPTUNE_DEVICE_INLINE void for_each_chunk(F f) {
    static_assert(THREADS > 0 && THREADS % 32 == 0, "THREADS is a whole number of warps");
    constexpr int per_row = COLS / 8;
    constexpr int chunks = ROWS * per_row;
    const int t = static_cast<int>(threadIdx.x);
    if (t >= THREADS) return;
#pragma unroll
    for (int k = 0; k < (chunks + THREADS - 1) / THREADS; ++k) {
        const int i = k * THREADS + t;
        if (chunks % THREADS == 0 || i < chunks) f(i / per_row, (i % per_row) * 8);
    }
}

/** The source of chunk (r, c) of a tile at g, or g itself when the chunk is masked: a masked chunk
 * reads no bytes, but its address is still formed, and must not be out of bounds. */
template <typename T>
NEPTUNE_DEVICE_INLINE const T *chunk_source(const T *g, long long row_stride, int r, int c, bool valid) {
    return valid ? g + r * row_stride + c : g;
}

NEPTUNE_DEVICE_INLINE void cp_async_16(unsigned dst, const void *src, int src_bytes) {
    // .cg: bypass L1 (each K/V byte is used once per CTA); bytes beyond src_bytes are zero-filled.
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" : : "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

/** Starts copying the tile at g (row r at g + r * row_stride) into s (a smem_tile or a
 * swizzled_tile: anything with rows, cols, element and at(r, c)). Rows >= valid_rows and
 * 8-element chunks at or beyond column valid_cols are zero-filled (valid_cols is therefore a
 * multiple of 8: pad the head dimension to one). Requirements: g and row_stride keep every chunk
 * 16-byte aligned (row_stride a multiple of 8); threads 0 .. THREADS-1 of the CTA all call it.
 * The copies join the next cp_async_commit() group; the data is there after cp_async_wait and a
 * barrier. */
template <int THREADS, class Tile>
NEPTUNE_DEVICE_INLINE void load_tile_async(Tile s, const typename Tile::element *g, long long row_stride,
                                           int valid_rows, int valid_cols) {
    for_each_chunk<THREADS, Tile::rows, Tile::cols>([&](int r, int c) {
        const bool valid = r < valid_rows && c < valid_cols;
        cp_async_16(smem_address(s.at(r, c)), chunk_source(g, row_stride, r, c, valid), valid ? 16 : 0);
    });
}

/** Closes the group of cp.async copies this thread has issued since the last commit (possibly
 * empty: committing unconditionally keeps group counting uniform in pipelined loops). */
NEPTUNE_DEVICE_INLINE void cp_async_commit() { asm volatile("cp.async.commit_group;" : : : "memory"); }

/** Waits until at most N of this thread's committed groups are still in flight. Other threads'
 * copies are visible only after a barrier that follows. */
template <int N>
NEPTUNE_DEVICE_INLINE void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" : : "n"(N) : "memory");
}

/** 16 bytes, for plain vector loads and stores. */
struct alignas(16) chunk16 {
    unsigned x, y, z, w;
};

/** load_tile_async's contract with ordinary 16-byte loads and stores, for tiles loaded once (Q in
 * a prefill kernel): the data is there after a barrier, and no commit group is involved. */
template <int THREADS, class Tile>
NEPTUNE_DEVICE_INLINE void load_tile_sync(Tile s, const typename Tile::element *g, long long row_stride, int valid_rows,
                                          int valid_cols) {
    for_each_chunk<THREADS, Tile::rows, Tile::cols>([&](int r, int c) {
        const bool valid = r < valid_rows && c < valid_cols;
        chunk16 x = {0u, 0u, 0u, 0u};
        if (valid) x = *reinterpret_cast<const chunk16 *>(g + r * row_stride + c);
        *reinterpret_cast<chunk16 *>(s.at(r, c)) = x;
    });
}

}  // namespace neptune::device

#endif
