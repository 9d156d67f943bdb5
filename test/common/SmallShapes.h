#ifndef NEPTUNE_TEST_COMMON_SMALL_SHAPES_H
#define NEPTUNE_TEST_COMMON_SMALL_SHAPES_H
/** \file
 * Test cases at odd shapes, and the suite's operators shrunk to run them quickly on the CPU:
 * fewer heads (the grouping kept up to a limit), fewer Performer features and matmul columns. */
#include <algorithm>
#include <cstdint>

#include "neptune/HostTensor.h"
#include "neptune/Operators.h"

namespace neptune::testing {

struct ShapeCase {
    int64_t batch, seq;
    int head_dim = 128;  // 96 also makes the V head dim 64: QK and V head dims may differ
    DType dtype = DType::F16;
    InputStyle style = InputStyle::Normal;
    int64_t seq_q = 0;  // attention: more query rows than keys gives fully masked rows
    int window = 0;  // windowed attention: override the window
};

/** `op` with kv_heads / kv_divisor KV heads (at least 1) and at most max_group query heads per KV head. */
inline OperatorSpec shrink(const OperatorSpec &op, const ShapeCase &c, int kv_divisor, int max_group, int features,
                           int matmul_n) {
    OperatorSpec s = op;
    s.dtype = c.dtype;
    AttentionSpec &a = s.attention;
    const int group = a.q_heads / a.kv_heads;
    a.kv_heads = std::max(1, a.kv_heads / kv_divisor);
    a.q_heads = a.kv_heads * std::min(group, max_group);
    a.head_dim_qk = c.head_dim;
    a.head_dim_v = c.head_dim == 96 ? 64 : c.head_dim;
    a.seq_q = c.seq_q;
    if (c.window) a.window = c.window;
    s.features = features;
    s.matmul_n = matmul_n;
    return s;
}

}  // namespace neptune::testing

#endif
