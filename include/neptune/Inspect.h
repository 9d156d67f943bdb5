#ifndef NEPTUNE_INSPECT_H
#define NEPTUNE_INSPECT_H
/** \file
 * A look inside the compiler, for lessons and tools that show its internals: the tile program of a
 * suite operator or of a fused group (docs/design/tile-ir.md), printed and run in the tile-IR
 * interpreter on host tensors, and the split-K chunk rule. The IR itself stays internal (src/tir/):
 * this header hands out its listing, a summary of its kernels and its interpreter. What it shows is
 * for reading, not an interface to build on: listings change with the lowering. */
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "Halide.h"
#include "neptune/Directives.h"
#include "neptune/HostTensor.h"
#include "neptune/Operators.h"

namespace neptune::inspect {

/** How a group is lowered to tiles, for sm_80's mma.sync kernels; 0 keeps the default. */
struct TileOptions {
    int block_n = 0;  // keys per KV tile; 0: the operator's default (lower_operator), the plan's tile (lower_group)
    int chunks = 1;  // lower_operator, decode: split-K chunks (a kernel parameter, set in ints())
    bool fold_combine = true;  // split-K: the combine in the last chunk block of each group (false: a second kernel)
};

struct KernelSummary {
    std::string name;
    int warps = 0;
    int shared_bytes = 0;
};

struct WorkspaceSummary {
    std::string name;
    bool zeroed = false;  // the launcher zeroes it once (arrival counters)
};

/** A lowered tile program. */
class TileProgram {
public:
    /** The listing: each kernel's header, values and statements (tir::to_string). */
    std::string text() const;
    std::vector<KernelSummary> kernels() const;
    std::vector<WorkspaceSummary> workspaces() const;
    /** The kernels' int parameters for the instance lower_operator lowered; empty from lower_group. */
    const std::map<std::string, int64_t> &ints() const;
    /** Runs every block of every kernel in the tile-IR interpreter, with the semantics the CUDA emitter
     * implements. `tensors`: the inputs and outputs by their names; the workspaces are allocated here,
     * sized by `ints` (the kernels' int parameters). Attention tensors are dense unless `ints` gives
     * their stride parameters (e.g. "q_vstride_2", the head stride in units of 8 elements). */
    void interpret(const std::vector<HostTensor *> &tensors, const std::map<std::string, int64_t> &ints) const;

    struct Impl;
    explicit TileProgram(std::shared_ptr<const Impl> impl);

private:
    std::shared_ptr<const Impl> impl_;
};

/** A suite attention operator, from its Halide algorithm through Neptune's schedule and the lowering
 * passes to a tile program. */
TileProgram lower_operator(const OperatorInstance &inst, const TileOptions &opt = {});

/** A fused group of attention shape (`outputs`: the Funcs after its chain) lowered as Neptune lowers
 * `spec`'s (element type, head dims, decode, query heads per KV head). */
TileProgram lower_group(const FusedReduction &group, const std::vector<Halide::Func> &outputs, const OperatorSpec &spec,
                        const TileOptions &opt = {});

/** Decode's chunk rule (core/SplitChunks.h): chunks for `groups` (batch x KV heads) blocks over `keys`
 * keys in tiles of `tile_keys`, on `sms` SMs holding `resident` blocks each. */
int split_k_chunks(int64_t groups, int64_t keys, int tile_keys, int sms, int resident);
/** Blocks of `shared_bytes` each that an SM holds, where a block may opt in to `max_shared_per_block`. */
int resident_blocks(int shared_bytes, int max_shared_per_block);

}  // namespace neptune::inspect

#endif
