// The matmul-fed pattern's lowering: pipeline_dots and multicast_loads against what their headers
// promise on linear + cross-entropy's sm_90a program, the verifier's rules for dots in flight across
// a mainloop's iterations, the emitted CUDA compiling with NVRTC, a chain a user writes over a product
// (a row's entropy of softmax(h * w^T)) through the interpreter against fp64, and the refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "Halide.h"
#include "codegen/CodeGenCuda.h"
#include "lower/Lower.h"
#include "lower/Patterns.h"
#include "neptune/CompileCuda.h"
#include "neptune/Directives.h"
#include "neptune/Error.h"
#include "suite/LowerOperator.h"
#include "tir/IR.h"
#include "tir/Interpreter.h"

using namespace neptune;
using namespace neptune::tir;

namespace neptune::internal {
const std::vector<std::pair<std::string, std::string>> &device_headers();
}

namespace {

internal::OperatorLowering lower_lce(int64_t tokens, int64_t vocab, int hidden, int multicast = 0) {
    OperatorSpec spec = *find_operator("linear_cross_entropy");
    spec.hidden = hidden;
    internal::LoweringChoices c;
    c.arch = GpuArch::Sm90a;
    c.multicast = multicast;
    return internal::lower_operator(instantiate(spec, tokens, vocab), c);
}

const Node *the_loop(const Kernel &k) {
    for (const Stmt &s : k.body)
        if (s->kind == NodeKind::CarriedLoop) return s.get();
    return nullptr;
}

bool contains(const std::string &text, const std::string &what) { return text.find(what) != std::string::npos; }

Halide::Expr f32(const Halide::Expr &e) { return Halide::cast<float>(e); }

}  // namespace

TEST_CASE("pipeline_dots: one wgmma in flight across the mainloop's iterations, buffers released a step late") {
    const Kernel k = lower_lce(300, 1000, 128).program.kernels.at(0);
    const Node *loop = the_loop(k);
    REQUIRE(loop);
    const Block &b = loop->body;
    size_t dot = b.size();
    for (size_t i = 0; i < b.size(); i++)
        if (b[i]->kind == NodeKind::TileDot) dot = i;
    REQUIRE(dot + 3 < b.size());
    CHECK(b[dot]->async);
    CHECK(b[dot]->restart.defined());  // a new column tile restarts the accumulator: no Fill touches it
    CHECK((b[dot + 1]->kind == NodeKind::DotWait && b[dot + 1]->pending == 1));
    REQUIRE(b[dot + 2]->kind == NodeKind::IfThen);
    for (const Stmt &r : b[dot + 2]->body) {
        CHECK(r->kind == NodeKind::Release);
        CHECK(contains(to_string(k), "ring step + -1"));
    }
    // The column tile's update waits for the dot before it reads x.
    const Stmt &update = b.back();
    REQUIRE(update->kind == NodeKind::IfThen);
    CHECK((update->body.at(0)->kind == NodeKind::DotWait && update->body.at(0)->pending == 0));
    // After the loop: the last dot retired, the last buffers released.
    size_t at = 0;
    while (k.body[at].get() != loop) at++;
    CHECK((k.body.at(at + 1)->kind == NodeKind::DotWait && k.body.at(at + 1)->pending == 0));
    CHECK(k.body.at(at + 2)->kind == NodeKind::IfThen);
}

TEST_CASE("verify: a mainloop's dot in flight is not read early, and is retired before the kernel ends") {
    const Kernel k = lower_lce(300, 1000, 128).program.kernels.at(0);
    tir::verify(k);
    const Node *loop = the_loop(k);
    REQUIRE(loop);
    // The tile update without its wait reads x while the dot writing it is in flight.
    Block body = loop->body;
    body.back() = with(body.back(), [](Node &n) { n.body.erase(n.body.begin()); });
    Kernel early = k;
    for (Stmt &s : early.body)
        if (s.get() == loop) s = with(s, [&](Node &n) { n.body = body; });
    CHECK_THROWS_WITH_AS(tir::verify(early), doctest::Contains("while the asynchronous dot writing it is in flight"),
                         InternalError);
    // Without the wait after the loop the last dot is never retired.
    Kernel unretired = k;
    for (size_t i = 0; i < unretired.body.size(); i++)
        if (unretired.body[i].get() == loop) unretired.body.erase(unretired.body.begin() + long(i) + 1);
    CHECK_THROWS_WITH_AS(tir::verify(unretired), doctest::Contains("is not retired before the kernel ends"),
                         InternalError);
}

TEST_CASE("multicast_loads: two row tiles per cluster share the vocabulary tile; the CUDA compiles") {
    const internal::OperatorLowering l = lower_lce(300, 1000, 128);
    const Kernel &k = l.program.kernels.at(0);
    REQUIRE(k.cluster_x.defined());
    CHECK(Halide::Internal::as_const_int(k.cluster_x) == 2);
    // 3 row tiles padded to 4: whole clusters.
    const Halide::Expr grid =
        Halide::Internal::simplify(Halide::Internal::substitute("rows", Halide::Expr(300), k.grid_x));
    CHECK(Halide::Internal::as_const_int(grid) == 4);
    const Node *loop = the_loop(k);
    REQUIRE(loop);
    int shared = 0, own = 0;
    for (const Stmt &s : loop->body)
        if (s->kind == NodeKind::TileLoad) (s->multicast == 2 ? shared : own)++;
    CHECK(shared == 1);  // weight's tile, the same in every row tile
    CHECK(own == 1);  // h's rows, the block's own
    for (const TensorMap &m : k.tensor_maps)
        CHECK(m.box_rows == (m.tensor == "weight" ? k.values.at("b_s").rows / 2 : k.values.at("a_s").rows));
    const std::string src = internal::emit_cuda(l.program);
    CHECK(contains(src, "nd::tma_load_tile_multicast<2>("));
    CHECK(contains(src, "nd::mbarrier_arrive_cluster<2>(b_s_empty"));
    CHECK(contains(src, "nd::cluster_sync();"));
    internal::NvrtcOptions no;
    no.cubin = true;
    no.headers = internal::device_headers();
    no.arch = "sm_90a";
    CHECK_NOTHROW(internal::nvrtc_compile(src, "linear_cross_entropy.cu", no));
    // Without multicast: no clusters.
    CHECK_FALSE(lower_lce(300, 1000, 128, 1).program.kernels.at(0).cluster_x.defined());
}

TEST_CASE("a user's chain over a product: the entropy of softmax(h * w^T) per row, against fp64") {
    const int rows = 37, cols = 333, depth = 64;
    Halide::ImageParam h(Halide::Float(16), 2, "ent_h"), w(Halide::Float(16), 2, "ent_w");
    Halide::Var c("c"), r("r");
    Halide::RDom rk(0, depth, "rk"), rc(0, w.dim(1).extent(), "rc");
    Halide::Func logits("ent_logits"), mx("ent_max"), sm("ent_sum"), t("ent_dot"), ent("ent_entropy");
    logits(c, r) = 0.0f;
    logits(c, r) += f32(h(rk, r)) * f32(w(rk, c));
    mx(r) = Halide::Float(32).min();
    mx(r) = Halide::max(mx(r), logits(rc, r));
    sm(r) = 0.0f;
    sm(r) += Halide::exp(logits(rc, r) - mx(r));
    t(r) = 0.0f;
    t(r) += Halide::exp(logits(rc, r) - mx(r)) * logits(rc, r);
    ent(r) = Halide::log(sm(r)) + mx(r) - t(r) / sm(r);
    const FusedReduction group = fuse_reduction(std::vector<Halide::Func>{sm, t}, Halide::RVar(rc.x));
    internal::LowerOptions opt;
    opt.warps = 4;
    opt.block_n = 64;
    const tir::Program p = internal::lower_to_tiles(group.plan(), {ent}, opt);
    HostTensor hs({"ent_h", DType::F16, {rows, depth}}), ws({"ent_w", DType::F16, {cols, depth}});
    for (size_t i = 0; i < hs.values.size(); i++) hs.values[i] = std::sin(0.37 * double(i));
    for (size_t i = 0; i < ws.values.size(); i++) ws.values[i] = std::cos(0.11 * double(i)) * 0.5;
    hs.round_to_dtype();
    ws.round_to_dtype();
    HostTensor out({"ent_entropy", DType::F32, {rows}});
    tir::LaunchArgs args;
    args.tensors = {{"ent_h", &hs}, {"ent_w", &ws}, {"ent_entropy", &out}};
    args.ints = {{"rows", rows}, {"cols", cols}, {"depth", depth}};
    tir::interpret(p, args);
    for (int i = 0; i < rows; i++) {
        std::vector<double> x(cols);
        double m = -INFINITY, s = 0, e = 0;
        for (int v = 0; v < cols; v++) {
            for (int k = 0; k < depth; k++)
                x[size_t(v)] += hs.values[size_t(i * depth + k)] * ws.values[size_t(v * depth + k)];
            m = std::max(m, x[size_t(v)]);
        }
        for (int v = 0; v < cols; v++) s += std::exp(x[size_t(v)] - m);
        for (int v = 0; v < cols; v++) e -= std::exp(x[size_t(v)] - m) / s * (x[size_t(v)] - m - std::log(s));
        INFO("row " << i);
        CHECK(out.values[size_t(i)] == doctest::Approx(e).epsilon(1e-4));
    }
}

namespace {

// A softmax's max and sum over the product of `a` and `b` (prefix names its Funcs): the lse per row,
// or with `per_element` the softmax itself, and the group fused over the columns.
struct ProductSoftmax {
    Halide::Func out;
    std::shared_ptr<FusedReduction> group;
};
ProductSoftmax product_softmax(const std::string &prefix, const Halide::ImageParam &a, const Halide::ImageParam &b,
                               bool per_element) {
    Halide::Var c("c"), r("r");
    Halide::RDom rk(0, 64, "rk"), rc(0, b.dim(1).extent(), "rc");
    Halide::Func x(prefix + "_x"), mx(prefix + "_max"), sm(prefix + "_sum"), out(prefix + "_out");
    x(c, r) = 0.0f;
    x(c, r) += f32(a(rk, r)) * f32(b(rk, c));
    mx(r) = Halide::Float(32).min();
    mx(r) = Halide::max(mx(r), x(rc, r));
    sm(r) = 0.0f;
    sm(r) += Halide::exp(x(rc, r) - mx(r));
    if (per_element)
        out(c, r) = Halide::exp(x(c, r) - mx(r)) / sm(r);
    else
        out(r) = mx(r) + Halide::log(sm(r));
    return {out, std::make_shared<FusedReduction>(fuse_reduction(std::vector<Halide::Func>{sm}, Halide::RVar(rc.x)))};
}

}  // namespace

TEST_CASE("matmul-fed chains: what the pattern refuses names the Func and the construct") {
    Halide::ImageParam h(Halide::Float(16), 2, "mc_h"), w(Halide::Float(16), 2, "mc_w"),
        wb(Halide::BFloat(16), 2, "mc_wb");
    // A softmax of the product writes every element of it: the product would be stored.
    const ProductSoftmax soft = product_softmax("mc_soft", h, w, true);
    CHECK_THROWS_WITH_AS(internal::lower_to_tiles(soft.group->plan(), {soft.out}, internal::LowerOptions()),
                         doctest::Contains("has a value per element of the product"), CompileError);
    // Operands of two types.
    const ProductSoftmax mixed = product_softmax("mc_mixed", h, wb, false);
    CHECK_THROWS_WITH_AS(internal::lower_to_tiles(mixed.group->plan(), {mixed.out}, internal::LowerOptions()),
                         doctest::Contains("which must both be f16 or both bf16"), CompileError);
}
