// attention: causal prefill attention and grouped-query decode attention through their AOT
// libraries (generators/meson.build): prefill_causal and decode_gqa run Neptune's kernels on the
// GPU, prefill_causal_host and decode_gqa_host the fused CPU form. README.md has the details.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "AppSupport.h"
#include "decode_gqa.h"
#include "decode_gqa_host.h"
#include "prefill_causal.h"
#include "prefill_causal_host.h"

using namespace neptune;
using namespace neptune::apps;

int main(int argc, char **argv) {
    CLI::App app{
        "Causal attention (prefill: FlashAttention-like, rolling update) or decode attention with 8 query "
        "heads per KV head (FlashDecoding-like, split-K) through Neptune's AOT libraries; head dim 128, f16. "
        "Checks against the fp64 reference, then times the library.",
        "attention"};
    std::string mode = "prefill", shape, heads;
    CommonOptions common;
    app.add_option("--mode", mode, "prefill (queries = keys) or decode (one query row per head)")
        ->check(CLI::IsMember({"prefill", "decode"}))
        ->capture_default_str();
    app.add_option("--shape", shape,
                   "B,S: batch and sequence (keys; prefill also queries); default on the GPU 1,4096 prefill, 8,8192 "
                   "decode; on the host 1,128 and 2,1024")
        ->check(CLI::Validator(check_shape, "B,S"));
    app.add_option("--heads", heads,
                   "HQ,HKV: query and KV heads; default 32,32 prefill (8,8 on the host), 64,8 decode");
    add_common_options(app, common);
    if (const int rc = parse_arguments(app, argc, argv, common); rc >= 0) return rc;

    // The host library is the fused CPU form, for checking rather than speed: smaller defaults.
    const bool decode = mode == "decode";
    if (shape.empty()) shape = decode ? (common.gpu ? "8,8192" : "2,1024") : (common.gpu ? "1,4096" : "1,128");
    if (heads.empty()) heads = decode ? "64,8" : (common.gpu ? "32,32" : "8,8");
    const std::string bad_heads = check_shape(heads);
    const auto [hq, hkv] = bad_heads.empty() ? parse_shape(heads) : std::pair<int64_t, int64_t>{0, 0};
    if (!bad_heads.empty() || hq % hkv != 0) {
        std::printf("--heads %s: expected HQ,HKV with HQ a multiple of HKV\n", heads.c_str());
        return exit_bad_arguments;
    }
    if (decode && hq != 8 * hkv) {
        std::printf("--heads %s: decode_gqa's kernels were compiled for 8 query heads per KV head\n", heads.c_str());
        return exit_bad_arguments;
    }
    const auto [batch, seq] = parse_shape(shape);
    OperatorSpec spec = *find_operator(decode ? "decode_gqa" : "prefill_causal");
    spec.attention.q_heads = int(hq);
    spec.attention.kv_heads = int(hkv);

    AppOperator op;
    op.inst = instantiate(spec, batch, seq);
    op.title = std::string(decode ? "decode" : "prefill") + " attention, causal: batch " + std::to_string(batch) +
               ", " + std::to_string(hq) + "/" + std::to_string(hkv) + " heads, " +
               (decode ? std::string("1 query") : std::to_string(seq) + " queries") + " x " + std::to_string(seq) +
               " keys, head dim 128, f16";
    if (decode) {
        op.gpu = [](Buffers &i, Buffers &o) { return decode_gqa(i[0], i[1], i[2], o[0]); };
        op.host = [](Buffers &i, Buffers &o) { return decode_gqa_host(i[0], i[1], i[2], o[0]); };
    } else {
        op.gpu = [](Buffers &i, Buffers &o) { return prefill_causal(i[0], i[1], i[2], o[0]); };
        op.host = [](Buffers &i, Buffers &o) { return prefill_causal_host(i[0], i[1], i[2], o[0]); };
    }
    // Probabilities are rounded to f16 for the tensor cores: correctness/gpu_attention's bounds.
    op.gpu_tolerance = {2e-3, 2e-2};
    return run_app(op, common);
}
