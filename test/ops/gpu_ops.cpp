// libneptune_ops.so on the GPU: the GPU variant of every operator on device memory, through the
// per-operator entries, against the fp64 reference (outputs poisoned with NaN first), and the
// device query. Skips (77) without a GPU; links the shared library and Neptune's Halide-free core.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "OpsCheck.h"
#include "neptune/NeptuneOps.h"

using namespace neptune;
using namespace neptune::testing;

namespace {

// As test/generator/gpu_aot.cpp: tensor cores round P to f16 before the second product; Halide's
// CUDA code for the row-wise families uses the GPU's exp and log.
CheckOptions on_gpu(bool attention, int64_t first_row = 0, int64_t rows = -1) {
    CheckOptions o;
    o.device = NEPTUNE_OPS_CUDA;
    o.first_row = first_row;
    o.rows = rows;
    o.tolerance = [attention](DType t) {
        if (attention) return t == DType::BF16 ? Tolerance{1e-2, 6e-2} : Tolerance{2e-3, 2e-2};
        return t == DType::F32 ? Tolerance{1e-3, 5e-3} : tolerance_for(t);
    };
    return o;
}

}  // namespace

TEST_CASE("gpu ops: the device the GPU variants run on") {
    neptune_ops_device_info info{};
    REQUIRE_MESSAGE(neptune_ops_get_device_info(&info) == NEPTUNE_OPS_OK, neptune_ops_last_error());
    MESSAGE("device: " << info.name << ", compute capability " << info.cc_major << "." << info.cc_minor << ", "
                       << info.sm_count << " SMs");
    CHECK(std::string(info.name).size() > 0);
    CHECK(info.cc_major >= 8);
    CHECK(info.sm_count > 0);
    CHECK(info.total_memory > 0);
}

TEST_CASE("gpu ops: the ten attention operators on device memory against the fp64 reference") {
    check_op(attention_instance("prefill_global", 4, 4, 1, 333), "prefill_global", on_gpu(true));
    check_op(attention_instance("prefill_causal", 8, 8, 2, 200), "prefill_causal", on_gpu(true));
    check_op(attention_instance("prefill_alibi", 8, 8, 1, 257), "prefill_alibi", on_gpu(true));
    check_op(attention_instance("prefill_gqa", 64, 8, 1, 130), "prefill_causal", on_gpu(true));
    check_op(attention_instance("prefill_softcap", 32, 16, 1, 100), "prefill_softcap", on_gpu(true));
    // Past the window (4096 keys): the last rows of the one head, where it cuts.
    check_op(attention_instance("prefill_windowed", 4, 1, 1, 4200), "prefill_windowed",
             on_gpu(true, 4200 * 3 + 4100, 100));
    check_op(attention_instance("decode_causal", 32, 32, 2, 1000), "decode_causal", on_gpu(true));
    check_op(attention_instance("decode_alibi", 32, 32, 1, 777), "decode_alibi", on_gpu(true));
    check_op(attention_instance("decode_gqa", 64, 8, 3, 8191), "decode_gqa", on_gpu(true));
    check_op(attention_instance("decode_softcap", 32, 16, 1, 4097), "decode_softcap", on_gpu(true));
}

TEST_CASE("gpu ops: the row-wise families and Performer on Halide's CUDA backend") {
    check_op(instantiate(*find_operator("softmax"), 64, 1000), "softmax", on_gpu(false));
    check_op(instantiate(*find_operator("logsumexp"), 33, 4097), "logsumexp", on_gpu(false));
    check_op(instantiate(*find_operator("layernorm"), 9, 1024), "layernorm", on_gpu(false));
    check_op(instantiate(*find_operator("rmsnorm"), 9, 4096), "rmsnorm", on_gpu(false));
    OperatorSpec p = *find_operator("performer");
    p.attention.q_heads = p.attention.kv_heads = 2;
    p.attention.head_dim_qk = p.attention.head_dim_v = 64;
    p.features = 32;
    check_op(instantiate(p, 1, 200), "performer", on_gpu(false));
}

namespace {

/** An operator of the suite at another element type, head dim and head counts. */
OperatorInstance at(const std::string &op, DType t, int head_dim, int q_heads, int kv_heads, int64_t batch,
                    int64_t seq) {
    OperatorSpec s = *find_operator(op);
    s.dtype = t;
    s.attention.head_dim_qk = s.attention.head_dim_v = head_dim;
    s.attention.q_heads = q_heads;
    s.attention.kv_heads = kv_heads;
    return instantiate(s, batch, seq);
}

OperatorInstance rowwise(const std::string &op, DType t, int64_t rows, int64_t cols) {
    OperatorSpec s = *find_operator(op);
    s.dtype = t;
    return instantiate(s, rows, cols);
}

}  // namespace

TEST_CASE("gpu ops: variants compiled on first use against the fp64 reference") {
    // The cache of this run (meson test points NEPTUNE_CACHE_DIR into the build tree): a call either
    // compiles the variant or loads it, and both must give the reference's answer.
    const int before = neptune_ops_num_variants();
    check_op(at("prefill_causal", DType::BF16, 64, 8, 8, 2, 200), "prefill_causal_bf16_d64", on_gpu(true));
    check_op(at("prefill_causal", DType::F16, 80, 4, 4, 1, 333), "prefill_causal_f16_d80", on_gpu(true));
    check_op(at("prefill_global", DType::BF16, 96, 4, 2, 1, 257), "prefill_global_bf16_d96", on_gpu(true));
    check_op(at("prefill_gqa", DType::BF16, 128, 16, 4, 1, 130), "prefill_gqa_bf16_d128", on_gpu(true));
    check_op(at("prefill_causal", DType::F16, 192, 2, 2, 1, 150), "prefill_causal_f16_d192", on_gpu(true));
    check_op(at("prefill_causal", DType::BF16, 256, 2, 1, 1, 129), "prefill_causal_bf16_d256", on_gpu(true));
    check_op(at("decode_gqa", DType::BF16, 128, 32, 8, 2, 1000), "decode_gqa_bf16_d128_g4", on_gpu(true));
    check_op(at("decode_gqa", DType::F16, 64, 32, 2, 1, 4097), "decode_gqa_f16_d64_g16", on_gpu(true));
    check_op(at("decode_gqa", DType::F16, 128, 8, 4, 3, 777), "decode_gqa_f16_d128_g2", on_gpu(true));
    check_op(at("decode_causal", DType::BF16, 80, 8, 8, 2, 2049), "decode_causal_bf16_d80_g1", on_gpu(true));
    check_op(rowwise("softmax", DType::BF16, 7, 1000), "softmax_bf16", on_gpu(false));
    check_op(rowwise("logsumexp", DType::BF16, 33, 4097), "logsumexp_bf16", on_gpu(false));
    check_op(rowwise("cross_entropy", DType::BF16, 9, 50257), "cross_entropy_bf16", on_gpu(false));
    check_op(rowwise("layernorm", DType::BF16, 9, 1024), "layernorm_bf16", on_gpu(false));
    check_op(rowwise("rmsnorm", DType::BF16, 5, 8191), "rmsnorm_bf16", on_gpu(false));
    const int after = neptune_ops_num_variants();
    CHECK(after == before + 15);
    // Listed like the AOT variants; a second call of the same configuration takes the same variant.
    neptune_ops_variant v{};
    REQUIRE(neptune_ops_get_variant(after - 1, &v) == NEPTUNE_OPS_OK);
    CHECK(std::string(v.name) == "rmsnorm_bf16");
    CHECK(std::string(v.kernels) == "neptune");
    CHECK(v.dtype == NEPTUNE_OPS_BF16);
    CHECK(std::string(v.signature) == "x[rows,cols] bf16, gamma[cols] bf16 -> y[rows,cols] bf16");
    REQUIRE(neptune_ops_get_variant(before + 7, &v) == NEPTUNE_OPS_OK);
    CHECK(std::string(v.name) == "decode_gqa_f16_d64_g16");
    CHECK(v.group == 16);
    CHECK(v.head_dim_qk == 64);
    check_op(at("decode_gqa", DType::BF16, 128, 32, 8, 1, 300), "decode_gqa_bf16_d128_g4", on_gpu(true));
    CHECK(neptune_ops_num_variants() == after);
}

TEST_CASE("gpu ops: paged attention, compiled on first use, against the fp64 reference") {
    // Shuffled pages, sequences of different lengths (operators.md, paged KV caches).
    check_op(at("decode_paged", DType::F16, 128, 32, 8, 5, 1000), "decode_paged_f16_d128_g4", on_gpu(true));
    check_op(at("decode_paged", DType::BF16, 64, 16, 2, 2, 64), "decode_paged_bf16_d64_g8", on_gpu(true));
    check_op(at("prefill_paged", DType::F16, 128, 8, 2, 3, 700), "prefill_paged_f16_d128", on_gpu(true));
}

TEST_CASE("gpu ops: attention on [B, S, H, D] memory through strides, AOT and compiled on first use") {
    // q, k, v and out as a model's projections leave them ([B, S, H, D], here with heads 8 elements
    // apart beyond D: NaN between them shows if read), seen as [B, H, S, D] by their strides.
    for (int64_t pad : {0, 8}) {
        INFO("head padding " << pad);
        CheckOptions o = on_gpu(true);
        o.bshd_pad = pad;
        check_op(attention_instance("prefill_causal", 8, 8, 2, 200), "prefill_causal", o);
        check_op(attention_instance("prefill_gqa", 64, 8, 1, 130), "prefill_causal", o);
        check_op(attention_instance("decode_gqa", 64, 8, 3, 8191), "decode_gqa", o);
        check_op(at("prefill_causal", DType::BF16, 64, 8, 8, 2, 200), "prefill_causal_bf16_d64", o);
        check_op(at("decode_gqa", DType::BF16, 128, 32, 8, 2, 1000), "decode_gqa_bf16_d128_g4", o);
    }
}

TEST_CASE("gpu ops: what is not compiled on first use is refused with the reason") {
    OpsCase c = ops_case(at("prefill_causal", DType::F16, 59, 2, 2, 1, 10), 1);
    for (OpsTensor &t : c.in) t.t.device = NEPTUNE_OPS_CUDA;
    int index = -1;
    std::vector<neptune_ops_tensor> in;
    for (const OpsTensor &t : c.in) in.push_back(t.t);
    CHECK(neptune_ops_select("prefill_causal", in.data(), 3, &index) == NEPTUNE_OPS_ERROR_UNSUPPORTED);
    const std::string m = neptune_ops_last_error();
    CHECK_MESSAGE(m.find("no compiled variant takes q [1, 2, 10, 59] f16 on the GPU") != std::string::npos, m);
    CHECK_MESSAGE(m.find("Neptune cannot compile it") != std::string::npos, m);
    CHECK_MESSAGE(m.find("head dims must be multiples of 8") != std::string::npos, m);
    // Without the compiler library (an AOT-only installation), the refusal says how to get it.
    setenv("NEPTUNE_OPS_JIT", "/nonexistent/libneptune_ops_jit.so", 1);
    OpsCase d = ops_case(at("prefill_causal", DType::F16, 72, 2, 2, 1, 10), 1);
    in.clear();
    for (OpsTensor &t : d.in) {
        t.t.device = NEPTUNE_OPS_CUDA;
        in.push_back(t.t);
    }
    CHECK(neptune_ops_select("prefill_causal", in.data(), 3, &index) == NEPTUNE_OPS_ERROR_UNSUPPORTED);
    const std::string n = neptune_ops_last_error();
    CHECK_MESSAGE(n.find("-Dops_jit=enabled") != std::string::npos, n);
    unsetenv("NEPTUNE_OPS_JIT");
}
