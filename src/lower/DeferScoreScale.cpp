#include "lower/DeferScoreScale.h"

#include <limits>

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

// The positive constant c of `s * c` (or `c * s`), or 0.
float scale_of(const Expr &e, const std::string &s) {
    const HI::Mul *m = e.as<HI::Mul>();
    if (!m) return 0;
    for (int side = 0; side < 2; side++) {
        const HI::Variable *v = (side ? m->b : m->a).as<HI::Variable>();
        const HI::FloatImm *c = (side ? m->a : m->b).as<HI::FloatImm>();
        if (v && c && v->name == s && c->value > 0) return float(c->value);
    }
    return 0;
}

// select(cond, s, -inf) with cond not reading s: positive scaling commutes with it.
bool is_mask_of(const Expr &e, const std::string &s) {
    const HI::Select *sel = e.as<HI::Select>();
    if (!sel || HI::expr_uses_var(sel->condition, s)) return false;
    const HI::Variable *v = sel->true_value.as<HI::Variable>();
    const HI::FloatImm *f = sel->false_value.as<HI::FloatImm>();
    return v && v->name == s && f && std::isinf(f->value) && f->value < 0;
}

class Deferral {
public:
    Deferral(Kernel &k, const std::string &s, float c) : k_(k), s_(s), c_(c) {}

    // Rewrites `b` while s is raw; false if the raw tile reaches a reader that cannot take the scale.
    bool block(const Block &in, Block &out) {
        for (const Stmt &st : in) {
            if (!raw_) {
                out.push_back(st);
                continue;
            }
            if (!stmt(st, out)) return false;
        }
        return true;
    }

private:
    Expr scaled() const { return HI::Variable::make(Halide::Float(32), s_) * c_; }

    bool stmt(const Stmt &st, Block &out) {
        const Node &n = *st;
        switch (n.kind) {
        case NodeKind::TileMap:
            if (n.dst == s_ && is_mask_of(n.value, s_)) {
                out.push_back(st);  // the raw tile stays raw under the mask
                return true;
            }
            if (n.dst == s_) raw_ = false;  // from here on s holds this map's value
            out.push_back(with(st, [&](Node &m) { m.value = HI::substitute(s_, scaled(), m.value); }));
            return true;
        case NodeKind::TileReduce: {
            if (n.src != s_) break;
            // c * op(raw row) into the destination, through a row vector of the raw op.
            const std::string t = fresh(n.op == ReduceOp::Max ? "_max_raw" : "_sum_raw");
            k_.values[t] = {DType::F32, k_.rows(), 1, Scope::Register, Layout::RowVector};
            out.push_back(make_fill(t, n.op == ReduceOp::Max ? -std::numeric_limits<float>::infinity() : 0.0f));
            out.push_back(make_reduce(t, n.op, s_));
            const Expr d = HI::Variable::make(Halide::Float(32), n.dst),
                       r = HI::Variable::make(Halide::Float(32), t) * c_;
            out.push_back(
                make_row_map(n.dst, n.op == ReduceOp::Max ? Halide::max(d, r) : d + r, "the deferred score scale"));
            return true;
        }
        case NodeKind::IfThen: {
            Block body;
            if (!block(n.body, body)) return false;
            out.push_back(with(st, [&](Node &m) { m.body = body; }));
            return true;
        }
        case NodeKind::TileDot:
        case NodeKind::Convert:
        case NodeKind::TileStore:
            if (n.a == s_ || n.b == s_ || n.src == s_) return false;
            break;
        case NodeKind::CarriedLoop: return false;
        default: break;
        }
        out.push_back(st);
        return true;
    }

    std::string fresh(const std::string &suffix) const {
        std::string name = s_ + suffix;
        for (int i = 2; k_.values.count(name); i++) name = s_ + suffix + std::to_string(i);
        return name;
    }

    Kernel &k_;
    std::string s_;
    float c_;
    bool raw_ = true;
};

}  // namespace

Kernel defer_score_scale(const Kernel &k) {
    Kernel out = k;
    bool changed = false;
    for (Stmt &loop : out.body) {
        if (loop->kind != NodeKind::CarriedLoop) continue;
        const Block &body = loop->body;
        for (size_t i = 0; i < body.size(); i++) {
            const Node &n = *body[i];
            if (n.role != Role::ScoreModifier) continue;
            const float c = scale_of(n.value, n.dst);
            if (c == 0) break;
            Kernel trial = out;
            Deferral d(trial, n.dst, c);
            Block rest, tail(body.begin() + long(i) + 1, body.end());
            if (!d.block(tail, rest)) break;
            Block nb(body.begin(), body.begin() + long(i));
            nb.insert(nb.end(), rest.begin(), rest.end());
            out.values = trial.values;
            loop = with(loop, [&](Node &l) { l.body = nb; });
            changed = true;
            break;
        }
    }
    return changed ? out : k;
}

}  // namespace neptune::internal
