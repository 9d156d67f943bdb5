#ifndef NEPTUNE_TEST_HEADS_LAYOUT_H
#define NEPTUNE_TEST_HEADS_LAYOUT_H
/** \file
 * The rows of a [B, H, S, D] tensor in two memories: dense row-major, and strided as a [B, S, H, D]
 * projection leaves it (heads and batches possibly padded). Tests copy between the two to run the
 * kernels on strided tensors and compare against dense references. */
#include <cstdint>

namespace neptune::testing {

/** Strides of [B, H, S, D] in elements, the last one 1. */
struct HeadsStrides {
    int64_t batch, head, row;
};

/** The strides of [B, S, H, D] memory whose heads lie `head_pad` elements apart beyond D and whose
 * batches `batch_pad` beyond S rows of all heads. */
inline HeadsStrides bshd_strides(int64_t H, int64_t S, int64_t D, int64_t head_pad, int64_t batch_pad) {
    const int64_t head = D + head_pad, row = H * head;
    return {S * row + batch_pad, head, row};
}

/** Calls f(dense, strided) for every (b, h, i) with the offsets of that row's first element in the
 * dense tensor and in the strided memory; each row holds D contiguous elements in both. */
template <class F>
void for_each_head_row(int64_t B, int64_t H, int64_t S, int64_t D, const HeadsStrides &st, F &&f) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) f(((b * H + h) * S + i) * D, b * st.batch + h * st.head + i * st.row);
}

}  // namespace neptune::testing

#endif
