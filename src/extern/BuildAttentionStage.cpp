#include "extern/PatternStages.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "codegen/CodeGenCuda.h"
#include "core/SplitChunks.h"
#include "core/StrideParams.h"
#include "extern/DescribeKernels.h"
#include "extern/IsolateGroup.h"
#include "interop/Descriptor.h"
#include "extern/StageParts.h"
#include "interop/ExternEntry.h"
#include "lower/BuildTileProgram.h"
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

}  // namespace

BuiltStages build_attention_stage(const FusedGroup &g, const IsolatedGroup &iso, const ExternOptions &opt) {
    const size_t primary = primary_output(iso.outputs);
    const Halide::Func &output = iso.outputs[primary];
    const std::string stage = stage_name(output);
    const std::string where = describe_group(g, output);
    auto fail = [&](const std::string &why) -> void { throw CompileError(where + ": " + why); };
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
    std::vector<std::string> stems;  // per set: the name its compiled module goes by
    // A sliding window takes smaller family tiles; the plan tells (the same for every family).
    const bool windowed =
        opt.family_tile && !decode &&
        skips_leading_tiles(plan, iso.outputs, default_lower_options(GpuArch::Sm80, *dtype, dqk, dv, false, group));
    const bool paged =
        reads_paged_cache(plan, iso.outputs, default_lower_options(GpuArch::Sm80, *dtype, dqk, dv, decode, group));
    for (const ArchTarget &a : stage_targets(opt)) {
        LowerOptions base = default_lower_options(a.arch, *dtype, dqk, dv, decode, group, windowed);
        if (!opt.family_tile) base.block_n = plan.tile;
        if (opt.warps > 0) base.warps = opt.warps;
        if (opt.stages > 0) base.stages = opt.stages;
        if (opt.min_blocks >= 0) base.min_blocks_per_sm = opt.min_blocks;
        if (decode && group > 16 * base.warps)
            fail(std::to_string(group) + " query heads per KV head need " + std::to_string((group + 15) / 16) +
                 " warps");
        // A paged cache's page size is a run-time value and a KV tile lies in one page (a constraint
        // below checks the call's): the family's tiles stay at 64 keys or fewer, and every set takes
        // the same tile, so pages of 64 (or any multiple of the tile) serve.
        if (paged && opt.family_tile) base.block_n = std::min(base.block_n, 64);
        std::vector<LowerOptions> variants = {base};  // the first serves shapes no other fits
        if (decode) variants = decode_variants(base, opt, dqk, dv);
        if (paged)
            variants.erase(std::remove_if(variants.begin(), variants.end(),
                                          [&](const LowerOptions &lo) { return lo.block_n != base.block_n; }),
                           variants.end());
        for (const LowerOptions &lo : variants) {
            tir::Program p = lower_to_tiles(plan, iso.outputs, lo);
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
            stems.push_back(stem);
            info.sets.push_back(std::move(set));
            built.push_back({std::move(p), a});
        }
    }
    // Decode's tunings are several kernel sets per family: compiled concurrently, or just in time
    // each when a call first takes it.
    const bool deferred = defers_sets(info.sets.size(), opt.aot);
    if (!deferred) {
        std::vector<std::string> sources;
        std::vector<ArchTarget> targets;
        for (size_t i = 0; i < info.sets.size(); i++) {
            sources.push_back(info.sets[i].cuda);
            targets.push_back(built[i].target);
        }
        const std::vector<CompiledModule> modules = compile_sets(sources, stems, targets, opt.aot);
        for (size_t i = 0; i < info.sets.size(); i++) {
            info.sets[i].image.assign(modules[i].cubin.begin(), modules[i].cubin.end());
            info.sets[i].compile_log = modules[i].log;
        }
    }

    // 2. The stage's buffers: the first kernel's inputs (q, k, v, 1-D extras), then the outputs.
    const tir::Program &p0 = built[0].program;
    const tir::Kernel &k0 = p0.kernels.at(0);
    std::set<std::string> workspaces;
    for (const tir::Workspace &w : p0.workspaces) workspaces.insert(w.name);
    std::vector<std::string> in_names, out_names;
    std::vector<std::vector<std::string>> extra_dims;  // the extents of inputs past q, k and v, innermost first
    for (const tir::TensorParam &t : k0.tensors)
        if (!t.output) {
            in_names.push_back(t.name);
            extra_dims.push_back(!t.dims.empty()    ? t.dims
                                 : t.extent.empty() ? std::vector<std::string>{}
                                                    : std::vector<std::string>{t.extent});
        }
    for (const tir::Kernel &k : p0.kernels)
        for (const tir::TensorParam &t : k.tensors)
            if (t.output && !workspaces.count(t.name) &&
                std::find(out_names.begin(), out_names.end(), t.name) == out_names.end())
                out_names.push_back(t.name);
    if (in_names.size() < 3 || out_names.size() != iso.outputs.size())
        throw InternalError(where + ": expected q, k, v and the group's outputs among the kernel tensors");
    const std::string D = std::to_string(dqk), DV = std::to_string(dv);
    // A paged cache is [pages, kv_heads, page_size, head_dim], its table [batch, max_pages].
    const std::string kv_rows = paged ? "page_size" : "seq_kv", kv_batch = paged ? "pages" : "batch";
    const std::vector<std::vector<std::string>> in_dims = {
        {D, "seq_q", "q_heads", "batch"}, {D, kv_rows, "kv_heads", kv_batch}, {DV, kv_rows, "kv_heads", kv_batch}};
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
        if (i >= 3 && extra_dims[i].empty())
            throw InternalError(where + ": the kernels read " + in_names[i] + " without its extent");
        const std::vector<std::string> dims = i < 3 ? in_dims[i] : extra_dims[i];
        if (in.dimensions != int(dims.size()))
            fail(in.name + " has " + std::to_string(in.dimensions) + " dimensions; the kernels read it as " +
                 std::to_string(dims.size()));
        d.buffers.push_back(tensor_spec(in.name, in.type, false, dims));
        inputs.push_back(in.arg);
        if (in.extents)
            for (size_t k = 0; k < dims.size(); k++)
                if (!std::isdigit(static_cast<unsigned char>(dims[k][0]))) extent_of.emplace(dims[k], (*in.extents)[k]);
    }
    const auto dims_of = [&](const Halide::Func &o) {
        if (o.dimensions() == 4) return std::vector<std::string>{DV, "seq_q", "q_heads", "batch"};
        if (o.dimensions() == 3) return std::vector<std::string>{"seq_q", "q_heads", "batch"};
        fail("output " + o.name() + " must have 3 or 4 dimensions");
        return std::vector<std::string>{};
    };
    const auto extents_of = [&](const std::vector<std::string> &dims) {
        std::vector<Halide::Expr> e;
        for (const std::string &n : dims)
            e.push_back(std::isdigit(static_cast<unsigned char>(n[0])) ? Halide::Expr(std::stoi(n)) : extent_of.at(n));
        return e;
    };
    const Halide::Type out_type = output.function().output_types()[0];
    const std::vector<std::string> out_dims = dims_of(output);
    d.buffers.push_back(tensor_spec(base_name(output.name()), out_type, true, out_dims));
    std::vector<SecondaryOutput> secondary;
    for (size_t i = 0; i < iso.outputs.size(); i++)
        if (i != primary) {
            const Halide::Func &o = iso.outputs[i];
            const std::vector<std::string> dims = dims_of(o);
            for (const std::string &n : dims)
                if (!std::isdigit(static_cast<unsigned char>(n[0])) && !extent_of.count(n))
                    fail("the extent " + n + " is in no input buffer; pass ExternOptions::extents[\"" + n + "\"]");
            secondary.push_back({o, base_name(o.name()), o.function().output_types()[0], dims, extents_of(dims)});
        }
    const int num_buffers = int(d.buffers.size());
    if (num_buffers > interop::max_extern_buffers) fail("more buffers than an extern entry point takes");

    // 3. Scalars: every int parameter of the kernels but split-K's chunk count and tile order (the
    // launcher picks those) and the strides of the stage's buffers (it reads them from the buffers),
    // as Exprs of the pipeline. A secondary output is a dense workspace: its strides are scalars.
    std::vector<Halide::Expr> scalars;
    for (const tir::Kernel &k : p0.kernels)
        for (const std::string &p : k.int_params) {
            if (is_split_k_launch_param(p) || std::find(d.scalars.begin(), d.scalars.end(), p) != d.scalars.end())
                continue;
            std::string tensor;
            int dim = 0;
            if (parse_stride_param(p, &tensor, &dim)) {
                bool buffer = false;
                for (interop::TensorSpec &t : d.buffers)
                    if (t.name == tensor) {
                        t.strided = buffer = true;
                        if (dim >= int(t.dims.size()))
                            throw InternalError(where + ": " + p + " strides a dimension " + tensor + " lacks");
                    }
                if (buffer) continue;
                const SecondaryOutput *o = nullptr;
                for (const SecondaryOutput &s2 : secondary)
                    if (s2.tensor == tensor) o = &s2;
                if (!o || dim >= int(o->extents.size()))
                    throw InternalError(where + ": the kernels take " + p + ", a stride of no buffer of the stage");
                Halide::Expr dense = Halide::Expr(1);
                for (int e = 0; e < dim; e++) dense = dense * o->extents[size_t(e)];
                d.scalars.push_back(p);
                scalars.push_back(Halide::cast<int32_t>(dense / kStrideUnit));
                continue;
            }
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
    if (paged) {
        const std::string keys = std::to_string(k0.values.at("k_s").rows);
        d.constraints.push_back(
            {"(== (% page_size " + keys + ") 0)", "the paged kernels read KV tiles of " + keys +
                                                      " keys from one page, so the page size must be a multiple of " +
                                                      keys + " (compile with a tile of 16 keys for pages of 16)"});
    }
    if (decode) {
        const int rows = k0.rows();
        d.constraints.push_back({"(== seq_q 1)", "decode kernels take one query row per head (seq_q must be 1)"});
        d.constraints.push_back(
            {"(<= (/ q_heads kv_heads) " + std::to_string(rows) + ")",
             "a KV group's query heads are the decode kernels' rows, at most " + std::to_string(rows)});
        d.chunks = opt.chunks < 0 ? plan.chunks : opt.chunks > 0 ? opt.chunks : -1;
        d.split_blocks = "(* batch kv_heads)";
        d.split_keys = paged ? "(* max_pages page_size)" : "seq_kv";  // the most keys a sequence holds
        // The combine writes tile outputs by rows r = b * q_heads + h (one query row each), r head strides in.
        for (const interop::TensorSpec &t : d.buffers)
            if (t.output && t.strided)
                d.constraints.push_back(
                    {"(== " + stride_param(t.name, 3) + " (* q_heads " + stride_param(t.name, 2) + "))",
                     t.name + ": decode writes its (batch, head) rows one head stride apart, so its batch stride "
                              "must be q_heads times its head stride (as in [B, 1, H, D] and [B, H, 1, D] tensors)",
                     true});
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
        if (deferred) ks.source = info.sets[s].cuda;
        std::set<std::string> known;
        for (const interop::TensorSpec &t : d.buffers) known.insert(t.name);
        for (const SecondaryOutput &o : secondary) known.insert(o.tensor);
        for (const interop::WorkspaceSpec &w : ks.workspaces) known.insert(w.name);
        for (const interop::KernelSpec &k : ks.kernels) {
            for (const std::string &t : k.tensors)
                if (!known.count(t))
                    throw InternalError(where + ": kernel " + k.name + " reads " + t + ", no buffer of the stage");
            for (const std::string &n : k.ints) {
                std::string t;
                int dim = 0;
                bool strided_buffer = false;
                if (parse_stride_param(n, &t, &dim))
                    for (const interop::TensorSpec &b : d.buffers) strided_buffer = strided_buffer || b.name == t;
                if (!is_split_k_launch_param(n) && !has(n) && !strided_buffer)
                    throw InternalError(where + ": kernel " + k.name + " takes " + n + ", no scalar of the stage");
            }
        }
        d.sets.push_back(std::move(ks));
    }
    keep_secondary_outputs(d, secondary);
    info.descriptor = interop::write_descriptor(d);
    info.extern_function = interop::extern_function_name(num_buffers);

    // 5. The extern stage itself, bound to whole outputs, and a copy stage per secondary output.
    BuiltStages b;
    b.funcs.resize(iso.outputs.size());
    b.funcs[primary] = define_stage(stage, info.descriptor, scalars, inputs, num_buffers, out_type,
                                    output.function().args(), extents_of(out_dims), opt);
    b.infos.push_back(info);
    for (size_t i = 0, j = 0; i < iso.outputs.size(); i++) {
        if (i == primary) continue;
        ExternStageInfo ci;
        b.funcs[i] = copy_stage(secondary[j++], b.funcs[primary], d.buffers.back(), info.descriptor, d.scalars, scalars,
                                opt, &ci);
        b.infos.push_back(ci);
    }
    return b;
}

}  // namespace neptune::internal
