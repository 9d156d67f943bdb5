// Neptune tutorial lesson 7: FlashAttention, derived from plain attention
//
// Attention is softmax (lessons 2 and 3) with two more steps around it: the scores are dot
// products of query and key rows, and the probabilities weight the rows of V. Written plainly, it
// is three passes over the keys of every query row: one for the row max, one for the sum of
// exponentials, one for the weighted sum of V, with every score either kept in memory between them
// or computed three times. FlashAttention makes it one pass, tile by tile over the keys, carrying
// (max, sum, output) and rescaling the sum and the output whenever the max rises.
//
// Nobody writes that rescaling here. We take the plain algorithm of the suite, say which
// reductions to fuse and that the state rolls from tile to tile, and Neptune derives the rescaling
// from the definitions and proves it (docs/design/fusion.md: the repair function, the rolling
// update). Then we follow the fused group down: its CPU form against the unfused algorithm, its
// tile program (what one thread block does), that program in the tile-IR interpreter against the
// fp64 reference, and, when this machine has a GPU, the CUDA kernel the same program becomes.
//
// Build and run (from the repository root, after scripts/setup.sh):
//   meson setup build -Dtests=enabled && ninja -C build tutorials/lesson_07_flash_attention
//   build/tutorials/lesson_07_flash_attention
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "Halide.h"
#include "gpu/GpuOperator.h"
#include "lower/Lower.h"
#include "neptune/Directives.h"
#include "neptune/HalideCpu.h"
#include "neptune/algorithms/Algorithms.h"
#include "neptune/reference/Reference.h"
#include "tir/Interpreter.h"

using namespace neptune;

namespace {

// The lines of `text` that contain any of `keys`, for printing an excerpt of a long program.
std::string lines_with(const std::string &text, const std::vector<std::string> &keys) {
    std::istringstream in(text);
    std::string line, out;
    while (std::getline(in, line))
        for (const std::string &k : keys)
            if (line.find(k) != std::string::npos) {
                out += line + "\n";
                break;
            }
    return out;
}

}  // namespace

int main() {
    // Causal attention from the suite, made small so the CPU runs it in a moment: one batch, 2
    // heads, head dim 64, 150 query rows and 150 keys (two whole tiles of 64 keys and a partial one).
    // Outputs in f32, so that the fused and unfused forms can be compared at fp32's precision.
    OperatorSpec spec = *find_operator("prefill_causal");
    spec.attention.q_heads = spec.attention.kv_heads = 2;
    spec.attention.head_dim_qk = spec.attention.head_dim_v = 64;
    spec.f32_outputs = true;
    const OperatorInstance inst = instantiate(spec, 1, 150);
    // Inputs whose row maxima rise along the keys: with plain random scores the max is often
    // found in the first tile and a missing rescale would go unnoticed.
    const std::vector<HostTensor> inputs = make_inputs(inst, 7, InputStyle::RisingScores);
    const std::vector<HostTensor> ref = reference::compute(inst, inputs);  // plain loops in fp64
    bool ok = true;

    // The plain algorithm (include/neptune/algorithms/Algorithms.h), as Halide Funcs:
    //   qk(j, i, h, b)    = sum over rd of q(rd, i, h, b) * k(rd, j, h, b)     the dot
    //   score(j, i, h, b) = j <= i ? qk / sqrt(64) : -inf                        the causal mask
    //   row_max(i, h, b)  = max over kv of score(kv, i, h, b)
    //   prob(j, i, h, b)  = exp(score - row_max)
    //   row_sum(i, h, b)  = sum over kv of prob(kv, i, h, b)
    //   acc(e, i, h, b)   = sum over kv of prob(kv, i, h, b) * v(e, kv, h, b)
    //   out(e, i, h, b)   = acc / row_sum
    // row_sum and acc read the *final* row_max: fused naively into the max's loop, they would use
    // the max of the keys seen so far, and be wrong (lesson 2 showed it for softmax).
    std::vector<HostTensor> unfused = make_outputs(inst);
    {
        algorithms::OperatorFuncs plain = algorithms::build(spec);
        HalideCpuRunner runner(inst, plain.inputs, plain.outputs);
        runner.set_inputs(inputs);
        runner.run(unfused);
        const ErrorStats e = compare(unfused[0].values, ref[0].values);
        std::printf("unfused algorithm (Halide on the CPU) vs fp64: relative RMS %.1e\n", e.rel_rms());
        // Prints: unfused algorithm (Halide on the CPU) vs fp64: relative RMS 3.0e-07
        ok = ok && e.rel_rms() < 1e-6;
    }

    // The directive. Both targets, acc and row_sum, are fused over kv with the reduction they
    // read (row_max, found by walking their definitions), rolling over tiles of 64 keys. That is
    // the whole schedule of FlashAttention's recurrence; describe() shows what Neptune derived.
    algorithms::OperatorFuncs funcs = algorithms::build(spec);
    const Halide::RVar kv(funcs.rdoms.at("kv").x);
    FusedReduction group = fuse_reduction({funcs.stage("acc"), funcs.stage("row_sum")}, kv).rolling_update(64);
    {
        std::printf("%s", group.describe().c_str());
        // Prints (the second build of the algorithm gets Halide's unique names, acc$1 and so on):
        //   fuse_reduction(acc$1, row_sum$1, kv): rolling update, tiles of 64
        //     row_max$1(i, h, b) = max over kv of score$1(kv, i, h, b)
        //     acc$1(e, i, h, b) = + over kv of exp(score$1(kv, i, h, b) - select(row_max$1 == -inf, 0, row_max$1))
        //                                      * v_im$1(e, kv, h / (q.extent.2 / k.extent.2), b)
        //         repair (rescale): h = t * exp(select(row_max$1 == -inf, 0, row_max$1)
        //                                       - select(row_max$1' == -inf, 0, row_max$1'))
        //         proof: R1: g(r', c) and h(g(r, c)) have the same normal form; R2: h(t) = ... is linear in t
        //     row_sum$1(i, h, b) = + over kv of exp(score$1(kv, i, h, b) - select(row_max$1 == -inf, 0, row_max$1))
        //         repair (rescale): the same h
        // The repair h is FlashAttention's rescale: when the max moves from m to m', every term
        // exp(s - m) already summed becomes exp(s - m') by one factor exp(m - m'), for the sum and
        // for each column of acc alike. The proof says why it is exact: h applied to a term under
        // the old max has the same normal form as the term under the new one (R1), and h is linear,
        // so it may be applied to the partial sum rather than to each term (R2). The select is the
        // algorithm's own guard (a safe max of 0 while every key so far was masked), which keeps
        // exp(-inf - -inf) out. The division by row_sum stays after the loop: out is the epilogue,
        // run once on the final state.
        ok = ok && group.describe().find("rolling") != std::string::npos;
    }

    {
        // The tile program: what one thread block computes, lowered by the passes of
        // src/lower/Lower.cpp for mma.sync-class GPUs (sm_80, also run on Hopper). A block owns 64
        // query rows (4 warps of 16) of one (batch, head) and walks the key tiles; the excerpt below
        // keeps the lines that are the recurrence.
        internal::LowerOptions lo = internal::default_lower_options(internal::GpuArch::Sm80, spec.dtype, 64, 64,
                                                                    /*decode*/ false, /*group*/ 1);
        lo.block_n = 64;  // the tile of rolling_update
        const tir::Program program = internal::lower_to_tiles(group.plan(), funcs.outputs, lo);
        const std::string text = tir::to_string(program);
        std::printf("%s", lines_with(text, {"for j in", "row_max_new = max", "acc_scale =", "acc += dot",
                                            "row_sum_new =", "o_out = map"})
                              .c_str());
        // Prints (the guards abridged to safe(...)):
        //   for j in [0, min((min(q0 + seq_kv - seq_q + 64, seq_kv) + -1) / 64 + 1, n_tiles)) carrying row_max, acc, row_sum {
        //     row_max_new = max(row_max_new, row_max(s))
        //     acc_scale = row_map(min(exp(safe(row_max) - safe(row_max_new)), 3.4e+38))  // repair of acc
        //     acc += dot(s_a, v_s)
        //     row_sum_new = row_map(select(row_sum == 0, row_sum, row_sum * exp(safe(row_max) - safe(row_max_new))))  // repair of row_sum
        //     row_sum_new = row_sum_new + row_sum(s)
        //   o_out = map(select(row_sum == 0, 0, acc / row_sum))  // output out
        // Each repair is the derived h, applied per row: acc's multiplies the accumulator tile
        // before this tile's dot is added, and the sum is left alone while it is still 0 (nothing
        // to rescale, and 0 * inf would be NaN).
        // The loop's bound comes from the causal mask: tiles entirely above the diagonal are never
        // visited, which is half the work of causal attention.

        // Run it on the CPU, every block of the grid, with the semantics the CUDA emitter implements
        // (probabilities rounded to f16 before the dot with V, as the tensor cores take them).
        std::vector<HostTensor> in = inputs, out = make_outputs(inst);
        tir::LaunchArgs args;
        for (HostTensor &t : in) args.tensors[t.desc.name] = &t;
        for (HostTensor &t : out) args.tensors[t.desc.name] = &t;
        args.ints = {{"batch", inst.batch}, {"q_heads", 2}, {"kv_heads", 2}, {"seq_q", 150}, {"seq_kv", 150}};
        tir::interpret(program, args);
        const ErrorStats e = compare(out[0].values, ref[0].values);
        std::printf("tile program (interpreter) vs fp64: relative RMS %.1e\n", e.rel_rms());
        // Prints: tile program (interpreter) vs fp64: relative RMS 1.3e-04
        // f16 probabilities and f16 inputs to the dots: the error of any fp16 attention kernel.
        ok = ok && e.nonfinite == 0 && e.rel_rms() < 2e-3 && text.find("acc += dot(s_a, v_s)") != std::string::npos;
    }

    {
        // The CPU form of the same group: lower_to_cpu rewrites the Funcs into tiles with carried
        // state (lesson 3), and Halide runs it. Against the unfused algorithm, both in f32, it
        // differs by rounding only: the sums are added in another order and rescaled on the way.
        const std::vector<Halide::Func> fused_out = lower_to_cpu(funcs.outputs);
        HalideCpuRunner runner(inst, funcs.inputs, fused_out);
        runner.set_inputs(inputs);
        std::vector<HostTensor> fused = make_outputs(inst);
        runner.run(fused);
        const ErrorStats e = compare(fused[0].values, unfused[0].values);
        std::printf("fused CPU form vs unfused algorithm: relative RMS %.1e\n", e.rel_rms());
        // Prints: fused CPU form vs unfused algorithm: relative RMS 9.1e-08
        ok = ok && e.rel_rms() < 1e-5;
    }

    // On a GPU the tile program is emitted as CUDA (lesson 6), compiled by NVRTC for the device
    // and launched over a grid of (query tiles, heads, batch); the output must match fp64 just as
    // the interpreter's did. GpuOperator does all of that for an operator of the suite.
    if (gpu_available()) {
        OperatorSpec gspec = spec;
        gspec.f32_outputs = false;  // the kernels write f16, as the suite's operator does
        const OperatorInstance ginst = instantiate(gspec, 1, 150);
        GpuOperator op(ginst);
        op.set_inputs(inputs);
        const std::vector<HostTensor> out = op.run();
        const ErrorStats e = compare(out[0].values, ref[0].values);
        std::printf("CUDA kernel vs fp64: relative RMS %.1e\n%s", e.rel_rms(), op.describe().c_str());
        ok = ok && e.nonfinite == 0 && e.rel_rms() < 2e-3;
    } else {
        std::printf("no GPU here: the kernel was not run\n");
    }

    if (!ok) {
        std::printf("lesson 7: a check failed\n");
        return 1;
    }
    std::printf("Success!\n");
    return 0;
}
