#include "lower/SkipMaskedTiles.h"

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

// The mask map's condition, or undefined.
Expr mask_condition(const Block &body) {
    for (const Stmt &s : body) {
        if (s->role != Role::Mask) continue;
        if (const HI::Select *sel = s->value.as<HI::Select>()) return sel->condition;
    }
    return Expr();
}

Stmt rewrite_loop(const Stmt &loop, int rows, int block_n) {
    const Expr c = mask_condition(loop->body);
    if (!c.defined()) return loop;
    HI::Scope<HI::Interval> tile;
    tile.push("row", HI::Interval(0, rows - 1));
    tile.push("col", HI::Interval(0, block_n - 1));
    // Visible everywhere in the tile: no mask needed. Possibly visible somewhere: the tile runs.
    const Expr all = HI::simplify(HI::and_condition_over_domain(c, tile));
    const Expr any = HI::simplify(HI::or_condition_over_domain(c, tile));
    const HI::Interval range = HI::solve_for_outer_interval(any, loop->var);
    Expr begin = loop->begin, end = loop->end;
    if (range.has_lower_bound()) begin = Halide::max(begin, range.min);
    if (range.has_upper_bound()) end = Halide::min(end, range.max + 1);
    Block body;
    for (const Stmt &s : loop->body) {
        if (s->role == Role::Mask) {
            body.push_back(make_if(!all, {s}, "a tile that is not visible everywhere"));
        } else {
            body.push_back(s);
        }
    }
    return with(loop, [&](Node &n) {
        n.begin = HI::simplify(begin);
        n.end = HI::simplify(end);
        n.body = body;
    });
}

}  // namespace

Kernel skip_masked_tiles(const Kernel &k, int block_n) {
    Kernel out = k;
    bool changed = false;
    for (Stmt &s : out.body) {
        if (s->kind != NodeKind::CarriedLoop) continue;
        const Stmt r = rewrite_loop(s, k.rows(), block_n);
        changed = changed || r != s;
        s = r;
    }
    return changed ? out : k;
}

}  // namespace neptune::internal
