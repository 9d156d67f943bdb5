#ifndef NEPTUNE_LOWER_LOWER_OPERATOR_H
#define NEPTUNE_LOWER_LOWER_OPERATOR_H
/** \file
 * An attention operator of the suite, from its Halide algorithm through its Neptune schedule to a
 * tile program: what the GPU backend compiles and the interpreter checks on the CPU. */
#include <map>
#include <string>

#include "neptune/Operators.h"
#include "tir/IR.h"

namespace neptune::internal {

struct OperatorLowering {
    tir::Program program;
    std::map<std::string, int64_t> ints;  // every int parameter of the kernels, for this instance
};

/** Lowers `inst`: prefill rolls over KV tiles of `block_n`; decode splits them into `chunks`.
 * `warps` = 0 picks 4 for prefill and enough for one KV group's query heads for decode. */
OperatorLowering lower_operator(const OperatorInstance &inst, int warps, int block_n, int chunks, int min_blocks = 0);

}  // namespace neptune::internal

#endif
