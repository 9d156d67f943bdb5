// The pattern dispatch of the tile lowering (attention, row chains, and the reasons when neither
// matches), the roles the attention builder gives the statements later passes look up, and the
// row-chain builder's kernel shapes and refusals.
#include <doctest/doctest.h>

#include <string>

#include "lower/BuildRowChain.h"
#include "lower/LowerOperator.h"
#include "lower/Patterns.h"
#include "neptune/Directives.h"
#include "neptune/Error.h"
#include "neptune/algorithms/Schedules.h"
#include "tir/IR.h"

using namespace neptune;
using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;

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
    // Performer's groups read two inputs in a dot: neither pattern; one reason per pattern.
    const internal::PatternMatch m = match_operator("performer");
    CHECK(!m.matched);
    REQUIRE(m.reasons.size() == 2);
    CHECK(contains(m.reasons[0], "attention: "));
    CHECK(contains(m.reasons[1], "row chain: "));
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
    const internal::RowChainShape warp = internal::default_row_chain_shape(DType::F16, 1000);
    CHECK(warp.threads_per_row == 32);
    CHECK(warp.rows_per_block == 4);
    CHECK(warp.vector == 8);
    CHECK(warp.cols() >= 1000);
    CHECK(!warp.chunked);
    const internal::RowChainShape block = internal::default_row_chain_shape(DType::F16, 32768);
    CHECK(block.threads_per_row == 1024);
    CHECK(block.rows_per_block == 1);
    CHECK(block.cols() == 32768);
    CHECK(!block.chunked);
    const internal::RowChainShape f32 = internal::default_row_chain_shape(DType::F32, 4096);
    CHECK(f32.vector == 4);
    CHECK(f32.cols() >= 4096);
    CHECK(f32.cols() / f32.threads_per_row <= 32);
    CHECK(internal::default_row_chain_shape(DType::F16, 131072).chunked);
    CHECK(internal::default_row_chain_shape(DType::BF16, 0).chunked);  // any length

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

TEST_CASE("row chains: refusals name the Func and the construct") {
    Halide::ImageParam x(Halide::Float(16), 3, "x");
    Var c("c"), m("m"), b("b");
    // A reduction over a middle axis: rows indexed by two variables.
    {
        RDom rm(0, x.dim(1).extent(), "rm");
        Func mx("mid_max"), sm("mid_sum");
        mx(c, b) = Halide::Float(32).min();
        mx(c, b) = Halide::max(mx(c, b), Halide::cast<float>(x(c, rm, b)));
        sm(c, b) = 0.0f;
        sm(c, b) += Halide::exp(Halide::cast<float>(x(c, rm, b)) - mx(c, b));
        Func out("mid_lse");
        out(c, b) = mx(c, b) + Halide::log(sm(c, b));
        const FusedReduction g = fuse_reduction(sm, Halide::RVar(rm.x));
        const std::string why = internal::row_chain_mismatch(g.plan(), {out});
        INFO(why);
        CHECK(contains(why, "mid_max"));
        CHECK(contains(why, "middle axis"));
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
