// Neptune tutorial lesson 8: FlashDecoding, derived with split_k_update
//
// Decoding runs attention for one new token: one query row per head against every key so far.
// Lesson 7's rolling schedule gives each (batch, KV head) one thread block that walks all the keys
// in order; with a batch of 1 and 8 KV heads that is 8 blocks on a GPU of 132 SMs, and the keys,
// which are most of the memory traffic, stream through 8 SMs only. FlashDecoding cuts the keys into
// chunks that separate blocks process at the same time, each producing a partial state (its max,
// its sum, its weighted sum of V), and a combine step merges the partials: a second kernel, or, as
// Neptune does by default, the last block of each group to finish.
//
// The combine is not written by hand either. split_k_update(P, T) asks for P chunks, each rolling
// over tiles of T keys as in lesson 7, and Neptune derives the merge of two partial states from
// the same repair h it derived for the rolling loop (docs/design/fusion.md, the split-K update;
// FlashDecoding writes the same combine with log-sum-exp). This lesson picks the chunk count,
// applies the directive, reads the two kernels of the tile program, folds them into one, runs both
// forms in the interpreter with a few chunk counts (including more chunks than tiles), and on a GPU
// runs the CUDA kernel.
//
// This lesson shows the compiler's internals (the tile program and its interpreter): it reads them
// through the inspection header (include/neptune/Inspect.h), whose listings are for reading and
// change with the lowering.
//
// Build and run (from the repository root, after scripts/setup.sh):
//   meson setup build -Dtests=enabled && ninja -C build tutorials/lesson_08_flash_decoding
//   build/tutorials/lesson_08_flash_decoding
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "Halide.h"
#include "neptune/Directives.h"
#include "neptune/GpuOperator.h"
#include "neptune/HalideCpu.h"
#include "neptune/Inspect.h"
#include "neptune/algorithms/Algorithms.h"
#include "neptune/reference/Reference.h"

using namespace neptune;

namespace {

// decode_gqa made small: 2 KV heads, each shared by 8 query heads (as in the suite), head dim 64,
// 5000 keys; outputs in f32 so that fused and unfused compare at fp32's precision.
OperatorSpec small_decode() {
    OperatorSpec spec = *find_operator("decode_gqa");
    spec.attention.kv_heads = 2;
    spec.attention.q_heads = 16;
    spec.attention.head_dim_qk = spec.attention.head_dim_v = 64;
    spec.f32_outputs = true;
    return spec;
}

// The tile program of `spec` fused with split_k_update(chunks, 32), and the group (for describe());
// `fold`: the combine runs in the partial kernel (the default) rather than as a second kernel.
struct Lowered {
    FusedReduction group;
    inspect::TileProgram program;
};
Lowered lower_decode(const OperatorSpec &spec, int chunks, bool fold) {
    algorithms::OperatorFuncs funcs = algorithms::build(spec);
    FusedReduction group =
        fuse_reduction({funcs.stage("acc"), funcs.stage("row_sum")}, Halide::RVar(funcs.rdoms.at("kv").x))
            .split_k_update(chunks, 32);
    inspect::TileOptions lo;
    lo.block_n = 32;
    lo.fold_combine = fold;
    return {group, inspect::lower_group(group, funcs.outputs, spec, lo)};
}

// Runs `p` in the tile-IR interpreter; the workspaces (the partial states between the two kernels)
// are allocated there, as a launcher does on the GPU, sized by the int parameters.
std::vector<HostTensor> interpret(const inspect::TileProgram &p, const OperatorInstance &inst,
                                  std::vector<HostTensor> in, int chunks) {
    const std::map<std::string, int64_t> ints = {
        {"batch", inst.batch},
        {"q_heads", inst.spec.attention.q_heads},
        {"kv_heads", inst.spec.attention.kv_heads},
        {"seq_q", 1},
        {"seq_kv", inst.seq},
        {"chunks", chunks},
        // chunk c takes tiles c, c + chunks, ...; 0 would give each chunk a run of tiles
        {"interleave", 1},
        // above 0, each chunk a run of this many tiles, whatever the chunk count (batch-invariant)
        {"chunk_tiles", 0}};
    std::vector<HostTensor> out = make_outputs(inst);
    std::vector<HostTensor *> tensors;
    for (HostTensor &t : in) tensors.push_back(&t);
    for (HostTensor &t : out) tensors.push_back(&t);
    p.interpret(tensors, ints);
    return out;
}

// The first line of `text` that contains `key`, without its indentation ("" if none).
std::string line_with(const std::string &text, const std::string &key) {
    const size_t at = text.find(key);
    if (at == std::string::npos) return "";
    const size_t b = text.rfind('\n', at) + 1, e = text.find('\n', at);
    const std::string line = text.substr(b, e == std::string::npos ? std::string::npos : e - b);
    return line.substr(line.find_first_not_of(' '));
}

// The kernel called `name` of `text` (a printed program), from its header to the next kernel.
std::string kernel_text(const std::string &text, const std::string &name) {
    const size_t b = text.find("kernel " + name);
    if (b == std::string::npos) return "";
    const size_t e = text.find("\nkernel ", b + 1);
    return text.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

}  // namespace

int main() {
    const OperatorSpec spec = small_decode();
    const OperatorInstance inst = instantiate(spec, 1, 5000);
    // Keys whose scores rise along the row: each chunk then ends with its own, different max, and
    // the combine has real rescaling to do.
    const std::vector<HostTensor> inputs = make_inputs(inst, 9, InputStyle::RisingScores);
    const std::vector<HostTensor> ref = reference::compute(inst, inputs);
    bool ok = true;

    // How many chunks. Without splitting there are batch x KV heads = 2 blocks (the 8 query heads
    // of a group are the rows of one block's tile, so K and V are read once for all of them). The
    // tiles of 32 keys number ceil(5000 / 32) = 157. split_k_chunks asks for about two blocks
    // per SM, so that every SM streams keys, but for no more than about sqrt(tiles) chunks: a block
    // streams tiles / c tiles and the combine then walks c chunks one after another, and on the
    // H200 a tile and a chunk cost about the same (docs/engineering-log.md, 2026-12-01, the chunk
    // rule). Then it takes up to a quarter fewer where that gives the busiest SM fewer tiles: a
    // one-wave kernel lasts as long as its busiest SM, so 5 chunks of 64 groups (3 blocks on some
    // SMs, 2 on others) lose to 4 (2 on almost every SM). Here every block has an SM to itself, and
    // 13 stays. (On an sm_90a GPU the operator would also take 64-key tiles here, decode_block_n:
    // with one block per SM a warp's own latency bounds the rate, and a 64-key tile halves its
    // steps per key; the sqrt cap counts 32-key tiles so that the chunks keep their keys.) The
    // count is a kernel parameter, so the program is the same for any count; only its shared memory
    // matters here, which decides how many blocks an SM holds once there are more blocks than two
    // per SM (then chunks fill waves).
    const int sms = 132, max_shared = 227 * 1024;  // the H200's SMs, and the shared memory a block may opt in to
    const int resident =
        inspect::resident_blocks(lower_decode(spec, 1, true).program.kernels().at(0).shared_bytes, max_shared);
    const int chunks = inspect::split_k_chunks(2, 5000, 32, sms, resident);
    std::printf(
        "chunks for 2 blocks over 157 tiles on %d SMs: %d; for decode_gqa at 1,8192 (8 blocks, 256 tiles): %d\n", sms,
        chunks, inspect::split_k_chunks(8, 8192, 32, sms, resident));
    // Prints: chunks for 2 blocks over 157 tiles on 132 SMs: 13; for decode_gqa at 1,8192 (8 blocks, 256 tiles): 16
    ok = ok && chunks == 13;

    const Lowered l = lower_decode(spec, chunks, /*fold*/ false);
    {
        // The directive and what Neptune derived. The repair is lesson 7's h; with split_k_update it
        // also merges the chunks: for chunk states (m_p, l_p, acc_p) and the global max m = max_p m_p,
        //   row_sum = sum_p h(l_p, m_p, m) = sum_p l_p * exp(m_p - m),   acc likewise per column.
        std::printf("%s", l.group.describe().c_str());
        // Prints (abridged):
        //   fuse_reduction(acc, row_sum, kv): split-K update, tiles of 32, 13 chunks
        //     row_max(i, h, b) = max over kv of score(kv, i, h, b)
        //     acc(e, i, h, b) = + over kv of exp(score(kv, i, h, b) - select(row_max == -inf, 0, row_max))
        //                                    * v_im(e, kv, h / (q.extent.2 / k.extent.2), b)
        //         repair (rescale): h = t * exp(select(row_max == -inf, 0, row_max) - select(row_max' == -inf, 0, row_max'))
        //         proof: R1: ...; R2: ... is linear in t
        //     row_sum(i, h, b) = + over kv of exp(score(kv, i, h, b) - select(row_max == -inf, 0, row_max))
        //         repair (rescale): the same h
        // h / (q.extent.2 / k.extent.2) is GQA's head mapping: query head h reads KV head h / 8.
        ok = ok && l.group.describe().find("split-K update, tiles of 32, 13 chunks") != std::string::npos;
    }

    {
        // Two kernels. The partial kernel's grid is (chunks, KV heads, batch): each block rolls over
        // its chunk's tiles exactly as lesson 7's loop does, then writes its state to the workspaces
        // (ws_...: one max, one sum and one row of acc per chunk and query head, in f32). The
        // combine kernel reads them back in one pass over the chunks, merging each chunk's state into
        // running ones the way lesson 7's loop merges a tile: the max first, then acc and row_sum,
        // each repaired from its old max to the new one and the chunk's from the chunk's max to it.
        const std::string text = l.program.text();
        for (const inspect::KernelSummary &k : l.program.kernels())
            std::printf("kernel %s, %d warps\n", k.name.c_str(), k.warps);
        for (const inspect::WorkspaceSummary &w : l.program.workspaces()) std::printf("workspace %s\n", w.name.c_str());
        const std::string combine = kernel_text(text, "neptune_split_k_combine");
        std::printf("%s\n", combine.substr(combine.find("  body:")).c_str());
        // Prints (the guards select(x == -inf, 0, x) abridged to safe(x)):
        //   kernel neptune_split_k_partial, 1 warps
        //   kernel neptune_split_k_combine, 1 warps
        //   workspace ws_row_max
        //   workspace ws_acc
        //   workspace ws_row_sum
        //     body:
        //       for strip in [0, (min(r_valid, 16) + 3) / 4) {
        //         row_max = fill(-inf)
        //         acc = fill(0)
        //         row_sum = fill(0)
        //         for p in [0, (chunks + 3) / 4 * 4) carrying row_max, acc, row_sum unrolled x4 {
        //           row_max_p = row_load ws_row_max[base: strip * 4 + n_rows * p + r0, stride 1, valid select(p < chunks, r_valid - strip * 4, 0)] else -inf
        //           acc_p = load ws_acc[base: (strip * 4 + n_rows * p + r0) * 64, stride 64, valid select(p < chunks, r_valid - strip * 4, 0) x 64]
        //           row_sum_p = row_load ws_row_sum[base: strip * 4 + n_rows * p + r0, stride 1, valid select(...)] else 0
        //           row_max_new = row_map(max(row_max, row_max_p))
        //           acc_scale = row_map(min(exp(safe(row_max) - safe(row_max_new)), 3.4e+38))  // repair of acc
        //           acc_p_scale = row_map(exp(safe(row_max_p) - safe(row_max_new)))  // repair of chunk p
        //           acc = map(select(p < chunks, acc * acc_scale + select(acc_p == 0, 0, acc_p * acc_p_scale), acc))
        //           row_sum_new = row_map(select(row_sum == 0, row_sum, row_sum * exp(...))
        //                                 + select(row_sum_p == 0, row_sum_p, row_sum_p * exp(...)))  // ...
        //           row_max = row_map(select(p < chunks, row_max_new, row_max))
        //           row_sum = row_map(select(p < chunks, row_sum_new, row_sum))
        //         }
        //         o_out = map(select(row_sum == 0, 0, acc / row_sum))  // output out
        //         store out[base: (strip * 4 + r0) * 64, stride 64, valid r_valid - strip * 4 x 64] = o_out
        //       }
        // The combine's block takes 16 query rows (the heads of the batch, flattened; r_valid =
        // n_rows - r0 of them are real), so one kernel serves every KV group. The repair is lesson 7's
        // h, applied twice per chunk; a partial that is 0 (an empty chunk) is added as 0, never
        // multiplied by a factor that could be infinite. The chunks' loads are independent of the
        // running state, so four chunks' loads are in flight at once: unroll_chunk_loops pads the loop
        // to a multiple of 4, and past the last chunk the loads read no rows and the state is kept.
        // The rows are independent too, so lay_out_combine merges them 4 at a time ("strip"), in
        // warp-rows registers (the listing's values section says warp-rows): a row of a chunk is one
        // 16-byte load per lane, and rows past r_valid are never loaded. In the partial kernel's mma
        // fragments each lane would load its 64 elements of a chunk one by one.
        ok = ok && l.program.kernels().size() == 2 && !kernel_text(text, "neptune_split_k_combine").empty();
    }

    const Lowered folded = lower_decode(spec, chunks, /*fold*/ true);
    {
        // A second kernel costs a launch, and its few blocks (one per 16 rows) wait for a whole grid
        // that ends ragged. fold_combine (before lay_out_combine and shared-memory planning) instead
        // appends the combine's body to the partial kernel under a LastArrival: each block counts itself in
        // ws_arrivals[b * kv_heads + hkv] once its partial state is written (and fenced), and the block
        // that completes the count runs the combine for its own group's rows only, r0 = b * q_heads +
        // h0 and r_valid = group, then resets the counter to 0 for the next launch. With one chunk (a
        // large batch fills the GPU without splitting), the block's state is already the group's: a
        // condition on the launch's chunk count writes the output directly, as lesson 7's kernel does.
        const std::string text = folded.program.text();
        const std::string direct = line_with(text, "if (chunks == 1)"),
                          several = line_with(text, "if (!(chunks == 1))"),
                          arrival = line_with(text, "if last of chunks arrivals");
        const inspect::KernelSummary k = folded.program.kernels().at(0);
        std::printf("folded: %zu kernel %s\n  %s\n  %s\n    ... %s\n", folded.program.kernels().size(), k.name.c_str(),
                    direct.c_str(), several.c_str(), arrival.c_str());
        const inspect::WorkspaceSummary w = folded.program.workspaces().back();
        std::printf("workspace %s, zeroed: %s\n", w.name.c_str(), w.zeroed ? "yes" : "no");
        // Prints:
        //   folded: 1 kernel neptune_split_k
        //     if (chunks == 1) {  // one chunk: its state is the group's
        //     if (!(chunks == 1)) {  // several chunks: store the state, the last one combines
        //       ... if last of chunks arrivals at ws_arrivals[b * kv_heads + hkv] {  // ...
        //   workspace ws_arrivals, zeroed: yes
        // The launcher zeroes that workspace once when it allocates it; every launch leaves it zero.
        // Inside the arrival the combine's state carries the suffix _c (acc_c, row_max_c, ...):
        // lay_out_combine gives it warp-rows registers, while the partial's acc stays in mma fragments.
        ok = ok && folded.program.kernels().size() == 1 && !direct.empty() && !several.empty() && !arrival.empty() &&
             w.zeroed;
    }

    {
        // The interpreter, with the chosen count, with one chunk (the rolling loop of lesson 7 plus
        // a trivial combine), and with 200 chunks for 157 tiles: 43 chunks hold no key, report
        // the identities (max -inf, sums 0), and the combine must give them no weight rather than
        // form 0 * inf.
        // Both forms: the two kernels, and the folded one (the interpreter runs blocks one after
        // another, so the last chunk of each group combines; it also checks the counters end at 0).
        for (const int p : {chunks, 1, 200})
            for (const bool fold : {false, true}) {
                const inspect::TileProgram prog =
                    p == chunks ? (fold ? folded : l).program : lower_decode(spec, p, fold).program;
                const std::vector<HostTensor> out = interpret(prog, inst, inputs, p);
                const ErrorStats e = compare(out[0].values, ref[0].values);
                std::printf("%3d chunks, %-9s: tile program vs fp64, relative RMS %.1e\n", p,
                            fold ? "folded" : "2 kernels", e.rel_rms());
                ok = ok && e.nonfinite == 0 && e.rel_rms() < 2e-3;
            }
        // Prints:
        //    13 chunks, 2 kernels: tile program vs fp64, relative RMS 1.5e-04
        //    13 chunks, folded   : tile program vs fp64, relative RMS 1.5e-04
        //     1 chunks, ...
        // The error is that of f16 probabilities in the dot with V, whatever the split or the form.
    }

    {
        // The CPU form (lesson 4) of the same directive, against the unfused algorithm, in f32.
        algorithms::OperatorFuncs plain = algorithms::build(spec), fused = algorithms::build(spec);
        fuse_reduction({fused.stage("acc"), fused.stage("row_sum")}, Halide::RVar(fused.rdoms.at("kv").x))
            .split_k_update(chunks, 32);
        HalideCpuRunner a(inst, plain.inputs, plain.outputs), b(inst, fused.inputs, lower_to_cpu(fused.outputs));
        a.set_inputs(inputs);
        b.set_inputs(inputs);
        std::vector<HostTensor> unfused = make_outputs(inst), split = make_outputs(inst);
        a.run(unfused);
        b.run(split);
        const ErrorStats e = compare(split[0].values, unfused[0].values);
        std::printf("split-K CPU form vs unfused algorithm: relative RMS %.1e\n", e.rel_rms());
        // Prints: split-K CPU form vs unfused algorithm: relative RMS 8.4e-07
        // More than lesson 7's rolling form: each of the 13 partials is rescaled once more in f32.
        ok = ok && e.rel_rms() < 1e-5;
    }

    // On a GPU: the suite's operator (f16 outputs) through GpuOperator, with the same chunk count.
    if (gpu_available()) {
        OperatorSpec gspec = spec;
        gspec.f32_outputs = false;
        GpuOptions opt;
        opt.chunks = chunks;
        GpuOperator op(instantiate(gspec, 1, 5000), opt);
        op.set_inputs(inputs);
        const ErrorStats e = compare(op.run()[0].values, ref[0].values);
        std::printf("CUDA kernels vs fp64: relative RMS %.1e\n%s", e.rel_rms(), op.describe().c_str());
        ok = ok && e.nonfinite == 0 && e.rel_rms() < 2e-3;
    } else {
        std::printf("no GPU here: the kernels were not run\n");
    }

    if (!ok) {
        std::printf("lesson 8: a check failed\n");
        return 1;
    }
    std::printf("Success!\n");
    return 0;
}
