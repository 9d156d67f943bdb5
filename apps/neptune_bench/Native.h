#ifndef NEPTUNE_BENCH_NATIVE_H
#define NEPTUNE_BENCH_NATIVE_H
/** \file
 * Implementations measured inside neptune_bench, on the inputs Neptune's kernels use: Neptune's own
 * kernels, the unfused cuBLAS path, and the slot for the unfused algorithm compiled by Halide's CUDA
 * backend. Each runs once to be checked, then all are timed interleaved (CUDA events, L2 flushed). */
#include <functional>
#include <optional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "neptune/GpuOperator.h"
#include "neptune/HostTensor.h"

namespace neptune::bench {

/** The implementation cannot run this operator, or not on this machine; what() says why. */
class Unsupported : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class NativeImpl {
public:
    virtual ~NativeImpl() = default;
    /** Copies the inputs (in inst.inputs order) to the device. */
    virtual void set_inputs(const std::vector<HostTensor> &inputs) = 0;
    /** Runs once and returns the outputs (in inst.outputs order). Outputs are poisoned first, so an
     * element the implementation does not write reads back as NaN. */
    virtual std::vector<HostTensor> run() = 0;
    /** One call, timed with CUDA events after the L2 has been flushed: milliseconds. */
    virtual double time_once() = 0;
    /** Kernels, grids and workspace, for the log. */
    virtual std::string describe() const = 0;
    /** The generated code, where there is some (Neptune: the tile program and the CUDA source). */
    virtual std::string dump() const { return ""; }
    /** Device memory a call needs beyond its inputs and outputs, where known. */
    virtual std::optional<double> extra_bytes() const { return std::nullopt; }
};

/** A native implementation by name; `make` throws Unsupported when it cannot run `inst`. */
struct NativeEntry {
    std::string name;
    std::function<std::unique_ptr<NativeImpl>(const OperatorInstance &inst, const GpuOptions &opt)> make;
};

/** The native baselines, in table order: cublas_unfused, halide_unfused, halide_cuda, copy. */
const std::vector<NativeEntry> &native_baselines();

/** The row-wise operators' fused CPU form on Halide's CUDA backend (the softmax, logsumexp,
 * cross_entropy, layernorm and rmsnorm libraries, f16): the ablation of Neptune's own kernels. */
std::unique_ptr<NativeImpl> make_halide_cuda(const OperatorInstance &inst, const GpuOptions &opt);
/** A device copy of the operator's bytes, the bandwidth bound of memory-bound operators (throws
 * Unsupported for the others); its run() returns no outputs and is never checked. */
std::unique_ptr<NativeImpl> make_copy_bound(const OperatorInstance &inst, const GpuOptions &opt);
/** Neptune's kernels (GpuOperator) as a NativeImpl. */
std::unique_ptr<NativeImpl> make_neptune(const OperatorInstance &inst, const GpuOptions &opt);
/** S = scale Q K^T with cuBLAS, a softmax kernel of ours, O = P V with cuBLAS (CublasAttention.cpp),
 * in chunks of rows whose scores and probabilities fit `workspace_bytes` (4 GiB by default). Throws
 * Unsupported for operators other than attention's output in f16 or bf16, or without libcublas. */
std::unique_ptr<NativeImpl> make_cublas_unfused(const OperatorInstance &inst, const GpuOptions &opt);
std::unique_ptr<NativeImpl> make_cublas_unfused(const OperatorInstance &inst, size_t workspace_bytes);
/** The path of the libcublas the baseline opened (NEPTUNE_CUBLAS, the loader's path, the toolkit, or
 * PyTorch's nvidia-cublas wheel); throws Unsupported when none opens. */
std::string cublas_library();
/** The CUDA source of the unfused baseline's softmax kernel (compiled with NVRTC at run time). */
const char *cublas_softmax_source();
/** The unfused algorithm compiled by Halide's CUDA backend (HalideUnfused.cpp). */
std::unique_ptr<NativeImpl> make_halide_unfused(const OperatorInstance &inst, const GpuOptions &opt);
/** The same, with at most `max_call_scores` scores per library call (Halide's int32 extents: 2^31 - 1
 * by default): above it the operator runs in (batch, head) chunks. A test makes it small. */
std::unique_ptr<NativeImpl> make_halide_unfused(const OperatorInstance &inst, int64_t max_call_scores);

/** Per implementation, `warmup` untimed calls, then `repeats` rounds in each of which every
 * implementation is timed once, in an order that rotates from round to round (so clock drift and
 * thermal state fall on all of them alike). Returns each one's median, min and max. */
std::vector<GpuTiming> time_interleaved(const std::vector<NativeImpl *> &impls, int repeats, int warmup);

/** CUDA-event timing of a launch sequence on the default stream, with 256 MB written before the
 * start event (over 4x the H200's 60 MB L2), so no input is served from L2. */
class EventTimer {
public:
    EventTimer();
    ~EventTimer();
    EventTimer(const EventTimer &) = delete;
    EventTimer &operator=(const EventTimer &) = delete;
    double time_ms(const std::function<void()> &launch);

private:
    void *start_ = nullptr, *stop_ = nullptr, *flush_ = nullptr;
    unsigned round_ = 0;
};

/** Throws std::runtime_error with neptune_last_error() when a runtime call fails. */
void check_runtime(int rc, const std::string &what);

}  // namespace neptune::bench

#endif
