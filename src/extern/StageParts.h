#ifndef NEPTUNE_EXTERN_STAGE_PARTS_H
#define NEPTUNE_EXTERN_STAGE_PARTS_H
/** \file
 * What every pattern's extern stage is made of: the GPU families it is compiled for, its buffer
 * specs, the compilation of its kernels, and the Halide extern Func that calls the launcher. */
#include <string>
#include <utility>
#include <vector>

#include "Halide.h"
#include "interop/Descriptor.h"
#include "neptune/CompileCuda.h"
#include "neptune/DType.h"
#include "neptune/GpuPipeline.h"
#include "tir/IR.h"

namespace neptune::internal {

/** The device library's headers as (name, contents), embedded at build time (DeviceHeaders.cpp):
 * nvcc and NVRTC compile emitted kernels without the source tree. */
const std::vector<std::pair<std::string, std::string>> &device_headers();

/** A GPU family a stage is compiled for, and the devices (compute capabilities) its image serves. */
struct ArchTarget {
    GpuArch arch;
    std::string lowering;  // arch_name(arch)
    std::vector<std::string> codes;
    int min_cc, max_cc;
};

/** AOT: sm_90a (Hopper's cubin), then sm_80 (a cubin for 8.x and compute_90 PTX for later GPUs).
 * JIT: the options' jit_arch alone. Throws CompileError for an architecture before sm_80. */
std::vector<ArchTarget> stage_targets(const ExternOptions &o);

/** f16, bf16, f32; I32 for anything else (the caller refuses what it does not read). */
DType dtype_of(const Halide::Type &t);

interop::TensorSpec tensor_spec(const std::string &name, const Halide::Type &t, bool output,
                                std::vector<std::string> dims);

/** The stage takes the output's name without Halide's uniquifying suffix ("out$1" -> "out"): the
 * stage, not the epilogue it replaces, is what the pipeline realizes under that name. */
std::string stage_name(const Halide::Func &output);

/** `cuda` compiled for `target`: nvcc's fatbin of its codes (AOT) or an NVRTC cubin (JIT), with
 * ptxas's resource report in the log. `stem` names the program in messages. */
CompiledModule compile_stage(const std::string &cuda, const std::string &stem, const ArchTarget &target, bool aot);

/** Whether a stage's kernel sets are compiled on first use (interop::KernelSet::source) rather than
 * now: just in time, where a stage holds several sets (a row chain's ladder of shapes, decode's
 * tunings), of which a call takes one. AOT stages hold every image. */
bool defers_sets(size_t sets, bool aot);

/** The images of `sources` (source i compiled for targets[i], named stems[i]), compiled concurrently
 * (NVRTC and nvcc compile separate programs in parallel): a stage compiles in the time of its
 * largest kernel. */
std::vector<CompiledModule> compile_sets(const std::vector<std::string> &sources, const std::vector<std::string> &stems,
                                         const std::vector<ArchTarget> &targets, bool aot);

/** The kernel compiler the launcher calls for a set compiled on first use
 * (neptune_halide_kernel_compiler_fn): NVRTC's cubin of the source for `arch`, ptxas's report in
 * the NEPTUNE_DUMP_CUDA logs. compile_gpu installs it. */
int jit_kernel_compiler(const char *source, const char *arch, const char *name, char **image, size_t *size,
                        char **message);

/** The extern Func `name` that calls the launcher with `descriptor`: the scalars (padded to the
 * entry point's count), then `inputs`; one output of `type` over `vars`, computed at root and bound
 * to [0, extent) in each dimension. */
Halide::Func define_stage(const std::string &name, const std::string &descriptor,
                          const std::vector<Halide::Expr> &scalars,
                          const std::vector<Halide::ExternFuncArgument> &inputs, int num_buffers,
                          const Halide::Type &type, const std::vector<std::string> &vars,
                          const std::vector<Halide::Expr> &extents, const ExternOptions &opt);

/** Which of a group's outputs is its stage's own buffer: the first of the highest rank (y before
 * its log-sum-exp, attention's out before its row statistics); the others are secondary. */
size_t primary_output(const std::vector<Halide::Func> &outputs);

/** An output of a group beside its stage's own (log-sum-exp beside y or attention's out): the
 * kernels write it into a per-thread workspace of the launcher, and a copy stage hands it on. */
struct SecondaryOutput {
    Halide::Func output;  // the user's Func (its name and variables)
    std::string tensor;  // the kernels' tensor
    Halide::Type type;
    std::vector<std::string> dims;  // innermost first, over the stage's scalars
    std::vector<Halide::Expr> extents;  // the same as Exprs of the pipeline
};

/** Declares each secondary output a per-thread workspace of every kernel set of `d`. */
void keep_secondary_outputs(interop::GroupDescriptor &d, const std::vector<SecondaryOutput> &outputs);

/** The copy stage of `out`: it reads `stage` (the group's own Func, whose buffer `stage_buffer`
 * describes) only to run after it, and copies what the group's last call on this thread left for
 * `out`. `group_descriptor` is the group's written descriptor. */
Halide::Func copy_stage(const SecondaryOutput &out, const Halide::Func &stage, const interop::TensorSpec &stage_buffer,
                        const std::string &group_descriptor, const std::vector<std::string> &scalar_names,
                        const std::vector<Halide::Expr> &scalars, const ExternOptions &opt, ExternStageInfo *info);

}  // namespace neptune::internal

#endif
