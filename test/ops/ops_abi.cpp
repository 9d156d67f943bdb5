// libneptune_ops.so on the CPU, through its C ABI alone (the program links the shared library and
// Neptune's Halide-free core for the fp64 references): the variant table against the suite's
// operators, every host variant against the fp64 reference through the per-operator entries, and
// every refusal with its status and message. GPU variants are called too: without a GPU they must
// refuse with NEPTUNE_OPS_ERROR_DEVICE, never crash.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "GpuProbe.h"
#include "OpsCheck.h"
#include "neptune/NeptuneOps.h"

using namespace neptune;
using namespace neptune::testing;

namespace {

const std::vector<std::string> attention_ops = {"prefill_global",  "prefill_causal",   "prefill_alibi", "prefill_gqa",
                                                "prefill_softcap", "prefill_windowed", "decode_causal", "decode_alibi",
                                                "decode_gqa",      "decode_softcap"};
const std::vector<std::string> other_ops = {"softmax",   "logsumexp", "cross_entropy",
                                            "layernorm", "rmsnorm",   "performer"};

std::vector<neptune_ops_variant> all_variants() {
    std::vector<neptune_ops_variant> vs(static_cast<size_t>(neptune_ops_num_variants()));
    for (size_t i = 0; i < vs.size(); i++)
        REQUIRE_MESSAGE(neptune_ops_get_variant(int(i), &vs[i]) == NEPTUNE_OPS_OK, neptune_ops_last_error());
    return vs;
}

const neptune_ops_variant *variant_of(const std::vector<neptune_ops_variant> &vs, const std::string &op, int device) {
    for (const neptune_ops_variant &v : vs)
        if (v.op == op && v.device == device) return &v;
    return nullptr;
}

/** `status` is `want` and the thread's message contains every one of `parts`. */
void check_refusal(int status, int want, std::initializer_list<const char *> parts) {
    const std::string m = neptune_ops_last_error();
    INFO("message: " << m);
    CHECK(status == want);
    for (const char *p : parts) CHECK_MESSAGE(m.find(p) != std::string::npos, "missing: " << p);
}

}  // namespace

TEST_CASE("ops abi: the version, and the ABI this header describes") {
    CHECK(neptune_ops_abi_version() == NEPTUNE_OPS_ABI_VERSION);
    CHECK(std::string(neptune_ops_version()) == NEPTUNE_TEST_VERSION);
    CHECK(std::string(neptune_ops_last_error()).empty());  // nothing failed yet on this thread
}

TEST_CASE(
    "ops abi: every operator of the suite with AOT libraries has a GPU and a host variant, as the suite defines it") {
    const std::vector<neptune_ops_variant> vs = all_variants();
    // Besides, the paged operators, listed for compiling on first use (below).
    CHECK(vs.size() == 2 * (attention_ops.size() + other_ops.size()) + 2);
    for (const std::string &op : attention_ops) {
        INFO(op);
        const OperatorSpec spec = *find_operator(op);
        const AttentionSpec &a = spec.attention;
        for (int device : {NEPTUNE_OPS_CUDA, NEPTUNE_OPS_HOST}) {
            const neptune_ops_variant *v = variant_of(vs, op, device);
            REQUIRE(v);
            CHECK(std::string(v->family) == "attention");
            CHECK(std::string(v->kernels) == (device == NEPTUNE_OPS_CUDA ? "neptune" : "host"));
            CHECK(v->dtype == NEPTUNE_OPS_F16);
            CHECK(v->head_dim_qk == 128);
            CHECK(v->head_dim_v == 128);
            CHECK(v->decode == (a.decode ? 1 : 0));
            CHECK(v->group == (a.decode ? a.q_heads / a.kv_heads : 0));
            CHECK(std::string(v->mask) == (a.mask == Mask::None     ? "none"
                                           : a.mask == Mask::Causal ? "causal"
                                                                    : "window"));
            CHECK(std::string(v->score_mod) == (a.mod == ScoreMod::None    ? "none"
                                                : a.mod == ScoreMod::Alibi ? "alibi"
                                                                           : "softcap"));
            CHECK(v->window == 4096);
            CHECK(v->softcap == 50.0);
            CHECK(v->scale == doctest::Approx(1.0 / std::sqrt(128.0)).epsilon(1e-12));
            CHECK(std::string(v->inputs) == (a.mod == ScoreMod::Alibi ? "q,k,v,slopes" : "q,k,v"));
            CHECK(std::string(v->outputs) == "out");
        }
    }
    for (const std::string &op : other_ops)
        for (int device : {NEPTUNE_OPS_CUDA, NEPTUNE_OPS_HOST}) {
            INFO(op);
            const neptune_ops_variant *v = variant_of(vs, op, device);
            REQUIRE(v);
            CHECK(std::string(v->family) == op);
            CHECK(std::string(v->kernels) == (device == NEPTUNE_OPS_HOST ? "host"
                                              : op == "performer"        ? "halide_cuda"
                                                                         : "neptune"));
            CHECK(v->head_dim_qk == 0);
            CHECK(std::string(v->mask).empty());
            CHECK(v->eps == (op == "layernorm" || op == "rmsnorm" ? 1e-5 : 0.0));
        }
    // prefill_gqa is prefill_causal with other head counts: the same libraries.
    CHECK(std::string(variant_of(vs, "prefill_gqa", NEPTUNE_OPS_CUDA)->name) == "prefill_causal");
    CHECK(std::string(variant_of(vs, "prefill_gqa", NEPTUNE_OPS_HOST)->name) == "prefill_causal_host");
    CHECK(std::string(variant_of(vs, "decode_softcap", NEPTUNE_OPS_CUDA)->name) == "decode_softcap");
    // Signatures name the run-time extents and spell the compiled ones.
    CHECK(std::string(variant_of(vs, "prefill_alibi", NEPTUNE_OPS_CUDA)->signature) ==
          "q[B,Hq,Sq,128] f16, k[B,Hkv,Skv,128] f16, v[B,Hkv,Skv,128] f16, slopes[Hq] f32 -> out[B,Hq,Sq,128] f16");
    CHECK(std::string(variant_of(vs, "decode_gqa", NEPTUNE_OPS_HOST)->signature) ==
          "q[B,Hq,1,128] f16, k[B,Hkv,Skv,128] f16, v[B,Hkv,Skv,128] f16 -> out[B,Hq,1,128] f16");
    CHECK(std::string(variant_of(vs, "logsumexp", NEPTUNE_OPS_CUDA)->signature) == "x[rows,cols] f16 -> lse[rows] f32");
    CHECK(std::string(variant_of(vs, "cross_entropy", NEPTUNE_OPS_HOST)->signature) ==
          "x[rows,cols] f16, labels[rows] i32 -> loss[rows] f32");
    CHECK(std::string(variant_of(vs, "performer", NEPTUNE_OPS_HOST)->signature) ==
          "q[B,H,S,D] f16, k[B,H,S,D] f16, v[B,H,S,Dv] f16, features[F,D] f32 -> out[B,H,S,Dv] f16");

    neptune_ops_variant v{};
    check_refusal(neptune_ops_get_variant(-1, &v), NEPTUNE_OPS_ERROR_ARGUMENT,
                  {"variant index -1 is out of range [0, 34)"});
    check_refusal(neptune_ops_get_variant(int(vs.size()), &v), NEPTUNE_OPS_ERROR_ARGUMENT, {"out of range"});
    check_refusal(neptune_ops_get_variant(0, nullptr), NEPTUNE_OPS_ERROR_ARGUMENT, {"out is NULL"});
}

TEST_CASE("ops abi: the host variants of the ten attention operators against the fp64 reference") {
    check_op(attention_instance("prefill_global", 2, 2, 1, 77), "prefill_global_host");
    CheckOptions rising;
    rising.style = InputStyle::RisingScores;
    check_op(attention_instance("prefill_causal", 2, 2, 2, 70), "prefill_causal_host", rising);
    check_op(attention_instance("prefill_alibi", 4, 4, 1, 65), "prefill_alibi_host");
    check_op(attention_instance("prefill_gqa", 8, 2, 1, 50), "prefill_causal_host");
    check_op(attention_instance("prefill_softcap", 4, 2, 1, 90), "prefill_softcap_host");
    // Past the window (4096 keys, itself included): 8 query rows at the last positions of 4200 keys
    // (bottom-right aligned) lose the first 97 to 104 keys.
    OperatorSpec windowed = *find_operator("prefill_windowed");
    windowed.attention.q_heads = 2;
    windowed.attention.kv_heads = 1;
    windowed.attention.seq_q = 8;
    check_op(instantiate(windowed, 1, 4200), "prefill_windowed_host");
    check_op(attention_instance("decode_causal", 2, 2, 3, 100), "decode_causal_host");
    check_op(attention_instance("decode_alibi", 4, 4, 2, 130), "decode_alibi_host");
    check_op(attention_instance("decode_gqa", 16, 2, 2, 257), "decode_gqa_host");
    check_op(attention_instance("decode_softcap", 4, 2, 2, 99), "decode_softcap_host");
}

TEST_CASE("ops abi: attention tensors given by strides ([B, S, H, D] memory, padded heads) need no copy") {
    // Every 4-D tensor, out included, as [B, S, H, D] memory seen as [B, H, S, D]; NaN padding
    // between heads shows in the output if it is read, and unwritten output elements stay NaN.
    for (int64_t pad : {0, 8}) {
        CheckOptions strided;
        strided.bshd_pad = pad;
        INFO("head padding " << pad);
        check_op(attention_instance("prefill_causal", 2, 2, 2, 70), "prefill_causal_host", strided);
        check_op(attention_instance("prefill_gqa", 8, 2, 1, 50), "prefill_causal_host", strided);
        check_op(attention_instance("decode_gqa", 16, 2, 2, 257), "decode_gqa_host", strided);
    }
}

TEST_CASE("ops abi: the row-wise host variants and Performer against the fp64 reference") {
    check_op(instantiate(*find_operator("softmax"), 5, 300), "softmax_host");
    check_op(instantiate(*find_operator("logsumexp"), 5, 65), "logsumexp_host");
    check_op(instantiate(*find_operator("cross_entropy"), 4, 33), "cross_entropy_host");
    check_op(instantiate(*find_operator("layernorm"), 3, 257), "layernorm_host");
    check_op(instantiate(*find_operator("rmsnorm"), 3, 64), "rmsnorm_host");
    OperatorSpec p = *find_operator("performer");
    p.attention.q_heads = p.attention.kv_heads = 2;
    p.attention.head_dim_qk = p.attention.head_dim_v = 32;
    p.features = 16;
    check_op(instantiate(p, 2, 37), "performer_host");
}

TEST_CASE("ops abi: output shapes come from the inputs, as a call would check them") {
    const OperatorInstance inst = attention_instance("decode_gqa", 16, 2, 2, 33);
    OpsCase c = ops_case(inst, 3);
    std::vector<neptune_ops_tensor> in;
    for (const OpsTensor &t : c.in) in.push_back(t.t);
    int index = -1;
    REQUIRE(neptune_ops_select("decode_gqa", in.data(), 3, &index) == NEPTUNE_OPS_OK);
    neptune_ops_tensor out{};
    REQUIRE(neptune_ops_output_shapes(index, in.data(), 3, &out, 1) == NEPTUNE_OPS_OK);
    CHECK(out.ndim == 4);
    CHECK(out.dtype == NEPTUNE_OPS_F16);
    CHECK(out.device == NEPTUNE_OPS_HOST);
    CHECK((out.shape[0] == 2 && out.shape[1] == 16 && out.shape[2] == 1 && out.shape[3] == 128));
    check_refusal(neptune_ops_output_shapes(index, in.data(), 3, &out, 2), NEPTUNE_OPS_ERROR_ARGUMENT,
                  {"decode_gqa: room for 2 outputs given, 1 needed (out)"});

    const OperatorInstance lse = instantiate(*find_operator("logsumexp"), 6, 10);
    OpsCase l = ops_case(lse, 3);
    REQUIRE(neptune_ops_select("logsumexp", &l.in[0].t, 1, &index) == NEPTUNE_OPS_OK);
    REQUIRE(neptune_ops_output_shapes(index, &l.in[0].t, 1, &out, 1) == NEPTUNE_OPS_OK);
    CHECK((out.ndim == 1 && out.shape[0] == 6 && out.dtype == NEPTUNE_OPS_F32));
}

TEST_CASE("ops abi: refusals name the operator, the tensor and what was expected") {
    const OperatorInstance inst = attention_instance("prefill_causal", 2, 2, 1, 70);
    OpsCase c = ops_case(inst, 5);
    neptune_ops_tensor q = c.in[0].t, k = c.in[1].t, v = c.in[2].t, out = c.out[0].t;
    auto call = [&](neptune_ops_tensor qq, neptune_ops_tensor kk, neptune_ops_tensor vv, neptune_ops_tensor oo) {
        return neptune_ops_prefill_causal(&qq, &kk, &vv, &oo, nullptr);
    };
    REQUIRE_MESSAGE(call(q, k, v, out) == NEPTUNE_OPS_OK, neptune_ops_last_error());

    SUBCASE("operators and tensor arrays") {
        neptune_ops_tensor in[3] = {q, k, v};
        check_refusal(neptune_ops_call("nope", in, 3, &out, 1, nullptr), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"unknown operator 'nope'; this library has prefill_global, prefill_causal,", "performer"});
        check_refusal(neptune_ops_call(nullptr, in, 3, &out, 1, nullptr), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"operator name is NULL"});
        check_refusal(neptune_ops_call("prefill_causal", in, 2, &out, 1, nullptr), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"prefill_causal: 2 inputs given, expected 3 (q, k, v)"});
        check_refusal(neptune_ops_call("prefill_causal", nullptr, 3, &out, 1, nullptr), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"the inputs array is NULL"});
        check_refusal(neptune_ops_call("prefill_causal", in, 3, &out, 0, nullptr), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"0 outputs given, expected 1 (out)"});
        check_refusal(neptune_ops_prefill_causal(&q, nullptr, &v, &out, nullptr), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"prefill_causal: k is NULL"});
        check_refusal(neptune_ops_run(1000, in, 3, &out, 1, nullptr), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"variant index 1000"});
        int index = 0;
        check_refusal(neptune_ops_select("prefill_causal", in, 3, nullptr), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"index is NULL"});
        check_refusal(
            neptune_ops_select("softmax", in, 1, &index), NEPTUNE_OPS_ERROR_SHAPE,
            {"softmax: x has shape [1, 2, 70, 128], expected 2 dimensions (x[rows,cols] f16 -> y[rows,cols] f16)"});
    }
    SUBCASE("strides and the ABI version") {
        neptune_ops_tensor bad = q;
        bad.abi = 1;
        check_refusal(call(bad, k, v, out), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"prefill_causal: q has abi 1, expected 2", "rebuild it against this library's header"});
        bad = q;
        const int64_t transposed_d[4] = {2 * 70 * 128, 70 * 128, 1, 70};  // d outermost of the last two
        std::copy(transposed_d, transposed_d + 4, bad.strides);
        check_refusal(call(bad, k, v, out), NEPTUNE_OPS_ERROR_SHAPE,
                      {"prefill_causal: q has strides [17920, 8960, 1, 70]",
                       "its innermost dimension must be contiguous (stride 1)"});
        bad.strides[2] = -128;
        bad.strides[3] = 1;
        check_refusal(call(bad, k, v, out), NEPTUNE_OPS_ERROR_SHAPE, {"strides must be positive"});
        const int64_t huge[4] = {int64_t(1) << 40, 70 * 128, 128, 1};
        bad.shape[0] = 2;
        std::copy(huge, huge + 4, bad.strides);
        check_refusal(call(bad, k, v, out), NEPTUNE_OPS_ERROR_UNSUPPORTED, {"past the libraries' 32-bit offsets"});
    }
    SUBCASE("null data") {
        neptune_ops_tensor bad = q;
        bad.data = nullptr;
        check_refusal(call(bad, k, v, out), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"prefill_causal: q is NULL (its data pointer)"});
        bad = out;
        bad.data = nullptr;
        check_refusal(call(q, k, v, bad), NEPTUNE_OPS_ERROR_ARGUMENT, {"prefill_causal: out is NULL"});
    }
    SUBCASE("ranks and extents") {
        neptune_ops_tensor bad = q;
        bad.ndim = 3;
        check_refusal(call(bad, k, v, out), NEPTUNE_OPS_ERROR_SHAPE,
                      {"prefill_causal: q has shape [1, 2, 70], expected 4 dimensions", "q[B,Hq,Sq,128] f16"});
        bad.ndim = 5;
        check_refusal(call(bad, k, v, out), NEPTUNE_OPS_ERROR_SHAPE, {"q has ndim 5, expected 1 to 4"});
        // One extent changed: (tensor of q, k, v, out; dimension; extent; the message's key phrase).
        struct Edit {
            int tensor, dim;
            int64_t extent;
            const char *message;
        };
        for (const Edit &e :
             {Edit{1, 2, 0, "k has shape [1, 2, 0, 128]: extents must be positive"},
              Edit{1, 0, 2, "prefill_causal: k has shape [2, 2, 70, 128], expected [1, 2, 70, 128]"},
              Edit{2, 2, 69, "v has shape [1, 2, 69, 128], expected [1, 2, 70, 128]"},
              Edit{3, 2, 71, "prefill_causal: output out has shape [1, 2, 71, 128], expected [1, 2, 70, 128]"}}) {
            neptune_ops_tensor t[4] = {q, k, v, out};
            t[e.tensor].shape[e.dim] = e.extent;
            check_refusal(call(t[0], t[1], t[2], t[3]), NEPTUNE_OPS_ERROR_SHAPE, {e.message});
        }
        bad = q;
        bad.shape[1] = 3;
        neptune_ops_tensor q3 = bad;
        bad = out;
        bad.shape[1] = 3;
        check_refusal(call(q3, k, v, bad), NEPTUNE_OPS_ERROR_SHAPE,
                      {"q_heads must be a positive multiple of kv_heads"});
    }
    SUBCASE("element types and devices") {
        neptune_ops_tensor b[4] = {q, k, v, out};
        for (neptune_ops_tensor &t : b) t.dtype = NEPTUNE_OPS_BF16;
        check_refusal(call(b[0], b[1], b[2], b[3]), NEPTUNE_OPS_ERROR_DTYPE,
                      {"prefill_causal: no compiled variant takes q [1, 2, 70, 128] bf16 on the host",
                       "prefill_causal_host (host, f16, head dim 128): it takes f16"});
        neptune_ops_tensor bad = out;
        bad.dtype = NEPTUNE_OPS_F32;
        check_refusal(call(q, k, v, bad), NEPTUNE_OPS_ERROR_DTYPE, {"output out is f32, expected f16"});
        bad = v;
        bad.dtype = NEPTUNE_OPS_BF16;
        check_refusal(call(q, k, bad, out), NEPTUNE_OPS_ERROR_DTYPE, {"prefill_causal: v is bf16, expected f16"});
        bad.dtype = 9;
        check_refusal(call(q, k, bad, out), NEPTUNE_OPS_ERROR_DTYPE, {"v has dtype code 9, not a neptune_ops_dtype"});
        bad = v;
        bad.device = 7;
        check_refusal(call(q, k, bad, out), NEPTUNE_OPS_ERROR_ARGUMENT, {"v has device code 7"});
        bad.device = NEPTUNE_OPS_CUDA;
        check_refusal(call(q, k, bad, out), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"prefill_causal: v is on the GPU, q on the host"});
        bad = out;
        bad.device = NEPTUNE_OPS_CUDA;
        check_refusal(call(q, k, v, bad), NEPTUNE_OPS_ERROR_ARGUMENT,
                      {"output out is on the GPU, the variant's tensors on the host"});
    }
    SUBCASE("what no variant was compiled for") {
        const OperatorInstance d64 = [] {
            OperatorSpec s = *find_operator("prefill_causal");
            s.attention.head_dim_qk = s.attention.head_dim_v = 64;
            s.attention.q_heads = s.attention.kv_heads = 1;
            return instantiate(s, 1, 10);
        }();
        OpsCase small = ops_case(d64, 1);
        check_refusal(call_entry("prefill_causal", small), NEPTUNE_OPS_ERROR_UNSUPPORTED,
                      {"no compiled variant takes q [1, 1, 10, 64] f16 on the host",
                       "prefill_causal_host (host, f16, head dim 128): it is compiled for head dim 128"});
        OpsCase g4 = ops_case(attention_instance("decode_gqa", 8, 2, 1, 10), 1);
        check_refusal(
            call_entry("decode_gqa", g4), NEPTUNE_OPS_ERROR_UNSUPPORTED,
            {"decode_gqa_host (host, f16, head dim 128, 8 query heads per KV head): it is compiled for 8 query "
             "heads per KV head"});
        // Decode takes one query row per head.
        OpsCase dec = ops_case(attention_instance("decode_causal", 2, 2, 1, 10), 1);
        dec.in[0].t.shape[2] = 2;
        check_refusal(call_entry("decode_causal", dec), NEPTUNE_OPS_ERROR_SHAPE,
                      {"decode_causal: q has shape [1, 2, 2, 128], expected [1, 2, 1, 128]"});
        // ALiBi's slopes: one f32 per query head.
        OpsCase al = ops_case(attention_instance("prefill_alibi", 2, 2, 1, 10), 1);
        al.in[3].t.shape[0] = 3;
        check_refusal(call_entry("prefill_alibi", al), NEPTUNE_OPS_ERROR_SHAPE, {"slopes has shape [3], expected [2]"});
        al.in[3].t.shape[0] = 2;
        al.in[3].t.dtype = NEPTUNE_OPS_F16;
        check_refusal(call_entry("prefill_alibi", al), NEPTUNE_OPS_ERROR_DTYPE, {"slopes is f16, expected f32"});
        // More elements than the libraries' 32-bit indexing: refused before any work.
        neptune_ops_tensor big{};
        big.data = c.in[0].bytes.data();
        big.dtype = NEPTUNE_OPS_F16;
        big.device = NEPTUNE_OPS_HOST;
        big.ndim = 2;
        big.abi = NEPTUNE_OPS_ABI_VERSION;
        big.shape[0] = big.shape[1] = 65536;
        int index = -1;
        check_refusal(neptune_ops_select("softmax", &big, 1, &index), NEPTUNE_OPS_ERROR_UNSUPPORTED,
                      {"softmax: x has 4294967296 elements; the AOT libraries take at most 2^31 - 1 per tensor"});
    }
    SUBCASE("the library's own refusal: a label out of range") {
        const OperatorInstance ce = instantiate(*find_operator("cross_entropy"), 2, 10);
        std::vector<HostTensor> in = make_inputs(ce, 5);
        in[1].values[1] = 10;  // cols = 10: out of range
        OpsTensor x = ops_tensor(in[0]), labels = ops_tensor(in[1]), loss = ops_output(ce.outputs[0]);
        check_refusal(neptune_ops_cross_entropy(&x.t, &labels.t, &loss.t, nullptr), NEPTUNE_OPS_ERROR_LIBRARY,
                      {"cross_entropy: the AOT library cross_entropy_host failed (Halide error", "label out of range"});
    }
    SUBCASE("the GPU variants without a GPU, or with host memory") {
        neptune_ops_tensor g[4] = {q, k, v, out};
        for (neptune_ops_tensor &t : g) t.device = NEPTUNE_OPS_CUDA;  // host pointers, said to be device memory
        const int rc = call(g[0], g[1], g[2], g[3]);
        if (!cuda_device_present()) {
            check_refusal(rc, NEPTUNE_OPS_ERROR_DEVICE,
                          {"prefill_causal: prefill_causal runs on the GPU, and there is none"});
            neptune_ops_device_info info{};
            check_refusal(neptune_ops_get_device_info(&info), NEPTUNE_OPS_ERROR_DEVICE, {"no GPU"});
        } else {
            check_refusal(rc, NEPTUNE_OPS_ERROR_DEVICE, {"prefill_causal: q:"});
        }
        // A configuration no AOT variant has is compiled on first use, which needs the GPU.
        for (neptune_ops_tensor &t : g) t.dtype = NEPTUNE_OPS_BF16;
        if (!cuda_device_present())
            check_refusal(call(g[0], g[1], g[2], g[3]), NEPTUNE_OPS_ERROR_DEVICE,
                          {"prefill_causal: no compiled variant takes q [1, 2, 70, 128] bf16 on the GPU",
                           "prefill_causal (GPU, f16, head dim 128): it takes f16",
                           "compiling a variant needs the GPU, and there is none"});
        check_refusal(neptune_ops_get_device_info(nullptr), NEPTUNE_OPS_ERROR_ARGUMENT, {"out is NULL"});
    }
}

TEST_CASE("ops abi: the last error belongs to the thread that failed") {
    check_refusal(neptune_ops_call("first", nullptr, 0, nullptr, 0, nullptr), NEPTUNE_OPS_ERROR_ARGUMENT, {"'first'"});
    std::string other;
    std::thread([&] {
        CHECK(std::string(neptune_ops_last_error()).empty());
        neptune_ops_call("second", nullptr, 0, nullptr, 0, nullptr);
        other = neptune_ops_last_error();
    }).join();
    CHECK(other.find("'second'") != std::string::npos);
    CHECK(std::string(neptune_ops_last_error()).find("'first'") != std::string::npos);
}

TEST_CASE("ops abi: paged attention is listed with its tensors and compiles for a first call's tensors") {
    const std::vector<neptune_ops_variant> vs = all_variants();
    for (const char *op : {"decode_paged", "prefill_paged"}) {
        INFO(op);
        const neptune_ops_variant *v = variant_of(vs, op, NEPTUNE_OPS_CUDA);
        REQUIRE(v);
        CHECK(std::string(v->kernels) == "neptune, compiled on first use");
        CHECK(std::string(v->inputs) == "q,k_cache,v_cache,page_table,seq_lens");
        CHECK(std::string(v->outputs) == "out");
        CHECK(variant_of(vs, op, NEPTUNE_OPS_HOST) == nullptr);
    }
    CHECK(std::string(variant_of(vs, "decode_paged", NEPTUNE_OPS_CUDA)->signature) ==
          "q[B,Hq,1,128] f16, k_cache[pages,Hkv,P,128] f16, v_cache[pages,Hkv,P,128] f16, page_table[B,max_pages] "
          "i32, seq_lens[B] i32 -> out[B,Hq,1,128] f16");
    CHECK(std::string(variant_of(vs, "prefill_paged", NEPTUNE_OPS_CUDA)->signature) ==
          "q[B,Hq,Sq,128] f16, k_cache[pages,Hkv,P,128] f16, v_cache[pages,Hkv,P,128] f16, page_table[B,max_pages] "
          "i32, seq_lens[B] i32 -> out[B,Hq,Sq,128] f16");
    // The listing itself runs nothing: it says how to get the variant that does.
    int listed = -1;
    for (size_t i = 0; i < vs.size(); i++)
        if (std::string(vs[i].op) == "decode_paged") listed = int(i);
    check_refusal(neptune_ops_run(listed, nullptr, 0, nullptr, 0, nullptr), NEPTUNE_OPS_ERROR_ARGUMENT,
                  {"decode_paged_on_first_use lists the operator", "neptune_ops_select"});
    // Host tensors: no variant runs on the host.
    std::vector<uint16_t> q(2 * 8 * 128), cache(3 * 2 * 16 * 128);
    std::vector<int32_t> table(2 * 2), lens(2, 20);
    const int64_t qs[4] = {2, 8, 1, 128}, cs[4] = {3, 2, 16, 128}, ts[2] = {2, 2}, ls[1] = {2};
    auto tensor = [](void *data, int dtype, int ndim, const int64_t *shape) {
        neptune_ops_tensor t{};
        t.abi = NEPTUNE_OPS_ABI_VERSION;
        t.data = data;
        t.dtype = dtype;
        t.device = NEPTUNE_OPS_HOST;
        t.ndim = ndim;
        for (int d = 0; d < ndim; d++) t.shape[d] = shape[d];
        return t;
    };
    const neptune_ops_tensor in[5] = {
        tensor(q.data(), NEPTUNE_OPS_F16, 4, qs), tensor(cache.data(), NEPTUNE_OPS_F16, 4, cs),
        tensor(cache.data(), NEPTUNE_OPS_F16, 4, cs), tensor(table.data(), NEPTUNE_OPS_I32, 2, ts),
        tensor(lens.data(), NEPTUNE_OPS_I32, 1, ls)};
    int index = -1;
    check_refusal(neptune_ops_select("decode_paged", in, 5, &index), NEPTUNE_OPS_ERROR_UNSUPPORTED,
                  {"decode_paged: no compiled variant takes q [2, 8, 1, 128] f16 on the host", "on the GPU"});
    std::vector<uint16_t> o(2 * 8 * 128);
    const neptune_ops_tensor out = tensor(o.data(), NEPTUNE_OPS_F16, 4, qs);
    check_refusal(neptune_ops_decode_paged(&in[0], &in[1], &in[2], &in[3], &in[4], &out, nullptr),
                  NEPTUNE_OPS_ERROR_UNSUPPORTED, {"decode_paged: no compiled variant takes q"});
}
