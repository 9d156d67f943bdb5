#ifndef NEPTUNE_TIR_INTERPRETER_H
#define NEPTUNE_TIR_INTERPRETER_H
/** \file
 * Runs tile IR on the host, block by block, with exactly the semantics documented above tir::Node:
 * the oracle that lowering passes and the CUDA emitter are tested against. Meant for small shapes. */
#include <cstdint>
#include <map>
#include <string>

#include "neptune/HostTensor.h"
#include "tir/IR.h"

namespace neptune::tir {

/** What a launch binds: every tensor of the kernel by name (for a Program also its workspaces,
 * which the caller allocates as f32 tensors), and every int and float parameter. */
struct LaunchArgs {
    std::map<std::string, HostTensor *> tensors;
    std::map<std::string, int64_t> ints;
    std::map<std::string, double> floats;
    /** The scalar "sm_count": the SMs a kernel may deal its blocks over (the H200's by default). */
    int64_t sm_count = 132;
};

/** Verifies `k`, then runs it for every block of its grid (an undefined grid dimension is 1; with
 * Kernel::cluster_x, the blocks of a cluster top-level statement by statement, so that a ClusterMerge
 * in rank 0 reads every block's published shared tiles), with
 * the scalars "block_x", "block_y", "block_z", "grid_x", "grid_y", "grid_z" bound per block and
 * "sm_count" to args.sm_count.
 * Values start as NaN in every block. Loads and stores index the flat HostTensor values; an
 * element outside a tensor, a missing argument or a tensor of another element type throws
 * InternalError. Stored values are rounded to the tensor's element type; f16/bf16 values are
 * rounded whenever they are written. */
void interpret(const Kernel &k, LaunchArgs &args);
/** Runs the kernels of `p` in order on the same arguments; checks the workspaces are present. */
void interpret(const Program &p, LaunchArgs &args);

}  // namespace neptune::tir

#endif
