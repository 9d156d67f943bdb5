// libneptune_ops.so on the GPU: the GPU variant of every operator on device memory, through the
// per-operator entries, against the fp64 reference (outputs poisoned with NaN first), and the
// device query. Skips (77) without a GPU; links the shared library and Neptune's Halide-free core.
#include <doctest/doctest.h>

#include <string>

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
