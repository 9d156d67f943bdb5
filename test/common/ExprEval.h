#ifndef NEPTUNE_TEST_COMMON_EXPR_EVAL_H
#define NEPTUNE_TEST_COMMON_EXPR_EVAL_H
/** \file
 * An fp64 evaluator for the float Halide Exprs that repairs are made of
 * (arithmetic, exp, log, tanh, sqrt, select, comparisons), written for tests
 * independently of the frontend's normal form. */
#include <map>
#include <string>

#include "Halide.h"

namespace neptune::testing {

/** Evaluates `e` with Variables (and opaque calls, by their printed form) bound in `env`. */
double eval(const Halide::Expr &e, const std::map<std::string, double> &env);

}  // namespace neptune::testing

#endif
