#include "frontend/DeriveRepair.h"

#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include "neptune/Error.h"

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace sym;

const char *reducer_name(Reducer r) {
    switch (r) {
    case Reducer::Sum: return "+";
    case Reducer::Max: return "max";
    case Reducer::Min: return "min";
    }
    return "?";
}

Expr reducer_identity(Reducer r) {
    switch (r) {
    case Reducer::Sum: return Expr(0.0f);
    case Reducer::Max: return Expr(-std::numeric_limits<float>::infinity());
    case Reducer::Min: return Expr(std::numeric_limits<float>::infinity());
    }
    return Expr();
}

Expr reducer_combine(Reducer r, const Expr &a, const Expr &b) {
    switch (r) {
    case Reducer::Sum: return a + b;
    case Reducer::Max: return Halide::max(a, b);
    case Reducer::Min: return Halide::min(a, b);
    }
    return Expr();
}

Expr guarded_producer(Reducer r, const Expr &v) {
    if (r == Reducer::Sum) return v;
    return Halide::select(v == reducer_identity(r), 0.0f, v);
}

const char *repair_kind_name(RepairKind k) {
    switch (k) {
    case RepairKind::None: return "none";
    case RepairKind::Rescale: return "rescale";
    case RepairKind::Shift: return "shift";
    case RepairKind::Taylor: return "rescale with companions";
    }
    return "?";
}

namespace {

constexpr int max_taylor_degree = 4;

std::string str(const Expr &e) { return pretty(e); }

bool is_identity(const Expr &e, Reducer r) {
    const HI::FloatImm *f = e.as<HI::FloatImm>();
    if (!f) {
        if (const HI::Cast *c = e.as<HI::Cast>()) return is_identity(c->value, r);
        if (const HI::IntImm *i = e.as<HI::IntImm>()) return r == Reducer::Sum && i->value == 0;
        return false;
    }
    switch (r) {
    case Reducer::Sum: return f->value == 0;
    case Reducer::Max: return std::isinf(f->value) && f->value < 0;
    case Reducer::Min: return std::isinf(f->value) && f->value > 0;
    }
    return false;
}

bool reads_producer(const Expr &e, const std::vector<std::string> &producers) {
    for (const std::string &p : producers)
        if (HI::expr_uses_var(e, p)) return true;
    return false;
}

// One leaf of the select tree: the repair as Polys over the context's atoms.
struct LeafRepair {
    RepairKind kind = RepairKind::None;
    std::vector<std::string> names;
    std::vector<Poly> maps;
    std::vector<std::vector<Poly>> coeff;
    std::vector<Poly> shift;
    std::string proof;
    std::string signature(const Context &ctx) const {
        std::string s = repair_kind_name(kind);
        s += "|" + std::to_string(maps.size());
        for (const auto &row : coeff)
            for (const Poly &c : row) s += "|" + key(ctx, c);
        for (const Poly &c : shift) s += "|" + key(ctx, c);
        return s;
    }
};

class Deriver {
public:
    Deriver(const std::string &target, Reducer reducer, const std::vector<std::string> &producers,
            const std::string &rvar, const std::map<std::string, Sign> &facts,
            const std::map<std::string, Reducer> &producer_reducers)
        : target_(target),
          reducer_(reducer),
          producers_(producers),
          ctx_(symbols(producers), rvar),
          facts_(facts),
          producer_reducers_(producer_reducers) {
        for (const std::string &p : producers) {
            prime_[p] = Context::primed(p);
            auto it = facts.find(p);
            if (it != facts.end()) facts_[Context::primed(p)] = it->second;
        }
    }

    Repair derive(const Expr &map) {
        std::vector<Expr> leaves;
        collect_leaves(map, leaves);
        const LeafRepair *first = nullptr;
        std::vector<LeafRepair> derived;
        derived.reserve(leaves.size());
        for (const Expr &leaf : leaves) {
            if (is_identity(leaf, reducer_)) continue;  // a masked branch contributes the identity
            derived.push_back(derive_leaf(leaf));
            if (!first) {
                first = &derived.back();
            } else if (derived.back().signature(ctx_) != first->signature(ctx_)) {
                fail("the branches of a select need different repairs (" + str(leaves.front()) + " and " + str(leaf) +
                     "); a select may only mask terms or choose between terms repaired alike");
            }
        }
        Repair r;
        if (!first) {  // every branch is the identity: nothing to carry
            r.names = {"t"};
            r.maps = {map};
            r.coeff = {{Expr(1.0f)}};
            r.shift = {Expr()};
            r.h = HI::Variable::make(Halide::Float(32), "t");
            r.proof = "the map is the reducer's identity everywhere";
            return r;
        }
        r.kind = first->kind;
        r.names = first->names;
        r.proof = first->proof;
        r.producers = producers_;
        const size_t n = first->maps.size();
        size_t leaf_index = 0;
        std::vector<const LeafRepair *> by_leaf;
        for (const Expr &leaf : leaves)
            by_leaf.push_back(is_identity(leaf, reducer_) ? nullptr : &derived[leaf_index++]);
        // Companion 0 keeps the map as written (its normal form is expanded, and evaluating
        // x*a - s*a instead of (x - s)*a would cancel); companions are evaluated from the normal form.
        r.maps.push_back(map);
        for (size_t k = 1; k < n; k++) {
            size_t i = 0;
            r.maps.push_back(rebuild(map, [&](const Expr &) {
                const LeafRepair *lr = by_leaf[i++];
                return lr ? to_expr(ctx_, lr->maps[k]) : reducer_identity(reducer_);
            }));
        }
        for (const auto &row : first->coeff) {
            std::vector<Expr> er;
            for (const Poly &c : row) er.push_back(c.is_zero() ? Expr() : to_expr(ctx_, c));
            r.coeff.push_back(er);
        }
        for (const Poly &s : first->shift) r.shift.push_back(s.is_zero() ? Expr() : to_expr(ctx_, s));
        Expr h = r.shift[0];
        for (size_t m = 0; m < n; m++) {
            if (!r.coeff[0][m].defined()) continue;
            const Expr old = HI::Variable::make(Halide::Float(32), m == 0 ? "t" : r.names[m]);
            const Expr term = HI::is_const_one(r.coeff[0][m]) ? old : old * r.coeff[0][m];
            h = h.defined() ? h + term : term;
        }
        r.h = h.defined() ? h : HI::Variable::make(Halide::Float(32), "t");
        return r;
    }

private:
    static std::set<std::string> symbols(const std::vector<std::string> &producers) {
        std::set<std::string> s;
        for (const std::string &p : producers) {
            s.insert(p);
            s.insert(Context::primed(p));
        }
        return s;
    }

    [[noreturn]] void fail(const std::string &why) const {
        throw CompileError("no repair for " + target_ + " (a " + reducer_name(reducer_) + " reduction reading " +
                           join(producers_) + "): " + why);
    }

    static std::string join(const std::vector<std::string> &v) {
        std::string s;
        for (const std::string &x : v) s += (s.empty() ? "" : ", ") + x;
        return s;
    }

    // Selects whose conditions do not read producers are masks: their leaves are derived separately.
    void collect_leaves(const Expr &e, std::vector<Expr> &out) const {
        if (const HI::Select *s = e.as<HI::Select>()) {
            if (!reads_producer(s->condition, producers_)) {
                collect_leaves(s->true_value, out);
                collect_leaves(s->false_value, out);
                return;
            }
        }
        out.push_back(e);
    }

    Expr rebuild(const Expr &e, const std::function<Expr(const Expr &)> &leaf) const {
        if (const HI::Select *s = e.as<HI::Select>()) {
            if (!reads_producer(s->condition, producers_)) {
                Expr t = rebuild(s->true_value, leaf);
                Expr f = rebuild(s->false_value, leaf);
                return Halide::select(s->condition, t, f);
            }
        }
        return leaf(e);
    }

    Poly primed(const Poly &p) { return rename_producers(ctx_, p, prime_); }

    Sign sign(const Poly &p) { return sign_of(to_expr(ctx_, p), facts_); }

    LeafRepair derive_leaf(const Expr &leaf) {
        const Poly g = from_expr(ctx_, leaf);
        std::vector<Split> parts;
        bool any_producer = false;
        for (const Monomial &m : g.terms) {
            Monomial single = m;
            Split s = split_monomial(ctx_, single);
            if (!s.blocking.empty())
                fail("the term " + s.blocking +
                     " mixes a producer with values that vary along the reduction; "
                     "only a product or a sum of a producer-only part and a producer-free part can be repaired. "
                     "Move the producer out of that term, or leave this reduction out of the chain");
            any_producer = any_producer || !(s.producer.terms.size() == 1 && s.producer.terms[0].powers.empty() &&
                                             !s.producer.terms[0].exp_arg);
            parts.push_back(std::move(s));
        }
        LeafRepair lr;
        if (!any_producer) {
            lr.kind = RepairKind::None;
            lr.names = {"t"};
            lr.maps = {g};
            lr.coeff = {{constant(1)}};
            lr.shift = {Poly()};
            lr.proof = "g reads no producer: h(t) = t";
            return lr;
        }
        // Common producer factor S: the shared producer exponential and the lowest power of each producer atom.
        bool same_exp = true;
        const std::shared_ptr<const Poly> exp0 = parts[0].producer.terms[0].exp_arg;
        std::map<int, int> low;
        std::set<int> seen;
        for (const Split &s : parts) {
            const Monomial &pm = s.producer.terms[0];
            const bool has = bool(pm.exp_arg);
            if (has != bool(exp0) || (has && !equal(ctx_, *pm.exp_arg, *exp0))) same_exp = false;
            for (auto [id, pw] : pm.powers) seen.insert(id);
        }
        for (int id : seen) {
            int lo = std::numeric_limits<int>::max();
            for (const Split &s : parts) {
                auto it = s.producer.terms[0].powers.find(id);
                lo = std::min(lo, it == s.producer.terms[0].powers.end() ? 0 : it->second);
            }
            if (lo != 0) low[id] = lo;
        }
        if (same_exp) {
            Monomial sm;
            sm.powers = low;
            sm.exp_arg = exp0;
            Poly S;
            S.terms = {sm};
            S = mul(S, constant(1));  // canonical
            Poly inv;
            invert_monomial(S, inv);
            Poly rest;  // g / S: polynomial in producer atoms (non-negative powers) times producer-free factors
            bool polynomial = true, constant_in_producers = true;
            for (const Split &s : parts) {
                Poly pi = mul(s.producer, inv);
                for (auto [id, pw] : pi.terms[0].powers) {
                    constant_in_producers = false;
                    if (pw < 0) polynomial = false;
                    (void)id;
                }
                if (pi.terms[0].exp_arg) polynomial = constant_in_producers = false;
                rest = add(rest, mul(pi, s.rest));
            }
            check_exponent_stability(S);
            if (constant_in_producers) return rescale(g, S);
            if (reducer_ == Reducer::Sum && polynomial) return taylor(g, S, rest);
        }
        if (reducer_ != Reducer::Sum) return shift(g, parts);
        fail("g = " + to_string(g) +
             " is neither a producer factor times a producer-free term nor polynomial in the "
             "producers after such a factor; no repair from the partial target exists");
    }

    std::string to_string(const Poly &p) const { return str(to_expr(ctx_, p)); }

    void require_definite(const Poly &S, const char *why) {
        const Sign s = sign(S);
        if (!definite(s))
            fail("the factor " + to_string(S) + " that the repair divides by is not provably " +
                 (reducer_ == Reducer::Sum ? "non-zero" : "positive or negative") + " (" + why + "); " +
                 (reducer_ == Reducer::Sum ? "guard a divisor that can be 0, e.g. select(l == 0, 1, l)"
                                           : "write the term so its producer factor has a known sign, e.g. exp(...) "
                                             "or a guarded sum"));
    }

    LeafRepair rescale(const Poly &g, const Poly &S) {
        require_definite(S, reducer_ == Reducer::Sum ? "the repair recovers the term by division"
                                                     : "a max or min reduction needs a positive factor");
        Poly inv;
        invert_monomial(S, inv);
        const Poly Q = mul(primed(S), inv);
        // R1 by rewriting: g(r', c) == Q * g(r, c) in normal form.
        if (!equal(ctx_, primed(g), mul(Q, g)))
            throw InternalError("rescale repair of " + target_ + " failed its R1 check");
        LeafRepair lr;
        lr.kind = RepairKind::Rescale;
        lr.names = {"t"};
        lr.maps = {g};
        lr.coeff = {{Q}};
        lr.shift = {Poly()};
        lr.proof = "R1: g(r', c) and h(g(r, c)) have the same normal form; R2: h(t) = t * " + to_string(Q) +
                   (reducer_ == Reducer::Sum ? " is linear in t"
                                             : " with a factor of definite sign ratio, so positive: h is monotone");
        return lr;
    }

    LeafRepair shift(const Poly &g, const std::vector<Split> &parts) {
        Poly P;
        for (size_t i = 0; i < g.terms.size(); i++) {
            const Monomial &r = parts[i].rest.terms[0];
            const Monomial &p = parts[i].producer.terms[0];
            const bool producer_free = p.powers.empty() && !p.exp_arg;
            const bool producer_only = r.powers.empty() && !r.exp_arg;
            if (!producer_free && !producer_only) {
                Poly term;
                term.terms = {g.terms[i]};
                fail("for a " + std::string(reducer_name(reducer_)) +
                     " reduction, g must be a positive producer "
                     "factor times a producer-free term, or a producer-only term plus a producer-free term; the term " +
                     to_string(term) + " is neither");
            }
            if (!producer_free) {
                Poly term;
                term.terms = {g.terms[i]};
                P = add(P, term);
            }
        }
        const Poly D = sub(primed(P), P);
        if (!equal(ctx_, primed(g), add(g, D))) throw InternalError("shift repair of " + target_ + " failed R1");
        LeafRepair lr;
        lr.kind = RepairKind::Shift;
        lr.names = {"t"};
        lr.maps = {g};
        lr.coeff = {{constant(1)}};
        lr.shift = {D};
        lr.proof = "R1: g(r', c) = g(r, c) + (" + to_string(D) +
                   ") by rewriting; R2: a shift is monotone, so it "
                   "distributes over " +
                   reducer_name(reducer_);
        return lr;
    }

    LeafRepair taylor(const Poly &g, const Poly &S, const Poly &p) {
        require_definite(S, "the companions are rescaled by its ratio");
        // Variables: producer atoms that p is polynomial in.
        std::vector<int> vars;
        int degree = 0;
        for (const Monomial &m : p.terms) {
            int d = 0;
            for (auto [id, pw] : m.powers)
                if (ctx_.atom_info(id).producer) {
                    if (std::find(vars.begin(), vars.end(), id) == vars.end()) vars.push_back(id);
                    d += pw;
                }
            degree = std::max(degree, d);
        }
        if (degree > max_taylor_degree)
            fail("g is a polynomial of degree " + std::to_string(degree) +
                 " in the producers; companions are "
                 "derived up to degree " +
                 std::to_string(max_taylor_degree));
        // Multi-indices a with |a| <= degree, and D_a = d^a p / a!.
        std::vector<std::vector<int>> alphas;
        std::function<void(size_t, std::vector<int> &, int)> gen = [&](size_t v, std::vector<int> &a, int left) {
            if (v == vars.size()) {
                alphas.push_back(a);
                return;
            }
            for (int k = 0; k <= left; k++) {
                a[v] = k;
                gen(v + 1, a, left - k);
            }
            a[v] = 0;
        };
        std::vector<int> a0(vars.size(), 0);
        gen(0, a0, degree);
        std::sort(alphas.begin(), alphas.end(), [](const std::vector<int> &x, const std::vector<int> &y) {
            int sx = 0, sy = 0;
            for (int v : x) sx += v;
            for (int v : y) sy += v;
            return sx != sy ? sx < sy : x > y;
        });
        std::vector<Poly> D;
        std::vector<std::vector<int>> kept;
        for (const auto &a : alphas) {
            Poly d = p;
            double fact = 1;
            for (size_t v = 0; v < vars.size(); v++)
                for (int k = 0; k < a[v]; k++) {
                    Poly next;
                    if (!differentiate(ctx_, d, vars[v], next)) throw InternalError("taylor: not polynomial");
                    d = next;
                    fact *= (k + 1);
                }
            if (d.is_zero()) continue;
            D.push_back(scale(d, 1.0 / fact));
            kept.push_back(a);
        }
        Poly inv;
        invert_monomial(S, inv);
        const Poly Q = mul(primed(S), inv);
        std::vector<Poly> delta;
        for (int v : vars) delta.push_back(sub(primed(atom_poly(v)), atom_poly(v)));
        LeafRepair lr;
        lr.kind = RepairKind::Taylor;
        const size_t n = kept.size();
        lr.coeff.assign(n, std::vector<Poly>(n));
        lr.shift.assign(n, Poly());
        for (size_t b = 0; b < n; b++) {
            std::string name = "t";
            if (b > 0) {
                // Name companions after their derivative: t[d row_max], t[d2 row_max], ...
                std::string nm = "t[d";
                for (size_t v = 0; v < vars.size(); v++)
                    if (kept[b][v])
                        nm += (kept[b][v] > 1 ? std::to_string(kept[b][v]) : "") + " " +
                              pretty(ctx_.atom_info(vars[v]).expr);
                name = nm + "]";
            }
            lr.names.push_back(name);
            lr.maps.push_back(mul(S, D[b]));
            for (size_t c = 0; c < n; c++) {
                // new_b += Q * binom(c, b) * delta^(c - b) * old_c   for multi-indices c >= b
                bool ge = true;
                double binom = 1;
                Poly dpow = constant(1);
                for (size_t v = 0; v < vars.size(); v++) {
                    const int k = kept[c][v] - kept[b][v];
                    if (k < 0) {
                        ge = false;
                        break;
                    }
                    for (int i = 0; i < k; i++) {
                        binom = binom * double(kept[c][v] - i) / double(i + 1);
                        dpow = mul(dpow, delta[v]);
                    }
                }
                if (ge) lr.coeff[b][c] = scale(mul(Q, dpow), binom);
            }
        }
        // R1 for every companion, by rewriting: map_b(r') == sum_c coeff[b][c] * map_c(r).
        for (size_t b = 0; b < n; b++) {
            Poly rhs;
            for (size_t c = 0; c < n; c++) rhs = add(rhs, mul(lr.coeff[b][c], lr.maps[c]));
            if (!equal(ctx_, primed(lr.maps[b]), rhs))
                throw InternalError("companion repair of " + target_ + " failed R1 for " + lr.names[b]);
        }
        if (!equal(ctx_, lr.maps[0], g)) throw InternalError("taylor: companion 0 is not g");
        lr.proof = "R1: for each of the " + std::to_string(n) +
                   " companions, g_b(r', c) equals sum_c coeff * g_c(r, c) "
                   "in normal form (Taylor expansion of a polynomial is exact); R2: the update is linear in the state";
        return lr;
    }

    std::string target_;
    Reducer reducer_;
    std::vector<std::string> producers_;
    Context ctx_;
    std::map<std::string, Sign> facts_;
    std::map<std::string, std::string> prime_;
    std::map<std::string, Reducer> producer_reducers_;

    // The producer an atom reads monotonically: r itself, or a safe-max select(r == identity, c, r).
    std::string monotone_producer(const Expr &e) const {
        Expr x = e;
        while (const HI::Cast *c = x.as<HI::Cast>()) x = c->value;
        if (const HI::Variable *v = x.as<HI::Variable>()) return v->name;
        if (const HI::Select *s = x.as<HI::Select>()) {
            const HI::EQ *eq = s->condition.as<HI::EQ>();
            const HI::Variable *v = s->false_value.as<HI::Variable>();
            if (eq && v && HI::equal(eq->a, s->false_value) && HI::is_const(s->true_value)) return v->name;
        }
        return "";
    }

    // Every exponential of producers in S must be exp(... - max) or exp(... + min).
    void check_exponent_stability(const Poly &S) {
        if (producer_reducers_.empty() || S.terms.empty() || !S.terms[0].exp_arg) return;
        for (const Monomial &m : S.terms[0].exp_arg->terms) {
            Poly term;
            term.terms = {m};
            const std::string why = "the repair rescales by exp(" + to_string(term) +
                                    "), which between two partial "
                                    "values of the producers can overflow where the unfused algorithm does not; an "
                                    "exponent may read a producer only as - max or + min (docs/design/fusion.md, "
                                    "numerical stability)";
            if (m.exp_arg || m.powers.size() != 1 || m.powers.begin()->second != 1) fail(why);
            const std::string p = monotone_producer(ctx_.atom_info(m.powers.begin()->first).expr);
            auto it = producer_reducers_.find(p);
            if (it == producer_reducers_.end()) fail(why);
            const bool ok = (it->second == Reducer::Max && m.coeff < 0) || (it->second == Reducer::Min && m.coeff > 0);
            if (!ok) fail(why);
        }
    }
};

}  // namespace

Repair derive_repair(const std::string &target, Reducer reducer, const Expr &map,
                     const std::vector<std::string> &producers, const std::string &rvar,
                     const std::map<std::string, Sign> &facts,
                     const std::map<std::string, Reducer> &producer_reducers) {
    Deriver d(target, reducer, producers, rvar, facts, producer_reducers);
    return d.derive(map);
}

}  // namespace neptune::internal
