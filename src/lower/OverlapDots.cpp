#include "lower/OverlapDots.h"

#include <set>

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

bool is_tma_load(const Stmt &s) {
    return s->kind == NodeKind::TileLoad && s->copy == CopyKind::Tma && s->ring.defined();
}

// The three statements load x; dot reading x; release x at `at`, or false.
bool load_dot_release(const Block &b, size_t at, const std::string &operand_b) {
    return at + 2 < b.size() && is_tma_load(b[at]) && b[at]->dst == operand_b && b[at + 1]->kind == NodeKind::TileDot &&
           b[at + 1]->mma == MmaKind::Wgmma && b[at + 1]->b == operand_b && b[at + 2]->kind == NodeKind::Release &&
           b[at + 2]->src == operand_b;
}

// A copy of the load / release with the loop variable one iteration back (C for tile j - 1).
Stmt previous_iteration(const Stmt &s, const std::string &var) {
    const Expr prev = int_var(var) - 1;
    return with_exprs(
        s, [&](const Expr &e) { return HI::simplify(HI::substitute(var, prev, e)); }, false);
}

Stmt async_dot(const Stmt &s) {
    return with(s, [](Node &n) { n.async = true; });
}

Stmt sync_dot(const Stmt &s) {
    return with(s, [](Node &n) { n.async = false; });
}

// The three loops replacing `loop`, or nothing when its body has another shape.
Block rotate(const Stmt &loop, bool turns) {
    const Block &body = loop->body;
    // A: the score dot on the loop's first tile, its operand K released right after.
    const size_t a = find_role(body, Role::ScoreDot);
    if (a != 1 || !load_dot_release(body, a - 1, body[a - 1]->dst) || !body[a]->transpose_b) return {};
    // C: the value dot, acc += p v with p in registers, between V's load and release.
    const size_t c = find_role(body, Role::ValueLoad), pv_at = find_role(body, Role::ValueDot);
    if (c == body.size() || c < a + 2 || pv_at != c + 1 || !load_dot_release(body, c, body[c]->dst)) return {};
    for (size_t i = pv_at + 1; i < body.size(); i++)
        if (body[i]->kind == NodeKind::TileDot) return {};  // the value dot must be the last
    const Stmt &pv = body[pv_at], &release_v = body[pv_at + 1];
    if (pv->transpose_b || !pv->accumulate) return {};
    const std::string acc = pv->dst, p = pv->a, s = body[a]->dst;
    // B2: what touches acc or p, and what depends on B2 either way (so B2 keeps its order and B1,
    // which moves ahead of it, shares no value with it).
    Block b1, b2;
    std::set<std::string> b2_reads, b2_writes;
    for (size_t i = a + 2; i < c; i++) {
        std::set<std::string> w, r;
        effects(*body[i], w, r, true);
        bool later = w.count(acc) || r.count(acc) || w.count(p);
        for (const std::string &x : r) later = later || b2_writes.count(x);
        for (const std::string &x : w) later = later || b2_writes.count(x) || b2_reads.count(x);
        if (!later) {
            b1.push_back(body[i]);
            continue;
        }
        b2.push_back(body[i]);
        b2_reads.insert(r.begin(), r.end());
        b2_writes.insert(w.begin(), w.end());
    }
    // D moves ahead of C's dot in the first loop: it must not read acc, nor write acc or p.
    const Block d(body.begin() + long(pv_at) + 2, body.end());
    for (const Stmt &x : d) {
        std::set<std::string> w, r;
        effects(*x, w, r, true);
        if (r.count(acc) || w.count(acc) || w.count(p)) return {};
    }

    const std::string &j = loop->var;
    const Expr begin = loop->begin, end = loop->end;
    Block first(body.begin(), body.begin() + long(c));
    first.insert(first.end(), d.begin(), d.end());
    Block steady = {body[a - 1],   async_dot(body[a]),    previous_iteration(body[c], j),
                    async_dot(pv), make_dot_wait(1, {s}), body[a + 1]};
    if (turns) {  // the warpgroup issues its two dots in its turn, then hands the tensor cores on
        steady.insert(steady.begin() + 1, make_turn(TurnMode::Take));
        steady.insert(steady.begin() + 5, make_turn(TurnMode::Pass));
    }
    steady.insert(steady.end(), b1.begin(), b1.end());
    steady.push_back(make_dot_wait(0, {acc, p}));
    steady.push_back(previous_iteration(release_v, j));
    steady.insert(steady.end(), b2.begin(), b2.end());
    steady.insert(steady.end(), d.begin(), d.end());
    const Block last = {body[c], sync_dot(pv), release_v};
    Block out = {make_loop(j, begin, HI::simplify(Halide::min(begin + 1, end)), loop->carried, first)};
    if (turns) out.push_back(make_turn(TurnMode::Begin));
    out.push_back(make_loop(j, HI::simplify(begin + 1), end, loop->carried, steady));
    if (turns) out.push_back(make_turn(TurnMode::End));
    out.push_back(make_loop(j, HI::simplify(Halide::max(begin, end - 1)), end, loop->carried, last));
    return out;
}

}  // namespace

Kernel overlap_dots(const Kernel &k, int level) {
    if (!k.producer_warps || level <= 0) return k;
    return rewrite_top_loops(k, [&](const Stmt &loop) { return rotate(loop, level >= 2 && k.warps >= 8); });
}

}  // namespace neptune::internal
