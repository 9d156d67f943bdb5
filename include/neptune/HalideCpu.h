#ifndef NEPTUNE_HALIDE_CPU_H
#define NEPTUNE_HALIDE_CPU_H
/** \file
 * Runs an operator's Halide Funcs on the host through Halide's JIT, for any
 * contiguous run of output rows, so large shapes can be checked on samples. */
#include <vector>

#include "Halide.h"
#include "neptune/HostTensor.h"

namespace neptune {

/** Converts a host tensor to a dense Halide buffer (dimensions reversed: innermost first), its host
 * marked dirty so that copy_to_device copies the values. */
Halide::Buffer<> to_halide_buffer(const HostTensor &t);

/** Computes every reduction of the pipeline that produces `outputs` at root: the plain algorithms
 * carry no schedule, and Halide's default (recompute a reduction at each use) would be quadratic. */
void schedule_reductions_at_root(const std::vector<Halide::Func> &outputs);

class HalideCpuRunner {
public:
    /** `inputs` and `outputs` follow the order of inst.inputs and inst.outputs. */
    HalideCpuRunner(const OperatorInstance &inst, std::vector<Halide::ImageParam> inputs,
                    std::vector<Halide::Func> outputs);

    /** Binds the input values (copied into Halide buffers). */
    void set_inputs(const std::vector<HostTensor> &values);

    /** Realizes rows [first, first + count) of every output into `outputs` (sized by make_outputs).
     * The run must stay inside one row block (OperatorInstance::row_block). */
    void run_rows(std::vector<HostTensor> &outputs, int64_t first, int64_t count);

    /** Every row. */
    void run(std::vector<HostTensor> &outputs);

private:
    OperatorInstance inst_;
    std::vector<Halide::ImageParam> params_;
    std::vector<Halide::Buffer<>> bound_;
    std::vector<Halide::Pipeline> pipelines_;
};

/** The host as JIT code may use it: Halide's detection (CPUID) less the AVX-512 features whose
 * register state the operating system does not enable. Some virtual machines report AVX-512 in CPUID
 * but leave it off, and code Halide compiles for it then dies of SIGILL; the compiler's own check
 * (__builtin_cpu_supports) reads the OS-enabled state too. */
Halide::Target host_target();

/** The JIT target for Neptune's CPU paths: HL_JIT_TARGET where set, else host_target(), with strict
 * IEEE float semantics. The algorithms use -infinity as the score of a masked position and test for it
 * (safe_max); under Halide's default fast-math, LLVM may assume no infinities and fold `m == -inf` to
 * false. */
Halide::Target cpu_target();

}  // namespace neptune

#endif
