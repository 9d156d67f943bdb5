// The benchmark's native baselines on the GPU: the unfused cuBLAS path (S = Q K^T, our softmax,
// O = P V) and the unfused algorithm's Halide CUDA libraries (halide_unfused) for every attention
// operator at odd shapes against the fp64 reference, the cuBLAS path with a tiny
// workspace too so the rows go through many chunks and partial row blocks; and one whole point as
// profile measures it (Neptune and the native baselines, checked and timed interleaved). Skips (77)
// without a GPU.
#include <doctest/doctest.h>

#include <cmath>

#include "Native.h"
#include "Profile.h"
#include "neptune/Check.h"
#include "neptune/reference/Reference.h"

using namespace neptune;
using namespace neptune::bench;

namespace {

// `op` with at most two KV heads (its grouping kept), a window of 100 so that it matters at these
// lengths, at (batch, seq); f16 or bf16.
OperatorInstance small(const std::string &op, int64_t batch, int64_t seq, DType dtype = DType::F16) {
    OperatorSpec s = *find_operator(op);
    const int group = s.attention.q_heads / s.attention.kv_heads;
    s.attention.kv_heads = 2;
    s.attention.q_heads = 2 * group;
    s.attention.window = 100;
    s.dtype = dtype;
    return instantiate(s, batch, seq);
}

void check_against_reference(const OperatorInstance &inst, NativeImpl &impl, InputStyle style) {
    const std::vector<HostTensor> in = make_inputs(inst, 5, style);
    impl.set_inputs(in);
    const std::vector<HostTensor> out = impl.run();
    const std::vector<HostTensor> ref = reference::compute(inst, in);
    const ErrorStats e = compare(out[0].values, ref[0].values);
    INFO(inst.spec.name << " " << inst.batch << "," << inst.seq << ": " << e.describe(inst.outputs[0]));
    CHECK(e.nonfinite == 0);  // NaN-poisoned outputs: every element was written
    CHECK(e.rel_rms() <= (inst.spec.dtype == DType::BF16 ? 1e-2 : 2e-3));
    CHECK(impl.time_once() > 0);
}

}  // namespace

TEST_CASE("gpu bench baselines: unfused cuBLAS attention matches fp64 on every operator") {
    for (const char *op : {"prefill_global", "prefill_causal", "prefill_alibi", "prefill_gqa", "prefill_softcap",
                           "prefill_windowed", "decode_causal", "decode_alibi", "decode_gqa", "decode_softcap"}) {
        const bool decode = std::string(op).rfind("decode", 0) == 0;
        const OperatorInstance inst = small(op, 2, decode ? 1000 : 301);
        std::unique_ptr<NativeImpl> impl = make_cublas_unfused(inst, GpuOptions{});
        check_against_reference(inst, *impl, InputStyle::RisingScores);
    }
    const OperatorInstance bf = small("prefill_gqa", 1, 130, DType::BF16);
    check_against_reference(bf, *make_cublas_unfused(bf, GpuOptions{}), InputStyle::Normal);
}

TEST_CASE("gpu bench baselines: the unfused algorithm on Halide's CUDA backend matches fp64 on every operator") {
    for (const char *op : {"prefill_global", "prefill_causal", "prefill_alibi", "prefill_gqa", "prefill_softcap",
                           "prefill_windowed", "decode_causal", "decode_alibi", "decode_gqa", "decode_softcap"}) {
        const bool decode = std::string(op).rfind("decode", 0) == 0;
        OperatorSpec s = *find_operator(op);
        const int group = s.attention.q_heads / s.attention.kv_heads;
        s.attention.kv_heads = 2;
        s.attention.q_heads = 2 * group;
        // The windowed library is compiled for the suite's window: a sequence longer than it.
        const int64_t seq = s.attention.mask == Mask::Window ? 4200 : decode ? 1000 : 301;
        const OperatorInstance inst = instantiate(s, decode ? 2 : 1, seq);
        std::unique_ptr<NativeImpl> impl = make_halide_unfused(inst, GpuOptions{});
        check_against_reference(inst, *impl, InputStyle::RisingScores);
    }
}

TEST_CASE("gpu bench baselines: the Halide unfused baseline in (batch, head) chunks gives the same attention") {
    // Halide's extents are int32, so past 2^31 - 1 scores a call takes crops of the buffers. Here the
    // limit is small. prefill_gqa (2 KV heads, groups of 8, 130 x 130 scores a head): 12 heads fit,
    // so one group (8 heads) a call, 2 calls a batch entry. prefill_alibi (4 heads): 3 fit, one head a
    // call, and the slopes are cropped with the heads. decode_alibi at batch 3 (2 heads of 1000 scores):
    // 4000 fit two batch entries, chunks of 2 and 1. The crops keep their mins, so a head's ALiBi slope
    // and KV head are the global head's.
    struct Case {
        const char *op;
        int kv_heads;
        int64_t batch, seq, max_scores;
    };
    for (const Case &c : {Case{"prefill_gqa", 2, 2, 130, 12 * 130 * 130},
                          Case{"prefill_alibi", 4, 1, 130, 3 * 130 * 130}, Case{"decode_alibi", 2, 3, 1000, 4000}}) {
        OperatorSpec s = *find_operator(c.op);
        const int group = s.attention.q_heads / s.attention.kv_heads;
        s.attention.kv_heads = c.kv_heads;
        s.attention.q_heads = c.kv_heads * group;
        const OperatorInstance inst = instantiate(s, c.batch, c.seq);
        std::unique_ptr<NativeImpl> impl = make_halide_unfused(inst, c.max_scores);
        INFO(impl->describe());
        CHECK(impl->describe().find("chunks") != std::string::npos);
        check_against_reference(inst, *impl, InputStyle::RisingScores);
    }
}

TEST_CASE("gpu bench baselines: chunks of a small workspace give the same attention") {
    // A row of scores and probabilities takes 6 bytes per key. prefill_gqa at 301 keys (1806 B a row):
    // 20000 B hold 11 rows, so each (batch, KV head)'s 8 x 301 rows go in 219 blocks, the last of 10.
    // decode_gqa at 1000 keys (6000 B a row): 20000 B hold 3 rows, blocks of 3, 3 and 2 of a group's
    // 8; 100000 B hold 16 rows, two whole groups per chunk. prefill_windowed: 3 rows per block.
    struct Case {
        const char *op;
        int64_t seq;
        size_t workspace;
    };
    for (const Case &c : {Case{"prefill_gqa", 301, 20000}, Case{"decode_gqa", 1000, 20000},
                          Case{"decode_gqa", 1000, 100000}, Case{"prefill_windowed", 400, 10000}}) {
        const OperatorInstance inst = small(c.op, 2, c.seq);
        std::unique_ptr<NativeImpl> impl = make_cublas_unfused(inst, c.workspace);
        INFO(impl->describe());
        check_against_reference(inst, *impl, InputStyle::Normal);
    }
}

TEST_CASE("gpu bench baselines: a point as profile measures it, without the PyTorch driver") {
    PointOptions opt;
    opt.repeat = 5;
    opt.warmup = 1;
    opt.impls = parse_impls("cublas_unfused,halide_unfused");
    const PointResult p = measure_point(small("prefill_causal", 1, 1000), opt, nullptr);
    INFO(format_table(p));
    REQUIRE_FALSE(p.failed);
    REQUIRE(p.results.size() == 3);
    for (const char *impl : {"neptune", "cublas_unfused", "halide_unfused"}) {
        const ImplResult *r = p.find(impl);
        REQUIRE(r);
        CHECK(r->supported);
        CHECK(r->correct);
        CHECK(*r->median_ms > 0);
        CHECK(*r->min_ms <= *r->median_ms);
        CHECK(*r->ref_rel_rms < 2e-3);
    }
    CHECK(*p.find("cublas_unfused")->max_abs_vs_neptune < 1e-2);
    CHECK(*p.find("halide_unfused")->max_abs_vs_neptune < 1e-2);
    CHECK(speedups(p).libraries.has_value());
    CHECK(speedups(p).compilers.has_value());
    CHECK(p.clocks.contains("before"));
}
