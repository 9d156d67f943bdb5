#include "lower/PipelineDots.h"

#include <set>

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

bool touches(const Stmt &s, const std::string &value) {
    std::set<std::string> w, r;
    effects(*s, w, r, true);
    return w.count(value) || r.count(value);
}

// The release `s` at ring position `at` of its loop variable `var` (i - 1: the previous iteration's).
Stmt release_at(const Stmt &s, const std::string &var, const Expr &at) {
    return with_exprs(
        s, [&](const Expr &e) { return HI::simplify(HI::substitute(var, at, e)); }, false);
}

// The loops replacing `loop` (one loop and what follows it), or nothing when its body has another shape.
Block pipeline(const Stmt &loop) {
    const Block &body = loop->body;
    size_t at = body.size();
    for (size_t i = 0; i < body.size(); i++) {
        if (body[i]->kind != NodeKind::TileDot) continue;
        if (at != body.size()) return {};  // two dots: not a mainloop of one
        at = i;
    }
    if (at == body.size()) return {};
    const Stmt &dot = body[at];
    if (dot->mma != MmaKind::Wgmma || dot->async) return {};
    // The releases of its ring operands right after it.
    size_t after = at + 1;
    std::set<std::string> released;
    while (after < body.size() && body[after]->kind == NodeKind::Release && body[after]->ring.defined()) {
        released.insert(body[after]->src);
        after++;
    }
    if (released.empty() || !released.count(dot->b) || (dot->a != dot->b && !released.count(dot->a))) return {};
    const std::string &i = loop->var, &acc = dot->dst;
    Block steady(body.begin(), body.begin() + long(at));
    steady.push_back(with(dot, [](Node &n) { n.async = true; }));
    steady.push_back(make_dot_wait(1, {}));
    Block previous, last;
    for (size_t r = at + 1; r < after; r++) {
        previous.push_back(release_at(body[r], i, int_var(i) - 1));
        last.push_back(release_at(body[r], i, loop->end - 1));
    }
    steady.push_back(make_if(int_var(i) > loop->begin, previous, "the previous iteration's dot is retired"));
    for (size_t r = after; r < body.size(); r++) {
        const Stmt &s = body[r];
        if (!touches(s, acc)) {
            steady.push_back(s);
        } else if (s->kind == NodeKind::IfThen) {
            Block inner = {make_dot_wait(0, {acc})};
            inner.insert(inner.end(), s->body.begin(), s->body.end());
            steady.push_back(with(s, [&](Node &n) { n.body = inner; }));
        } else {
            steady.push_back(make_dot_wait(0, {acc}));
            steady.push_back(s);
        }
    }
    return {with(loop, [&](Node &n) { n.body = steady; }), make_dot_wait(0, {acc}),
            make_if(loop->end > loop->begin, last, "the last iteration's buffers")};
}

}  // namespace

Kernel pipeline_dots(const Kernel &k) { return k.producer_warps ? rewrite_top_loops(k, pipeline) : k; }

}  // namespace neptune::internal
