#ifndef NEPTUNE_TIR_PRETTY_EXPR_H
#define NEPTUNE_TIR_PRETTY_EXPR_H
/** \file
 * Readable text for the Halide Exprs the tile IR's maps are made of. The printer, messages and the
 * frontend's dumps (frontend/Symbolic.h forwards to it) share one rendering. */
#include <string>

#include "Halide.h"

namespace neptune::tir {

/** A readable rendering of a float Expr for messages and dumps: no casts, exp(...) for exp_f32,
 * Variables by name, constants in shortest form: "t * exp(m - m')". */
std::string pretty_expr(const Halide::Expr &e);

}  // namespace neptune::tir

#endif
