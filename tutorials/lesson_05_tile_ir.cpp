// Neptune tutorial lesson 5: reading the tile IR
//
// Lessons 3 and 4 rewrote fused chains into plain Halide for the CPU. For the GPU, Neptune lowers a
// fused group to its own tile IR instead: what one thread block does, one statement per step of the
// recurrence, over tiles (K and V in shared memory, scores and the output accumulator in tensor-core
// registers) and row vectors (the carried max and sum). This lesson lowers causal attention, reads
// the program it gets, and runs it in the tile-IR interpreter against the fp64 reference: the tile
// lowering is checked on the CPU before any GPU sees it.
//
// This lesson shows the compiler's internals: it reads them through the inspection header
// (include/neptune/Inspect.h), whose listings are for reading and change with the lowering.
//
// Build and run (from the repository root, after scripts/setup.sh):
//   meson setup build -Dtests=enabled && ninja -C build tutorials/lesson_05_tile_ir
//   build/tutorials/lesson_05_tile_ir
#include <cstdio>
#include <string>

#include "neptune/HostTensor.h"
#include "neptune/Inspect.h"
#include "neptune/reference/Reference.h"

using namespace neptune;

int main() {
    // The operator: causal attention from the suite, made small so the interpreter is quick:
    // 2 heads, head dim 64, one batch of 70 query rows and 70 keys (not a multiple of the tile).
    OperatorSpec spec = *find_operator("prefill_causal");
    spec.attention.q_heads = spec.attention.kv_heads = 2;
    spec.attention.head_dim_qk = spec.attention.head_dim_v = 64;
    const OperatorInstance inst = instantiate(spec, 1, 70);

    // lower_operator builds the Halide algorithm (lesson 2's chain plus the QK^T dot and the mask),
    // applies Neptune's schedule (fuse_reduction({acc, row_sum}, kv).rolling_update(32)), and runs
    // the lowering passes of src/lower/Lower.cpp, in order: build the tile program, skip masked
    // tiles, hoist row-invariant work, pipeline the loads, plan shared memory.
    inspect::TileOptions choices;
    choices.block_n = 32;
    const inspect::TileProgram lowered = inspect::lower_operator(inst, choices);
    const std::string text = lowered.text();
    {
        // The whole program reads like the online-softmax recurrence. Things to find in it:
        //  - `for j in [0, min(...))`: the KV loop; its upper bound comes from the causal mask
        //    (Halide's interval solver: tiles past the diagonal are never visited);
        //  - `if (!(...)) { s = map(select(...)) }`: the mask runs only on tiles that are not
        //    visible everywhere (the diagonal and the last, partial tile);
        //  - `row_max_new = max(row_max_new, row_max(s))`: the producer, a row reduction;
        //  - `acc_scale = row_map(min(exp(...row_max... - ...row_max_new...), 3.4e+38))`: the
        //    derived repair t * exp(m - m') of lesson 3, per row;
        //  - `acc += dot(s_a, v_s)`: the weighted sum with V on tensor cores, after `s_a = convert(s)`
        //    rounded the probabilities to f16;
        //  - after the loop, `o_out = map(select(row_sum == 0, 0, acc / row_sum))`: the epilogue.
        std::printf("%s\n", text.c_str());
        // Expected output (excerpt):
        //   for j in [0, min((min(q0 + seq_kv - seq_q + 64, seq_kv) + -1) / 32 + 1, n_tiles)) carrying ...
        //     s += dot(q_a, k_s^T)
        //     ...
        //     acc += dot(s_a, v_s)
    }

    // Now run it. The interpreter executes every block of the grid on the host, with the semantics
    // the CUDA emitter implements (zero-filled loads past the end, f16 rounding where the kernel
    // rounds, f32 arithmetic). Inputs and outputs are host tensors; outputs start as NaN so an
    // element the program forgets to write shows up.
    std::vector<HostTensor> in = make_inputs(inst, 11, InputStyle::RisingScores);
    std::vector<HostTensor> out = make_outputs(inst);
    for (HostTensor &t : out) std::fill(t.values.begin(), t.values.end(), NAN);
    std::vector<HostTensor *> tensors;
    for (HostTensor &t : in) tensors.push_back(&t);
    for (HostTensor &t : out) tensors.push_back(&t);
    lowered.interpret(tensors, lowered.ints());

    // The fp64 reference (plain loops, src/reference/) is the judge.
    const std::vector<HostTensor> ref = reference::compute(inst, in);
    const ErrorStats e = compare(out[0].values, ref[0].values);
    std::printf("tile program vs fp64: %s\n", e.describe(inst.outputs[0]).c_str());
    // Expected output: a relative RMS error near 2e-4, the rounding of f16 outputs and probabilities.

    const bool ok = e.nonfinite == 0 && e.rel_rms() < 2e-3 && text.find("acc += dot(s_a, v_s)") != std::string::npos;
    if (!ok) {
        std::printf("FAILED\n");
        return 1;
    }
    std::printf("Success!\n");
    return 0;
}
