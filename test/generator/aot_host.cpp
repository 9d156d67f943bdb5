// Every family's host library (backend=host: the fused CPU form compiled ahead of time) called on
// halide_buffer_ts and compared with the fp64 reference, at odd shapes. The program links the
// libraries and Halide's runtime only: no libHalide, no other build step.
#include <doctest/doctest.h>

#include <cstring>

#include "AotBuffers.h"
#include "cross_entropy_host.h"
#include "decode_gqa_host.h"
#include "layernorm_host.h"
#include "logsumexp_host.h"
#include "performer_host.h"
#include "prefill_causal_host.h"
#include "prefill_row_stats_host.h"
#include "rmsnorm_host.h"
#include "softmax_host.h"
#include "softmax_lse_host.h"

using namespace neptune;
using namespace neptune::testing;

TEST_CASE("aot host: prefill attention, causal, grouped heads, rising row maxima") {
    RunOptions rising;
    rising.style = InputStyle::RisingScores;
    for (int64_t seq : {1, 33, 130})
        check_library(
            attention_instance("prefill_causal", 4, 2, 2, seq),
            [](Buffers &i, Buffers &o) { return prefill_causal_host(i[0], i[1], i[2], o[0]); }, rising);
}

TEST_CASE("aot host: attention with its row statistics: out, lse, entropy and max_prob") {
    for (int64_t seq : {1, 77})
        check_library(attention_instance("attention_row_stats", 4, 2, 2, seq), [](Buffers &i, Buffers &o) {
            return prefill_row_stats_host(i[0], i[1], i[2], o[0], o[1], o[2], o[3]);
        });
}

TEST_CASE("aot host: decode attention, split-K over the keys, 8 query heads per KV head") {
    for (int64_t seq : {1, 100, 257})
        check_library(attention_instance("decode_gqa", 16, 2, 3, seq),
                      [](Buffers &i, Buffers &o) { return decode_gqa_host(i[0], i[1], i[2], o[0]); });
}

TEST_CASE("aot host: softmax, log-sum-exp and cross-entropy rows") {
    for (int64_t cols : {1, 65, 300}) {
        check_library(instantiate(*find_operator("softmax"), 5, cols),
                      [](Buffers &i, Buffers &o) { return softmax_host(i[0], o[0]); });
        check_library(instantiate(*find_operator("logsumexp"), 5, cols),
                      [](Buffers &i, Buffers &o) { return logsumexp_host(i[0], o[0]); });
        check_library(instantiate(*find_operator("cross_entropy"), 5, cols),
                      [](Buffers &i, Buffers &o) { return cross_entropy_host(i[0], i[1], o[0]); });
    }
}

TEST_CASE("aot host: softmax with its log-sum-exp (with_lse=true)") {
    OperatorSpec spec = *find_operator("softmax");
    spec.row_stats = RowStats::Lse;
    for (int64_t cols : {1, 65, 300})
        check_library(instantiate(spec, 5, cols),
                      [](Buffers &i, Buffers &o) { return softmax_lse_host(i[0], o[0], o[1]); });
}

TEST_CASE("aot host: LayerNorm and RMSNorm rows") {
    for (int64_t cols : {1, 64, 257}) {
        check_library(instantiate(*find_operator("layernorm"), 3, cols),
                      [](Buffers &i, Buffers &o) { return layernorm_host(i[0], i[1], i[2], o[0]); });
        check_library(instantiate(*find_operator("rmsnorm"), 3, cols),
                      [](Buffers &i, Buffers &o) { return rmsnorm_host(i[0], i[1], o[0]); });
    }
}

TEST_CASE("aot host: Performer") {
    OperatorSpec s = *find_operator("performer");
    s.attention.q_heads = 2;
    s.attention.kv_heads = 2;
    s.attention.head_dim_qk = s.attention.head_dim_v = 32;
    s.features = 16;
    check_library(instantiate(s, 2, 37),
                  [](Buffers &i, Buffers &o) { return performer_host(i[0], i[1], i[2], i[3], o[0]); });
}

TEST_CASE("aot host: a label out of range is the library's error, not a wrong loss") {
    const OperatorInstance inst = instantiate(*find_operator("cross_entropy"), 2, 10);
    std::vector<HostTensor> in = make_inputs(inst, 5);
    in[1].values[1] = 10;  // cols = 10: out of range
    Halide::Runtime::Buffer<void> x = host_buffer(in[0]), labels = host_buffer(in[1]),
                                  loss = poisoned_buffer(inst.outputs[0]);
    clear_messages();
    CHECK(cross_entropy_host(x, labels, loss) == halide_error_code_requirement_failed);
    CHECK(all_messages().find("label out of range") != std::string::npos);
}

TEST_CASE("aot host: attention buffers that disagree are refused, not read in part") {
    // Each buffer is large enough for every access, so Halide's bounds checks pass: only the
    // generator's requirements stand between these shapes and a wrong answer.
    auto zeros = [](std::vector<int> extents) {
        Halide::Runtime::Buffer<void> b(halide_type_t(halide_type_float, 16), extents);
        std::memset(b.data(), 0, b.size_in_bytes());
        return b;
    };
    Halide::Runtime::Buffer<void> q = zeros({128, 5, 2, 1}), k = zeros({128, 5, 2, 1}), v = zeros({128, 5, 2, 1});
    Halide::Runtime::Buffer<void> out = zeros({128, 5, 2, 1});
    struct Case {
        Halide::Runtime::Buffer<void> k, v;
        const char *message;
    };
    const std::vector<Case> cases = {
        {zeros({128, 5, 4, 1}), zeros({128, 5, 4, 1}), "q's heads must be a multiple of k's; q has 2 and k 4"},
        {zeros({256, 5, 2, 1}), v, "k's head dim must be q's; q has 128 and k 256"},
        {k, zeros({128, 9, 2, 1}), "v must have k's keys and heads"},
        {zeros({128, 5, 2, 2}), zeros({128, 5, 2, 2}), "q, k and v must have one batch"},
    };
    for (const Case &c : cases) {
        clear_messages();
        Halide::Runtime::Buffer<void> ck = c.k, cv = c.v;
        CHECK(prefill_causal_host(q, ck, cv, out) == halide_error_code_requirement_failed);
        CHECK_MESSAGE(all_messages().find(c.message) != std::string::npos, all_messages());
    }
    clear_messages();
    CHECK(prefill_causal_host(q, k, v, out) == 0);
}
