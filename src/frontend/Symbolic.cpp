#include "frontend/Symbolic.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "neptune/Error.h"

namespace neptune::internal::sym {

namespace HI = Halide::Internal;
using Halide::Expr;

namespace {

class UsedVars : public HI::IRGraphVisitor {
public:
    std::set<std::string> names;
    using HI::IRGraphVisitor::visit;
    void visit(const HI::Variable *op) override { names.insert(op->name); }
};

std::string expr_key(const Expr &e) {
    std::ostringstream os;
    os << e;
    return os.str();
}

std::string number(double c) {
    std::ostringstream os;
    os.precision(17);
    os << c;
    return os.str();
}

std::string monomial_key(const Context &ctx, const Monomial &m, bool with_coeff) {
    std::ostringstream os;
    if (with_coeff) os << number(m.coeff) << "*";
    for (auto [id, p] : m.powers) os << "{" << ctx.atom_info(id).key << "}^" << p << "*";
    if (m.exp_arg) os << "exp(" << key(ctx, *m.exp_arg) << ")";
    return os.str();
}

// Canonical form: merge like terms, drop zeros, sort. Keys need no context beyond atom ids and exp args,
// so canonicalisation uses an id-based key.
std::string raw_key(const Poly &p);

std::string raw_monomial_key(const Monomial &m) {
    std::ostringstream os;
    for (auto [id, pw] : m.powers) os << id << "^" << pw << ",";
    if (m.exp_arg) os << "e(" << raw_key(*m.exp_arg) << ")";
    return os.str();
}

std::string raw_key(const Poly &p) {
    std::ostringstream os;
    for (const Monomial &m : p.terms) os << number(m.coeff) << "*" << raw_monomial_key(m) << "+";
    return os.str();
}

Poly canonical(std::vector<Monomial> terms) {
    std::map<std::string, Monomial> merged;
    for (Monomial &m : terms) {
        if (m.coeff == 0) continue;
        if (m.exp_arg && m.exp_arg->is_zero()) m.exp_arg = nullptr;
        const std::string k = raw_monomial_key(m);
        auto it = merged.find(k);
        if (it == merged.end()) {
            merged.emplace(k, std::move(m));
        } else {
            it->second.coeff += m.coeff;
        }
    }
    Poly p;
    for (auto &[k, m] : merged)
        if (m.coeff != 0) p.terms.push_back(std::move(m));
    return p;
}

Monomial mul_monomial(const Monomial &a, const Monomial &b) {
    Monomial m;
    m.coeff = a.coeff * b.coeff;
    m.powers = a.powers;
    for (auto [id, p] : b.powers) {
        const int q = (m.powers[id] += p);
        if (q == 0) m.powers.erase(id);
    }
    if (a.exp_arg && b.exp_arg) {
        Poly s = add(*a.exp_arg, *b.exp_arg);
        if (!s.is_zero()) m.exp_arg = std::make_shared<const Poly>(std::move(s));
    } else {
        m.exp_arg = a.exp_arg ? a.exp_arg : b.exp_arg;
    }
    return m;
}

const HI::Call *exp_call(const Expr &e) {
    const HI::Call *c = e.as<HI::Call>();
    if (c && c->is_extern() && (c->name == "exp_f32" || c->name == "exp_f64") && c->args.size() == 1) return c;
    return nullptr;
}

}  // namespace

Context::Context(std::set<std::string> producer_symbols, std::string rvar)
    : symbols_(std::move(producer_symbols)), rvar_(std::move(rvar)) {}

int Context::atom(const Expr &e) {
    const std::string k = expr_key(e);
    auto it = by_key_.find(k);
    if (it != by_key_.end()) return it->second;
    Atom a;
    a.expr = e;
    a.key = k;
    UsedVars used;
    e.accept(&used);
    for (const std::string &n : used.names) {
        if (is_producer_symbol(n)) a.producer = true;
        if (n == rvar_) a.varying = true;
    }
    const HI::Variable *v = e.as<HI::Variable>();
    a.is_symbol = v && is_producer_symbol(v->name);
    atoms_.push_back(a);
    by_key_[k] = int(atoms_.size() - 1);
    return int(atoms_.size() - 1);
}

Poly constant(double c) {
    Monomial m;
    m.coeff = c;
    return canonical({m});
}

Poly atom_poly(int id, int power) {
    Monomial m;
    m.powers[id] = power;
    return canonical({m});
}

Poly add(const Poly &a, const Poly &b) {
    std::vector<Monomial> t = a.terms;
    t.insert(t.end(), b.terms.begin(), b.terms.end());
    return canonical(std::move(t));
}

Poly scale(const Poly &a, double c) {
    std::vector<Monomial> t = a.terms;
    for (Monomial &m : t) m.coeff *= c;
    return canonical(std::move(t));
}

Poly sub(const Poly &a, const Poly &b) { return add(a, scale(b, -1)); }

Poly mul(const Poly &a, const Poly &b) {
    std::vector<Monomial> t;
    for (const Monomial &x : a.terms)
        for (const Monomial &y : b.terms) t.push_back(mul_monomial(x, y));
    return canonical(std::move(t));
}

Poly exp_of(const Poly &arg) {
    // A constant part of the argument becomes a coefficient: exp(c + x) = e^c exp(x).
    double c = 0;
    std::vector<Monomial> rest;
    for (const Monomial &m : arg.terms) {
        if (m.powers.empty() && !m.exp_arg) {
            c += m.coeff;
        } else {
            rest.push_back(m);
        }
    }
    Monomial m;
    m.coeff = std::exp(c);
    Poly r = canonical(std::move(rest));
    if (!r.is_zero()) m.exp_arg = std::make_shared<const Poly>(std::move(r));
    return canonical({m});
}

bool invert_monomial(const Poly &a, Poly &out) {
    if (a.terms.size() != 1) return false;
    Monomial m = a.terms[0];
    m.coeff = 1.0 / m.coeff;
    for (auto &[id, p] : m.powers) p = -p;
    if (m.exp_arg) m.exp_arg = std::make_shared<const Poly>(scale(*m.exp_arg, -1));
    out = canonical({m});
    return true;
}

Poly from_expr(Context &ctx, const Expr &e) {
    if (const HI::FloatImm *f = e.as<HI::FloatImm>()) return constant(f->value);
    if (const HI::IntImm *i = e.as<HI::IntImm>()) return constant(double(i->value));
    if (const HI::UIntImm *u = e.as<HI::UIntImm>()) return constant(double(u->value));
    if (const HI::Cast *c = e.as<HI::Cast>()) {
        if (c->type.is_float() && c->value.type().is_float()) return from_expr(ctx, c->value);
    }
    if (const HI::Add *op = e.as<HI::Add>()) return add(from_expr(ctx, op->a), from_expr(ctx, op->b));
    if (const HI::Sub *op = e.as<HI::Sub>()) return sub(from_expr(ctx, op->a), from_expr(ctx, op->b));
    if (const HI::Mul *op = e.as<HI::Mul>()) return mul(from_expr(ctx, op->a), from_expr(ctx, op->b));
    if (const HI::Div *op = e.as<HI::Div>()) {
        if (op->type.is_float()) {
            const Poly den = from_expr(ctx, op->b);
            Poly inv;
            if (invert_monomial(den, inv)) return mul(from_expr(ctx, op->a), inv);
            return mul(from_expr(ctx, op->a), atom_poly(ctx.atom(op->b), -1));
        }
    }
    if (const HI::Call *c = exp_call(e)) return exp_of(from_expr(ctx, c->args[0]));
    return atom_poly(ctx.atom(e));
}

Expr to_expr(const Context &ctx, const Poly &p) {
    Expr sum;
    std::vector<Monomial> ordered = p.terms;
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](const Monomial &a, const Monomial &b) { return a.coeff > 0 && b.coeff < 0; });
    for (const Monomial &m : ordered) {
        Expr num, den;
        auto times = [](Expr &acc, const Expr &f) { acc = acc.defined() ? acc * f : f; };
        for (auto [id, pw] : m.powers) {
            const Expr a = Halide::cast<float>(ctx.atom_info(id).expr);
            for (int k = 0; k < std::abs(pw); k++) times(pw > 0 ? num : den, a);
        }
        if (m.exp_arg) times(num, Halide::exp(to_expr(ctx, *m.exp_arg)));
        // Emit |coeff| * num / den, and subtract it when the coefficient is negative.
        const double c = std::fabs(m.coeff);
        Expr term;
        if (!num.defined()) {
            term = Expr(float(c));
        } else if (c == 1) {
            term = num;
        } else {
            term = Expr(float(c)) * num;
        }
        if (den.defined()) term = term / den;
        if (m.coeff < 0) {
            sum = sum.defined() ? sum - term : HI::Sub::make(Expr(0.0f), term);
        } else {
            sum = sum.defined() ? sum + term : term;
        }
    }
    return sum.defined() ? sum : Expr(0.0f);
}

std::string key(const Context &ctx, const Poly &p) {
    std::vector<std::string> parts;
    for (const Monomial &m : p.terms) parts.push_back(monomial_key(ctx, m, true));
    std::sort(parts.begin(), parts.end());
    std::string s;
    for (const std::string &x : parts) s += x + " + ";
    return s;
}

bool equal(const Context &ctx, const Poly &a, const Poly &b) {
    (void)ctx;
    return sub(a, b).is_zero();
}

Poly rename_producers(Context &ctx, const Poly &p, const std::map<std::string, std::string> &to) {
    std::map<std::string, Expr> repl;
    for (auto &[from, dst] : to) repl[from] = HI::Variable::make(Halide::Float(32), dst);
    std::vector<Monomial> terms;
    for (const Monomial &m : p.terms) {
        Poly acc = constant(m.coeff);
        for (auto [id, pw] : m.powers) {
            const Atom &a = ctx.atom_info(id);
            const int nid = a.producer ? ctx.atom(HI::substitute(repl, a.expr)) : id;
            acc = mul(acc, atom_poly(nid, pw));
        }
        if (m.exp_arg) acc = mul(acc, exp_of(rename_producers(ctx, *m.exp_arg, to)));
        terms.insert(terms.end(), acc.terms.begin(), acc.terms.end());
    }
    return canonical(std::move(terms));
}

Poly substitute_atom(Context &ctx, const Poly &p, int id, const Poly &value) {
    std::vector<Monomial> terms;
    for (const Monomial &m : p.terms) {
        Poly acc = constant(m.coeff);
        for (auto [aid, pw] : m.powers) {
            if (aid != id) {
                acc = mul(acc, atom_poly(aid, pw));
                continue;
            }
            Poly v = value;
            if (pw < 0 && !invert_monomial(value, v)) throw InternalError("substitute_atom: negative power of a sum");
            for (int k = 0; k < std::abs(pw); k++) acc = mul(acc, v);
        }
        if (m.exp_arg) acc = mul(acc, exp_of(substitute_atom(ctx, *m.exp_arg, id, value)));
        terms.insert(terms.end(), acc.terms.begin(), acc.terms.end());
    }
    return canonical(std::move(terms));
}

bool differentiate(const Context &ctx, const Poly &p, int id, Poly &out) {
    (void)ctx;  // distinct atoms are independent variables: Taylor expansion over them is exact for polynomials
    std::vector<Monomial> terms;
    for (const Monomial &m : p.terms) {
        if (m.exp_arg) {
            // exp(arg) must not contain the variable: d/dx would not terminate in a polynomial.
            for (const Monomial &e : m.exp_arg->terms)
                if (e.powers.count(id)) return false;
        }
        auto it = m.powers.find(id);
        if (it == m.powers.end()) continue;
        if (it->second < 0) return false;
        Monomial d = m;
        d.coeff *= it->second;
        if (--d.powers[id] == 0) d.powers.erase(id);
        terms.push_back(d);
    }
    out = canonical(std::move(terms));
    return true;
}

void dependencies(const Context &ctx, const Monomial &m, bool &producer, bool &varying) {
    for (auto [id, pw] : m.powers) {
        (void)pw;
        producer = producer || ctx.atom_info(id).producer;
        varying = varying || ctx.atom_info(id).varying;
    }
    if (m.exp_arg)
        for (const Monomial &e : m.exp_arg->terms) dependencies(ctx, e, producer, varying);
}

Split split_monomial(const Context &ctx, const Monomial &m) {
    Split s;
    Monomial prod, rest;
    rest.coeff = m.coeff;
    for (auto [id, pw] : m.powers) {
        const Atom &a = ctx.atom_info(id);
        if (a.producer && a.varying) {
            s.blocking = a.key;
            return s;
        }
        (a.producer ? prod : rest).powers[id] = pw;
    }
    if (m.exp_arg) {
        std::vector<Monomial> pe, re;
        for (const Monomial &e : m.exp_arg->terms) {
            // A term of the exponent, nested exponentials included, is producer-only or producer-free.
            bool producer = false, varying = false;
            dependencies(ctx, e, producer, varying);
            if (producer && varying) {
                s.blocking = monomial_key(ctx, e, true);
                return s;
            }
            (producer ? pe : re).push_back(e);
        }
        Poly pp = canonical(pe), rp = canonical(re);
        if (!pp.is_zero()) prod.exp_arg = std::make_shared<const Poly>(std::move(pp));
        if (!rp.is_zero()) rest.exp_arg = std::make_shared<const Poly>(std::move(rp));
    }
    s.producer = canonical({prod});
    s.rest = canonical({rest});
    return s;
}

// ---- Signs ---------------------------------------------------------------------------------

bool definite(Sign s) { return s == Sign::Positive || s == Sign::Negative; }

namespace {

Sign negate(Sign s) {
    switch (s) {
    case Sign::Positive: return Sign::Negative;
    case Sign::Negative: return Sign::Positive;
    case Sign::NonNegative: return Sign::NonPositive;
    case Sign::NonPositive: return Sign::NonNegative;
    default: return s;
    }
}

bool nonneg(Sign s) { return s == Sign::Positive || s == Sign::NonNegative || s == Sign::Zero; }
bool nonpos(Sign s) { return s == Sign::Negative || s == Sign::NonPositive || s == Sign::Zero; }

Sign product(Sign a, Sign b) {
    if (a == Sign::Zero || b == Sign::Zero) return Sign::Zero;
    if (definite(a) && definite(b)) return a == b ? Sign::Positive : Sign::Negative;
    if (nonneg(a) && nonneg(b)) return Sign::NonNegative;
    if (nonpos(a) && nonpos(b)) return Sign::NonNegative;
    if ((nonneg(a) && nonpos(b)) || (nonpos(a) && nonneg(b))) return Sign::NonPositive;
    return Sign::Unknown;
}

Sign join(Sign a, Sign b) {  // either may hold
    if (a == b) return a;
    if (nonneg(a) && nonneg(b))
        return (a == Sign::Positive && b == Sign::Positive) ? Sign::Positive : Sign::NonNegative;
    if (nonpos(a) && nonpos(b)) return Sign::NonPositive;
    return Sign::Unknown;
}

Sign sum(Sign a, Sign b) {
    if (a == Sign::Zero) return b;
    if (b == Sign::Zero) return a;
    if (nonneg(a) && nonneg(b))
        return (a == Sign::Positive || b == Sign::Positive) ? Sign::Positive : Sign::NonNegative;
    if (nonpos(a) && nonpos(b))
        return (a == Sign::Negative || b == Sign::Negative) ? Sign::Negative : Sign::NonPositive;
    return Sign::Unknown;
}

Sign of_constant(double v) {
    if (v > 0) return Sign::Positive;
    if (v < 0) return Sign::Negative;
    return Sign::Zero;
}

}  // namespace

Sign sign_of(const Expr &e, const std::map<std::string, Sign> &facts) {
    if (const HI::FloatImm *f = e.as<HI::FloatImm>()) return of_constant(f->value);
    if (const HI::IntImm *i = e.as<HI::IntImm>()) return of_constant(double(i->value));
    if (const HI::UIntImm *u = e.as<HI::UIntImm>()) return of_constant(double(u->value));
    if (const HI::Variable *v = e.as<HI::Variable>()) {
        auto it = facts.find(v->name);
        if (it != facts.end()) return it->second;
        // A buffer's extent: a reduction over it has at least one position.
        return v->name.find(".extent.") != std::string::npos ? Sign::Positive : Sign::Unknown;
    }
    if (const HI::Cast *c = e.as<HI::Cast>()) return sign_of(c->value, facts);
    if (const HI::Mul *op = e.as<HI::Mul>()) {
        if (HI::equal(op->a, op->b)) return sign_of(op->a, facts) == Sign::Zero ? Sign::Zero : Sign::NonNegative;
        return product(sign_of(op->a, facts), sign_of(op->b, facts));
    }
    if (const HI::Div *op = e.as<HI::Div>()) {
        const Sign b = sign_of(op->b, facts);
        return definite(b) ? product(sign_of(op->a, facts), b) : Sign::Unknown;
    }
    if (const HI::Add *op = e.as<HI::Add>()) return sum(sign_of(op->a, facts), sign_of(op->b, facts));
    if (const HI::Sub *op = e.as<HI::Sub>()) return sum(sign_of(op->a, facts), negate(sign_of(op->b, facts)));
    if (const HI::Select *op = e.as<HI::Select>()) {
        // A guarded value: select(x == 0, a, x) with x >= 0 and a > 0 is positive.
        if (const HI::EQ *eq = op->condition.as<HI::EQ>()) {
            const Sign x = sign_of(eq->a, facts);
            if (HI::is_const_zero(eq->b) && HI::equal(eq->a, op->false_value) && nonneg(x) &&
                sign_of(op->true_value, facts) == Sign::Positive)
                return Sign::Positive;
        }
        return join(sign_of(op->true_value, facts), sign_of(op->false_value, facts));
    }
    if (exp_call(e)) return Sign::Positive;  // over the reals; -inf arguments are guarded by the safe max
    if (const HI::Call *c = e.as<HI::Call>()) {
        if (c->is_extern() && (c->name == "sqrt_f32" || c->name == "sqrt_f64") && c->args.size() == 1)
            return sign_of(c->args[0], facts) == Sign::Positive ? Sign::Positive : Sign::NonNegative;
    }
    return Sign::Unknown;
}

}  // namespace neptune::internal::sym
