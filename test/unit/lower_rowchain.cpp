// The pattern dispatch of the tile lowering (attention, row chains, and the reasons when neither
// matches), the roles the attention builder gives the statements later passes look up, and the
// row-chain builder's kernel shapes and refusals.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "UserChains.h"
#include "codegen/CodeGenCuda.h"
#include "lower/BuildRowChain.h"
#include "lower/Lower.h"
#include "suite/LowerOperator.h"
#include "lower/Patterns.h"
#include "neptune/Directives.h"
#include "neptune/Error.h"
#include "neptune/HostTensor.h"
#include "neptune/algorithms/Schedules.h"
#include "neptune/CompileCuda.h"
#include "tir/IR.h"
#include "tir/Interpreter.h"

using namespace neptune;
using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;

namespace neptune::internal {
const std::vector<std::pair<std::string, std::string>> &device_headers();
}

namespace {

internal::PatternMatch match_operator(const std::string &name) {
    const OperatorSpec spec = *find_operator(name);
    const algorithms::OperatorFuncs funcs = algorithms::build(spec);
    const auto groups = algorithms::fuse_operator(spec, funcs, algorithms::FusionChoice{});
    return internal::match_pattern(groups.at(0).plan(), funcs.outputs);
}

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("patterns: each operator of the suite matches its pattern, or says why none does") {
    for (const char *name : {"prefill_causal", "decode_gqa", "prefill_alibi"}) {
        const internal::PatternMatch m = match_operator(name);
        CHECK(m.matched);
        CHECK(m.kind == internal::PatternKind::Attention);
    }
    for (const char *name : {"softmax", "logsumexp", "cross_entropy", "layernorm", "rmsnorm"}) {
        INFO(name);
        const internal::PatternMatch m = match_operator(name);
        CHECK(m.matched);
        CHECK(m.kind == internal::PatternKind::RowChain);
    }
    const internal::PatternMatch lce = match_operator("linear_cross_entropy");
    CHECK(lce.matched);
    CHECK(lce.kind == internal::PatternKind::MatmulChain);
    // Performer's groups read two inputs in a dot: no pattern; one reason per pattern.
    const internal::PatternMatch m = match_operator("performer");
    CHECK(!m.matched);
    REQUIRE(m.reasons.size() == 3);
    CHECK(contains(m.reasons[0], "attention: "));
    CHECK(contains(m.reasons[1], "matmul-fed chain: "));
    CHECK(contains(m.reasons[2], "row chain: "));
    CHECK(contains(m.why(), "no pattern of the tile backend matches"));
}

TEST_CASE("roles: the attention program marks what later passes look up") {
    const OperatorSpec spec = *find_operator("prefill_causal");
    const internal::OperatorLowering l = internal::lower_operator(instantiate(spec, 1, 256));
    const tir::Kernel &k = l.program.kernels.at(0);
    const tir::Block *loop = nullptr;
    for (const tir::Stmt &s : k.body)
        if (s->kind == tir::NodeKind::CarriedLoop) loop = &s->body;
    REQUIRE(loop);
    const size_t dot = tir::find_role(*loop, tir::Role::ScoreDot), value = tir::find_role(*loop, tir::Role::ValueDot);
    REQUIRE(dot < loop->size());
    REQUIRE(value < loop->size());
    CHECK((*loop)[dot]->kind == tir::NodeKind::TileDot);
    CHECK((*loop)[dot]->transpose_b);
    CHECK((*loop)[value]->kind == tir::NodeKind::TileDot);
    CHECK(!(*loop)[value]->transpose_b);
    CHECK(tir::find_role(*loop, tir::Role::ValueLoad) < value);
    // The printer shows roles.
    CHECK(contains(tir::to_string(l.program), "[score dot]"));
    CHECK(contains(tir::to_string(l.program), "[value dot]"));
}

TEST_CASE("row chains: kernel shapes by row length") {
    const internal::RowChainShape warp = internal::default_row_chain_shape(GpuArch::Sm80, DType::F16, 1000);
    CHECK(warp.threads_per_row == 32);
    CHECK(warp.rows_per_block == 4);
    CHECK(warp.vector == 8);
    CHECK(warp.cols() >= 1000);
    CHECK(!warp.chunked);
    const internal::RowChainShape block = internal::default_row_chain_shape(GpuArch::Sm80, DType::F16, 32768);
    CHECK(block.threads_per_row == 512);  // 64 16-bit columns per thread, kept packed
    CHECK(block.rows_per_block == 1);
    CHECK(block.cols() == 32768);
    CHECK(internal::default_row_chain_shape(GpuArch::Sm80, DType::F16, 16384).threads_per_row == 512);  // 32 per thread
    CHECK(!block.chunked);
    const internal::RowChainShape f32 = internal::default_row_chain_shape(GpuArch::Sm80, DType::F32, 4096);
    CHECK(f32.vector == 4);
    CHECK(f32.cols() >= 4096);
    CHECK(f32.cols() / f32.threads_per_row <= 32);
    CHECK(internal::default_row_chain_shape(GpuArch::Sm80, DType::F16, 131072).chunked);
    // On sm_90a rows up to eight blocks long are a cluster of blocks, x still read once.
    const internal::RowChainShape cluster = internal::default_row_chain_shape(GpuArch::Sm90a, DType::F16, 131072);
    CHECK(!cluster.chunked);
    CHECK(cluster.cluster == 4);
    CHECK(cluster.cluster * cluster.cols() == 131072);
    CHECK(internal::default_row_chain_shape(GpuArch::Sm90a, DType::F16, 100000).cluster == 4);
    CHECK(internal::default_row_chain_shape(GpuArch::Sm90a, DType::F32, 65536).cluster == 4);
    CHECK(internal::default_row_chain_shape(GpuArch::Sm90a, DType::F16, 32768).cluster == 1);
    CHECK(internal::default_row_chain_shape(GpuArch::Sm90a, DType::F16, 8 * 32768 + 1).chunked);
    // A chain whose chunked form reads x once (outputs per row, stages online) streams instead.
    CHECK(internal::default_row_chain_shape(GpuArch::Sm90a, DType::F16, 131072, internal::RowChainForm{true, false})
              .chunked);
    CHECK(internal::row_chain_shape(DType::F16, 131072, 256, 8).cols() == 16384);
    CHECK(!internal::row_chain_shape(DType::F16, 131072, 256, 8).chunked);
    CHECK(internal::default_row_chain_shape(GpuArch::Sm80, DType::BF16, 0).chunked);  // any length
    // Forced threads per row (LoweringChoices::row_threads): 8 warps at 32768 f16 columns would hold 128 per
    // thread, more than 64: the chunked form; 32 warps hold the row on chip.
    CHECK(internal::row_chain_shape(DType::F16, 32768, 256).chunked);
    CHECK(!internal::row_chain_shape(DType::F16, 32768, 1024).chunked);
    CHECK(internal::row_chain_shape(DType::F16, 32768, 1024).cols() == 32768);
    CHECK(internal::row_chain_shape(DType::F16, 1000, 32).rows_per_block == 4);
    CHECK_THROWS_AS(internal::lower_operator(instantiate(*find_operator("softmax"), 4, 4096),
                                             [] {
                                                 internal::LoweringChoices c;
                                                 c.row_threads = 96;
                                                 return c;
                                             }()),
                    CompileError);

    // Softmax at 4096 columns: x read once, y written once, the row statistics from registers.
    const internal::OperatorLowering l = internal::lower_operator(instantiate(*find_operator("softmax"), 64, 4096));
    const tir::Kernel &k = l.program.kernels.at(0);
    int loads = 0, stores = 0, loops = 0;
    for (const tir::Stmt &s : k.body) {
        loads += s->kind == tir::NodeKind::TileLoad;
        stores += s->kind == tir::NodeKind::TileStore;
        loops += s->kind == tir::NodeKind::CarriedLoop;
    }
    CHECK(loads == 1);
    CHECK(stores == 1);
    CHECK(loops == 0);
    CHECK(k.strip_threads == 128);  // 32 columns per thread
    CHECK(l.ints.at("rows") == 64);
    CHECK(l.ints.at("cols") == 4096);
}

TEST_CASE("row chains: an x past 2^31 - 1 elements is refused by name, one below it lowers") {
    // 32768 x 65536 = 2^31: the last rows' offsets would wrap in 32 bits.
    CHECK_THROWS_WITH_AS(internal::lower_operator(instantiate(*find_operator("softmax"), 32768, 65536)),
                         doctest::Contains("softmax: x has 2147483648 elements; Neptune's row kernels address at most "
                                           "2^31 - 1"),
                         CompileError);
    CHECK_NOTHROW(internal::lower_operator(instantiate(*find_operator("rmsnorm"), 32767, 65536)));
}

TEST_CASE("row chains: refusals name the Func and the construct") {
    Halide::ImageParam x(Halide::Float(16), 3, "x");
    Var c("c"), m("m"), b("b");
    // A stage reading x at the next row: not a row chain.
    {
        Halide::ImageParam x2(Halide::Float(16), 2, "x2");
        Var r("r");
        RDom rc(0, x2.dim(0).extent(), "rc");
        Func mx("next_max"), sm("next_sum");
        mx(r) = Halide::Float(32).min();
        mx(r) = Halide::max(mx(r), Halide::cast<float>(x2(rc, r)));
        sm(r) = 0.0f;
        sm(r) += Halide::exp(Halide::cast<float>(x2(rc, r + 1)) - mx(r));
        Func out("next_lse");
        out(r) = mx(r) + Halide::log(sm(r));
        const FusedReduction g = fuse_reduction(sm, Halide::RVar(rc.x));
        const std::string why = internal::row_chain_mismatch(g.plan(), {out});
        INFO(why);
        CHECK(contains(why, "next_sum"));
        CHECK(contains(why, "row other than its own"));
        CHECK_THROWS_AS(internal::build_pattern(g.plan(), {out}, internal::LowerOptions()), CompileError);
    }
    // Two 2-D inputs multiplied along the row: a dot product, not a row chain.
    {
        Halide::ImageParam a(Halide::Float(16), 2, "a"), w(Halide::Float(16), 2, "w");
        Var r("r");
        RDom rc(0, a.dim(0).extent(), "rc");
        Func mx("dot_max"), sm("dot_sum");
        mx(r) = Halide::Float(32).min();
        mx(r) = Halide::max(mx(r), Halide::cast<float>(a(rc, r)) * Halide::cast<float>(w(rc, r)));
        sm(r) = 0.0f;
        sm(r) += Halide::exp(Halide::cast<float>(a(rc, r)) * Halide::cast<float>(w(rc, r)) - mx(r));
        Func out("dot_lse");
        out(r) = mx(r) + Halide::log(sm(r));
        const FusedReduction g = fuse_reduction(sm, Halide::RVar(rc.x));
        const std::string why = internal::row_chain_mismatch(g.plan(), {out});
        INFO(why);
        CHECK(contains(why, "second 2-D input"));
    }
}

namespace {

// The program verifies, and NVRTC compiles its CUDA for the program's architecture.
void check_compiles(const tir::Program &p) {
    tir::verify(p);
    const std::string src = internal::emit_cuda(p);
    internal::NvrtcOptions no;
    no.cubin = true;
    no.headers = internal::device_headers();
    no.arch = arch_name(p.arch);
    INFO(tir::to_string(p) << "\n" << src);
    CHECK_NOTHROW(internal::nvrtc_compile(src, "row_chain.cu", no));
}

}  // namespace

TEST_CASE("row chains: the emitted CUDA of every row operator compiles with NVRTC for sm_80 and sm_90a") {
    // A warp per row, a block per row, clusters, split rows, the chunked form; odd lengths; f16 and bf16.
    const std::vector<std::pair<int64_t, DType>> shapes = {
        {7, DType::F16},      {1000, DType::F16},  {8191, DType::BF16}, {32768, DType::F16},
        {131072, DType::F16}, {300000, DType::F16}};  // 3 rows past 16384 (log-sum-exp) or 262144 columns split on sm_90a
    for (const char *name : {"softmax", "logsumexp", "cross_entropy", "layernorm", "rmsnorm"})
        for (const auto &[cols, dtype] : shapes)
            for (const GpuArch arch : {GpuArch::Sm80, GpuArch::Sm90a}) {
                OperatorSpec spec = *find_operator(name);
                spec.dtype = dtype;
                internal::LoweringChoices c;
                c.arch = arch;
                INFO(name << " " << cols << " " << dtype_name(dtype) << " " << arch_name(arch));
                check_compiles(internal::lower_operator(instantiate(spec, 3, cols), c).program);
            }
}

TEST_CASE("row chains: column-indexed tensors are read a vector at a time, in a cluster's block from its offset") {
    // LayerNorm's gamma and beta: gamma(col) in a block per row, gamma(rank * 32768 + col) in a block
    // of a cluster (the element loads were 8 times the instructions of the vector ones).
    for (const auto &[cols, offset] : {std::pair<int64_t, bool>{8192, false}, {131072, true}}) {
        internal::LoweringChoices c;
        c.arch = GpuArch::Sm90a;
        const tir::Program p = internal::lower_operator(instantiate(*find_operator("layernorm"), 3, cols), c).program;
        const std::string src = internal::emit_cuda(p);
        INFO(cols << " columns:\n" << src);
        CHECK(p.kernels.at(0).cluster_x.defined() == offset);
        for (const std::string t : {"gamma", "beta"}) {
            const std::string from = offset ? "(" + t + " + " : t + " + nd::strip_col";
            CHECK(contains(src, "nd::load_cols<V_>(cv_" + t + ", " + from));
            CHECK(contains(src, "nd::aligned16(" + std::string(offset ? "(" : "") + t));
        }
        check_compiles(p);
    }
}

TEST_CASE("row chains: a row over a cluster combines every stage's state in one exchange") {
    // Softmax's max and sum, RMSNorm's sum of squares: each block reduces its columns with its own
    // producers, then one cluster synchronisation publishes all the states (and one more keeps each
    // block's shared memory until the cluster is done); the sum is repaired from each rank's max.
    for (const std::string op : {"softmax", "rmsnorm", "logsumexp"}) {
        internal::LoweringChoices c;
        c.arch = GpuArch::Sm90a;
        const int64_t rows = op == "logsumexp" ? 8 : 3;  // log-sum-exp's few long rows split
        const tir::Program p = internal::lower_operator(instantiate(*find_operator(op), rows, 131072), c).program;
        const std::string src = internal::emit_cuda(p);
        INFO(op << ":\n" << src);
        REQUIRE(p.kernels.at(0).cluster_x.defined());
        size_t syncs = 0;
        for (size_t at = src.find("nd::cluster_sync()"); at != std::string::npos;
             at = src.find("nd::cluster_sync()", at + 1))
            syncs++;
        CHECK(syncs == 2);
        if (op != "rmsnorm") CHECK(contains(src, "cluster_slot0_[2]"));
        check_compiles(p);
    }
}

TEST_CASE("row chains: users' chains over a middle axis and over rows of several dimensions compile with NVRTC") {
    const std::vector<testing::UserChain> chains = {
        testing::middle_softmax(37, 7, 3, DType::F16), testing::middle_softmax(40, 100, 2, DType::BF16),
        testing::middle_layernorm(37, 7, 3),           testing::softmax_4d(100, 3, 5, 2),
        testing::cross_entropy_3d(1000, 7, 3),         testing::row_entropy(1000, 9)};
    for (const testing::UserChain &c : chains)
        for (const int64_t cols : {int64_t(7), int64_t(1000), int64_t(0)})
            for (const GpuArch arch : {GpuArch::Sm80, GpuArch::Sm90a}) {
                internal::LowerOptions lo;
                lo.arch = arch;
                lo.dtype = c.inputs.at(0).desc.dtype;
                lo.row_cols = cols;
                const tir::Program p = internal::lower_to_tiles(c.group->plan(), c.outputs, lo);
                INFO(c.name << " " << cols << " " << arch_name(arch));
                CHECK(p.kernels.at(0).strip_lanes_along_rows == (c.name.find("middle") != std::string::npos));
                check_compiles(p);
            }
}

TEST_CASE("row chains: a user's chain over f32 rows of any length (the chunked form) with an ignore index") {
    // Cross-entropy with an ignore index, written by the user: label < 0 gives a loss of 0.
    Halide::ImageParam x(Halide::Float(32), 2, "logits"), labels(Halide::Int(32), 1, "target");
    Var r("r");
    RDom rc(0, x.dim(0).extent(), "rc");
    Func mx("mx"), sm("sm"), loss("nll");
    mx(r) = Halide::Float(32).min();
    mx(r) = Halide::max(mx(r), x(rc, r));
    sm(r) = 0.0f;
    sm(r) += Halide::exp(x(rc, r) - mx(r));
    const Expr label = labels(r);
    loss(r) = Halide::select(label < 0, 0.0f,
                             mx(r) + Halide::log(sm(r)) - x(Halide::clamp(label, 0, x.dim(0).extent() - 1), r));
    const FusedReduction g = fuse_reduction(sm, Halide::RVar(rc.x));
    internal::LowerOptions lo;
    lo.dtype = DType::F32;
    const tir::Program p = internal::lower_to_tiles(g.plan(), {loss}, lo);
    REQUIRE(p.kernels.size() == 1);
    CHECK(p.kernels[0].strip_vector == 4);  // 16 bytes of f32
    const std::string src = internal::emit_cuda(p);
    internal::NvrtcOptions no;
    no.cubin = true;
    no.headers = internal::device_headers();
    no.arch = "sm_80";
    INFO(tir::to_string(p) << "\n" << src);
    CHECK_NOTHROW(internal::nvrtc_compile(src, "nll.cu", no));

    // In the interpreter, against a direct computation: rows 0 and 2 ignored.
    const int64_t rows = 3, cols = 20000;
    HostTensor xs(TensorDesc{"logits", DType::F32, {rows, cols}}), ls(TensorDesc{"target", DType::I32, {rows}}),
        out(TensorDesc{"nll", DType::F32, {rows}});
    for (int64_t i = 0; i < rows * cols; i++) xs.values[size_t(i)] = double(float(std::sin(0.37 * double(i)) * 4));
    ls.values = {-1, 12345, -100};
    tir::LaunchArgs args;
    args.tensors = {{"logits", &xs}, {"target", &ls}, {"nll", &out}};
    args.ints = {{"rows", rows}, {"cols", cols}};
    tir::interpret(p, args);
    double m = -1e300, sum = 0;
    for (int64_t c = 0; c < cols; c++) m = std::max(m, xs.values[size_t(cols + c)]);
    for (int64_t c = 0; c < cols; c++) sum += std::exp(xs.values[size_t(cols + c)] - m);
    CHECK(out.values[0] == 0);
    CHECK(out.values[2] == 0);
    CHECK(out.values[1] == doctest::Approx(m + std::log(sum) - xs.values[size_t(cols + 12345)]).epsilon(1e-5));
}
