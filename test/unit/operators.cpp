// The operator catalog: shapes, costs (hand-derived from docs/design/operators.md: shapes, counting work) and shape
// parsing.
#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>

#include "neptune/HostTensor.h"
#include "neptune/Operators.h"

using namespace neptune;

namespace {
OperatorInstance at(const std::string &name, int64_t b, int64_t s) { return instantiate(*find_operator(name), b, s); }
}  // namespace

TEST_CASE("operators: the suite holds the ten attention operators of docs/design/operators.md and the row-wise ones") {
    for (const char *n :
         {"prefill_global",      "prefill_causal",     "prefill_alibi", "prefill_gqa",    "prefill_softcap",
          "prefill_windowed",    "decode_causal",      "decode_alibi",  "decode_gqa",     "decode_softcap",
          "attention_row_stats", "prefill_causal_lse", "softmax",       "logsumexp",      "cross_entropy",
          "layernorm",           "layernorm_matmul",   "rmsnorm",       "rmsnorm_matmul", "performer"})
        CHECK_MESSAGE(find_operator(n).has_value(), n);
    CHECK_FALSE(find_operator("prefill_nothing").has_value());
}

TEST_CASE("operators: prefill_causal_lse returns out and an f32 log-sum-exp per query row, nothing more") {
    const OperatorInstance l = at("prefill_causal_lse", 2, 100);
    REQUIRE(l.outputs.size() == 2);
    CHECK(l.outputs[1].name == "lse");
    CHECK(l.outputs[1].dtype == DType::F32);
    CHECK(l.outputs[1].shape == std::vector<int64_t>{2, 32, 100});
}

TEST_CASE("operators: decode_paged reads a paged cache through a page table, with a length per sequence") {
    const OperatorInstance p = at("decode_paged", 5, 130);  // 3 pages of 64 keys per sequence
    CHECK(p.input("q").shape == std::vector<int64_t>{5, 32, 1, 128});
    CHECK(p.input("k_cache").shape == std::vector<int64_t>{15, 8, 64, 128});
    CHECK(p.input("v_cache").shape == std::vector<int64_t>{15, 8, 64, 128});
    CHECK(p.input("page_table").shape == std::vector<int64_t>{5, 3});
    CHECK(p.input("seq_lens").dtype == DType::I32);
    CHECK(attention_keys(p) == 192);
    // Lengths: full, 29 short, about half, 5, then again; at least 1.
    CHECK(paged_seq_len(0, 130) == 130);
    CHECK(paged_seq_len(1, 130) == 101);
    CHECK(paged_seq_len(2, 130) == 72);
    CHECK(paged_seq_len(3, 130) == 5);
    CHECK(paged_seq_len(4, 130) == 130);
    CHECK(paged_seq_len(1, 20) == 1);
    // Bytes: K and V of the keys held (130 + 101 + 72 + 5 + 130), 8 heads of 128 f16 each.
    CHECK(operator_bytes(p) == doctest::Approx(438.0 * 8 * 256 * 2));
    // The inputs: each page once in the table, lengths as above.
    const std::vector<HostTensor> in = make_inputs(p, 3);
    std::vector<double> pages = in[3].values;
    std::sort(pages.begin(), pages.end());
    for (size_t i = 0; i < pages.size(); i++) CHECK(pages[i] == double(i));
    CHECK(in[3].values != std::vector<double>(pages));  // shuffled: no sequence's pages in order
    CHECK(in[4].values == std::vector<double>{130, 101, 72, 5, 130});
    // Chunked prefill: 512 query rows per sequence, at the end of what it holds.
    const OperatorInstance c = at("prefill_paged", 2, 1000);
    CHECK(c.input("q").shape == std::vector<int64_t>{2, 32, 512, 128});
    CHECK(c.input("k_cache").shape == std::vector<int64_t>{32, 8, 64, 128});
    // Visible pairs: sequence 0 holds 1000 keys, its rows see 489 + i + 1 keys; sequence 1 holds 971.
    double pairs = 0;
    for (int i = 0; i < 512; i++) pairs += (1000 - 512 + i + 1) + (971 - 512 + i + 1);
    CHECK(operator_flops(c) == doctest::Approx(4.0 * 32 * 128 * pairs));
    OperatorSpec negative = *find_operator("decode_paged");
    negative.attention.page_size = -64;
    CHECK_THROWS_WITH_AS(instantiate(negative, 1, 64), doctest::Contains("the page size must not be negative"),
                         std::invalid_argument);
}

TEST_CASE("operators: attention tensors follow [B, H, S, D] with GQA heads and decode's single row") {
    const OperatorInstance g = at("prefill_gqa", 2, 100);
    CHECK(g.input("q").shape == std::vector<int64_t>{2, 64, 100, 128});
    CHECK(g.input("k").shape == std::vector<int64_t>{2, 8, 100, 128});
    CHECK(g.output("out").shape == std::vector<int64_t>{2, 64, 100, 128});
    CHECK(g.rows == 2 * 64 * 100);
    CHECK(g.row_block == 100);
    const OperatorInstance d = at("decode_alibi", 3, 77);
    CHECK(d.input("q").shape == std::vector<int64_t>{3, 32, 1, 128});
    CHECK(d.input("k").shape == std::vector<int64_t>{3, 32, 77, 128});
    CHECK(d.input("slopes").shape == std::vector<int64_t>{32});
    CHECK(d.rows == 3 * 32);
}

TEST_CASE("operators: FLOP and byte counts match the shapes table of docs/design/operators.md at B=1, S=8192") {
    CHECK(operator_flops(at("prefill_global", 1, 8192)) == doctest::Approx(1.0995e12).epsilon(1e-3));
    CHECK(operator_flops(at("prefill_causal", 1, 8192)) == doctest::Approx(0.5498e12).epsilon(1e-3));
    CHECK(operator_flops(at("prefill_gqa", 1, 8192)) == doctest::Approx(1.0995e12).epsilon(1e-3));
    CHECK(operator_flops(at("prefill_windowed", 1, 8192)) == doctest::Approx(0.2749e12).epsilon(1e-3));
    CHECK(operator_flops(at("decode_causal", 1, 8192)) == doctest::Approx(134.2e6).epsilon(1e-3));
    CHECK(operator_flops(at("decode_gqa", 1, 8192)) == doctest::Approx(268.4e6).epsilon(1e-3));
    CHECK(operator_bytes(at("decode_causal", 1, 8192)) == doctest::Approx(134.2e6).epsilon(1e-3));
    CHECK(operator_bytes(at("decode_gqa", 1, 8192)) == doctest::Approx(33.55e6).epsilon(1e-3));
    CHECK(operator_bytes(at("decode_softcap", 1, 8192)) == doctest::Approx(67.1e6).epsilon(1e-3));
    CHECK(memory_bound(*find_operator("decode_gqa")));
    CHECK_FALSE(memory_bound(*find_operator("prefill_gqa")));
}

TEST_CASE("operators: shapes parse as B,S and anything else is an error that shows the expected form") {
    CHECK(parse_shape("1,8192") == std::pair<int64_t, int64_t>{1, 8192});
    CHECK(parse_shape("3,7") == std::pair<int64_t, int64_t>{3, 7});
    for (const char *bad : {"", "8192", "1,", ",5", "1,2,3", "0,5", "-1,5", "a,b", "1.5,2", "1,99999999999"})
        CHECK_THROWS_WITH_AS(parse_shape(bad), doctest::Contains("expected B,S"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(instantiate(*find_operator("softmax"), 0, 4), doctest::Contains("positive"),
                         std::invalid_argument);
    OperatorSpec bad = *find_operator("prefill_gqa");
    bad.attention.kv_heads = 5;
    CHECK_THROWS_WITH_AS(instantiate(bad, 1, 4), doctest::Contains("multiple of kv_heads"), std::invalid_argument);
}
