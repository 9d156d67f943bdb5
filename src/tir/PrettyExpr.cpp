#include "tir/PrettyExpr.h"

#include <cmath>
#include <sstream>

namespace neptune::tir {

namespace HI = Halide::Internal;
using Halide::Expr;

namespace {

// Casts print as their value (pretty), so they bind as it does: float(a + b) on the right of a
// minus needs its parentheses.
int precedence(Expr e) {
    while (const HI::Cast *c = e.as<HI::Cast>()) e = c->value;
    if (e.as<HI::Add>() || e.as<HI::Sub>()) return 1;
    if (e.as<HI::Mul>() || e.as<HI::Div>()) return 2;
    if (e.as<HI::EQ>() || e.as<HI::NE>() || e.as<HI::LT>() || e.as<HI::LE>() || e.as<HI::GT>() || e.as<HI::GE>())
        return 0;
    if (e.as<HI::And>() || e.as<HI::Or>()) return -1;
    return 3;
}

std::string wrap(const Expr &e, int min_prec) {
    const std::string s = pretty_expr(e);
    return precedence(e) < min_prec ? "(" + s + ")" : s;
}

std::string binary(const Expr &a, const char *op, const Expr &b, int prec, bool right_strict) {
    return wrap(a, prec) + " " + op + " " + wrap(b, right_strict ? prec + 1 : prec);
}

}  // namespace

std::string pretty_expr(const Expr &e) {
    if (!e.defined()) return "<undefined>";
    if (const HI::FloatImm *f = e.as<HI::FloatImm>()) {
        if (std::isinf(f->value)) return f->value < 0 ? "-inf" : "inf";
        std::ostringstream os;
        os << f->value;
        return os.str();
    }
    if (const HI::IntImm *i = e.as<HI::IntImm>()) return std::to_string(i->value);
    if (const HI::Variable *v = e.as<HI::Variable>()) {
        const size_t d = v->name.find("$x");  // a 1-D RDom's variable reads as the RDom
        return d != std::string::npos && d + 2 == v->name.size() ? v->name.substr(0, d) : v->name;
    }
    if (const HI::Cast *c = e.as<HI::Cast>()) return pretty_expr(c->value);
    if (const HI::Add *op = e.as<HI::Add>()) return binary(op->a, "+", op->b, 1, false);
    if (const HI::Sub *op = e.as<HI::Sub>()) {
        if (HI::is_const_zero(op->a)) return "-" + wrap(op->b, 2);
        return binary(op->a, "-", op->b, 1, true);
    }
    if (const HI::Mul *op = e.as<HI::Mul>()) return binary(op->a, "*", op->b, 2, false);
    if (const HI::Div *op = e.as<HI::Div>()) return binary(op->a, "/", op->b, 2, true);
    if (const HI::EQ *op = e.as<HI::EQ>()) return binary(op->a, "==", op->b, 1, false);
    if (const HI::NE *op = e.as<HI::NE>()) return binary(op->a, "!=", op->b, 1, false);
    if (const HI::LT *op = e.as<HI::LT>()) return binary(op->a, "<", op->b, 1, false);
    if (const HI::LE *op = e.as<HI::LE>()) return binary(op->a, "<=", op->b, 1, false);
    if (const HI::GT *op = e.as<HI::GT>()) return binary(op->a, ">", op->b, 1, false);
    if (const HI::GE *op = e.as<HI::GE>()) return binary(op->a, ">=", op->b, 1, false);
    if (const HI::And *op = e.as<HI::And>()) return binary(op->a, "&&", op->b, 0, false);
    if (const HI::Or *op = e.as<HI::Or>()) return binary(op->a, "||", op->b, 0, false);
    if (const HI::Not *op = e.as<HI::Not>()) return "!" + wrap(op->a, 3);
    if (const HI::Max *op = e.as<HI::Max>()) return "max(" + pretty_expr(op->a) + ", " + pretty_expr(op->b) + ")";
    if (const HI::Min *op = e.as<HI::Min>()) return "min(" + pretty_expr(op->a) + ", " + pretty_expr(op->b) + ")";
    if (const HI::Select *op = e.as<HI::Select>())
        return "select(" + pretty_expr(op->condition) + ", " + pretty_expr(op->true_value) + ", " +
               pretty_expr(op->false_value) + ")";
    if (const HI::Call *c = e.as<HI::Call>()) {
        std::string name = c->name;
        for (const char *suffix : {"_f32", "_f64"})
            if (c->is_extern() && name.size() > 4 && name.compare(name.size() - 4, 4, suffix) == 0)
                name = name.substr(0, name.size() - 4);
        std::string s = name + "(";
        for (size_t i = 0; i < c->args.size(); i++) s += (i ? ", " : "") + pretty_expr(c->args[i]);
        return s + ")";
    }
    std::ostringstream os;
    os << e;
    return os.str();
}

}  // namespace neptune::tir
