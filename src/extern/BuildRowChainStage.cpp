// The extern stages of a row chain (PatternStages.h): a ladder of kernel shapes per GPU family (in
// one image in a library, a module each just in time), the launcher taking the first whose rows hold the call's row length; secondary outputs
// through per-thread workspaces and copy stages.
#include <algorithm>
#include <cctype>

#include "codegen/CodeGenCuda.h"
#include "extern/DescribeKernels.h"
#include "extern/PatternStages.h"
#include "extern/StageParts.h"
#include "interop/ExternEntry.h"
#include "lower/BuildRowChain.h"
#include "lower/Patterns.h"
#include "neptune/Error.h"

namespace neptune::internal {

namespace {

/** A kernel shape and the longest rows it holds (0: any, the chunked form); or the split form. */
struct Rung {
    RowChainShape shape;
    int64_t max_cols = 0;
    bool split = false;  // few long rows (splits_rows): taken first where it applies
};

bool same_shape(const RowChainShape &a, const RowChainShape &b) {
    return a.rows_per_block == b.rows_per_block && a.threads_per_row == b.threads_per_row && a.vector == b.vector &&
           a.vectors == b.vectors && a.chunked == b.chunked && a.cluster == b.cluster && a.min_blocks == b.min_blocks &&
           a.strided == b.strided;
}

/** The shapes Neptune picks for rows of 256, 512, ... columns (default_row_chain_shape), up to the
 * first chunked one, which serves every longer row. A row takes the shape of the next power of two
 * at or above its length: at most half the shape's columns idle, a dozen kernels per family. */
std::vector<Rung> ladder(GpuArch arch, DType dtype, const RowChainForm &form) {
    std::vector<Rung> rungs;
    if (splits_rows(arch, form, 1, int64_t(1) << 40)) rungs.push_back({split_row_chain_shape(dtype), 0, true});
    for (int64_t c = 256;; c *= 2) {
        const RowChainShape s = default_row_chain_shape(arch, dtype, c, form);
        if (s.chunked) {
            rungs.push_back({s, 0});
            return rungs;
        }
        const int64_t holds = int64_t(s.cols()) * s.cluster;
        if (!rungs.empty() && same_shape(rungs.back().shape, s)) {
            rungs.back().max_cols = holds;
        } else {
            rungs.push_back({s, holds});
        }
    }
}

Halide::Type type_of(DType t) {
    switch (t) {
    case DType::F16: return Halide::Float(16);
    case DType::BF16: return Halide::BFloat(16);
    case DType::F32: return Halide::Float(32);
    default: return Halide::Int(32);
    }
}

}  // namespace

BuiltStages build_row_chain_stage(const FusedGroup &g, const IsolatedGroup &iso, const ExternOptions &opt) {
    const FusedPlan &plan = iso.group.plan;
    const size_t primary = primary_output(iso.outputs);
    const Halide::Func &output = iso.outputs[primary];
    const std::string stage = stage_name(output);
    const std::string where = describe_group(g, output);
    auto fail = [&](const std::string &why) -> void { throw CompileError(where + ": " + why); };
    const RowChainForm form = row_chain_form(plan, iso.outputs);

    // 1. Per GPU family, the ladder's programs. A library holds them in one CUDA source compiled
    // once (one image, the other sets pointing at it); just in time each is a module of its own,
    // compiled when a call first takes it (a call's row length takes one rung).
    ExternStageInfo info;
    info.name = stage;
    interop::GroupDescriptor d;
    d.name = stage;
    d.jit = !opt.aot;
    std::vector<tir::TensorParam> tensors;  // the first program's, in kernel order
    std::vector<std::string> int_params;
    for (const ArchTarget &a : stage_targets(opt)) {
        const size_t first = d.sets.size();
        std::vector<std::string> sources;
        DType x_type = DType::F16;
        // The element type decides the vector width, so the ladder: read it from a first lowering.
        {
            const tir::Program p0 =
                build_row_chain(plan, iso.outputs, a.arch, default_row_chain_shape(a.arch, x_type, 0, form));
            x_type = p0.kernels.at(0).tensors.at(0).elem;
            if (tensors.empty()) {
                tensors = p0.kernels.at(0).tensors;
                int_params = p0.kernels.at(0).int_params;
            }
        }
        for (const Rung &r : ladder(a.arch, x_type, form)) {
            tir::Program p = build_row_chain(plan, iso.outputs, a.arch, r.shape);
            tir::Kernel &k = p.kernels.at(0);
            k.name = "row_chain_" + (r.split ? std::string("split") : r.max_cols ? std::to_string(r.max_cols) : "any");
            ExternStageInfo::KernelSet set;
            set.arch = arch_name(a.arch);
            set.codes = a.codes.front();
            for (size_t c = 1; c < a.codes.size(); c++) set.codes += "," + a.codes[c];
            set.tile_program = tir::to_string(p);
            sources.push_back(emit_cuda(p));
            info.sets.push_back(set);
            interop::KernelSet ks = describe_kernels(p);
            ks.arch = set.arch;
            ks.codes = set.codes;
            ks.min_cc = a.min_cc;
            ks.max_cc = a.max_cc;
            if (r.max_cols) ks.when = "(<= cols " + std::to_string(r.max_cols) + ")";
            if (r.split) {
                std::string rows;  // the product of the row dimensions
                for (const std::string &n : int_params)
                    if (n.rfind("rows", 0) == 0) rows = rows.empty() ? n : "(* " + n + " " + rows + ")";
                ks.when = "(&& (<= " + rows + " " + std::to_string(kSplitRows) + ") (< " +
                          std::to_string(split_above(form)) + " cols))";
            }
            if (opt.aot && d.sets.size() > first) ks.image_of = int(first);
            d.sets.push_back(std::move(ks));
        }
        if (opt.aot) {
            std::string cuda;
            for (const std::string &src : sources) cuda += src;
            sources = {cuda};
        }
        for (size_t i = 0; i < sources.size(); i++) info.sets[first + i].cuda = sources[i];
        if (defers_sets(sources.size(), opt.aot)) {
            for (size_t i = 0; i < sources.size(); i++) d.sets[first + i].source = sources[i];
            continue;
        }
        std::vector<std::string> stems;
        for (size_t i = 0; i < sources.size(); i++) stems.push_back(stage + "_" + a.lowering + "_" + std::to_string(i));
        const std::vector<CompiledModule> modules =
            compile_sets(sources, stems, std::vector<ArchTarget>(sources.size(), a), opt.aot);
        for (size_t i = 0; i < sources.size(); i++) {
            d.sets[first + i].image.assign(modules[i].cubin.begin(), modules[i].cubin.end());
            info.sets[first + i].image = d.sets[first + i].image;
            info.sets[first + i].compile_log = modules[i].log;
        }
    }

    // 2. Buffers: x and the 1-D inputs as the kernels read them, then the primary output. The
    // secondary outputs are per-thread workspaces of every set.
    std::vector<Halide::ExternFuncArgument> inputs;
    std::map<std::string, Halide::Expr> extent_of = opt.extents;
    for (const tir::TensorParam &t : tensors) {
        if (t.output) continue;
        auto it = iso.inputs.find(t.name);
        if (it == iso.inputs.end()) throw InternalError(where + ": the kernels read " + t.name + ", not an input");
        const GroupInput &in = it->second;
        if (in.dimensions != int(t.dims.size()))
            fail(in.name + " has " + std::to_string(in.dimensions) + " dimensions; the kernels read it as " +
                 std::to_string(t.dims.size()));
        d.buffers.push_back(tensor_spec(in.name, in.type, false, t.dims));
        inputs.push_back(in.arg);
        if (in.extents)
            for (size_t k = 0; k < t.dims.size(); k++) extent_of.emplace(t.dims[k], (*in.extents)[k]);
    }
    // The kernels' int parameters: the extents of x's dimensions, by name.
    std::vector<Halide::Expr> scalars;
    for (const std::string &e : int_params) {
        if (!extent_of.count(e))
            fail("the extent " + e +
                 " is in no input buffer (the group reads Funcs); pass "
                 "ExternOptions::extents[\"" +
                 e + "\"]");
        scalars.push_back(Halide::cast<int32_t>(extent_of.at(e)));
    }
    d.scalars = int_params;
    auto output_tensor = [&](const Halide::Func &o) -> const tir::TensorParam & {
        for (const tir::TensorParam &t : tensors)
            if (t.output && t.name == base_name(o.name())) return t;
        throw InternalError(where + ": no kernel tensor for output " + o.name());
    };
    auto dims_of = [&](const tir::TensorParam &t) {
        std::vector<Halide::Expr> e;
        for (const std::string &n : t.dims) e.push_back(extent_of.at(n));
        return e;
    };
    const tir::TensorParam &out_t = output_tensor(output);
    d.buffers.push_back(tensor_spec(out_t.name, type_of(out_t.elem), true, out_t.dims));
    const int num_buffers = int(d.buffers.size());
    if (num_buffers > interop::max_extern_buffers) fail("more buffers than an extern entry point takes");
    std::vector<SecondaryOutput> secondary(iso.outputs.size());
    for (size_t i = 0; i < iso.outputs.size(); i++) {
        if (i == primary) continue;
        const tir::TensorParam &t = output_tensor(iso.outputs[i]);
        secondary[i] = {iso.outputs[i], t.name, type_of(t.elem), t.dims, dims_of(t)};
        keep_secondary_outputs(d, {secondary[i]});
    }
    info.descriptor = interop::write_descriptor(d);
    info.extern_function = interop::extern_function_name(num_buffers);

    // 3. The stages: the group's, then one copy stage per secondary output, reading the first.
    BuiltStages b;
    b.funcs.resize(iso.outputs.size());
    b.funcs[primary] = define_stage(stage, info.descriptor, scalars, inputs, num_buffers, type_of(out_t.elem),
                                    output.function().args(), dims_of(out_t), opt);
    b.infos.push_back(info);
    for (size_t i = 0; i < iso.outputs.size(); i++) {
        if (i == primary) continue;
        ExternStageInfo ci;
        b.funcs[i] =
            copy_stage(secondary[i], b.funcs[primary], d.buffers.back(), info.descriptor, d.scalars, scalars, opt, &ci);
        b.infos.push_back(ci);
    }
    return b;
}

}  // namespace neptune::internal
