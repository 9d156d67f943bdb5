#ifndef NEPTUNE_EXTERN_ISOLATE_GROUP_H
#define NEPTUNE_EXTERN_ISOLATE_GROUP_H
/** \file
 * A fused group cut out of its pipeline: what it reads from the rest of the pipeline becomes input
 * buffers, so the tile lowering sees the group alone, as it sees an operator of the suite.
 *
 * The group is everything between its outputs and its inputs: the chain's stages and every Func
 * they read that is left inline. Its inputs are the buffers it reads (image parameters, generator
 * inputs, constant Buffers; a Func that only wraps one counts as the buffer) and the Funcs it reads
 * that are scheduled on their own (compute_root or compute_at, GPU loops, extern definitions):
 * those stay Halide stages that feed the extern stage.
 *   before: out <- {acc, row_sum} <- score <- qk <- (qs, k)   with qs.compute_root()
 *   after:  a copy of out <- ... <- qk <- (qs placeholder buffer, k)
 * The copy reads a placeholder buffer parameter named after each Func input; the user's Funcs are
 * left as they are. */
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "Halide.h"
#include "api/FusedGroups.h"

namespace neptune::internal {

struct GroupInput {
    std::string name;  // the tensor name the tile program uses
    Halide::ExternFuncArgument arg;  // what the extern call passes: the buffer parameter, Buffer or Func
    Halide::Type type;
    int dimensions = 0;
    bool is_func = false;
    /** The extent of dimension d, where a buffer tells it: the input's own buffer, or for a Func
     * input defined pointwise from a buffer of the same shape (a pre-scaling, a cast), that buffer. */
    std::optional<std::vector<Halide::Expr>> extents;
};

struct IsolatedGroup {
    std::vector<Halide::Func> outputs;  // the copies of the group's outputs, in the order given
    FusedGroup group;  // the directive and its plan, over the copies
    std::map<std::string, GroupInput> inputs;  // by tensor name
};

/** `extents` are the user's expressions for the kernels' int parameters (ExternOptions::extents):
 * where one is a buffer's extent (q.extent.2), the copy reads the parameter (q_heads) instead.
 * Throws CompileError naming the group for Tuple-valued Func inputs, and for extents of buffers the
 * group does not read that no such expression names. */
IsolatedGroup isolate_group(const FusedGroup &g, const std::vector<Halide::Func> &outputs,
                            const std::map<std::string, Halide::Expr> &extents = {});

}  // namespace neptune::internal

#endif
