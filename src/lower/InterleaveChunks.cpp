#include "lower/InterleaveChunks.h"

#include <algorithm>

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

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
        const Expr chunks = int_var("chunks");
        // The first tile of [begin, end) that is chunk modulo chunks (Halide's % is never negative).
        out.scalars.push_back({"j_first", HI::simplify(s->begin + (int_var("chunk") - s->begin) % chunks)});
        out.scalars.push_back(
            {"n_own", HI::simplify(Halide::max((s->end - int_var("j_first") + chunks - 1) / chunks, 0))});
        const Expr tile = int_var("j_first") + chunks * int_var("t");
        Block body;
        for (const Stmt &b : s->body)
            body.push_back(with_exprs(b, [&](const Expr &e) { return HI::substitute("j", tile, e); }, true));
        s = with(s, [&](Node &n) {
            n.var = "t";
            n.begin = Expr(0);
            n.end = int_var("n_own");
            n.body = body;
        });
        changed = true;
    }
    return changed ? out : k;
}

}  // namespace neptune::internal
