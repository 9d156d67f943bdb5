#include "lower/DealChunkTiles.h"

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

Kernel deal_chunk_tiles(const Kernel &k) {
    const bool partial =
        has_scalar(k, "chunk") && std::find(k.int_params.begin(), k.int_params.end(), "chunks") != k.int_params.end();
    if (!partial) return k;
    Kernel out = k;
    bool changed = false;
    for (Stmt &s : out.body) {
        if (s->kind != NodeKind::CarriedLoop || s->var != "j") continue;
        out.scalars.push_back({"j_end", HI::simplify(s->end)});
        const Expr chunks = int_var("chunks"), chunk = int_var("chunk"), begin = s->begin, end = int_var("j_end");
        // Fixed runs (chunk_tiles > 0) are never interleaved.
        const Expr fixed = int_var("chunk_tiles") > 0;
        const Expr interleaved = int_var("interleave") != 0 && !fixed;
        // Halide's % and / round towards minus infinity: the first tile is never below begin.
        const Expr run = Halide::select(fixed, int_var("chunk_tiles"), (end - begin + chunks - 1) / chunks);
        const Expr run_first = begin + chunk * run;
        out.scalars.push_back(
            {"j_first", HI::simplify(Halide::select(interleaved, begin + (chunk - begin) % chunks, run_first))});
        out.scalars.push_back({"j_step", Halide::select(interleaved, chunks, 1)});
        out.scalars.push_back(
            {"n_own",
             HI::simplify(Halide::max(Halide::select(interleaved, (end - int_var("j_first") + chunks - 1) / chunks,
                                                     Halide::min(run, end - int_var("j_first"))),
                                      0))});
        const Expr tile = int_var("j_first") + int_var("j_step") * int_var("t");
        Block body;
        for (const Stmt &b : s->body)
            body.push_back(with_exprs(
                b, [&](const Expr &e) { return HI::substitute("j", tile, e); }, true));
        s = with(s, [&](Node &n) {
            n.var = "t";
            n.begin = Expr(0);
            n.end = int_var("n_own");
            n.body = body;
        });
        changed = true;
    }
    if (changed) out.int_params.insert(out.int_params.end(), {"interleave", "chunk_tiles"});
    return changed ? out : k;
}

}  // namespace neptune::internal
