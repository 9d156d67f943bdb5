// The inspection API (include/neptune/Inspect.h) over the internal tile IR, lowering and interpreter.
#include "neptune/Inspect.h"

#include <optional>

#include "core/SplitChunks.h"
#include "lower/Lower.h"
#include "neptune/Error.h"
#include "suite/LowerOperator.h"
#include "tir/Interpreter.h"

namespace neptune::inspect {

namespace HI = Halide::Internal;

struct TileProgram::Impl {
    tir::Program program;
    std::map<std::string, int64_t> ints;
};

TileProgram::TileProgram(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

std::string TileProgram::text() const { return tir::to_string(impl_->program); }

std::vector<KernelSummary> TileProgram::kernels() const {
    std::vector<KernelSummary> out;
    for (const tir::Kernel &k : impl_->program.kernels) out.push_back({k.name, k.warps, k.shared_bytes});
    return out;
}

std::vector<WorkspaceSummary> TileProgram::workspaces() const {
    std::vector<WorkspaceSummary> out;
    for (const tir::Workspace &w : impl_->program.workspaces) out.push_back({w.name, w.zeroed});
    return out;
}

const std::map<std::string, int64_t> &TileProgram::ints() const { return impl_->ints; }

void TileProgram::interpret(const std::vector<HostTensor *> &tensors,
                            const std::map<std::string, int64_t> &ints) const {
    tir::LaunchArgs args;
    args.ints = ints;
    tir::bind_dense_strides(impl_->program, args.ints);
    for (HostTensor *t : tensors) args.tensors[t->desc.name] = t;
    std::map<std::string, Halide::Expr> vars;
    for (const auto &[name, v] : ints) vars[name] = Halide::Expr(int(v));
    std::vector<HostTensor> ws;
    ws.reserve(impl_->program.workspaces.size());
    for (const tir::Workspace &w : impl_->program.workspaces) {
        const Halide::Expr n = HI::simplify(HI::substitute(vars, w.elements));
        const std::optional<int64_t> elements = HI::as_const_int(n);
        if (!elements) throw CompileError("workspace " + w.name + ": its size needs int parameters not given");
        ws.emplace_back(TensorDesc{w.name, DType::F32, {*elements}});
    }
    for (HostTensor &t : ws) args.tensors[t.desc.name] = &t;
    tir::interpret(impl_->program, args);
}

TileProgram lower_operator(const OperatorInstance &inst, const TileOptions &opt) {
    internal::LoweringChoices c;
    c.block_n = opt.block_n;
    c.chunks = opt.chunks;
    c.fold_combine = opt.fold_combine ? 1 : 0;
    internal::OperatorLowering l = internal::lower_operator(inst, c);
    return TileProgram(std::make_shared<const TileProgram::Impl>(TileProgram::Impl{l.program, l.ints}));
}

TileProgram lower_group(const FusedReduction &group, const std::vector<Halide::Func> &outputs, const OperatorSpec &spec,
                        const TileOptions &opt) {
    const AttentionSpec &a = spec.attention;
    internal::LowerOptions lo = internal::default_lower_options(GpuArch::Sm80, spec.dtype, a.head_dim_qk, a.head_dim_v,
                                                                a.decode, a.q_heads / a.kv_heads);
    if (opt.block_n) lo.block_n = opt.block_n;
    lo.fold_combine = opt.fold_combine;
    return TileProgram(std::make_shared<const TileProgram::Impl>(
        TileProgram::Impl{internal::lower_to_tiles(group.plan(), outputs, lo), {}}));
}

int split_k_chunks(int64_t groups, int64_t keys, int tile_keys, int sms, int resident) {
    return internal::split_k_chunks(groups, keys, tile_keys, sms, resident);
}

int resident_blocks(int shared_bytes, int max_shared_per_block) {
    return internal::resident_blocks(shared_bytes, max_shared_per_block);
}

}  // namespace neptune::inspect
