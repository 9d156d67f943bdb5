// Fused groups as extern stages of Halide pipelines, through the JIT entry point, on the CPU: what
// the stage holds (buffers, scalars, kernels, dumps), bounds queries and buffer checks run by
// Halide's own pipeline before any device work, Halide stages feeding the group, and the groups or
// options Neptune refuses. Runs on any machine; the GPU run is correctness/gpu_jit_extern.
#include <doctest/doctest.h>

#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "CustomAttention.h"
#include "GpuProbe.h"
#include "neptune/GpuPipeline.h"
#include "neptune/Error.h"
#include "neptune/HalideCpu.h"
#include "neptune/algorithms/Schedules.h"
#include "neptune/runtime/NeptuneHalide.h"

using namespace neptune;
using Halide::Buffer;
using Halide::float16_t;

namespace {

struct Built {
    algorithms::OperatorFuncs funcs;
    GpuPipeline pipeline;
};

/** The operator's algorithm with its Neptune schedule applied (split-K with 32-key tiles for decode). */
algorithms::OperatorFuncs fused(const std::string &op) {
    const OperatorSpec spec = *find_operator(op);
    algorithms::OperatorFuncs f = algorithms::build(spec);
    algorithms::FusionChoice choice;
    if (spec.attention.decode) {
        choice.variant = algorithms::FusionVariant::SplitK;
        choice.tile = 32;
    }
    algorithms::fuse_operator(spec, f, choice);
    return f;
}

ExternOptions head_dim_128() {
    ExternOptions o;
    o.head_dim_qk = 128;
    return o;
}

Built compile(const std::string &op, ExternOptions o = head_dim_128()) {
    algorithms::OperatorFuncs f = fused(op);
    return {f, compile_gpu(f.outputs, o)};
}

nlohmann::json descriptor(const GpuPipeline &p) { return nlohmann::json::parse(p.stages().at(0).descriptor); }

std::vector<neptune_halide_trace_event> &events() {
    static std::vector<neptune_halide_trace_event> e;
    return e;
}
std::vector<std::vector<int>> &out_regions() {
    static std::vector<std::vector<int>> r;
    return r;
}
void trace(const neptune_halide_trace_event *e) {
    events().push_back(*e);
    std::vector<int> region;
    const halide_buffer_t *out = e->buffers[e->num_buffers - 1];
    for (int d = 0; d < out->dimensions; d++) region.insert(region.end(), {out->dim[d].min, out->dim[d].extent});
    out_regions().push_back(region);
}

std::string realize_error(GpuPipeline &p, Buffer<float16_t> &out) {
    try {
        p.realize(out);
    } catch (const Halide::RuntimeError &e) { return e.what(); }
    return "";
}

bool has(const std::string &text, const std::string &what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("to_halide_buffer: the values, innermost dimension first, on a host marked dirty") {
    // Marked dirty so that copy_to_device copies them: Halide copies only a dirty host, and a buffer
    // written through data() is not (gpu_jit_extern's Halide stage read uninitialized device memory).
    HostTensor t(TensorDesc{"x", DType::F16, {2, 3}});
    for (size_t i = 0; i < t.values.size(); i++) t.values[i] = double(i) - 2.5;
    Halide::Buffer<> b = to_halide_buffer(t);
    CHECK(b.raw_buffer()->host_dirty());
    CHECK(b.dimensions() == 2);
    CHECK(b.dim(0).extent() == 3);
    CHECK(b.dim(1).extent() == 2);
    Halide::Buffer<Halide::float16_t> h(*b.raw_buffer());
    CHECK(float(h(2, 1)) == 2.5f);  // element [1][2] = 5 - 2.5
}

TEST_CASE("extern stage: prefill attention is one stage over q, k, v and out, with the kernels and their dumps") {
    Built b = compile("prefill_causal");
    const GpuPipeline &p = b.pipeline;
    REQUIRE(p.stages().size() == 1);
    const ExternStageInfo &s = p.stages()[0];
    CHECK(s.name == "out");
    CHECK(s.extern_function == "neptune_halide_extern_4");
    const nlohmann::json d = descriptor(p);
    CHECK(d["scalars"] == nlohmann::json({"batch", "q_heads", "kv_heads", "seq_q", "seq_kv"}));
    REQUIRE(d["buffers"].size() == 4);
    CHECK(d["buffers"][0]["name"] == "q");
    CHECK(d["buffers"][0]["dims"] == nlohmann::json({"128", "seq_q", "q_heads", "batch"}));
    CHECK(d["buffers"][1]["dims"] == nlohmann::json({"128", "seq_kv", "kv_heads", "batch"}));
    CHECK(d["buffers"][3]["output"] == true);
    CHECK(d["chunks"] == 0);
    REQUIRE(s.sets.size() == 1);  // JIT: this machine's GPU family only
    CHECK(!s.sets[0].image.empty());
    CHECK(has(p.tile_program(), "kernel neptune_rolling"));
    CHECK(has(p.cuda_source(), "extern \"C\" __global__"));
    CHECK(has(p.ptx(), ".entry neptune_rolling"));
    CHECK(has(p.ptxas_report(), "registers"));
}

TEST_CASE(
    "extern stage: prefill kernels take the directive's tile, or with family_tile the JIT's tile for the GPU family") {
    // The directive's tile is 64 keys (FusionChoice's default). sm_90a's wgmma path takes 192 (128 when
    // the mask hides leading keys, a sliding window); the plan alone tells, as no OperatorSpec reaches
    // the stage.
    const auto kv_rows = [](const std::string &op, bool family_tile) {
        ExternOptions o = head_dim_128();
        o.jit_arch = "sm_90a";
        o.family_tile = family_tile;
        const std::string tir = compile(op, o).pipeline.tile_program();
        for (int rows : {64, 128, 192})
            if (has(tir, "k_s: f16[" + std::to_string(rows) + " x 128]")) return rows;
        return 0;
    };
    CHECK(kv_rows("prefill_causal", false) == 64);
    CHECK(kv_rows("prefill_causal", true) == 192);
    CHECK(kv_rows("prefill_windowed", true) == 128);
}

TEST_CASE("extern stage: ALiBi's slopes are an f32 input over the query heads, a fifth buffer") {
    Built b = compile("prefill_alibi");
    CHECK(b.pipeline.stages()[0].extern_function == "neptune_halide_extern_5");
    const nlohmann::json d = descriptor(b.pipeline);
    REQUIRE(d["buffers"].size() == 5);
    CHECK(d["buffers"][3]["name"] == "slopes");
    CHECK(d["buffers"][3]["bits"] == 32);
    CHECK(d["buffers"][3]["dims"] == nlohmann::json({"q_heads"}));
}

TEST_CASE("extern stage: masks and modifiers reading int32 and f32 inputs over the batch and heads compile") {
    // A padded KV cache's keys per batch (int32), a window per head (int32), a temperature per batch
    // (f32): each kernel declares the input with its element type, and the stage's buffer has the
    // extent of the index it is read at. NVRTC compiles the rolling and split-K kernels of both families.
    const float neg_inf = -std::numeric_limits<float>::infinity();
    const testing::Modifier masked = [&](const testing::ScoreArgs &x) {
        return Halide::select(x.j < x.kv_len(x.n) && x.j > x.pos - x.window(x.h), x.s * x.temperature(x.n), neg_inf);
    };
    for (const char *arch : {"sm_80", "sm_90a"})
        for (bool split_k : {false, true}) {
            INFO(arch << (split_k ? " split-K" : " rolling"));
            testing::CustomAttention a(masked, 64);
            a.fuse(split_k ? 4 : 0);
            ExternOptions o;
            o.head_dim_qk = 64;
            o.jit_arch = arch;
            GpuPipeline p = compile_gpu({a.out}, o);
            CHECK(has(p.cuda_source(), "const int *__restrict__ kv_len"));
            CHECK(has(p.cuda_source(), "const int *__restrict__ window"));
            CHECK(has(p.cuda_source(), "const float *__restrict__ temperature"));
            const nlohmann::json d = descriptor(p);
            REQUIRE(d["buffers"].size() == 7);
            std::map<std::string, nlohmann::json> by_name;
            for (const nlohmann::json &b : d["buffers"]) by_name[b["name"].get<std::string>()] = b;
            CHECK(by_name["kv_len"]["type_code"] == int(halide_type_int));
            CHECK(by_name["kv_len"]["bits"] == 32);
            CHECK(by_name["kv_len"]["dims"] == nlohmann::json({"batch"}));
            CHECK(by_name["window"]["type_code"] == int(halide_type_int));
            CHECK(by_name["window"]["dims"] == nlohmann::json({"q_heads"}));
            CHECK(by_name["temperature"]["type_code"] == int(halide_type_float));
            CHECK(by_name["temperature"]["dims"] == nlohmann::json({"batch"}));
        }

    // Read at another index than the query head or the batch, or of another type: the reason, by name.
    const testing::Modifier at_key = [&](const testing::ScoreArgs &x) {
        return Halide::select(x.j < x.kv_len(x.j % 2), x.s, neg_inf);
    };
    testing::CustomAttention a(at_key, 64);
    a.fuse(0);
    ExternOptions o;
    o.head_dim_qk = 64;
    o.jit_arch = "sm_80";
    CHECK_THROWS_WITH_AS(compile_gpu({a.out}, o),
                         doctest::Contains("the scores read kv_len((kv % 2)); 1-D inputs are read at the query head "
                                           "or the batch index"),
                         CompileError);
    Halide::ImageParam flags(Halide::UInt(8), 1, "flags");
    const testing::Modifier bytes = [&](const testing::ScoreArgs &x) {
        return Halide::select(flags(x.n) != 0, x.s, neg_inf);
    };
    testing::CustomAttention c(bytes, 64);
    c.fuse(0);
    CHECK_THROWS_WITH_AS(
        compile_gpu({c.out}, o),
        doctest::Contains("the scores read flags(b) of type uint8; 1-D inputs must be int32 or float32"), CompileError);
}

TEST_CASE("extern stage: decode is one split-K kernel that picks its chunks at run time and checks its grouping") {
    ExternOptions o = head_dim_128();
    o.group = 8;
    Built b = compile("decode_gqa", o);
    const nlohmann::json d = descriptor(b.pipeline);
    CHECK(d["chunks"] == -1);
    CHECK(d["split_blocks"] == "(* batch kv_heads)");
    CHECK(d["split_keys"] == "seq_kv");
    // A kernel per depth the JIT picks from (SplitChunks.h's decode_stages), the launcher choosing.
    REQUIRE(d["sets"].size() == 2);
    CHECK(d["sets"][0]["stages"] == 3);
    CHECK(d["sets"][1]["stages"] == 2);
    CHECK(d["sets"][0]["tile_keys"] == 32);
    CHECK(d["sets"][1]["tile_keys"] == 32);
    CHECK(d["sets"][0]["kernels"][0]["shared_bytes"].get<int>() >
          d["sets"][1]["kernels"][0]["shared_bytes"].get<int>());
    // The combine runs in the last chunk block of each group: one kernel, and its arrival counters are
    // a workspace the launcher zeroes when it allocates it.
    CHECK(d["sets"][0]["kernels"].size() == 1);
    REQUIRE(!d["sets"][0]["workspaces"].empty());
    const nlohmann::json &counters = d["sets"][0]["workspaces"].back();
    CHECK(counters["name"] == "ws_arrivals");
    CHECK(counters["zeroed"] == true);
    CHECK(d["sets"][0]["workspaces"].front()["zeroed"] == false);
    std::string constraints;
    for (const auto &c : d["constraints"]) constraints += c["message"].get<std::string>() + "; ";
    CHECK(has(constraints, "seq_q must be 1"));
    CHECK(has(constraints, "compiled for 8 query heads per KV head"));
    CHECK(has(constraints, "at most 16"));
}

TEST_CASE("extern stage: Halide's pipeline asks for whole inputs, and wrong buffers fail before any device work") {
    Built b = compile("prefill_causal");
    std::vector<Halide::ImageParam> &in = b.funcs.inputs;
    Buffer<float16_t> q(128, 7, 4, 2), k(128, 9, 2, 2), v(128, 9, 2, 2), out(128, 7, 4, 2);
    for (auto *t : {&q, &k, &v}) t->fill(float16_t(0.5f));
    in[0].set(q);
    in[1].set(k);
    in[2].set(v);
    neptune_halide_set_trace(trace);
    events().clear();
    out_regions().clear();
    const std::string plain = realize_error(b.pipeline, out);
    if (!neptune::testing::cuda_device_present()) { CHECK(has(plain, "libcuda.so.1")); }
    REQUIRE(!events().empty());
    CHECK(events().front().bounds_query == 1);
    for (const std::vector<int> &r : out_regions()) CHECK(r == std::vector<int>{0, 128, 0, 7, 0, 4, 0, 2});  // whole

    Buffer<float16_t> narrow(64, 9, 2, 2);
    in[1].set(narrow);
    CHECK(has(realize_error(b.pipeline, out), "buffer k covers [0, 64) in dimension 0 (128), expected [0, 128)"));
    Buffer<float16_t> three_heads(128, 9, 3, 2);
    in[1].set(three_heads);
    in[2].set(three_heads);
    CHECK(has(realize_error(b.pipeline, out),
              "q_heads must be a multiple of kv_heads (batch = 2, q_heads = 4, kv_heads = 3"));
    in[1].set(k);
    in[2].set(v);
    Buffer<float16_t> cropped(128, 5, 4, 2);
    CHECK(has(realize_error(b.pipeline, cropped),
              "output buffer out covers [0, 5) in dimension 1 (seq_q), expected [0, 7)"));
    // Views are read through their strides (a crop of a longer cache is fine), as long as rows start
    // on 16 bytes: rows of 130 elements do not.
    Buffer<float16_t> wide_rows(130, 9, 2, 2);
    wide_rows.crop(0, 0, 128);
    in[1].set(wide_rows);
    CHECK(has(realize_error(b.pipeline, out),
              "buffer k has stride 130 in dimension 1: Neptune's kernels take strides that are positive multiples of "
              "8 elements (16 bytes)"));
    neptune_halide_set_trace(nullptr);
}

TEST_CASE("extern stage: a Func scheduled on its own feeds the group as an input; extents come from its buffer") {
    const OperatorSpec spec = *find_operator("prefill_causal");
    Halide::ImageParam q(Halide::Float(16), 4, "q"), k(Halide::Float(16), 4, "k"), v(Halide::Float(16), 4, "v");
    Halide::Var d("d"), i("i"), h("h"), bv("b");
    Halide::Func q_scaled("q_scaled");
    q_scaled(d, i, h, bv) = Halide::cast<float16_t>(Halide::cast<float>(q(d, i, h, bv)) * 0.5f);
    q_scaled.compute_root();
    algorithms::AttentionInputs in{q_scaled,
                                   k,
                                   v,
                                   Halide::Func(),
                                   q.dim(1).extent(),
                                   k.dim(1).extent(),
                                   q.dim(2).extent(),
                                   k.dim(2).extent(),
                                   q.dim(0).extent()};
    algorithms::AttentionFuncs a = algorithms::attention(spec.attention, DType::F16, in);
    fuse_reduction({a.acc, a.row_sum}, Halide::RVar(a.kv.x)).rolling_update(64);
    ExternOptions o;
    o.head_dim_qk = 128;
    GpuPipeline p = compile_gpu({a.out}, o);
    const nlohmann::json desc = descriptor(p);
    CHECK(desc["buffers"][0]["name"].get<std::string>().rfind("q_scaled", 0) == 0);  // Halide may add $N
    CHECK(desc["scalars"].size() == 5);

    // Not pointwise in its buffer: the extents it hides must be given.
    Halide::Func shifted("shifted");
    shifted(d, i, h, bv) = q(d, i, (h + 1) % q.dim(2).extent(), bv);
    shifted.compute_root();
    in.q = shifted;
    algorithms::AttentionFuncs a2 = algorithms::attention(spec.attention, DType::F16, in);
    fuse_reduction({a2.acc, a2.row_sum}, Halide::RVar(a2.kv.x)).rolling_update(64);
    CHECK_THROWS_WITH_AS(compile_gpu({a2.out}, o),
                         doctest::Contains("reads q.extent.1, an extent of q, a buffer the group does not read"),
                         CompileError);
    algorithms::AttentionFuncs a3 = algorithms::attention(spec.attention, DType::F16, in);
    fuse_reduction({a3.acc, a3.row_sum}, Halide::RVar(a3.kv.x)).rolling_update(64);
    o.extents = {{"q_heads", q.dim(2).extent()}, {"seq_q", q.dim(1).extent()}};
    CHECK(descriptor(compile_gpu({a3.out}, o))["buffers"][0]["name"].get<std::string>().rfind("shifted", 0) == 0);
}

TEST_CASE("extern stage: what the tile backend cannot lower, or the options cannot describe, is a CompileError") {
    const ExternOptions o = head_dim_128();
    // Groups the tile backend does not lower are refused for their shape, with every pattern's reason
    // and what to do, before any option of the attention kernels (the head dims) is asked for.
    const auto refusal = [](const std::string &op) {
        try {
            compile_gpu(fused(op).outputs, ExternOptions{});
        } catch (const CompileError &e) { return std::string(e.what()); }
        return std::string("no CompileError");
    };
    const std::string performer = refusal("performer");
    CHECK(has(performer, "fuse_reduction("));
    CHECK(has(performer, "no pattern of the tile backend matches: attention: "));
    CHECK(has(performer, "; row chain: "));
    CHECK(has(performer, "Run it through lower_to_cpu and Halide's own schedules"));
    CHECK_FALSE(has(performer, "head_dim"));

    CHECK_THROWS_WITH_AS(compile("prefill_global",
                                 [] {
                                     ExternOptions none;
                                     none.head_dim_qk = -1;
                                     return none;
                                 }()),
                         doctest::Contains("head_dim_qk is not set"), CompileError);

    algorithms::OperatorFuncs g = fused("prefill_global");
    CHECK_THROWS_WITH_AS(compile_gpu({g.stage("row_sum")}, o),
                         doctest::Contains("needs the Func that reads the group's stages"), CompileError);
}

TEST_CASE("extern stage: Halide CUDA stages before and after the stage compile into one JIT pipeline") {
    Halide::ImageParam q(Halide::Float(16), 4, "q"), k(Halide::Float(16), 4, "k"), v(Halide::Float(16), 4, "v");
    Halide::Var d("d"), i("i"), h("h"), bv("b"), di, ii;
    Halide::Func q_scaled("q_scaled");
    q_scaled(d, i, h, bv) = Halide::cast<float16_t>(Halide::cast<float>(q(d, i, h, bv)) * 0.5f);
    q_scaled.compute_root().gpu_tile(d, i, di, ii, 32, 4, Halide::TailStrategy::GuardWithIf);
    algorithms::AttentionInputs in{q_scaled,
                                   k,
                                   v,
                                   Halide::Func(),
                                   q.dim(1).extent(),
                                   k.dim(1).extent(),
                                   q.dim(2).extent(),
                                   k.dim(2).extent(),
                                   q.dim(0).extent()};
    algorithms::AttentionFuncs a = algorithms::attention(find_operator("prefill_causal")->attention, DType::F16, in);
    fuse_reduction({a.acc, a.row_sum}, Halide::RVar(a.kv.x)).rolling_update(64);
    Halide::Func doubled("doubled");
    doubled(d, i, h, bv) = a.out(d, i, h, bv) * float16_t(2.0f);
    doubled.gpu_tile(d, i, di, ii, 32, 4, Halide::TailStrategy::GuardWithIf);
    ExternOptions o;
    o.head_dim_qk = 128;
    GpuPipeline p = compile_gpu({doubled}, o);  // `doubled` reads the group's output: the stage replaces out
    REQUIRE(p.stages().size() == 1);
    CHECK(descriptor(p)["buffers"][0]["name"].get<std::string>().rfind("q_scaled", 0) == 0);
    p.pipeline().compile_jit(gpu_jit_target());  // Halide's own CUDA stages and the extern call, no GPU needed
}

TEST_CASE("extern stage: a Pipeline of one's own runs the stages after prepare_jit") {
    algorithms::OperatorFuncs f = fused("prefill_global");
    ExternOptions o = head_dim_128();
    o.aot = false;
    Halide::Pipeline p(extern_stages(f.outputs, o));
    prepare_jit(p);
    Buffer<float16_t> q(128, 3, 2, 1), k(128, 5, 2, 1), out(128, 3, 2, 1);
    q.fill(float16_t(0.25f));
    k.fill(float16_t(0.25f));
    f.inputs[0].set(q);
    f.inputs[1].set(k);
    f.inputs[2].set(k);
    try {
        p.realize(out, gpu_jit_target());
        CHECK(neptune::testing::cuda_device_present());
        out.copy_to_host();
        CHECK(float(out(0, 0, 0, 0)) == doctest::Approx(0.25));  // uniform values: the mean is the value
    } catch (const Halide::RuntimeError &e) {
        CHECK(!neptune::testing::cuda_device_present());
        CHECK(has(e.what(), "libcuda.so.1"));
    }
}

TEST_CASE("extern stage: attention's out and its row statistics from one kernel, the statistics copy stages") {
    algorithms::OperatorFuncs f = fused("attention_row_stats");
    REQUIRE(f.outputs.size() == 4);  // out, lse, entropy, max_prob
    GpuPipeline p = compile_gpu(f.outputs, head_dim_128());
    REQUIRE(p.stages().size() == 4);
    const nlohmann::json d = descriptor(p);
    CHECK(d["name"] == "out");
    REQUIRE(d["buffers"].size() == 4);  // q, k, v, out
    REQUIRE(d["sets"][0]["workspaces"].size() == 3);
    for (size_t i = 0; i < 3; i++) {
        const nlohmann::json w = d["sets"][0]["workspaces"][i];
        CHECK(w["per_thread"] == true);
        CHECK(w["elements"] == "(* seq_q (* q_heads batch))");
        const nlohmann::json copy = nlohmann::json::parse(p.stages()[i + 1].descriptor);
        CHECK(copy["copy_of_group"] == d["id"]);
        CHECK(copy["copy_of_workspace"] == w["name"]);
        CHECK(copy["buffers"][1]["dims"] == nlohmann::json({"seq_q", "q_heads", "batch"}));
    }
    CHECK(p.stages()[1].name == "lse");
}

TEST_CASE("extern stage: a paged cache's stage takes the caches, the page table and the lengths by name") {
    Built b = compile("decode_paged");
    const nlohmann::json d = descriptor(b.pipeline);
    std::map<std::string, nlohmann::json> by_name;
    for (const nlohmann::json &x : d["buffers"]) by_name[x["name"].get<std::string>()] = x;
    CHECK(by_name["k_cache"]["dims"] == nlohmann::json({"128", "page_size", "kv_heads", "pages"}));
    CHECK(by_name["v_cache"]["dims"] == nlohmann::json({"128", "page_size", "kv_heads", "pages"}));
    CHECK(by_name["page_table"]["dims"] == nlohmann::json({"max_pages", "batch"}));
    CHECK(by_name["page_table"]["type_code"] == int(halide_type_int));
    CHECK(by_name["seq_lens"]["dims"] == nlohmann::json({"batch"}));
    CHECK(has(b.pipeline.cuda_source(), "const int *__restrict__ page_table"));
    // Every scalar is an extent of a buffer; the keys a sequence may hold come from the table's width.
    for (const nlohmann::json &n : d["scalars"]) CHECK(n != "seq_kv");
    CHECK(d["split_keys"] == "(* max_pages page_size)");
    // Every kernel set reads tiles of 32 keys (no 64-key tuning), so pages of 32 keys or more serve.
    REQUIRE(!d["sets"].empty());
    for (const nlohmann::json &set : d["sets"]) CHECK(set["tile_keys"] == 32);
    // Pages of 16 keys under 32-key tiles: refused before any device work, saying what to do.
    std::vector<Halide::ImageParam> &in = b.funcs.inputs;
    Buffer<float16_t> q(128, 1, 32, 2), cache(128, 16, 8, 4), out(128, 1, 32, 2);
    Buffer<int32_t> table(2, 2), lens(2);
    for (auto *t : {&q, &cache}) t->fill(float16_t(0.5f));
    table.fill(0);
    lens.fill(20);
    in[0].set(q);
    in[1].set(cache);
    in[2].set(cache);
    in[3].set(table);
    in[4].set(lens);
    CHECK(has(realize_error(b.pipeline, out), "the page size must be a multiple of 32"));
}
