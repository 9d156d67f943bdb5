// Neptune tutorial lesson 6: the generated CUDA
//
// The tile program of lesson 5 becomes CUDA C++ that calls a small header-only device library
// (include/neptune/device/: mma.sync on tensor cores, ldmatrix, cp.async copies, row reductions by
// warp shuffles). The emitter writes calls, not instructions: the order of the calls, the masks,
// the repair and the double buffering come from the tile program. This lesson emits decode
// attention with grouped query heads (split-K: one block per chunk of keys, and the last block of
// each group to finish combines the group's chunks; lesson 8), compiles it for sm_90 with NVRTC and
// with nvcc, and reads ptxas's resource report. No GPU is needed; with one, the kernel also runs and
// is checked against the fp64 reference.
//
// Build and run (from the repository root, after scripts/setup.sh):
//   meson setup build -Dtests=enabled && ninja -C build tutorials/lesson_06_generated_cuda
//   build/tutorials/lesson_06_generated_cuda
#include <cstdio>
#include <string>

#include "neptune/GpuOperator.h"
#include "neptune/Check.h"
#include "neptune/reference/Reference.h"

using namespace neptune;

int main() {
    // decode_gqa: one query row per head, 64 query heads sharing 8 KV heads. Each block of the
    // partial kernel takes one (batch, KV head, chunk of keys) and makes the 8 query heads of the
    // group the rows of its tensor-core tile, so K and V are read once for all of them.
    const OperatorInstance inst = instantiate(*find_operator("decode_gqa"), 2, 1000);
    GpuOptions opt;
    opt.chunks = 4;
    const EmittedOperator e = emit_operator(inst, opt, "sm_90");

    {
        // The source: one extern "C" kernel per tile-IR kernel. Print its first lines: the signature
        // (tensors, then the int extents) and the shared tiles, which are functions of the buffer
        // index so nothing indexes an array of tiles at run time (that would go to local memory).
        const size_t start = e.cuda.find("extern \"C\"");
        std::printf("%s\n...\n", e.cuda.substr(start, 900).c_str());
        // Expected output (excerpt):
        //   extern "C" __global__ void __launch_bounds__(32) neptune_split_k(const nd::f16 *__restrict__ q, ...
    }
    {
        // ptxas's report per kernel: registers, spills and stack. Spills (local-memory traffic) would
        // say the emitted code indexes register arrays at run time or keeps too much alive.
        for (const KernelResources &r : e.resources)
            std::printf("%-26s %3d registers, %d bytes spilled, %d bytes of stack\n", r.kernel.c_str(), r.registers,
                        r.spill_stores, r.stack_bytes);
        // Expected output (numbers from CUDA 13.0):
        //   neptune_split_k            ~220 registers, 0 bytes spilled, 0 bytes of stack
        // One kernel: the combine's registers are live only after the partial's are dead.
    }
    bool ok = e.resources.size() == 1 && e.ptx.find(".entry neptune_split_k(") != std::string::npos;
    for (const KernelResources &r : e.resources) ok = ok && r.registers > 0 && r.spill_stores == 0;

    // With a GPU, run the kernels through Neptune's runtime and compare with the fp64 reference.
    if (gpu_available()) {
        GpuOperator g(inst, opt);
        const std::vector<HostTensor> in = make_inputs(inst, 3);
        g.set_inputs(in);
        const std::vector<HostTensor> out = g.run();
        const ErrorStats err = compare(out[0].values, reference::compute(inst, in)[0].values);
        std::printf("GPU vs fp64: %s\n", err.describe(inst.outputs[0]).c_str());
        ok = ok && err.nonfinite == 0 && err.rel_rms() < 2e-3;
    } else {
        std::printf("no GPU here: the kernels were compiled, not run\n");
    }
    if (!ok) {
        std::printf("FAILED\n");
        return 1;
    }
    std::printf("Success!\n");
    return 0;
}
