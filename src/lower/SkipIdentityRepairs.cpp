#include "lower/SkipIdentityRepairs.h"

#include <map>

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

bool is_exponential(const HI::Call *c) {
    return c && (c->name == "exp_f32" || c->name == "exp2_f32" || c->name == "fast_exp2" || c->name == "fast_exp2_f32") &&
           c->args.size() == 1;
}

// The exponentials in an expression.
std::vector<const HI::Call *> exponentials(const Expr &e) {
    class Find : public HI::IRGraphVisitor {
    public:
        std::vector<const HI::Call *> found;
        using HI::IRGraphVisitor::visit;
        void visit(const HI::Call *c) override {
            if (is_exponential(c)) found.push_back(c);
            HI::IRGraphVisitor::visit(c);
        }
    } find;
    e.accept(&find);
    return find.found;
}

// The one row vector `e` reads, or "" when it reads none or several.
std::string only_row_vector(const Kernel &k, const Expr &e) {
    std::set<std::string> writes, reads;
    Node probe;
    probe.kind = NodeKind::RowMap;
    probe.value = e;
    effects(probe, writes, reads);
    std::string found;
    for (const std::string &n : reads) {
        auto it = k.values.find(n);
        if (it == k.values.end() || it->second.layout != Layout::RowVector) continue;
        if (!found.empty()) return "";
        found = n;
    }
    return found;
}

struct Moved {
    std::string old_state, new_state;  // the factor is 1 on rows where these are equal
};

// Whether F's expression is a repair factor exp(g(u) - g(v)) (times a constant inside), 1 where u == v.
bool repair_factor(const Kernel &k, const Expr &f, Moved &m) {
    const std::vector<const HI::Call *> ex = exponentials(f);
    if (ex.size() != 1) return false;
    Expr arg = ex[0]->args[0];
    if (const auto *mul = arg.as<HI::Mul>()) {
        if (mul->b.as<HI::FloatImm>()) arg = mul->a;
        else if (mul->a.as<HI::FloatImm>()) arg = mul->b;
    }
    const auto *sub = arg.as<HI::Sub>();
    if (!sub) return false;
    const std::string u = only_row_vector(k, sub->a), v = only_row_vector(k, sub->b);
    if (u.empty() || v.empty() || u == v) return false;
    const Expr vu = HI::Variable::make(Halide::Float(32), v);
    if (!HI::equal(HI::substitute(u, vu, sub->a), sub->b)) return false;
    // Outside the exponential, f must be 1 where the exponential is (e.g. a cap: min(e, 3.4e38)).
    class One : public HI::IRMutator {
    public:
        explicit One(const HI::Call *c) : c_(c) {}
        using HI::IRMutator::visit;
        Expr visit(const HI::Call *c) override { return c == c_ ? HI::FloatImm::make(Halide::Float(32), 1.0) : HI::IRMutator::visit(c); }

    private:
        const HI::Call *c_;
    } one(ex[0]);
    if (!HI::is_const_one(HI::simplify(one.mutate(f)))) return false;
    m = {u, v};
    return true;
}

// X * F or F * X.
bool scales_by(const Node &map, const std::string &f) {
    const auto *mul = map.value.as<HI::Mul>();
    if (!mul) return false;
    auto is = [](const Expr &e, const std::string &n) {
        const auto *v = e.as<HI::Variable>();
        return v && v->name == n;
    };
    return (is(mul->a, map.dst) && is(mul->b, f)) || (is(mul->a, f) && is(mul->b, map.dst));
}

class Pass {
public:
    explicit Pass(const Kernel &k) : k_(k) { count_reads(k.body); }

    Block block(const Block &b, bool in_loop) {
        Block out;
        for (size_t i = 0; i < b.size(); i++) {
            const Stmt &s = b[i];
            Moved m;
            if (in_loop && i + 1 < b.size() && s->kind == NodeKind::RowMap && b[i + 1]->kind == NodeKind::TileMap &&
                k_.values.at(s->dst).layout == Layout::RowVector &&
                k_.values.at(b[i + 1]->dst).layout == Layout::MmaAccumulator && reads_.at(s->dst) == 1 &&
                scales_by(*b[i + 1], s->dst) && repair_factor(k_, s->value, m)) {
                const Expr moved = HI::Variable::make(Halide::Float(32), m.old_state) !=
                                   HI::Variable::make(Halide::Float(32), m.new_state);
                out.push_back(make_if_any_row(moved, {s, b[i + 1]}, "the repair is 1 where no row's " + m.old_state + " moved"));
                i++;
                continue;
            }
            if (s->kind == NodeKind::CarriedLoop || s->kind == NodeKind::IfThen) {
                const bool loop = in_loop || s->kind == NodeKind::CarriedLoop;
                out.push_back(with(s, [&](Node &n) { n.body = block(n.body, loop); }));
                continue;
            }
            out.push_back(s);
        }
        return out;
    }

private:
    const Kernel &k_;
    std::map<std::string, int> reads_;

    void count_reads(const Block &b) {
        for (const Stmt &s : b) {
            std::set<std::string> writes, reads;
            effects(*s, writes, reads);
            for (const std::string &r : reads) reads_[r]++;
            count_reads(s->body);
        }
    }
};

}  // namespace

Kernel skip_identity_repairs(const Kernel &k) {
    if (k.producer_warps) return k;
    Kernel out = k;
    out.body = Pass(k).block(k.body, false);
    return out;
}

}  // namespace neptune::internal
