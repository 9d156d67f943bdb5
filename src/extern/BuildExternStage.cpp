#include "extern/BuildExternStage.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "codegen/CodeGenCuda.h"
#include "core/SplitChunks.h"
#include "extern/DescribeKernels.h"
#include "extern/IsolateGroup.h"
#include "interop/Descriptor.h"
#include "interop/ExternEntry.h"
#include "lower/Lower.h"
#include "lower/Patterns.h"
#include "neptune/Error.h"
#include "neptune/CompileCuda.h"

namespace neptune::internal {

namespace HI = Halide::Internal;

namespace {

// Shared memory per SM that bounds the blocks a kernel can keep resident, per family: the register
// cap of __launch_bounds__ is only worth its spills when that many blocks fit (GpuOperator does the
// same with the device's figure). sm_8x: the 100 KB of sm_86/89 (A100 has 164); sm_90: 228 KB.
int shared_per_sm(const std::string &arch) {
    if (arch.rfind("sm_90", 0) == 0) return 228 * 1024;
    if (arch == "sm_80") return 164 * 1024;
    return 100 * 1024;
}

void cap_min_blocks(tir::Program &p, const std::string &arch) {
    for (tir::Kernel &k : p.kernels) {
        if (k.min_blocks_per_sm <= 0 || k.shared_bytes == 0 || k.producer_warps) continue;  // specialized: 1 by design
        k.min_blocks_per_sm = std::min(k.min_blocks_per_sm, shared_per_sm(arch) / (k.shared_bytes + 1024));
        if (k.min_blocks_per_sm < 2) k.min_blocks_per_sm = 0;
    }
}

DType dtype_of(const Halide::Type &t) {
    if (t.is_bfloat() && t.bits() == 16) return DType::BF16;
    if (t.is_float() && t.bits() == 16) return DType::F16;
    if (t.is_float() && t.bits() == 32) return DType::F32;
    return DType::I32;
}

interop::TensorSpec tensor_spec(const std::string &name, const Halide::Type &t, bool output,
                                std::vector<std::string> dims) {
    interop::TensorSpec s;
    s.name = name;
    s.output = output;
    s.type_code = int(t.code());
    s.bits = t.bits();
    s.dims = std::move(dims);
    return s;
}

struct ArchTarget {
    GpuArch arch;
    std::string lowering;  // arch_name(arch)
    std::vector<std::string> codes;
    int min_cc, max_cc;
};

std::vector<ArchTarget> targets(const ExternOptions &o) {
    if (o.aot) {
        // Hopper first: its cubin runs only on compute capability 9.0. The sm_80 set's cubin serves
        // 8.x and its compute_90 PTX every later GPU (the driver compiles it).
        return {{GpuArch::Sm90a, "sm_90a", {"sm_90a"}, 90, 90},
                {GpuArch::Sm80, "sm_80", {"sm_80", "compute_90"}, 80, 1000}};
    }
    std::string digits = o.jit_arch.substr(o.jit_arch.rfind('_') + 1);
    const bool hopper = !digits.empty() && digits.back() == 'a';
    if (hopper) digits.pop_back();
    const int cc = std::atoi(digits.c_str());
    if (cc < 80)
        throw CompileError("ExternOptions::jit_arch " + o.jit_arch + ": Neptune's kernels need sm_80 or later");
    return {{hopper ? GpuArch::Sm90a : GpuArch::Sm80, o.jit_arch, {o.jit_arch}, cc, cc}};
}

/** Split-K's tunings. The JIT picks its partial kernel's stages for each shape (decode_stages: 3
 * below one group per SM, else 2) and, on sm_90a's TMA copies with the family's tile, its keys per
 * tile (decode_block_n: 64 where groups leave one block per SM, at head dims up to 128); an AOT stage
 * carries every tuning those rules can pick, keeping what the user fixed (stages; the directive's
 * tile without family_tile). The first, 3 stages, serves where no other fits. On sm_90a's TMA copies
 * with one-warp blocks, each tuning of the chunk-rule's tile (2 to 8 chunks: the cluster sizes) has a
 * cluster-merge twin (FoldCombine.h) that the launcher takes where use_cluster_merge says. */
std::vector<LowerOptions> decode_variants(const LowerOptions &base, const ExternOptions &opt, int dqk, int dv) {
    std::vector<LowerOptions> out;
    auto add = [&](int keys, int stages) {
        LowerOptions o = base;
        o.block_n = keys;
        o.stages = stages;
        out.push_back(o);
    };
    const std::vector<int> stages = opt.stages > 0 ? std::vector<int>{opt.stages} : std::vector<int>{3, 2};
    for (int s : stages) add(base.block_n, s);
    if (opt.family_tile && base.tma_loads && std::max(dqk, dv) <= 128 && base.block_n != 64) add(64, stages[0]);
    if (base.arch == GpuArch::Sm90a && base.tma_loads && base.warps == 1 && base.fold_combine)
        for (int s : stages) {
            add(base.block_n, s);
            out.back().cluster_merge = true;
        }
    return out;
}

std::string join(const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &x : v) s += (s.empty() ? "" : ",") + x;
    return s;
}

// The stage takes the output's name without Halide's uniquifying suffix ("out$1" -> "out"): the
// stage, not the epilogue it replaces, is what the pipeline realizes under that name.
std::string stage_name(const Halide::Func &output) { return output.name().substr(0, output.name().find('$')); }

std::string describe_group(const FusedGroup &g, const Halide::Func &output) {
    return g.plan.directive + " (extern stage " + stage_name(output) + ")";
}

}  // namespace

void refuse_unlowerable(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const std::string &where) {
    const std::string refusal = lowering_refusal(plan, outputs);
    if (!refusal.empty())
        throw CompileError(where + ": " + refusal +
                           ". Run it through lower_to_cpu and Halide's own schedules instead (generators/README.md)");
}

IsolatedGroup isolate_lowerable(const FusedGroup &g, const Halide::Func &output, const ExternOptions &opt) {
    IsolatedGroup iso = isolate_group(g, output, opt.extents);
    const std::string where = describe_group(g, output);
    refuse_unlowerable(iso.group.plan, {iso.output}, where);
    // Row chains get Neptune's kernels through the suite's operators (GpuOperator, neptune_bench); the
    // extern stage's buffer contract is attention's q, k, v and output.
    if (match_pattern(iso.group.plan, {iso.output}).kind == PatternKind::RowChain)
        throw CompileError(where +
                           ": a row chain; its kernels run through the operator suite (GpuOperator, neptune_bench), "
                           "and extern stages take attention-shaped groups for now. Run it through lower_to_cpu and "
                           "Halide's own schedules in a pipeline (generators/README.md)");
    return iso;
}

BuiltExternStage build_extern_stage(const FusedGroup &g, const Halide::Func &output, const ExternOptions &opt) {
    const std::string stage = stage_name(output);
    const std::string where = describe_group(g, output);
    auto fail = [&](const std::string &why) -> void { throw CompileError(where + ": " + why); };
    if (output.function().outputs() != 1) fail("the output must be a single-valued Func");
    // What the tile backend lowers first: options of the lowering only matter for a group it lowers.
    IsolatedGroup iso = isolate_lowerable(g, output, opt);
    if (opt.head_dim_qk <= 0) fail("ExternOptions::head_dim_qk is not set: the kernels are compiled for one head dim");
    const int dqk = opt.head_dim_qk, dv = opt.head_dim_v > 0 ? opt.head_dim_v : opt.head_dim_qk;
    if (dqk % 8 || dv % 8)
        fail("head dims must be multiples of 8 (16-byte copies), got " + std::to_string(dqk) + "/" +
             std::to_string(dv));
    const FusedPlan &plan = iso.group.plan;
    const bool decode = plan.variant == Variant::SplitK;
    std::optional<DType> dtype;
    for (auto &[name, in] : iso.inputs) {
        if (in.dimensions != 4) continue;
        const DType t = dtype_of(in.type);
        if (t != DType::F16 && t != DType::BF16) {
            std::ostringstream os;
            os << in.type;
            fail(name + " is " + os.str() + "; the kernels read f16 or bf16");
        }
        if (dtype && *dtype != t) fail("q, k and v must share one element type");
        dtype = t;
    }
    if (!dtype)
        fail(
            "the tile backend lowers attention-shaped groups (q, k and v of 4 dimensions); this one reads none: "
            "compile it with lower_to_cpu and Halide's schedules (generators/README.md)");
    const int group = opt.group > 0 ? opt.group : 1;

    // 1. The tile programs, emitted and compiled: one per GPU family, and for split-K one per tuning
    // the JIT would pick for some shape (SplitChunks.h), the launcher choosing per call.
    ExternStageInfo info;
    info.name = stage;
    struct Built {
        tir::Program program;
        ArchTarget target;
    };
    std::vector<Built> built;
    // A sliding window takes smaller family tiles; the plan tells (the same for every family).
    const bool windowed =
        opt.family_tile && !decode &&
        skips_leading_tiles(plan, {iso.output}, default_lower_options(GpuArch::Sm80, *dtype, dqk, dv, false, group));
    for (const ArchTarget &a : targets(opt)) {
        LowerOptions base = default_lower_options(a.arch, *dtype, dqk, dv, decode, group, windowed);
        if (!opt.family_tile) base.block_n = plan.tile;
        if (opt.warps > 0) base.warps = opt.warps;
        if (opt.stages > 0) base.stages = opt.stages;
        if (opt.min_blocks >= 0) base.min_blocks_per_sm = opt.min_blocks;
        if (decode && group > 16 * base.warps)
            fail(std::to_string(group) + " query heads per KV head need " + std::to_string((group + 15) / 16) +
                 " warps");
        std::vector<LowerOptions> variants = {base};  // the first serves shapes no other fits
        if (decode) variants = decode_variants(base, opt, dqk, dv);
        for (const LowerOptions &lo : variants) {
            tir::Program p = lower_to_tiles(plan, {iso.output}, lo);
            cap_min_blocks(p, a.lowering);
            ExternStageInfo::KernelSet set;
            set.arch = arch_name(a.arch);
            set.codes = join(a.codes);
            if (decode) {
                set.tile_keys = lo.block_n;
                set.stages = lo.stages;
                set.cluster = lo.cluster_merge;
            }
            set.tile_program = tir::to_string(p);
            set.cuda = emit_cuda(p);
            const std::string stem = stage + "_" + a.lowering +
                                     (decode ? "_" + std::to_string(lo.block_n) + "_" + std::to_string(lo.stages) +
                                                   (lo.cluster_merge ? "_cluster" : "")
                                             : "");
            CompiledModule m;
            if (opt.aot) {
                m = nvcc_fatbin(set.cuda, stem, a.codes, device_headers());
            } else {
                NvrtcOptions no;
                no.arch = a.lowering;
                no.cubin = true;
                no.headers = device_headers();
                no.extra = {"--ptxas-options=-v"};
                m = nvrtc_compile(set.cuda, stem, no);
            }
            set.image.assign(m.cubin.begin(), m.cubin.end());
            set.compile_log = m.log;
            info.sets.push_back(std::move(set));
            built.push_back({std::move(p), a});
        }
    }

    // 2. The stage's buffers: the first kernel's inputs (q, k, v, 1-D extras), then the outputs.
    const tir::Program &p0 = built[0].program;
    const tir::Kernel &k0 = p0.kernels.at(0);
    std::set<std::string> workspaces;
    for (const tir::Workspace &w : p0.workspaces) workspaces.insert(w.name);
    std::vector<std::string> in_names, out_names, extra_extent;
    for (const tir::TensorParam &t : k0.tensors)
        if (!t.output) {
            in_names.push_back(t.name);
            extra_extent.push_back(t.extent);
        }
    for (const tir::Kernel &k : p0.kernels)
        for (const tir::TensorParam &t : k.tensors)
            if (t.output && !workspaces.count(t.name) &&
                std::find(out_names.begin(), out_names.end(), t.name) == out_names.end())
                out_names.push_back(t.name);
    if (in_names.size() < 3 || out_names.size() != 1)
        throw InternalError(where + ": expected q, k, v and one output among the kernel tensors");
    const std::string D = std::to_string(dqk), DV = std::to_string(dv);
    const std::vector<std::vector<std::string>> in_dims = {
        {D, "seq_q", "q_heads", "batch"}, {D, "seq_kv", "kv_heads", "batch"}, {DV, "seq_kv", "kv_heads", "batch"}};
    interop::GroupDescriptor d;
    d.name = stage;
    d.jit = !opt.aot;
    std::vector<Halide::ExternFuncArgument> inputs;
    std::map<std::string, Halide::Expr> extent_of = opt.extents;
    for (size_t i = 0; i < in_names.size(); i++) {
        auto it = iso.inputs.find(in_names[i]);
        if (it == iso.inputs.end())
            throw InternalError(where + ": the kernels read " + in_names[i] + ", which the group does not");
        const GroupInput &in = it->second;
        if (i >= 3 && extra_extent[i].empty())
            throw InternalError(where + ": the kernels read " + in_names[i] + " without its extent");
        const std::vector<std::string> dims = i < 3 ? in_dims[i] : std::vector<std::string>{extra_extent[i]};
        if (in.dimensions != int(dims.size()))
            fail(in.name + " has " + std::to_string(in.dimensions) + " dimensions; the kernels read it as " +
                 std::to_string(dims.size()));
        d.buffers.push_back(tensor_spec(in.name, in.type, false, dims));
        inputs.push_back(in.arg);
        if (in.extents)
            for (size_t k = 0; k < dims.size(); k++)
                if (!std::isdigit(static_cast<unsigned char>(dims[k][0]))) extent_of.emplace(dims[k], (*in.extents)[k]);
    }
    const Halide::Type out_type = output.function().output_types()[0];
    const std::vector<std::string> out_dims = output.dimensions() == 4
                                                  ? std::vector<std::string>{DV, "seq_q", "q_heads", "batch"}
                                                  : std::vector<std::string>{"seq_q", "q_heads", "batch"};
    if (output.dimensions() != int(out_dims.size())) fail("the output must have 3 or 4 dimensions");
    d.buffers.push_back(tensor_spec(out_names[0], out_type, true, out_dims));
    const int num_buffers = int(d.buffers.size());
    if (num_buffers > interop::max_extern_buffers) fail("more buffers than an extern entry point takes");

    // 3. Scalars: every int parameter of the kernels but split-K's chunk count and tile order (the
    // launcher picks those), as Exprs of the pipeline.
    std::vector<Halide::Expr> scalars;
    for (const tir::Kernel &k : p0.kernels)
        for (const std::string &p : k.int_params) {
            if (is_split_k_launch_param(p) || std::find(d.scalars.begin(), d.scalars.end(), p) != d.scalars.end())
                continue;
            auto e = extent_of.find(p);
            if (e == extent_of.end())
                fail("the extent " + p +
                     " is in no input buffer (the group reads Funcs); pass ExternOptions::extents[\"" + p + "\"]");
            d.scalars.push_back(p);
            scalars.push_back(Halide::cast<int32_t>(e->second));
        }
    if (d.scalars.size() > size_t(interop::extern_scalars))
        throw InternalError(where + ": too many kernel int parameters");
    auto has = [&](const std::string &n) {
        return std::find(d.scalars.begin(), d.scalars.end(), n) != d.scalars.end();
    };
    if (has("q_heads") && has("kv_heads")) {
        d.constraints.push_back({"(< 0 kv_heads)", "kv_heads must be positive"});
        d.constraints.push_back({"(== (% q_heads kv_heads) 0)", "q_heads must be a multiple of kv_heads"});
        if (opt.group > 0)
            d.constraints.push_back(
                {"(== q_heads (* " + std::to_string(opt.group) + " kv_heads))",
                 "the kernels were compiled for " + std::to_string(opt.group) + " query heads per KV head"});
    }
    if (decode) {
        const int rows = k0.rows();
        d.constraints.push_back({"(== seq_q 1)", "decode kernels take one query row per head (seq_q must be 1)"});
        d.constraints.push_back(
            {"(<= (/ q_heads kv_heads) " + std::to_string(rows) + ")",
             "a KV group's query heads are the decode kernels' rows, at most " + std::to_string(rows)});
        d.chunks = opt.chunks < 0 ? plan.chunks : opt.chunks > 0 ? opt.chunks : -1;
        d.split_blocks = "(* batch kv_heads)";
        d.split_keys = "seq_kv";
    }

    // 4. The kernel sets, checked against the stage's arguments.
    for (size_t s = 0; s < built.size(); s++) {
        interop::KernelSet ks = describe_kernels(built[s].program);
        ks.arch = info.sets[s].arch;
        ks.codes = info.sets[s].codes;
        ks.min_cc = built[s].target.min_cc;
        ks.max_cc = built[s].target.max_cc;
        ks.tile_keys = info.sets[s].tile_keys;
        ks.stages = info.sets[s].stages;
        ks.cluster = info.sets[s].cluster;
        ks.image = info.sets[s].image;
        std::set<std::string> known;
        for (const interop::TensorSpec &t : d.buffers) known.insert(t.name);
        for (const interop::WorkspaceSpec &w : ks.workspaces) known.insert(w.name);
        for (const interop::KernelSpec &k : ks.kernels) {
            for (const std::string &t : k.tensors)
                if (!known.count(t))
                    throw InternalError(where + ": kernel " + k.name + " reads " + t + ", no buffer of the stage");
            for (const std::string &n : k.ints)
                if (!is_split_k_launch_param(n) && !has(n))
                    throw InternalError(where + ": kernel " + k.name + " takes " + n + ", no scalar of the stage");
        }
        d.sets.push_back(std::move(ks));
    }
    info.descriptor = interop::write_descriptor(d);
    info.extern_function = interop::extern_function_name(num_buffers);

    // 5. The extern stage itself, bound to whole outputs.
    // An AOT pipeline has a user context only with Target::UserContext; elsewhere Halide passes none.
    const Halide::Expr user_context = !opt.aot || opt.user_context
                                          ? Halide::user_context_value()
                                          : Halide::reinterpret(Halide::Handle(), Halide::cast<uint64_t>(0));
    std::vector<Halide::ExternFuncArgument> args = {user_context, Halide::Expr(info.descriptor),
                                                    HI::make_device_interface_call(Halide::DeviceAPI::CUDA)};
    for (size_t s = 0; s < size_t(interop::extern_scalars); s++)
        args.push_back(s < scalars.size() ? scalars[s] : Halide::Expr(0));
    args.insert(args.end(), inputs.begin(), inputs.end());
    std::vector<Halide::Var> vars;
    for (const std::string &a : output.function().args()) vars.push_back(Halide::Var(a));
    Halide::Func ext(stage);
    ext.define_extern(info.extern_function, args, {out_type}, vars, Halide::NameMangling::Default,
                      Halide::DeviceAPI::CUDA);
    // At root: the stage computes whole outputs anyway, and Halide 21 crashes compiling a GPU loop
    // that reads an extern stage left at the default (inline) level.
    ext.compute_root();
    for (size_t k = 0; k < vars.size(); k++) {
        const std::string &e = out_dims[k];
        ext.bound(vars[k], 0,
                  std::isdigit(static_cast<unsigned char>(e[0])) ? Halide::Expr(std::stoi(e)) : extent_of.at(e));
    }
    return {ext, info};
}

}  // namespace neptune::internal
