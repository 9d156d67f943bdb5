#include "lower/InterleaveChunks.h"

#include <algorithm>

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

Expr ivar(const std::string &n) { return HI::Variable::make(Halide::Int(32), n); }

// `s` with `var` replaced by `value` in every expression, bodies included.
Stmt substitute(const Stmt &s, const std::string &var, const Expr &value) {
    auto sub = [&](Expr &e) {
        if (e.defined()) e = HI::substitute(var, value, e);
    };
    return with(s, [&](Node &n) {
        for (Expr *e : {&n.base, &n.row_stride, &n.valid_rows, &n.valid_cols, &n.value, &n.plane, &n.row, &n.ring,
                        &n.begin, &n.end, &n.cond})
            sub(*e);
        for (Stmt &b : n.body) b = substitute(b, var, value);
    });
}

bool has_scalar(const Kernel &k, const std::string &name) {
    return std::any_of(k.scalars.begin(), k.scalars.end(), [&](const ScalarDef &d) { return d.name == name; });
}

}  // namespace

Kernel interleave_chunks(const Kernel &k, bool on) {
    const bool partial = has_scalar(k, "chunk") &&
                         std::find(k.int_params.begin(), k.int_params.end(), "chunks") != k.int_params.end();
    if (!on || !partial) return k;
    Kernel out = k;
    bool changed = false;
    for (Stmt &s : out.body) {
        if (s->kind != NodeKind::CarriedLoop || s->var != "j") continue;
        const Expr chunks = ivar("chunks");
        // The first tile of [begin, end) that is chunk modulo chunks (Halide's % is never negative).
        out.scalars.push_back({"j_first", HI::simplify(s->begin + (ivar("chunk") - s->begin) % chunks)});
        out.scalars.push_back(
            {"n_own", HI::simplify(Halide::max((s->end - ivar("j_first") + chunks - 1) / chunks, 0))});
        Block body;
        for (const Stmt &b : s->body) body.push_back(substitute(b, "j", ivar("j_first") + chunks * ivar("t")));
        s = with(s, [&](Node &n) {
            n.var = "t";
            n.begin = Expr(0);
            n.end = ivar("n_own");
            n.body = body;
        });
        changed = true;
    }
    return changed ? out : k;
}

}  // namespace neptune::internal
