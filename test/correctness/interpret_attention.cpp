// Every attention operator's tile program, executed by the tile-IR interpreter on the CPU, against
// the fp64 reference: the tile lowering (masks and skipped tiles, partial last tiles, split-K
// partials and combine, fully masked rows) is proven before any GPU run. On the sm_90a programs the
// interpreter also follows each TMA ring (loads and releases in ring order, no load before its
// buffer's release), which would otherwise show only as a hang on the GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "HeadsLayout.h"
#include "core/StrideParams.h"
#include "suite/LowerOperator.h"
#include "neptune/Check.h"
#include "neptune/Error.h"
#include "neptune/reference/Reference.h"
#include "tir/Interpreter.h"

using namespace neptune;
using testing::bshd_strides;
using testing::for_each_head_row;
using testing::HeadsStrides;

namespace {

struct Case {
    int64_t batch, seq;
    int dqk = 64, dv = 64;
    int64_t seq_q = 0;
    int window = 0;
    int block_n = 32, chunks = 3;
    GpuArch arch = GpuArch::Sm80;  // Sm90a: the wgmma/TMA program for prefill (block_n 0: its default)
    int overlap = -1;
    int fold_combine = -1;  // decode: 0 a separate combine kernel (the default folds it into the partial)
    int tma_loads = -1;  // sm_90a mma.sync kernels: 1 the loop's K/V copies by TMA (by plane and row)
    int wgmma = -1;  // sm_90a prefill: 0 keeps the mma.sync kernel
    int interleave = -1;  // decode: the kernel parameter `interleave` (0 runs of tiles); -1: the rule's
    int cluster = -1;  // decode, sm_90a: 1 a group's chunk blocks merge as a thread block cluster
    std::function<void(tir::Program &)> edit = nullptr;  // a change to the program before it runs
    std::function<void(std::vector<HostTensor> &)> edit_inputs = nullptr;  // a change to the inputs
    int64_t sm_count = 132;  // the SMs masked prefill deals its blocks over (sections of heads)
    bool bshd = false;  // q, k, v and out as [B, S, H, D] memory with padded heads, read through strides
};

/** Tensor t ([B, H, S, D], dense) as [B, S, H, D] memory whose heads are `pad` elements apart beyond
 * D and whose batches `batch_pad` beyond; the strides go into `ints` (units of 8 elements). */
HostTensor strided_copy(const HostTensor &t, int64_t pad, int64_t batch_pad, std::map<std::string, int64_t> &ints) {
    const std::vector<int64_t> &sh = t.desc.shape;
    const int64_t D = sh[3];
    const HeadsStrides st = bshd_strides(sh[1], sh[2], D, pad, batch_pad);
    HostTensor m(TensorDesc{t.desc.name, t.desc.dtype, {sh[0] * st.batch}});
    std::fill(m.values.begin(), m.values.end(), NAN);  // padding: a read of it shows
    for_each_head_row(sh[0], sh[1], sh[2], D, st, [&](int64_t dense, int64_t strided) {
        std::copy_n(t.values.begin() + dense, D, m.values.begin() + strided);
    });
    ints[internal::stride_param(t.desc.name, 1)] = st.row / internal::kStrideUnit;
    ints[internal::stride_param(t.desc.name, 2)] = st.head / internal::kStrideUnit;
    ints[internal::stride_param(t.desc.name, 3)] = st.batch / internal::kStrideUnit;
    return m;
}

/** The inverse: memory `m` laid out as strided_copy made it, back into dense `t`. */
void gather_strided(const HostTensor &m, HostTensor &t, const std::map<std::string, int64_t> &ints) {
    const std::vector<int64_t> &sh = t.desc.shape;
    const HeadsStrides st{ints.at(internal::stride_param(t.desc.name, 3)) * internal::kStrideUnit,
                          ints.at(internal::stride_param(t.desc.name, 2)) * internal::kStrideUnit,
                          ints.at(internal::stride_param(t.desc.name, 1)) * internal::kStrideUnit};
    for_each_head_row(sh[0], sh[1], sh[2], sh[3], st, [&](int64_t dense, int64_t strided) {
        std::copy_n(m.values.begin() + strided, sh[3], t.values.begin() + dense);
    });
}

/** The program's workspaces at the lowering's int parameters. */
std::vector<HostTensor> workspaces(const internal::OperatorLowering &l) {
    std::vector<HostTensor> ws;
    for (const tir::Workspace &w : l.program.workspaces) {
        std::map<std::string, Halide::Expr> m;
        for (auto &[k, v] : l.ints) m[k] = Halide::Expr(int(v));
        const int64_t n = Halide::Internal::simplify(Halide::Internal::substitute(m, w.elements))
                              .as<Halide::Internal::IntImm>()
                              ->value;
        ws.emplace_back(TensorDesc{w.name, DType::F32, {n}});
    }
    return ws;
}

/** The operator's first output, its tile program interpreted on `in`. */
HostTensor interpret_first_output(const OperatorInstance &inst, std::vector<HostTensor> &in,
                                  const internal::LoweringChoices &lc) {
    const internal::OperatorLowering l = internal::lower_operator(inst, lc);
    std::vector<HostTensor> out = make_outputs(inst), ws = workspaces(l);
    tir::LaunchArgs args;
    for (std::vector<HostTensor> *ts : {&in, &out, &ws})
        for (HostTensor &t : *ts) args.tensors[t.desc.name] = &t;
    args.ints = l.ints;
    tir::interpret(l.program, args);
    return out.at(0);
}

void run(const OperatorSpec &op, const Case &c) {
    OperatorSpec s = op;
    AttentionSpec &a = s.attention;
    const int group = a.q_heads / a.kv_heads;
    a.kv_heads = std::max(1, a.kv_heads / 16);
    a.q_heads = a.kv_heads * std::min(group, 4);
    a.head_dim_qk = c.dqk;
    a.head_dim_v = c.dv;
    a.seq_q = c.seq_q;
    if (c.window) a.window = c.window;
    const OperatorInstance inst = instantiate(s, c.batch, c.seq);
    INFO(op.name << " B=" << c.batch << " S=" << c.seq << " D=" << c.dqk << "/" << c.dv << " seq_q=" << c.seq_q
                 << " tile " << c.block_n << " " << arch_name(c.arch) << " chunks " << c.chunks << " tma "
                 << c.tma_loads << " interleave " << c.interleave);
    internal::LoweringChoices lc;
    lc.arch = c.arch;
    lc.block_n = c.block_n;
    lc.chunks = c.chunks;
    lc.overlap = c.overlap;
    lc.fold_combine = c.fold_combine;
    lc.tma_loads = c.tma_loads;
    lc.wgmma = c.wgmma;
    lc.cluster_merge = c.cluster;
    internal::OperatorLowering l = internal::lower_operator(inst, lc);
    if (c.edit) c.edit(l.program);
    if (c.interleave >= 0) l.ints["interleave"] = c.interleave;  // a kernel parameter, as a launcher may pass
    if (c.tma_loads == 1) CHECK(l.program.kernels.at(0).tensor_maps.size() == 2);  // K and V by TMA, Q not
    if (c.cluster == 1) {  // no workspace: the states travel through the cluster's shared memory
        CHECK(l.program.kernels.at(0).cluster_x.defined());
        CHECK(l.program.workspaces.empty());
    }
    // On sm_90a prefill takes the wgmma path: a TMA producer warpgroup and two compute warpgroups.
    if (c.arch == GpuArch::Sm90a && !a.decode && c.wgmma != 0) CHECK(l.program.kernels.at(0).producer_warps == 4);
    std::vector<HostTensor> in = make_inputs(inst, 5, InputStyle::RisingScores);
    if (c.edit_inputs) c.edit_inputs(in);
    std::vector<HostTensor> out = make_outputs(inst);
    for (HostTensor &t : out) std::fill(t.values.begin(), t.values.end(), NAN);  // unwritten elements fail
    std::vector<HostTensor> ws = workspaces(l);
    tir::LaunchArgs args;
    for (HostTensor &t : in) args.tensors[t.desc.name] = &t;
    for (HostTensor &t : out) args.tensors[t.desc.name] = &t;
    for (HostTensor &t : ws) args.tensors[t.desc.name] = &t;
    args.ints = l.ints;
    args.sm_count = c.sm_count;
    // The [B, S, H, D] memory of every 4-D tensor: heads 16 elements apart beyond D, batches 8 more
    // (decode's output rows are (batch, head) rows a head stride apart: no batch padding there).
    std::map<std::string, HostTensor> strided;
    if (c.bshd) {
        for (std::vector<HostTensor> *ts : {&in, &out})
            for (HostTensor &t : *ts) {
                if (t.desc.shape.size() != 4) continue;
                const bool decode_out = a.decode && ts == &out;
                strided.emplace(t.desc.name, strided_copy(t, 16, decode_out ? 0 : 8, args.ints));
                args.tensors[t.desc.name] = &strided.at(t.desc.name);
            }
        CHECK(strided.size() == 4);
    }
    tir::interpret(l.program, args);
    for (HostTensor &t : out)
        if (strided.count(t.desc.name)) gather_strided(strided.at(t.desc.name), t, args.ints);
    const std::vector<HostTensor> ref = reference::compute(inst, in);
    for (size_t o = 0; o < out.size(); o++) {
        const ErrorStats e = compare(out[o].values, ref[o].values);
        INFO(inst.outputs[o].name << ": " << e.describe(inst.outputs[o]));
        CHECK(e.nonfinite == 0);
        CHECK(e.rel_rms() <= (inst.outputs[o].dtype == DType::F32 ? 1e-3 : 2e-3));
    }
}

}  // namespace

TEST_CASE("interpret: every attention operator's tile program matches the fp64 reference") {
    const std::vector<Case> cases = {
        {1, 1},
        {2, 70, 64, 64},
        {1, 45, 96, 64, 0, 0, 16, 2},
        {1, 33, 64, 64, 40, 5},
        {1, 300, 128, 128, 0, 0, 64, 4},
        {3, 100, 64, 64, 0, 0, 32, 1},  // decode's one chunk: no arrival, the output directly
        {1, 700, 64, 64, 0, 0, 32, 11}};  // 11 chunks: the combine's loop padded to 16
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention) continue;
        for (const Case &c : cases) {
            if (op.attention.decode && c.seq_q) continue;
            run(op, c);
        }
    }
}

TEST_CASE("interpret: a paged cache's kernels read no table entry past a sequence's pages") {
    // Serving engines leave the table's unused entries unset: here -1, a page the interpreter cannot
    // read (an element outside a tensor is an error), so a read of one fails the case.
    const auto unset_past_length = [](std::vector<HostTensor> &in) {
        HostTensor &table = in.at(3), &lens = in.at(4);
        REQUIRE(table.desc.name == "page_table");
        REQUIRE(lens.desc.name == "seq_lens");
        const int64_t max_pages = table.desc.shape[1], page = 64;
        for (int64_t b = 0; b < table.desc.shape[0]; b++)
            for (int64_t p = (int64_t(lens.values[size_t(b)]) + page - 1) / page; p < max_pages; p++)
                table.values[size_t(b * max_pages + p)] = -1;
    };
    for (const char *name : {"decode_paged", "prefill_paged"})
        for (GpuArch arch : {GpuArch::Sm80, GpuArch::Sm90a}) {
            Case c{4, 300, 64, 64};
            c.seq_q = std::string(name) == "prefill_paged" ? 40 : 0;
            c.arch = arch;
            c.block_n = arch == GpuArch::Sm90a && c.seq_q ? 0 : 32;
            c.edit_inputs = unset_past_length;
            run(*find_operator(name), c);
        }
}

TEST_CASE("interpret: with fixed chunk lengths a sequence's decode is the same bit for bit in any batch") {
    // Sequence 3 of a batch of four (5 keys of 300, 10 tiles of 32 for the longest: 5 chunks of 2), then
    // alone in a batch of one whose longest sequence is itself (1 tile: 1 chunk), reading the same pages.
    OperatorSpec spec = *find_operator("decode_paged");
    spec.attention.q_heads = 8;
    spec.attention.kv_heads = 2;
    spec.attention.head_dim_qk = spec.attention.head_dim_v = 64;
    const OperatorInstance four = instantiate(spec, 4, 300);
    std::vector<HostTensor> in4 = make_inputs(four, 7, InputStyle::RisingScores);
    spec.attention.pages = four.input("k_cache").shape[0];
    const OperatorInstance one = instantiate(spec, 1, 64);
    std::vector<HostTensor> in1 = make_inputs(one, 7);
    const int64_t q_row = 8 * 64, max_pages4 = four.input("page_table").shape[1];
    std::copy_n(in4[0].values.begin() + 3 * q_row, q_row, in1[0].values.begin());  // q of sequence 3
    in1[1].values = in4[1].values;  // the same pool of pages
    in1[2].values = in4[2].values;
    in1[3].values[0] = in4[3].values[size_t(3 * max_pages4)];  // its one page
    in1[4].values[0] = in4[4].values[3];
    REQUIRE(in1[4].values[0] == 5);
    for (GpuArch arch : {GpuArch::Sm80, GpuArch::Sm90a}) {
        INFO(arch_name(arch));
        internal::LoweringChoices lc;
        lc.arch = arch;
        lc.block_n = 32;
        lc.chunk_tiles = 2;
        const HostTensor alone = interpret_first_output(one, in1, lc), among = interpret_first_output(four, in4, lc);
        for (int64_t i = 0; i < q_row; i++) CHECK(alone.values[size_t(i)] == among.values[size_t(3 * q_row + i)]);
        // And both are right.
        const std::vector<HostTensor> ref = reference::compute(one, in1);
        CHECK(compare(alone.values, ref[0].values).rel_rms() <= 2e-3);
    }
}

TEST_CASE("interpret: masked prefill deals every (query tile, head, batch) to one block, whatever the SM count") {
    // Heaviest first in sections of heads (BuildTileProgram's heaviest_first_order): the section size
    // follows the SM count, so a few SMs give one-head sections (or whole GQA groups), many give one
    // section, and a batch of 3 leaves a last section short. A block dealt twice or never leaves NaN.
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention || op.attention.decode || op.attention.mask == Mask::None) continue;
        for (int64_t sms : {1, 3, 7, 100000})
            for (Case c :
                 std::vector<Case>{{3, 300, 64, 64, 0, 0, 32, 3}, {3, 300, 64, 64, 0, 0, 64, 3, GpuArch::Sm90a}}) {
                c.sm_count = sms;
                INFO("sm_count " << sms);
                run(op, c);
            }
    }
}

TEST_CASE("interpret: split-K decode with its combine as a second kernel matches the fp64 reference too") {
    // The default folds the combine into the last chunk block of each group (the case above); here the
    // two-kernel form, with empty chunks (more chunks than tiles) and a batch of two.
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention || !op.attention.decode) continue;
        for (Case c : std::vector<Case>{{2, 70, 64, 64, 0, 0, 32, 3}, {1, 45, 64, 64, 0, 0, 16, 5}}) {
            c.fold_combine = 0;
            run(op, c);
        }
    }
}

TEST_CASE("interpret: split-K decode merging each group's chunks in a thread block cluster matches fp64") {
    // sm_90a's cluster merge: every chunk block publishes its state in shared memory and rank 0 of the
    // group's cluster merges them (the interpreter runs a cluster's blocks in step, rank 0's merge
    // reading the others' tiles). One chunk (a cluster of one), padded chunk loops (3 and 5 chunks),
    // empty chunks (5 chunks over 2 tiles), the portable maximum of 8, GQA groups of 4 rows, head dims
    // 64 and 128.
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention || !op.attention.decode) continue;
        for (Case c : std::vector<Case>{{3, 100, 64, 64, 0, 0, 32, 1},
                                        {2, 70, 64, 64, 0, 0, 32, 2},
                                        {1, 300, 128, 128, 0, 0, 32, 3},
                                        {1, 45, 64, 64, 0, 0, 16, 5},
                                        {2, 1000, 128, 128, 0, 0, 32, 8}}) {
            c.arch = GpuArch::Sm90a;
            c.tma_loads = 1;
            c.cluster = 1;
            run(op, c);
        }
    }
}

TEST_CASE("interpret: split-K decode with each chunk a run of tiles (interleave 0) matches fp64 too") {
    // The default deals the tiles out round-robin (the cases above); runs, with empty chunks too.
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention || !op.attention.decode) continue;
        for (Case c : std::vector<Case>{
                 {2, 70, 64, 64, 0, 0, 32, 3}, {1, 45, 64, 64, 0, 0, 16, 5}, {1, 700, 64, 64, 0, 0, 32, 11}}) {
            c.interleave = 0;
            run(op, c);
        }
    }
}

TEST_CASE("interpret: decode with TMA copies in its one-warp loop (sm_90a) matches the fp64 reference") {
    // TMA addresses K and V by (plane, row) of their views and zero-fills past the sequence, where the
    // cp.async form clips at its valid rows: sequences ending inside a tile, several planes, head dims
    // 64 and 128, 16- and 32-key tiles, one chunk and several.
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention || !op.attention.decode) continue;
        for (Case c : std::vector<Case>{
                 {2, 70, 64, 64, 0, 0, 32, 3}, {1, 45, 128, 128, 0, 0, 16, 1}, {3, 100, 64, 64, 0, 0, 32, 2}}) {
            c.arch = GpuArch::Sm90a;
            c.tma_loads = 1;
            run(op, c);
        }
    }
    // 64-key tiles on sm_90a's default copies at odd head dims (256; 80; 96 for K by cp.async and 64
    // for V by TMA) with more chunks than tiles: what decode runs at batch 1 (decode_block_n).
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention || !op.attention.decode) continue;
        for (Case c : std::vector<Case>{
                 {1, 200, 256, 256, 0, 0, 64, 5}, {1, 333, 80, 80, 0, 0, 64, 16}, {1, 1000, 96, 64, 0, 0, 64, 16}}) {
            c.arch = GpuArch::Sm90a;
            run(op, c);
        }
    }
    // sm_90a's default for decode: TMA where the tiles are swizzled (V, head dim 64), cp.async where
    // they are not (K, head dim 96), in one loop.
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention || !op.attention.decode) continue;
        Case mixed{1, 45, 96, 64, 0, 0, 16, 2, GpuArch::Sm90a};
        mixed.edit = [](tir::Program &p) { CHECK(p.kernels.at(0).tensor_maps.size() == 1); };
        run(op, mixed);
    }
    // The same pass on a 4-warp prefill kernel kept on mma.sync: Q loaded once, K and V by TMA.
    for (const char *name : {"prefill_causal", "prefill_gqa"}) {
        Case c{1, 300, 64, 64, 0, 0, 64, 3, GpuArch::Sm90a};
        c.wgmma = 0;
        c.tma_loads = 1;
        run(*find_operator(name), c);
    }
}

TEST_CASE("interpret: a ring tile never released would hang the producer, and the interpreter says so") {
    for (const int overlap : {0, 2}) {
        Case c{1, 300, 64, 64, 0, 0, 64, 3, GpuArch::Sm90a, overlap};
        c.edit = [](tir::Program &p) {
            // Drop the releases of k_s: its third load then waits for a buffer nobody gives back.
            std::function<tir::Block(const tir::Block &)> strip = [&](const tir::Block &b) {
                tir::Block out;
                for (const tir::Stmt &s : b) {
                    if (s->kind == tir::NodeKind::Release && s->src == "k_s") continue;
                    out.push_back(s->body.empty() ? s : tir::with(s, [&](tir::Node &n) { n.body = strip(s->body); }));
                }
                return out;
            };
            p.kernels[0].body = strip(p.kernels[0].body);
        };
        INFO("overlap " << overlap);
        CHECK_THROWS_WITH_AS(run(*find_operator("prefill_global"), c), doctest::Contains("would hang"), InternalError);
    }
}

TEST_CASE("interpret: the sm_90a programs (wgmma, TMA by plane and row, releases) match the fp64 reference") {
    // 128 query rows per block over 128- or 64-key tiles; sequences that end inside a tile, several
    // planes (batch, GQA heads), fewer query rows than keys, a window.
    const std::vector<Case> cases = {
        {1, 300, 128, 128, 0, 0, 0, 3, GpuArch::Sm90a}, {2, 70, 64, 64, 0, 0, 64, 3, GpuArch::Sm90a},
        {1, 200, 64, 128, 77, 0, 0, 3, GpuArch::Sm90a}, {1, 260, 64, 64, 0, 100, 64, 3, GpuArch::Sm90a},
        {2, 300, 64, 64, 0, 96, 0, 3, GpuArch::Sm90a},  // both window edges in one tile
        {1, 50, 64, 64, 0, 0, 0, 3, GpuArch::Sm90a}};  // one KV tile: no steady loop
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention) continue;
        for (const Case &c : cases) {
            if (op.attention.decode && c.seq_q) continue;
            if (c.window && op.attention.mask != Mask::Window) continue;
            run(op, c);
        }
    }
}

TEST_CASE("interpret: q, k, v and out as [B, S, H, D] memory with padded heads, read through their strides") {
    // The kernels address every attention tensor through its strides: a model's projections viewed as
    // [B, H, S, D] run without a copy. Padding beyond D and between batches holds NaN, so a read of it
    // shows in the output. Both families: mma.sync with cp.async, and sm_90a's TMA maps (4-D, strided).
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention) continue;
        for (Case c : std::vector<Case>{{2, 70, 64, 64, 0, 0, 32, 3},
                                        {2, 70, 64, 64, 0, 0, 64, 3, GpuArch::Sm90a},
                                        {1, 45, 96, 64, 0, 0, 16, 2}}) {
            c.bshd = true;
            if (op.attention.decode && c.arch == GpuArch::Sm90a) c.block_n = 32;
            run(op, c);
        }
    }
}
