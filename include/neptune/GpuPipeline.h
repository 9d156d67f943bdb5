#ifndef NEPTUNE_GPU_PIPELINE_H
#define NEPTUNE_GPU_PIPELINE_H
/** \file
 * Fused reduction groups on the GPU, inside Halide pipelines. extern_stages() turns each group the
 * outputs depend on (its targets and the epilogue up to the output, e.g. attention's `out`) into an
 * extern stage of the pipeline that launches Neptune's kernels; everything else stays Halide's. The
 * stage runs on Halide's device buffers in one CUDA context (runtime/NeptuneHalide.h), answers
 * bounds queries (it needs every input whole and writes the whole output), and refuses wrong buffers
 * with a Halide error code and a message naming the buffer.
 *
 * \code
 * // JIT: algorithm, directives, run (a few lines)
 * neptune::algorithms::AttentionFuncs a = neptune::algorithms::attention(spec, DType::F16, in, false);
 * neptune::fuse_reduction({a.acc, a.row_sum}, Halide::RVar(a.kv.x)).rolling_update(64);
 * neptune::ExternOptions o;
 * o.head_dim_qk = 128;
 * neptune::GpuPipeline p = neptune::compile_gpu({a.out}, o);
 * p.realize(out_buffer);
 * // AOT, in a Generator's generate(): out = neptune::extern_stages({a.out}, options)[0];
 * \endcode
 *
 * The stage is DeviceAPI::CUDA, so Halide puts its output on the device before the call and marks
 * it device-dirty after (a GPU consumer reads it there, a host consumer gets a copy back); inputs
 * arrive as they are, and the stage moves host-only ones to the device through Halide's own runtime
 * (halide_cuda_device_interface), where they stay attached to their buffers. A Host stage would put
 * every output on the host: a round trip per call for the usual all-GPU pipeline.
 *
 * Which groups get Neptune's kernels: those a pattern of the tile backend lowers (attention; row
 * chains: softmax, log-sum-exp, cross-entropy, LayerNorm, RMSNorm and chains of their shape). Other
 * groups raise CompileError here with each pattern's reason; run them through lower_to_cpu() and
 * Halide's own schedules instead (generators/README.md).
 *
 * Several outputs of one group (softmax's y and its log-sum-exp) are written by one kernel: pass
 * them together, compile_gpu({y, lse}); each becomes a Func of its own (the first of the highest
 * rank is the group's stage, the others copy their values from it, a few bytes per row). Attention
 * gives one output for now. */
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "Halide.h"

namespace neptune {

struct ExternOptions {
    /** Head dims the kernels are compiled for (checked at run time); head_dim_v 0: head_dim_qk. */
    int head_dim_qk = 0, head_dim_v = 0;
    /** Query heads per KV head. Decode kernels hold one KV group's heads as rows, so they are compiled
     * for it (1 when 0). Prefill serves any grouping; > 0 makes the stage require exactly this one. */
    int group = 0;
    /** Tile parameters; 0 (or -1 for min_blocks) keeps lower/Lower.h's defaults for the GPU family,
     * but split-K's stages 0 compiles a kernel for each depth the JIT picks from (3 and 2), the
     * launcher choosing per call as the JIT would (core/SplitChunks.h's decode_stages). */
    int warps = 0, stages = 0, min_blocks = -1;
    /** true: the kernels take each GPU family's own KV tile, as the JIT's operators do, in place of
     * the fusion directive's tile, which then shapes the CPU form only. Prefill: 192 keys on sm_90a's
     * wgmma path at head dims up to 128 (128 under a sliding window), 64 on sm_80. Split-K: 32 keys,
     * and on sm_90a also 64-key kernels, which the launcher takes where the JIT would (few groups per
     * SM). */
    bool family_tile = false;
    /** Split-K groups: -1 the directive's chunk count, 0 chosen at run time from the device and shape
     * (core/SplitChunks.h), > 0 fixed. */
    int chunks = 0;
    /** Expressions for the problem's extents (batch, q_heads, kv_heads, seq_q, seq_kv) where no input
     * buffer has them, e.g. when the group reads a Func (a pre-scaled q) rather than a buffer. Taken
     * from the input buffers (or a pointwise Func of one) otherwise. */
    std::map<std::string, Halide::Expr> extents;
    /** AOT: one kernel set per GPU family, compiled by nvcc into the pipeline (an sm_80 fatbin with
     * compute_90 PTX for newer GPUs; an sm_90a cubin). JIT: one set for `jit_arch` by NVRTC. */
    bool aot = true;
    std::string jit_arch;  // JIT: sm_XY (sm_90a for Hopper); empty: this process's GPU, sm_80 without one
    /** AOT: the target has Target::UserContext, so the stage passes the pipeline's user context to
     * Halide's runtime calls and error handler (else none, as Halide's own calls). JIT: always. */
    bool user_context = false;
};

/** What Neptune compiled for one extern stage: for dumps, tests and the generator's side outputs. */
struct ExternStageInfo {
    std::string name;  // the group's output Func
    std::string extern_function;  // neptune_halide_extern_<N>
    struct KernelSet {
        std::string arch;  // the lowering's GPU family: sm_80, sm_90a
        std::string codes;  // what the image holds: "sm_80,compute_90"
        int tile_keys = 0, stages = 0;  // split-K: the tuning of this set (keys per tile, stages); else 0
        bool cluster = false;  // split-K: its groups merge in thread block clusters (sm_90a)
        std::string tile_program;  // tir::to_string
        std::string cuda;  // the emitted CUDA C++ (empty where an earlier set's source holds the kernels)
        /** The fatbin, cubin or PTX the stage loads (empty likewise). Just in time, a stage of several
         * sets (a row chain's ladder of shapes, decode's tunings) compiles each when a call first
         * takes it: then image and compile_log stay empty here. */
        std::string image;
        std::string compile_log;  // nvcc's (with ptxas -v) or NVRTC's messages
    };
    std::vector<KernelSet> sets;
    std::string descriptor;  // the JSON the stage carries (interop/Descriptor.h)
};

/** Replaces every fused group that `outputs` depend on by an extern stage (DeviceAPI::CUDA), and
 * returns the Funcs to realize: `outputs`, each replaced by its group's extern stage where it is a
 * group's output. Funcs outside the groups that read an output now read the stage. Funcs the group
 * reads that are scheduled on their own (compute_root, GPU loops, extern) stay Halide stages and
 * become the stage's inputs; Funcs left inline are part of the group. Throws CompileError naming
 * the group for what the tile backend cannot lower or the options cannot describe. The target must
 * have CUDA (Target::CUDA with a capability: docs/design/halide.md, generators). */
std::vector<Halide::Func> extern_stages(const std::vector<Halide::Func> &outputs, const ExternOptions &options);

/** The extern stages built so far in this process, oldest first (the generator's main writes them
 * next to the library it emits). */
const std::vector<ExternStageInfo> &extern_stages_built();

/** Points `p`'s JIT CUDA runtime at Neptune's context and stream (NeptuneHalide.h). */
void share_cuda_context(Halide::Pipeline &p);
/** The same for Halide's JIT runtime as a whole (its default handlers): device memory that
 * Halide::Buffer::copy_to_device allocates outside any pipeline then lives in Neptune's context too.
 * compile_gpu() calls both. */
void share_cuda_context();

/** Makes a JIT Pipeline built from extern_stages() results runnable: Neptune's entry points as its
 * JIT externs (kept beside the pipeline's own), its CUDA runtime on Neptune's context, stage errors
 * in Halide::RuntimeError. compile_gpu() does this for the pipeline it returns. */
void prepare_jit(Halide::Pipeline &p);

/** JIT: the host plus CUDA at Halide 21's highest capability (86; the H200's driver runs its PTX). */
Halide::Target gpu_jit_target();

/** A pipeline whose fused groups run Neptune's kernels, compiled just in time for this machine's
 * GPU (sm_80 code for inspection where there is none). */
class GpuPipeline {
public:
    GpuPipeline(Halide::Pipeline pipeline, std::vector<ExternStageInfo> stages);
    /** Realizes into `outputs` (device_dirty afterwards: call copy_to_host to read them). Throws
     * Halide::RuntimeError with the stage's message on bad buffers or CUDA failures. */
    void realize(Halide::Pipeline::RealizationArg outputs);
    Halide::Pipeline &pipeline() { return pipeline_; }
    const std::vector<ExternStageInfo> &stages() const { return stages_; }
    /** Dumps of every stage's kernels: the tile program, the CUDA source, PTX (NVRTC) and ptxas's
     * resource report (nvcc -Xptxas -v; needs the toolkit's nvcc). */
    std::string tile_program() const;
    std::string cuda_source() const;
    std::string ptx() const;
    std::string ptxas_report() const;

private:
    Halide::Pipeline pipeline_;
    std::vector<ExternStageInfo> stages_;
};

/** extern_stages() for this process's GPU, then a Pipeline with Neptune's JIT externs and context.
 * NEPTUNE_DEBUG=2 prints the tile program after each lowering pass, NEPTUNE_DUMP_CUDA=dir keeps the
 * sources and logs of every compilation. */
GpuPipeline compile_gpu(const std::vector<Halide::Func> &outputs, ExternOptions options = {});

}  // namespace neptune

#endif
