#include "ExprEval.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace neptune::testing {

namespace HI = Halide::Internal;

double eval(const Halide::Expr &e, const std::map<std::string, double> &env) {
    if (const auto *f = e.as<HI::FloatImm>()) return f->value;
    if (const auto *i = e.as<HI::IntImm>()) return double(i->value);
    if (const auto *u = e.as<HI::UIntImm>()) return double(u->value);
    if (const auto *c = e.as<HI::Cast>()) return eval(c->value, env);
    if (const auto *v = e.as<HI::Variable>()) {
        auto it = env.find(v->name);
        if (it == env.end()) throw std::runtime_error("eval: unbound variable " + v->name);
        return it->second;
    }
    if (const auto *op = e.as<HI::Add>()) return eval(op->a, env) + eval(op->b, env);
    if (const auto *op = e.as<HI::Sub>()) return eval(op->a, env) - eval(op->b, env);
    if (const auto *op = e.as<HI::Mul>()) return eval(op->a, env) * eval(op->b, env);
    if (const auto *op = e.as<HI::Div>()) return eval(op->a, env) / eval(op->b, env);
    if (const auto *op = e.as<HI::Min>()) return std::min(eval(op->a, env), eval(op->b, env));
    if (const auto *op = e.as<HI::Max>()) return std::max(eval(op->a, env), eval(op->b, env));
    if (const auto *op = e.as<HI::EQ>()) return eval(op->a, env) == eval(op->b, env);
    if (const auto *op = e.as<HI::NE>()) return eval(op->a, env) != eval(op->b, env);
    if (const auto *op = e.as<HI::LT>()) return eval(op->a, env) < eval(op->b, env);
    if (const auto *op = e.as<HI::LE>()) return eval(op->a, env) <= eval(op->b, env);
    if (const auto *op = e.as<HI::GT>()) return eval(op->a, env) > eval(op->b, env);
    if (const auto *op = e.as<HI::GE>()) return eval(op->a, env) >= eval(op->b, env);
    if (const auto *op = e.as<HI::And>()) return eval(op->a, env) && eval(op->b, env);
    if (const auto *op = e.as<HI::Or>()) return eval(op->a, env) || eval(op->b, env);
    if (const auto *op = e.as<HI::Not>()) return !eval(op->a, env);
    if (const auto *op = e.as<HI::Select>())
        return eval(op->condition, env) ? eval(op->true_value, env) : eval(op->false_value, env);
    if (const auto *c = e.as<HI::Call>()) {
        if (c->is_extern() && c->args.size() == 1) {
            const double x = eval(c->args[0], env);
            if (c->name == "exp_f32") return std::exp(x);
            if (c->name == "log_f32") return std::log(x);
            if (c->name == "tanh_f32") return std::tanh(x);
            if (c->name == "sqrt_f32") return std::sqrt(x);
        }
        std::ostringstream os;
        os << e;
        auto it = env.find(os.str());
        if (it != env.end()) return it->second;
        throw std::runtime_error("eval: unbound call " + os.str());
    }
    std::ostringstream os;
    os << e;
    throw std::runtime_error("eval: cannot evaluate " + os.str());
}

}  // namespace neptune::testing
