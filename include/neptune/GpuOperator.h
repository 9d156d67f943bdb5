#ifndef NEPTUNE_GPU_OPERATOR_H
#define NEPTUNE_GPU_OPERATOR_H
/** \file
 * An operator of the suite compiled by Neptune for the GPU: the Halide algorithm, its Neptune
 * schedule, the tile program, the emitted CUDA (NVRTC) and launches through the runtime. */
#include <memory>
#include <string>
#include <vector>

#include "neptune/HostTensor.h"

namespace neptune {

struct GpuOptions {
    int block_n = 0;  // keys per tile; 0: 64 for prefill, 32 for decode (64 where groups leave one block per SM)
    int chunks = 0;  // split-K chunks for decode and linear + cross-entropy's vocabulary; 0: chosen from the SM count
    int min_blocks = 0;  // __launch_bounds__ blocks per SM (caps registers); 0: 3 for prefill, none for decode
    std::string arch;  // sm_80 (mma.sync + cp.async) or sm_90a (wgmma + TMA where shapes allow); "": the device's
    int wgmma = -1;  // on sm_90a: 1 forces the wgmma path, 0 keeps mma.sync, -1 lets the shape decide
    int overlap = -1;  // wgmma: 0 none, 1 async dots overlap the softmax, 2 and warpgroups take turns; -1: 2
    int stages = 0;  // K/V copies in flight (cp.async stages or TMA ring buffers); 0: the default
    int fold_combine = -1;  // decode: 1 the last block of each group combines, 0 a separate combine kernel; -1: 1
    int cluster_merge =
        -1;  // decode on sm_90a: 1 a group's chunk blocks are a cluster merging through shared memory, 0 the workspace fold; -1: where chunks are 2 to 8
    int tma_loads =
        -1;  // sm_90a mma.sync kernels: 1 the pipelined K/V copies by TMA (mbarriers), 0 cp.async; -1: default
    int row_threads = 0;  // row-wise operators: threads per row, a power of two from 32 to 1024; 0: by length
    int row_cluster = 0;  // row-wise operators: blocks per row, 1 to 8 (above 1: a cluster, sm_90a); 0: by length
    bool dump = false;  // print the tile program and the CUDA source
};

struct GpuTiming {
    double median_ms = 0, min_ms = 0, max_ms = 0;
    int repeats = 0;
};

/** The compiled kernels of one operator instance. Throws CompileError for an operator the tile
 * backend cannot lower, and std::runtime_error naming the CUDA error for launch failures. */
class GpuOperator {
public:
    GpuOperator(const OperatorInstance &inst, const GpuOptions &opt = {});
    ~GpuOperator();
    GpuOperator(const GpuOperator &) = delete;
    GpuOperator &operator=(const GpuOperator &) = delete;

    /** Copies `inputs` to the device (kept for later runs and timings). */
    void set_inputs(const std::vector<HostTensor> &inputs);
    /** Runs once and copies every output back (outputs are poisoned with NaN first). */
    std::vector<HostTensor> run();
    /** Median time of the whole launch sequence with CUDA events, L2 flushed before each repeat. */
    GpuTiming time(int repeats, int warmup = 5);

    const std::string &tile_program() const;
    const std::string &cuda_source() const;
    std::string describe() const;  // kernels, grids, shared memory, split-K chunks
    size_t workspace_bytes() const;  // device memory beside the inputs and outputs (split-K states, counters)

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/** One operator's kernels compiled ahead of time, with no GPU needed: the tile program, the CUDA
 * source, PTX (NVRTC) and ptxas's resource report per kernel (nvcc -Xptxas -v). */
struct KernelResources {
    std::string kernel;
    int registers = -1, shared_bytes = -1, spill_stores = -1, spill_loads = -1, stack_bytes = -1;
};
struct EmittedOperator {
    std::string tile_program, cuda, ptx, ptxas_log;
    std::vector<char> cubin;  // nvcc's, for cuobjdump --dump-sass
    std::vector<KernelResources> resources;
};
/** `arch` is sm_80, sm_90 or sm_90a (sm_90a lowers the Hopper path, the others the mma.sync path).
 * Decode uses opt.chunks (4 when 0); the mma.sync path takes opt.min_blocks as given (0: no register
 * cap). Throws CompileError for operators the backend cannot lower. */
EmittedOperator emit_operator(const OperatorInstance &inst, const GpuOptions &opt, const std::string &arch);

/** True when a CUDA device is usable (the driver opens and reports a device). */
bool gpu_available();

}  // namespace neptune

#endif
