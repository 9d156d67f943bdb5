#include "suite/LowerOperator.h"

#include <algorithm>
#include <cstdint>

#include "core/SplitChunks.h"
#include "lower/Lower.h"
#include "neptune/Error.h"
#include "neptune/algorithms/Schedules.h"

namespace neptune::internal {

namespace {

// Softmax, log-sum-exp, cross-entropy, LayerNorm and RMSNorm: the row-chain pattern, x as rows x cols.
OperatorLowering lower_row_operator(const OperatorInstance &inst, const LoweringChoices &c) {
    const OperatorSpec &spec = inst.spec;
    LowerOptions lo;
    lo.arch = c.arch;
    lo.dtype = spec.dtype;
    const TensorDesc &x = inst.input("x");
    // The row kernels address x and y with 32-bit element offsets (as Halide's buffers without
    // large_buffers do), so a larger x would be read at wrapped offsets.
    if (x.numel() > int64_t(INT32_MAX))
        throw CompileError(spec.name + ": x has " + std::to_string(x.numel()) +
                           " elements; Neptune's row kernels address at most 2^31 - 1: split the rows into "
                           "calls of fewer elements");
    lo.row_cols = x.shape.back();
    lo.rows = x.numel() / x.shape.back();
    if (const int t = c.row_threads) {
        if (t < 32 || t > 1024 || (t & (t - 1)))
            throw CompileError(spec.name + ": threads per row must be a power of two from 32 to 1024, not " +
                               std::to_string(t));
        lo.row_threads = t;
    }
    if (const int b = c.row_cluster) {
        if (b < 1 || b > 8 || (b > 1 && c.arch != GpuArch::Sm90a))
            throw CompileError(spec.name +
                               ": blocks per row must be 1 to 8, and above 1 only on sm_90a (clusters), not " +
                               std::to_string(b) + " on " + arch_name(c.arch));
        lo.row_cluster = b;
    }
    const algorithms::OperatorFuncs funcs = algorithms::build(spec);
    const std::vector<FusedReduction> groups = algorithms::fuse_operator(spec, funcs, algorithms::FusionChoice{});
    OperatorLowering out;
    out.ints = {{"rows", x.numel() / x.shape.back()}, {"cols", x.shape.back()}};
    out.program = lower_to_tiles(groups.at(0).plan(), funcs.outputs, lo);
    return out;
}

// Linear + cross-entropy: the matmul-fed pattern, h [rows, depth] and weight [cols, depth].
OperatorLowering lower_matmul_operator(const OperatorInstance &inst, const LoweringChoices &c) {
    const OperatorSpec &spec = inst.spec;
    const int64_t rows = inst.batch, cols = inst.seq, depth = spec.hidden;
    if (depth % 8)
        throw CompileError(spec.name + ": a hidden size of " + std::to_string(depth) +
                           "; the kernels copy rows in 16-byte pieces and need a multiple of 8");
    for (const char *t : {"h", "weight"})
        if (inst.input(t).numel() > int64_t(INT32_MAX))
            throw CompileError(spec.name + ": " + t +
                               " has more than 2^31 - 1 elements, which the kernels' 32-bit "
                               "offsets do not address: split the call");
    LowerOptions lo;
    lo.arch = c.arch;
    lo.dtype = spec.dtype;
    // sm_90a: two consumer warpgroups of 64 rows on wgmma, fed by a TMA producer through 4 stages of
    // 64-column chunks (16 KB of h and 24 KB of weight each). TMA reads 64-column boxes, so the hidden
    // size must be a multiple of 64; other sizes and sm_80 take mma.sync with cp.async. Tiles of 192
    // vocabulary columns: 8192 x 128256 x 4096 on an H100, 541 TFLOP/s against 495 with 128 (2026-12-06,
    // docs/performance.md); 256 spills the accumulator and the term tile.
    lo.wgmma = c.arch == GpuArch::Sm90a && depth % 64 == 0 && c.wgmma != 0;
    if (c.wgmma == 1 && !lo.wgmma)
        throw CompileError(spec.name + ": wgmma needs sm_90a and a hidden size that is a multiple of 64");
    lo.warps = lo.wgmma ? 8 : 4;
    lo.block_n = lo.wgmma ? 192 : 128;
    lo.stages = lo.wgmma ? 4 : 3;
    lo.min_blocks_per_sm = lo.wgmma ? 1 : 0;
    if (c.warps) lo.warps = c.warps;
    if (c.block_n) lo.block_n = c.block_n;
    if (c.stages) lo.stages = c.stages;
    if (c.min_blocks >= 0) lo.min_blocks_per_sm = c.min_blocks;
    // Two row tiles per cluster share each weight tile's copy from L2 (TMA multicast): a block's tile of
    // 128 x 192 logits reads 1 MB of h and 1.5 MB of weight per 201 MFLOP; shared, 1.75 MB. On an H100,
    // 561 TFLOP/s against 538 unshared (2026-12-06).
    if (c.multicast < 0 || c.multicast > 4)
        throw CompileError(spec.name + ": multicast takes 1 to 4 row tiles per cluster, not " +
                           std::to_string(c.multicast));
    lo.multicast = lo.wgmma ? (c.multicast ? c.multicast : 2) : 1;
    // Few row tiles leave SMs idle: split the vocabulary into chunks so that about one wave of blocks
    // (132 SMs on the H100 and H200) runs, each chunk's states merged by the derived repair.
    const int64_t row_tiles = (rows + 16 * lo.warps - 1) / (16 * lo.warps);
    const int64_t col_tiles = (cols + lo.block_n - 1) / lo.block_n;
    int64_t chunks = c.vocab_chunks > 0 ? c.vocab_chunks : (132 + row_tiles / 2) / row_tiles;
    chunks = std::max<int64_t>(1, std::min(chunks, col_tiles));
    const algorithms::OperatorFuncs funcs = algorithms::build(spec);
    algorithms::FusionChoice choice;
    choice.tile = lo.block_n;
    if (chunks > 1) {
        choice.variant = algorithms::FusionVariant::SplitK;
        choice.chunks = int(chunks);
    }
    const std::vector<FusedReduction> groups = algorithms::fuse_operator(spec, funcs, choice);
    OperatorLowering out;
    out.ints = {{"rows", rows}, {"cols", cols}, {"depth", depth}};
    if (chunks > 1) out.ints["chunks"] = chunks;
    out.program = lower_to_tiles(groups.at(0).plan(), funcs.outputs, lo);
    return out;
}

}  // namespace

OperatorLowering lower_operator(const OperatorInstance &inst, const LoweringChoices &c) {
    const OperatorSpec &spec = inst.spec;
    const Family f = spec.family;
    if (f == Family::Softmax || f == Family::LogSumExp || f == Family::CrossEntropy || f == Family::LayerNorm ||
        f == Family::RmsNorm)
        return lower_row_operator(inst, c);
    if (f == Family::LinearCrossEntropy) return lower_matmul_operator(inst, c);
    if (spec.family != Family::Attention)
        throw CompileError(spec.name +
                           ": the tile backend lowers attention and row-wise operators (softmax, "
                           "logsumexp, cross_entropy, layernorm, rmsnorm, and linear_cross_entropy) for now");
    const AttentionSpec &a = spec.attention;
    const int group = a.q_heads / a.kv_heads;
    const bool windowed = a.mask == Mask::Window;
    LowerOptions lo = default_lower_options(c.arch, spec.dtype, a.head_dim_qk, a.head_dim_v, a.decode, group, windowed);
    if (c.wgmma == 0 && lo.wgmma)
        lo = default_lower_options(GpuArch::Sm80, spec.dtype, a.head_dim_qk, a.head_dim_v, a.decode, group);
    lo.arch = c.arch;
    if (c.wgmma == 1) {
        lo.wgmma = true;
        lo.min_blocks_per_sm = 1;
    }
    if (c.block_n) lo.block_n = c.block_n;
    if (c.min_blocks >= 0) lo.min_blocks_per_sm = c.min_blocks;
    if (c.warps) lo.warps = c.warps;
    if (c.overlap >= 0) lo.overlap = c.overlap;
    if (c.stages) lo.stages = c.stages;
    if (c.unroll_chunks) lo.unroll_chunks = c.unroll_chunks;
    if (c.fold_combine >= 0) lo.fold_combine = c.fold_combine == 1;
    if (c.tma_loads == 1 && c.arch != GpuArch::Sm90a)
        throw CompileError(spec.name + ": TMA copies need sm_90a, not " + arch_name(c.arch));
    if (c.tma_loads >= 0) lo.tma_loads = c.tma_loads == 1;
    if (c.cluster_merge == 1) {
        const std::string why =
            !a.decode                  ? "it is for decode (split-K)"
            : c.arch != GpuArch::Sm90a ? "thread block clusters need sm_90a, not " + std::string(arch_name(c.arch))
            : !lo.fold_combine         ? "it is a form of the folded combine (fold_combine 0 asked for two kernels)"
            : lo.warps != 1
                ? "it merges one-warp blocks (one state each); this kernel has " + std::to_string(lo.warps) + " warps"
                : "";
        if (!why.empty()) throw CompileError(spec.name + ": no cluster merge: " + why);
        lo.cluster_merge = true;
    }
    if (a.decode && group > 16 * lo.warps)
        throw CompileError(spec.name + ": " + std::to_string(group) + " query heads per KV head need " +
                           std::to_string((group + 15) / 16) + " warps");
    if (a.head_dim_qk % 8 || a.head_dim_v % 8)
        throw CompileError(spec.name + ": head dims must be multiples of 8 (16-byte copies)");

    if (a.page_size > 0) {
        // A KV tile lies in one page (BuildTileProgram.cpp): the tile's keys divide the page's.
        if (a.page_size % 16)
            throw CompileError(spec.name + ": pages of " + std::to_string(a.page_size) +
                               " keys; the paged kernels need a multiple of 16");
        if (a.page_size % lo.block_n) {
            if (c.block_n)
                throw CompileError(spec.name + ": KV tiles of " + std::to_string(lo.block_n) +
                                   " keys do not divide pages of " + std::to_string(a.page_size) +
                                   "; pass --block-n 16 or a divisor of the page size");
            // The largest tile below the default that divides the page.
            int tile = lo.block_n - lo.block_n % 16;
            while (a.page_size % tile) tile -= 16;
            lo.block_n = tile;
        }
    }
    algorithms::OperatorFuncs funcs = algorithms::build(spec);
    algorithms::FusionChoice choice;
    choice.tile = lo.block_n;
    OperatorLowering out;
    out.ints = {{"batch", inst.batch},
                {"q_heads", a.q_heads},
                {"kv_heads", a.kv_heads},
                {"seq_q", inst.input("q").shape[2]},
                {"seq_kv", attention_keys(inst)}};
    if (a.page_size > 0) {
        const TensorDesc &cache = inst.input("k_cache");
        out.ints["page_size"] = a.page_size;
        out.ints["pages"] = cache.shape[0];
        out.ints["max_pages"] = inst.input("page_table").shape[1];
    }
    if (a.decode) {
        choice.variant = algorithms::FusionVariant::SplitK;
        int chunks = c.chunks;
        if (c.chunk_tiles > 0) {
            const int64_t tiles = (attention_keys(inst) + lo.block_n - 1) / lo.block_n;
            chunks = int((tiles + c.chunk_tiles - 1) / c.chunk_tiles);
        }
        choice.chunks = chunks;
        set_split_k_params(out.ints, chunks, c.chunk_tiles);
    }
    const std::vector<FusedReduction> groups = algorithms::fuse_operator(spec, funcs, choice);
    out.program = lower_to_tiles(groups.at(0).plan(), funcs.outputs, lo);
    tir::bind_dense_strides(out.program, out.ints);  // the suite's tensors are dense
    return out;
}

}  // namespace neptune::internal
