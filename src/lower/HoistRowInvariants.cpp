#include "lower/HoistRowInvariants.h"

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

constexpr double log2e = 1.4426950408889634;

Expr fast_exp2(const Expr &x) { return HI::Call::make(Halide::Float(32), "fast_exp2", {x}, HI::Call::PureExtern); }

// x * f, with a constant factor of x folded in: (s * c) * log2e is one multiply, s * (c log2e).
Expr times(const Expr &x, double f) {
    if (const HI::Mul *m = x.as<HI::Mul>()) {
        if (const HI::FloatImm *c = m->b.as<HI::FloatImm>()) return m->a * float(c->value * f);
        if (const HI::FloatImm *c = m->a.as<HI::FloatImm>()) return m->b * float(c->value * f);
    }
    return x * float(f);
}

class Hoister : public HI::IRMutator {
public:
    Hoister(const Kernel &k, const std::string &dst, Kernel &out, Block &pre)
        : k_(k), dst_(dst), out_(out), pre_(pre) {}
    using HI::IRMutator::visit;

    Expr mutate(const Expr &e) override {
        if (!varies(e) && worth_hoisting(e)) return hoist(e);
        return HI::IRMutator::mutate(e);
    }

    Expr visit(const HI::Call *op) override {
        if (op->name == "exp_f32" && op->args.size() == 1) {
            // exp(x - r) = exp2(x log2e - r log2e): one FFMA per element with r log2e hoisted.
            const Expr arg = op->args[0];
            if (const HI::Sub *sub = arg.as<HI::Sub>()) {
                if (varies(sub->a) && !varies(sub->b))
                    return fast_exp2(times(mutate(sub->a), log2e) - hoist(sub->b * float(log2e)));
            }
            return fast_exp2(times(mutate(arg), log2e));
        }
        return HI::IRMutator::visit(op);
    }

private:
    // Reads a tile element or the column: must stay per element.
    bool varies(const Expr &e) const {
        class Find : public HI::IRGraphVisitor {
        public:
            explicit Find(const Kernel &k) : k(k) {}
            const Kernel &k;
            bool v = false;
            using HI::IRGraphVisitor::visit;
            void visit(const HI::Variable *op) override {
                if (op->name == "col") v = true;
                auto it = k.values.find(op->name);
                if (it != k.values.end() && !is_row_vector(it->second)) v = true;
            }
        } f(k_);
        e.accept(&f);
        return f.v;
    }

    // Row vectors hold f32: only float sub-expressions that do some work move.
    static bool worth_hoisting(const Expr &e) {
        return e.type() == Halide::Float(32) &&
               !(e.as<HI::Variable>() || e.as<HI::FloatImm>() || e.as<HI::IntImm>() || e.as<HI::Cast>());
    }

    Expr hoist(const Expr &e) {
        if (!worth_hoisting(e)) return e;
        std::string name;
        do { name = dst_ + "_r" + std::to_string(count_++); } while (out_.values.count(name));
        out_.values[name] = {DType::F32, k_.rows(), 1, Scope::Register, Layout::RowVector};
        pre_.push_back(make_row_map(name, e, "row-invariant part of " + dst_));
        return HI::Variable::make(Halide::Float(32), name);
    }

    const Kernel &k_;
    std::string dst_;
    Kernel &out_;
    Block &pre_;
    int count_ = 0;
};

Block rewrite(const Block &in, const Kernel &k, Kernel &out, bool &changed) {
    Block b;
    for (const Stmt &s : in) {
        if (s->kind == NodeKind::CarriedLoop || s->kind == NodeKind::IfThen) {
            Block body = rewrite(s->body, k, out, changed);
            b.push_back(with(s, [&](Node &n) { n.body = body; }));
            continue;
        }
        if (s->kind != NodeKind::TileMap) {
            b.push_back(s);
            continue;
        }
        Block pre;
        Hoister h(k, s->dst, out, pre);
        const Expr v = h.mutate(s->value);
        if (v.same_as(s->value)) {
            b.push_back(s);
            continue;
        }
        changed = true;
        b.insert(b.end(), pre.begin(), pre.end());
        b.push_back(with(s, [&](Node &n) { n.value = v; }));
    }
    return b;
}

}  // namespace

Kernel hoist_row_invariants(const Kernel &k) {
    Kernel out = k;
    bool changed = false;
    out.body = rewrite(k.body, k, out, changed);
    return changed ? out : k;
}

}  // namespace neptune::internal
