#ifndef NEPTUNE_FRONTEND_SYMBOLIC_H
#define NEPTUNE_FRONTEND_SYMBOLIC_H
/** \file
 * A small normal form for the map functions of reductions, in which the
 * repair derivation proves its identities by rewriting rather than sampling.
 *
 * A Poly is a sum of monomials c * prod(atom^k) * exp(Poly): atoms are the
 * producer symbols (the values r, r' of the reductions a target reads) and
 * opaque sub-expressions (loads, tanh, select on producers, ...). Products of
 * exponentials merge their arguments, so exp(s - m') and exp(m - m') * exp(s - m)
 * have the same normal form. Two Polys are equal iff their canonical keys are. */
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "Halide.h"
#include "tir/PrettyExpr.h"

namespace neptune::internal::sym {

struct Poly;

struct Monomial {
    double coeff = 1;
    std::map<int, int> powers;  // atom id -> exponent (never 0; negative for division)
    std::shared_ptr<const Poly> exp_arg;  // exp(arg) factor, or null
};

struct Poly {
    std::vector<Monomial> terms;  // canonical: like terms merged, sorted by key, no zero coefficients
    bool is_zero() const { return terms.empty(); }
};

/** How an atom relates to the reduction being fused. */
struct Atom {
    Halide::Expr expr;
    std::string key;
    bool producer = false;  // reads a producer symbol (old or new value)
    bool varying = false;  // changes along the reduction variable (reads it, or a load indexed by it)
    bool is_symbol = false;  // a producer symbol itself
};

/** Atoms and the names that give them meaning: producer symbols and the reduction variable. */
class Context {
public:
    Context(std::set<std::string> producer_symbols, std::string rvar);
    int atom(const Halide::Expr &e);
    const Atom &atom_info(int id) const { return atoms_.at(size_t(id)); }
    bool is_producer_symbol(const std::string &name) const { return symbols_.count(name) > 0; }
    /** The name of the "new value" of a producer symbol: row_max -> row_max' (and back). */
    static std::string primed(const std::string &name) { return name + "'"; }

private:
    std::set<std::string> symbols_;
    std::string rvar_;
    std::vector<Atom> atoms_;
    std::map<std::string, int> by_key_;
};

Poly constant(double c);
Poly atom_poly(int id, int power = 1);
Poly add(const Poly &a, const Poly &b);
Poly sub(const Poly &a, const Poly &b);
Poly mul(const Poly &a, const Poly &b);
Poly scale(const Poly &a, double c);
Poly exp_of(const Poly &arg);
/** a^-1 for a single monomial; nullopt-like empty Poly with ok=false otherwise. */
bool invert_monomial(const Poly &a, Poly &out);

/** Normal form of a Halide Expr (float). Sub-expressions it cannot interpret become atoms. */
Poly from_expr(Context &ctx, const Halide::Expr &e);
/** Back to a float Halide Expr, exponentials of merged arguments kept as one exp. */
Halide::Expr to_expr(const Context &ctx, const Poly &p);

std::string key(const Context &ctx, const Poly &p);
bool equal(const Context &ctx, const Poly &a, const Poly &b);

/** Replaces every producer symbol by `to(symbol)` (e.g. its primed name) in atoms and exponents. */
Poly rename_producers(Context &ctx, const Poly &p, const std::map<std::string, std::string> &to);
/** Substitutes atom `id` (which must be a symbol atom) by the Poly `value`. */
Poly substitute_atom(Context &ctx, const Poly &p, int id, const Poly &value);
/** d p / d atom(id), for p polynomial in that atom (no occurrence inside exponents or other atoms). */
bool differentiate(const Context &ctx, const Poly &p, int id, Poly &out);

/** Splits a monomial's factors into the part that depends on producers and the rest. */
struct Split {
    Poly producer;  // one monomial (coefficient 1): producer atoms and the producer part of the exponent
    Poly rest;  // one monomial: coefficient, non-producer atoms, the non-producer part of the exponent
    std::string blocking;  // non-empty if a factor mixes producers with values that vary along the reduction
};
Split split_monomial(const Context &ctx, const Monomial &m);
/** Whether `m` (through nested exponentials too) reads producers, and values varying along the reduction. */
void dependencies(const Context &ctx, const Monomial &m, bool &producer, bool &varying);

/** A readable rendering of a float Expr for messages and dumps (tir/PrettyExpr.h). */
inline std::string pretty(const Halide::Expr &e) { return tir::pretty_expr(e); }

/** Sign knowledge for the positivity proofs of max/min repairs. */
enum class Sign { Positive, NonNegative, Negative, NonPositive, Zero, Unknown };
/** The sign of `e`, given facts about Variables (producer symbols). */
Sign sign_of(const Halide::Expr &e, const std::map<std::string, Sign> &facts);
bool definite(Sign s);  // Positive or Negative: never zero

}  // namespace neptune::internal::sym

#endif
