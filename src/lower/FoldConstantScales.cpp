#include "lower/FoldConstantScales.h"

#include <cmath>

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

// A finite f32 constant, or null.
const HI::FloatImm *float_constant(const Expr &e) {
    const HI::FloatImm *c = e.as<HI::FloatImm>();
    return c && c->type == Halide::Float(32) && std::isfinite(c->value) ? c : nullptr;
}

class Fold : public HI::IRMutator {
public:
    using HI::IRMutator::visit;

    Expr visit(const HI::Div *op) override {
        const Expr a = mutate(op->a), b = mutate(op->b);
        const HI::FloatImm *c = float_constant(b);
        if (op->type == Halide::Float(32) && c && c->value != 0) return product(a, double(float(1.0 / c->value)));
        return HI::Div::make(a, b);
    }

    Expr visit(const HI::Mul *op) override {
        const Expr a = mutate(op->a), b = mutate(op->b);
        if (op->type == Halide::Float(32)) {
            const HI::FloatImm *cb = float_constant(b), *ca = float_constant(a);
            if (cb && a.as<HI::Mul>()) return product(a, cb->value);
            if (ca && b.as<HI::Mul>()) return product(b, ca->value);
        }
        return HI::Mul::make(a, b);
    }

private:
    // x * c, folding c into x's own constant factor when x is (y * c0).
    static Expr product(const Expr &x, double c) {
        if (const HI::Mul *m = x.as<HI::Mul>()) {
            const HI::FloatImm *c0 = float_constant(m->b);
            const double folded = c0 ? double(float(c0->value * c)) : 0;
            if (c0 && std::isfinite(folded) && folded != 0)
                return HI::Mul::make(m->a, HI::FloatImm::make(Halide::Float(32), folded));
        }
        return HI::Mul::make(x, HI::FloatImm::make(Halide::Float(32), double(float(c))));
    }
};

Block fold_block(const Block &in) {
    Block out;
    for (const Stmt &s : in) {
        if (s->kind == NodeKind::TileMap || s->kind == NodeKind::RowMap) {
            out.push_back(with(s, [](Node &n) { n.value = Fold().mutate(n.value); }));
        } else if (!s->body.empty()) {
            out.push_back(with(s, [](Node &n) { n.body = fold_block(n.body); }));
        } else {
            out.push_back(s);
        }
    }
    return out;
}

}  // namespace

Kernel fold_constant_scales(const Kernel &k) {
    Kernel out = k;
    out.body = fold_block(k.body);
    return out;
}

}  // namespace neptune::internal
