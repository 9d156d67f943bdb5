#ifndef NEPTUNE_DEVICE_MMA_CUH
#define NEPTUNE_DEVICE_MMA_CUH
/** \file
 * Tensor-core products on warp register tiles: ldmatrix from shared tiles (padded or swizzled) into
 * fragments, and mma.sync m16n8k16 with f32 accumulation for both 16-bit element types (C += A B^T
 * for scores, C += A B for P V), plus the free conversion of accumulators into A operands. */
#include "neptune/device/tile.cuh"
#include "neptune/device/types.cuh"

namespace neptune::device {

// ---- Instruction wrappers ------------------------------------------------------------------------
// ldmatrix is volatile: it reads shared memory that other threads rewrite between barriers, so it
// must neither be hoisted out of a loop nor merged with an earlier load from the same address.

/** Four 8x8 b16 matrices; lanes 8q .. 8q+7 give the row addresses of matrix q, which lands in r[q]
 * (lane l holds row l / 4, columns 2 (l % 4) + {0, 1}). */
NEPTUNE_DEVICE_INLINE void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
/** As ldmatrix_x4, each matrix transposed: lane l holds rows 2 (l % 4) + {0, 1} of column l / 4. */
NEPTUNE_DEVICE_INLINE void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
/** Two matrices (addresses from lanes 0..15) into r[0], r[1]; r[2], r[3] are left alone. */
NEPTUNE_DEVICE_INLINE void ldmatrix_x2(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
NEPTUNE_DEVICE_INLINE void ldmatrix_x2_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

/** d += a b for one m16n8k16 tile: a is an A fragment, (b0, b1) the B fragment (k rows 0..7 and
 * 8..15 of column lane / 4, rows 2 (lane % 4) + {0, 1}). */
template <typename T>
NEPTUNE_DEVICE_INLINE void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);
// The element types differ only in the instruction's type suffix.
#define NEPTUNE_MMA_M16N8K16(T)                                                                                 \
    template <>                                                                                                 \
    NEPTUNE_DEVICE_INLINE void mma_m16n8k16<T>(float(&d)[4], const unsigned(&a)[4], unsigned b0, unsigned b1) { \
        asm("mma.sync.aligned.m16n8k16.row.col.f32." #T "." #T                                                  \
            ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "                                                         \
            "{%8, %9}, {%0, %1, %2, %3};"                                                                       \
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                    \
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                                    \
    }
NEPTUNE_MMA_M16N8K16(f16)
NEPTUNE_MMA_M16N8K16(bf16)
#undef NEPTUNE_MMA_M16N8K16

/** c += a b with B fragments read by ldmatrix (transposing with TRANS) from shared memory: the
 * lane's address for k-step k and n8 tiles n, n + 1 is addr(k, n) (both compile-time after
 * unrolling, so a padded tile's addresses fold into immediates and a swizzled tile's into one XOR).
 * One k-step and two n8 tiles at a time (an .x2 load for an odd last tile), so only four B registers
 * are live. */
template <bool TRANS, typename T, int MT, int NT, int KT, class Addr>
NEPTUNE_DEVICE_INLINE void mma_smem_b(acc_tile<MT, NT> &c, const a_tile<T, MT, KT> &a, Addr addr) {
#pragma unroll
    for (int k = 0; k < KT; ++k)
#pragma unroll
        for (int n = 0; n < NT; n += 2) {
            unsigned f[4];
            const unsigned at = addr(k, n);
            const bool pair = n + 1 < NT;
            if (pair)
                TRANS ? ldmatrix_x4_trans(f, at) : ldmatrix_x4(f, at);
            else
                TRANS ? ldmatrix_x2_trans(f, at) : ldmatrix_x2(f, at);
#pragma unroll
            for (int m = 0; m < MT; ++m) {
                mma_m16n8k16<T>(c.v[m][n], a.v[m][k], f[0], f[1]);
                if (pair) mma_m16n8k16<T>(c.v[m][n + 1], a.v[m][k], f[2], f[3]);
            }
        }
}

/** A lane's XOR key in a swizzled tile: reading row `row` at chunks 2i + chunk_bit0 (i compile-time),
 * it finds chunk 2i + chunk_bit0 at byte key ^ (16 * (2i % 8)) of the row's 128 bytes in a block. */
NEPTUNE_DEVICE_INLINE unsigned swizzle_key(int row, int chunk_bit0) {
    return static_cast<unsigned>((row ^ chunk_bit0) & 7) << 4;
}

// ---- Tile operations -----------------------------------------------------------------------------

/** a = rows [row0, row0 + 16 MT), columns [0, 16 KT) of s. */
template <typename T, int MT, int KT, int R, int C>
NEPTUNE_DEVICE_INLINE void load_a(a_tile<T, MT, KT> &a, smem_tile<T, R, C> s, int row0) {
    static_assert(16 * KT <= C, "load_a: the tile has fewer than 16 KT columns");
    // Matrix q = lane / 8 of an x4 is (rows +8 (q % 2), columns +8 (q / 2)): registers 0..3 of
    // the A fragment in order.
    const int l = lane_id();
    const unsigned base = smem_address(s.at(row0 + (l & 15), (l >> 4) * 8));
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int k = 0; k < KT; ++k)
            ldmatrix_x4(a.v[m][k], base + (m * 16 * s.pitch + k * 16) * static_cast<int>(sizeof(T)));
}

/** c += a b^T: b's rows [b_row0, b_row0 + 8 NT) are the N dimension and its columns [0, 16 KT)
 * the K dimension (S = Q K^T with K stored [key][d]). */
template <typename T, int MT, int NT, int KT, int R, int C>
NEPTUNE_DEVICE_INLINE void mma_abt(acc_tile<MT, NT> &c, const a_tile<T, MT, KT> &a, smem_tile<T, R, C> b, int b_row0) {
    static_assert(8 * NT <= R && 16 * KT <= C, "mma_abt: b is smaller than 8 NT x 16 KT");
    // B^T is stored row-major, so plain ldmatrix yields B fragments. Matrix q of an x4 is (n8 tile
    // +q / 2, k half q % 2): b0, b1 of tile nt, then b0, b1 of tile nt + 1.
    const int l = lane_id();
    const unsigned base = smem_address(b.at(b_row0 + (l & 7) + ((l >> 4) << 3), ((l >> 3) & 1) * 8));
    constexpr int elem = static_cast<int>(sizeof(T)), pitch = smem_tile<T, R, C>::pitch;
    mma_smem_b<false>(c, a, [=](int k, int n) { return base + (k * 16 + n * 8 * pitch) * elem; });
}

/** c += a b[b_row0 .. b_row0 + 16 KT, b_col0 .. b_col0 + 8 NT): b's rows are the K dimension
 * (O += P V with V stored [key][d]), so B fragments come from ldmatrix .trans. */
template <typename T, int MT, int NT, int KT, int R, int C>
NEPTUNE_DEVICE_INLINE void mma_ab(acc_tile<MT, NT> &c, const a_tile<T, MT, KT> &a, smem_tile<T, R, C> b, int b_row0,
                                  int b_col0) {
    static_assert(16 * KT <= R && 8 * NT <= C, "mma_ab: b is smaller than 16 KT x 8 NT");
    // Matrix q of an x4 is (k half q % 2, n8 tile +q / 2), transposed on the way in.
    const int l = lane_id();
    const unsigned base = smem_address(b.at(b_row0 + (l & 15), b_col0 + (l >> 4) * 8));
    constexpr int elem = static_cast<int>(sizeof(T)), pitch = smem_tile<T, R, C>::pitch;
    mma_smem_b<true>(c, a, [=](int k, int n) { return base + (k * 16 * pitch + n * 8) * elem; });
}

// The same three operations on swizzled tiles (swizzled_tile's layout: 64-column blocks of 128-byte
// rows, chunk c of row r at c ^ (r % 8)). Each lane keeps one row address and one XOR key; the
// unrolled steps add whole 8-row groups or blocks (immediates) and XOR the chunk (one LOP3).

template <typename T, int MT, int KT, int R, int C>
NEPTUNE_DEVICE_INLINE void load_a(a_tile<T, MT, KT> &a, swizzled_tile<T, R, C> s, int row0) {
    static_assert(16 * KT <= C, "load_a: the tile has fewer than 16 KT columns");
    const int l = lane_id(), row = row0 + (l & 15);  // matrix q = l / 8: rows +8 (q % 2), chunk +(q / 2)
    const unsigned base = smem_address(s.ptr) + static_cast<unsigned>(row) * 128u, key = swizzle_key(row, l >> 4);
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int k = 0; k < KT; ++k)
            ldmatrix_x4(a.v[m][k], base + m * 16 * 128 + (k >> 2) * R * 128 + (key ^ ((2 * k & 7) << 4)));
}

/** b_row0: any row. */
template <typename T, int MT, int NT, int KT, int R, int C>
NEPTUNE_DEVICE_INLINE void mma_abt(acc_tile<MT, NT> &c, const a_tile<T, MT, KT> &a, swizzled_tile<T, R, C> b,
                                   int b_row0) {
    static_assert(8 * NT <= R && 16 * KT <= C, "mma_abt: b is smaller than 8 NT x 16 KT");
    const int l = lane_id(), row = b_row0 + (l & 7) + ((l >> 4) << 3);  // matrix q: tile +q / 2, k half q % 2
    const unsigned base = smem_address(b.ptr) + static_cast<unsigned>(row) * 128u, key = swizzle_key(row, (l >> 3) & 1);
    mma_smem_b<false>(
        c, a, [=](int k, int n) { return base + n * 8 * 128 + (k >> 2) * R * 128 + (key ^ ((2 * k & 7) << 4)); });
}

/** b_row0: any row; b_col0: a multiple of 64 (a whole column block). */
template <typename T, int MT, int NT, int KT, int R, int C>
NEPTUNE_DEVICE_INLINE void mma_ab(acc_tile<MT, NT> &c, const a_tile<T, MT, KT> &a, swizzled_tile<T, R, C> b, int b_row0,
                                  int b_col0) {
    static_assert(16 * KT <= R && 8 * NT <= C, "mma_ab: b is smaller than 16 KT x 8 NT");
    const int l = lane_id(), row = b_row0 + (l & 15);  // matrix q: k half q % 2, tile +q / 2
    const unsigned base = smem_address(b.ptr) + static_cast<unsigned>((b_col0 >> 6) * R + row) * 128u,
                   key = swizzle_key(row, l >> 4);
    mma_smem_b<true>(c, a,
                     [=](int k, int n) { return base + k * 16 * 128 + (n >> 3) * R * 128 + (key ^ ((n & 7) << 4)); });
}

/** a = c converted to T (round to nearest even). The m16n8 accumulators 2k and 2k + 1 hold, lane
 * for lane, registers (0, 1) and (2, 3) of the m16k16 A fragment k, so P = softmax(S) feeds the
 * P V product without shuffles or shared memory. */
template <typename T, int MT, int NT>
NEPTUNE_DEVICE_INLINE void acc_to_a(a_tile<T, MT, NT / 2> &a, const acc_tile<MT, NT> &c) {
    static_assert(NT % 2 == 0, "acc_to_a: an even number of n8 tiles makes whole k16 tiles");
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int k = 0; k < NT / 2; ++k)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const float *src = c.v[m][2 * k + (r >> 1)];
                a.v[m][k][r] = pack2<T>(src[2 * (r & 1)], src[2 * (r & 1) + 1]);
            }
}

}  // namespace neptune::device

#endif
