// The slot of the "no fusion" ablation compiled by a compiler: the operator's plain Halide algorithm
// (include/neptune/algorithms) scheduled for Halide's own CUDA backend, with every reduction a
// separate kernel. It needs the ahead-of-time generators (generators/, being built on the branch
// `aot`): the benchmark binary must not JIT through libHalide on the GPU machine. Once they exist,
// this function returns a NativeImpl that calls the generated pipeline on halide_buffer_ts wrapping
// the device pointers, and the rest of the benchmark (checks, interleaved timing, table, sweep,
// plots) picks it up by its name, halide_unfused (a compiler, in kind_of()).
#include "Native.h"

namespace neptune::bench {

std::unique_ptr<NativeImpl> make_halide_unfused(const OperatorInstance &, const GpuOptions &) {
    throw Unsupported("needs the AOT generators (the unfused algorithm compiled by Halide's CUDA backend); not "
                      "built yet");
}

}  // namespace neptune::bench
