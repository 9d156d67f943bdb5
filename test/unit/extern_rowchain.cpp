// Row chains as extern stages of Halide pipelines, through the JIT entry point, on the CPU: the
// stage's buffers and scalars, the ladder of kernel shapes by row length (a module each just in
// time), several outputs of one group (the second a copy stage of the first), and the kernels' NaN
// for a label out of range; a reduction over a middle axis and rows over several dimensions, their
// extents passed by name. The GPU run is correctness/gpu_jit_rowchain.
#include <doctest/doctest.h>

#include <cstdlib>
#include <limits>

#include <nlohmann/json.hpp>

#include "UserChains.h"
#include "neptune/GpuPipeline.h"
#include "neptune/Directives.h"
#include "neptune/Error.h"
#include "neptune/algorithms/Schedules.h"
#include "neptune/runtime/NeptuneHalide.h"

using namespace neptune;
using nlohmann::json;

namespace {

algorithms::OperatorFuncs fused(const std::string &op) {
    const OperatorSpec spec = *find_operator(op);
    algorithms::OperatorFuncs f = algorithms::build(spec);
    algorithms::fuse_operator(spec, f, algorithms::FusionChoice());
    return f;
}

ExternOptions jit(const std::string &arch) {
    ExternOptions o;
    o.jit_arch = arch;
    return o;
}

json descriptor(const ExternStageInfo &s) { return json::parse(s.descriptor); }

/** The row lengths each set of the descriptor serves up to, in order (0: any; -1: the split form for
 * few long rows). */
std::vector<int64_t> ladder(const json &d) {
    std::vector<int64_t> l;
    for (const json &s : d["sets"]) {
        const std::string w = s["when"];
        l.push_back(w.empty()                ? 0
                    : w.rfind("(&&", 0) == 0 ? -1
                                             : std::stoll(w.substr(std::string("(<= cols ").size())));
    }
    return l;
}

bool has(const std::string &text, const std::string &what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE(
    "extern stage: softmax is one stage over x and y, with a ladder of kernels by row length, each compiled on first "
    "use") {
    algorithms::OperatorFuncs f = fused("softmax");
    GpuPipeline p = compile_gpu(f.outputs, jit("sm_90a"));
    REQUIRE(p.stages().size() == 1);
    const ExternStageInfo &s = p.stages()[0];
    CHECK(s.name == "y");
    CHECK(s.extern_function == "neptune_halide_extern_2");
    const json d = descriptor(s);
    CHECK(d["scalars"] == json({"rows", "cols"}));
    REQUIRE(d["buffers"].size() == 2);
    CHECK(d["buffers"][0]["name"] == "x");
    CHECK(d["buffers"][0]["dims"] == json({"cols", "rows"}));
    CHECK(d["buffers"][1]["output"] == true);
    CHECK(d["buffers"][1]["dims"] == json({"cols", "rows"}));
    // Rows of up to 256, 512, ... columns of f16 each take their shape; past a warp's 1024 a block per
    // row; past 32768 a cluster of blocks (sm_90a; softmax re-reads its row otherwise); then the
    // chunked form for any length. First of all, few rows longer than a cluster's split (sm_90a).
    CHECK(ladder(d) ==
          std::vector<int64_t>{-1, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 0});
    CHECK(d["sets"][0]["when"] == "(&& (<= rows 64) (< 262144 cols))");
    CHECK(d["sets"][0]["kernels"][0]["name"] == "row_chain_split");
    CHECK(d["sets"][0]["kernels"][0]["cluster"] == "8");
    // Just in time every shape is a module of its own, compiled when a call first takes it (a
    // library holds them all in one image): each set carries its source and no image yet.
    const json &sets = d["sets"];
    for (size_t i = 0; i < sets.size(); i++) {
        CHECK(sets[i]["image"] == "");
        CHECK(sets[i]["image_of"] == -1);
        CHECK(sets[i]["source"] == s.sets[i].cuda);
        CHECK(s.sets[i].image.empty());
    }
    CHECK(has(sets[5]["source"].get<std::string>(), "row_chain_4096("));
    // compile_gpu installed the launcher's compiler for them: NVRTC's cubin of a set's source.
    const neptune_halide_kernel_compiler_fn compiler = neptune_halide_set_kernel_compiler(nullptr);
    neptune_halide_set_kernel_compiler(compiler);
    REQUIRE(bool(compiler));
    char *image = nullptr, *message = nullptr;
    size_t size = 0;
    CHECK(compiler(s.sets[5].cuda.c_str(), "sm_90a", "softmax_4096", &image, &size, &message) == 0);
    CHECK(message == nullptr);
    REQUIRE(image != nullptr);
    CHECK(std::string(image, 4) ==
          "\x7f"
          "ELF");
    CHECK(size > 100);
    std::free(image);
    CHECK(sets[10]["kernels"][0]["name"] == "row_chain_131072");
    CHECK(sets[10]["kernels"][0]["cluster"] == "4");
    CHECK(sets[12]["kernels"][0]["name"] == "row_chain_any");
    CHECK(has(s.sets[1].cuda, "row_chain_256("));
    CHECK(!has(s.sets[1].cuda, "row_chain_512("));
    CHECK(has(s.sets[2].cuda, "row_chain_512("));
    CHECK(has(p.cuda_source(), "row_chain_256("));
    CHECK(has(p.cuda_source(), "row_chain_any("));
    CHECK(has(p.ptx(), ".entry row_chain_4096"));
    CHECK(has(p.tile_program(), "kernel row_chain_8192"));
}

TEST_CASE("extern stage: log-sum-exp streams long rows (no clusters); sm_80 has none either") {
    const json lse = descriptor(compile_gpu(fused("logsumexp").outputs, jit("sm_90a")).stages().at(0));
    CHECK(ladder(lse) == std::vector<int64_t>{-1, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 0});
    CHECK(lse["sets"][0]["when"] == "(&& (<= rows 64) (< 16384 cols))");
    CHECK(lse["buffers"][1]["dims"] == json({"rows"}));
    const json soft80 = descriptor(compile_gpu(fused("softmax").outputs, jit("sm_80")).stages().at(0));
    CHECK(ladder(soft80) == std::vector<int64_t>{256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 0});
    CHECK(soft80["sets"][0]["arch"] == "sm_80");
}

TEST_CASE("extern stage: LayerNorm reads gamma and beta along the row, cross-entropy its labels per row") {
    const json ln = descriptor(compile_gpu(fused("layernorm").outputs, jit("sm_80")).stages().at(0));
    REQUIRE(ln["buffers"].size() == 4);
    CHECK(ln["buffers"][1]["dims"] == json({"cols"}));
    CHECK(ln["buffers"][2]["dims"] == json({"cols"}));
    const json ce = descriptor(compile_gpu(fused("cross_entropy").outputs, jit("sm_80")).stages().at(0));
    REQUIRE(ce["buffers"].size() == 3);
    CHECK(ce["buffers"][1]["name"] == "labels");
    CHECK(ce["buffers"][1]["type_code"] == 0);  // int32
    CHECK(ce["buffers"][1]["dims"] == json({"rows"}));
    CHECK(ce["buffers"][2]["dims"] == json({"rows"}));
}

TEST_CASE("extern stage: softmax with its log-sum-exp: one kernel writes both, the second output a copy stage") {
    // Named in either order, the stage's own buffer is the output of the highest rank.
    for (bool lse_first : {false, true}) {
        INFO("lse first: " << lse_first);
        const OperatorSpec spec = *find_operator("softmax");
        algorithms::OperatorFuncs f = algorithms::build(spec);
        Halide::Var r("r");
        Halide::Func lse("lse");
        lse(r) = f.stage("row_max")(r) + Halide::log(f.stage("row_sum")(r));
        algorithms::fuse_operator(spec, f, algorithms::FusionChoice());
        const std::vector<Halide::Func> outs =
            lse_first ? std::vector<Halide::Func>{lse, f.outputs[0]} : std::vector<Halide::Func>{f.outputs[0], lse};
        GpuPipeline p = compile_gpu(outs, jit("sm_80"));
        REQUIRE(p.stages().size() == 2);
        const json y = descriptor(p.stages()[0]), copy = descriptor(p.stages()[1]);
        CHECK(y["name"] == "y");
        REQUIRE(y["buffers"].size() == 2);
        for (const json &s : y["sets"]) {
            REQUIRE(s["workspaces"].size() == 1);
            CHECK(s["workspaces"][0]["name"] == "lse");
            CHECK(s["workspaces"][0]["elements"] == "rows");
            CHECK(s["workspaces"][0]["per_thread"] == true);
            CHECK(s["kernels"][0]["tensors"] == (lse_first ? json({"x", "lse", "y"}) : json({"x", "y", "lse"})));
        }
        CHECK(copy["name"] == "lse");
        CHECK(copy["sets"].empty());
        CHECK(copy["copy_of_group"] == y["id"]);
        CHECK(copy["copy_of_workspace"] == "lse");
        CHECK(copy["buffers"][0]["name"] == "y");
        CHECK(copy["buffers"][0]["output"] == false);
        CHECK(copy["buffers"][1]["dims"] == json({"rows"}));
    }
}

TEST_CASE("extern stage: an output named as a stage of the chain keeps its tensor apart from the stage's value") {
    // softmax's row maximum asked for through a Func of the stage's own name: the kernel holds the
    // running maximum and writes the tensor row_max. Under one name both would be declared in the
    // kernel and it would not compile (NVRTC runs here, without a GPU: the stage's sets are compiled
    // on first use, so through ptx(), which compiles every one).
    for (const char *arch : {"sm_80", "sm_90a"}) {
        INFO(arch);
        const OperatorSpec spec = *find_operator("softmax");
        algorithms::OperatorFuncs f = algorithms::build(spec);
        algorithms::fuse_operator(spec, f, algorithms::FusionChoice());
        Halide::Var r("r");
        Halide::Func m("row_max");
        m(r) = f.stage("row_max")(r);
        GpuPipeline p = compile_gpu({m, f.outputs[0]}, jit(arch));
        REQUIRE(p.stages().size() == 2);
        CHECK_NOTHROW(p.ptx());
        CHECK(has(p.cuda_source(), "row_max["));  // the tensor, written
        CHECK(has(p.tile_program(), "row_max2 = max(row_max2, row_max(x_t))"));  // the running state, renamed
    }
}

TEST_CASE("extern stage: cross-entropy's label check guards the loss in the kernel (NaN where it fails)") {
    const GpuPipeline ce = compile_gpu(fused("cross_entropy").outputs, jit("sm_80"));
    REQUIRE(ce.stages().size() == 1);
    CHECK(ce.stages()[0].name == "loss");  // log-sum-exp, inlined under the loss, is part of the group
    CHECK(has(ce.cuda_source(), "__int_as_float(0x7fffffff)"));
    CHECK(has(ce.tile_program(), "-100"));
}

TEST_CASE("extern stage: a middle axis and rows of several dimensions take every extent of x by name") {
    const testing::UserChain mid = testing::middle_softmax(37, 7, 3, DType::F16);
    GpuPipeline p = compile_gpu(mid.outputs, jit("sm_90a"));
    REQUIRE(p.stages().size() == 2);
    const json d = descriptor(p.stages()[0]);
    CHECK(d["scalars"] == json({"rows", "cols", "planes"}));
    CHECK(d["buffers"][0]["name"] == "ms_x");
    CHECK(d["buffers"][0]["dims"] == json({"rows", "cols", "planes"}));
    CHECK(d["buffers"][1]["dims"] == json({"rows", "cols", "planes"}));
    // Strided rows: up to 32 columns per thread and 32 threads per row, then 512-column chunks.
    CHECK(ladder(d) == std::vector<int64_t>{256, 512, 1024, 0});
    CHECK(d["sets"][0]["workspaces"][0]["elements"] == "(* rows planes)");
    CHECK(descriptor(p.stages()[1])["buffers"][1]["dims"] == json({"rows", "planes"}));
    CHECK(has(p.tile_program(), "column stride inner"));

    const json four = descriptor(compile_gpu(testing::softmax_4d(100, 3, 5, 2).outputs, jit("sm_80")).stages().at(0));
    CHECK(four["scalars"] == json({"rows", "cols", "rows2", "rows3"}));
    CHECK(four["buffers"][0]["dims"] == json({"cols", "rows", "rows2", "rows3"}));
    const json ce = descriptor(compile_gpu(testing::cross_entropy_3d(1000, 7, 3).outputs, jit("sm_80")).stages().at(0));
    CHECK(ce["buffers"][1]["name"] == "ce_labels");
    CHECK(ce["buffers"][1]["dims"] == json({"rows", "rows2"}));
}

TEST_CASE("extern stage: a chain over a matrix product is refused by name, with what to do instead") {
    const algorithms::OperatorFuncs f = fused("linear_cross_entropy");
    CHECK_THROWS_WITH_AS(compile_gpu(f.outputs, jit("sm_90a")), doctest::Contains("has no extern stage yet"),
                         CompileError);
}
