// Neptune tutorial lesson 9: a Halide Generator with a Neptune schedule, and its static library
//
// Lessons 1 to 8 ran everything in one process: the algorithm built as Halide Funcs, fused,
// lowered and run just in time. A user of a compiled operator wants none of that at run time: a
// static library and a header, a function to call on buffers, no compiler in the process. Halide
// gets there with Generators, compiled ahead of time by the build; Neptune adds its schedule to the
// Generator and its kernels to the library.
//
// The generator is lesson_09_window_generator.cpp: sliding-window attention (each query sees the 96
// keys up to its own position) over the suite's algorithm, fused by rolling_update, compiled either
// into Neptune's CUDA kernels (backend=gpu) or into the fused CPU form (backend=host). The build
// turns two entries of the table in generators/meson.build into two libraries:
//
//   'lesson_09_window':      {'generator': 'window_attention', 'sources': files('../tutorials/lesson_09_window_generator.cpp'),
//                             'params': ['window=96']},
//   'lesson_09_window_host': {'generator': 'window_attention', 'sources': files('../tutorials/lesson_09_window_generator.cpp'),
//                             'params': ['window=96', 'backend=host']},
//
// and each entry defines a Meson dependency, <name>_dep, which this lesson links (tutorials/meson.build):
//
//   executable('lesson_09_generator', 'lesson_09_generator.cpp',
//              dependencies: [lesson_09_window_dep, lesson_09_window_host_dep, neptune_core_dep])
//
// This program includes the two headers and calls the two functions on halide_buffer_t's. It links
// Halide's runtime and Neptune's launcher, not libHalide: that is what runs on a GPU machine. The
// host library is checked against the fp64 reference here; the GPU library runs when there is a GPU.
//
// Build and run (from the repository root, after scripts/setup.sh):
//   meson setup build -Dtests=enabled && ninja -C build tutorials/lesson_09_generator
//   build/tutorials/lesson_09_generator
#include <HalideBuffer.h>
#include <HalideRuntimeCuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "lesson_09_window.h"  // int lesson_09_window(halide_buffer_t *q, *k, *v, *out)
#include "lesson_09_window_host.h"  // the same signature
#include "neptune/HostTensor.h"
#include "neptune/reference/Reference.h"
#include "neptune/runtime/HalideBuffers.h"
#include "neptune/runtime/NeptuneRuntime.h"

using namespace neptune;
using Halide::Runtime::Buffer;

namespace {

// Halide's runtime reports errors through halide_error, which calls this handler; the function
// then returns the error code. Keep the messages of a call to print them.
std::string messages;
void keep_message(void *, const char *message) {
    std::string m = message;
    while (!m.empty() && m.back() == '\n') m.pop_back();
    messages += (messages.empty() ? "" : "\n                   ") + m;
}
std::string take_messages() {
    std::string m = messages;
    messages.clear();
    return m;
}

// Neptune's host tensors as dense Halide buffers (neptune/runtime/HalideBuffers.h), and back.
Buffer<void> to_buffer(const HostTensor &t) { return to_runtime_buffer(t); }
HostTensor from_buffer(Buffer<void> &b, const TensorDesc &d) {
    b.copy_to_host();  // a no-op for host results; the GPU library leaves its output on the device
    return from_runtime_buffer(b, d);
}

// An output filled with NaN first: an element the library does not write fails the comparison.
Buffer<void> poisoned(const TensorDesc &d) {
    HostTensor t(d);
    std::fill(t.values.begin(), t.values.end(), NAN);
    return to_buffer(t);
}

}  // namespace

int main() {
    halide_set_error_handler(keep_message);
    bool ok = true;

    {
        // What the generator declared is in the library: the arguments and the target. Every
        // generated library has a <name>_metadata() next to <name>().
        const halide_filter_metadata_t *m = lesson_09_window_host_metadata();
        std::printf("%s(", m->name);
        for (int a = 0; a < m->num_arguments; a++) {
            const halide_filter_argument_t &arg = m->arguments[a];
            std::printf("%s%s: %s %dD %s%d", a ? ", " : "", arg.name,
                        arg.kind == halide_argument_kind_output_buffer ? "output" : "input", arg.dimensions,
                        arg.type.code == halide_type_float ? "f" : "i", arg.type.bits);
        }
        std::printf(")\n  target %s\n", m->target);
        // Prints:
        //   lesson_09_window_host(q: input 4D f16, k: input 4D f16, v: input 4D f16, out: output 4D f16)
        //     target x86-64-linux-avx-avx2-cuda-cuda_capability_86-f16c-fma-no_runtime-sse41-strict_float
        ok = ok && m->num_arguments == 4;
    }

    // The problem: batch 2, 4 query heads sharing 2 KV heads, 300 queries and keys (four tiles of
    // 64 and a partial one), head dim 64: the extents are the buffers', chosen at run time. The
    // suite's operator description with the same window gives the inputs and the fp64 reference.
    OperatorSpec spec = *find_operator("prefill_causal");
    spec.attention.mask = Mask::Window;
    spec.attention.window = 96;
    spec.attention.q_heads = 4;
    spec.attention.kv_heads = 2;
    spec.attention.head_dim_qk = spec.attention.head_dim_v = 64;
    const OperatorInstance inst = instantiate(spec, 2, 300);
    const std::vector<HostTensor> inputs = make_inputs(inst, 9, InputStyle::RisingScores);
    const std::vector<HostTensor> ref = reference::compute(inst, inputs);  // plain loops in fp64
    Buffer<void> q = to_buffer(inputs[0]), k = to_buffer(inputs[1]), v = to_buffer(inputs[2]);

    {
        // The host library: one call, like any C function. It returns 0 or a Halide error code.
        Buffer<void> out = poisoned(inst.outputs[0]);
        const auto t0 = std::chrono::steady_clock::now();
        const int rc = lesson_09_window_host(q, k, v, out);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const ErrorStats e = compare(from_buffer(out, inst.outputs[0]).values, ref[0].values);
        std::printf("host library: returned %d in %.1f ms (CPU); vs fp64: relative RMS %.1e\n", rc, ms, e.rel_rms());
        // Prints: host library: returned 0 in 690.0 ms (CPU); vs fp64: relative RMS 2.0e-04
        // The error is f16's rounding of the output: the CPU form computes in f32. It is there to
        // check results anywhere, not to be fast: its schedule is the simplest (reductions at root).
        ok = ok && rc == 0 && e.nonfinite == 0 && e.rel_rms() < 1e-3;
    }

    {
        // The GPU library: the same call. Inputs may live on the host (the extern stage copies them
        // to the device through Halide's runtime) or already on the device, as here. The output
        // comes back on the device; copy_to_host brings it over. Its kernels are inside the library
        // (an sm_80 fatbin with compute_90 PTX and an sm_90a cubin), picked by the device at run time.
        if (neptune_cuda_available()) {
            Buffer<void> qd = to_buffer(inputs[0]), kd = to_buffer(inputs[1]), vd = to_buffer(inputs[2]);
            for (Buffer<void> *b : {&qd, &kd, &vd}) b->copy_to_device(halide_cuda_device_interface());
            Buffer<void> out = poisoned(inst.outputs[0]);
            const int rc = lesson_09_window(qd, kd, vd, out);
            const ErrorStats e = compare(from_buffer(out, inst.outputs[0]).values, ref[0].values);
            std::printf("GPU library: returned %d; vs fp64: relative RMS %.1e %s\n", rc, e.rel_rms(),
                        rc ? take_messages().c_str() : "");
            // f16 probabilities into the tensor cores: the bound of lesson 7.
            ok = ok && rc == 0 && e.nonfinite == 0 && e.rel_rms() < 2e-3;

            // Tensors as a model's projections leave them, [batch, seq, heads, dim] in memory, run
            // as they are: a Halide buffer of that layout with dimensions 1 and 2 swapped is the
            // [batch, heads, seq, dim] view the library takes, strides and all. No copy is made.
            auto bshd = [](const Buffer<void> &dense) {
                Buffer<void> storage(dense.type(), {dense.dim(0).extent(), dense.dim(2).extent(), dense.dim(1).extent(),
                                                    dense.dim(3).extent()});
                Buffer<void> view = storage.transposed(1, 2);
                view.copy_from(dense);
                return view;
            };
            Buffer<void> qs = bshd(to_buffer(inputs[0])), ks = bshd(to_buffer(inputs[1])),
                         vs = bshd(to_buffer(inputs[2])), outs = bshd(poisoned(inst.outputs[0]));
            for (Buffer<void> *b : {&qs, &ks, &vs}) b->copy_to_device(halide_cuda_device_interface());
            const int rc2 = lesson_09_window(qs, ks, vs, outs);
            outs.copy_to_host();
            Buffer<void> dense_out = to_buffer(HostTensor(inst.outputs[0]));
            dense_out.copy_from(outs);
            const ErrorStats e2 = compare(from_buffer(dense_out, inst.outputs[0]).values, ref[0].values);
            std::printf("GPU library on [B, S, H, D] tensors: returned %d; vs fp64: relative RMS %.1e %s\n", rc2,
                        e2.rel_rms(), rc2 ? take_messages().c_str() : "");
            ok = ok && rc2 == 0 && e2.nonfinite == 0 && e2.rel_rms() < 2e-3;
        } else {
            std::printf("no GPU here: the GPU library was linked, not run\n");
        }
    }

    {
        // Bad arguments are error codes with a message, checked before any work. A null buffer:
        Buffer<void> out = to_buffer(HostTensor(inst.outputs[0]));
        take_messages();
        int rc = lesson_09_window_host(q, nullptr, v, out);
        std::printf("null k:            %d  %s\n", rc, take_messages().c_str());
        ok = ok && rc == halide_error_code_buffer_argument_is_null;
        // Prints: null k:            -12  Buffer argument k is nullptr

        // Too small a buffer: Halide checks every access the pipeline makes against the extents.
        Buffer<void> k32 = to_buffer(HostTensor(TensorDesc{"k", DType::F16, {2, 2, 300, 32}}));
        rc = lesson_09_window_host(q, k32, v, out);
        std::printf("k of head dim 32:  %d  %s\n", rc, take_messages().c_str());
        ok = ok && rc == halide_error_code_access_out_of_bounds;
        // Prints: k of head dim 32:  -4  Input buffer k is accessed at 63, which is beyond the max (31) in dimension 0

        // Too large a buffer would be read in part, silently: the generator's constraint
        // (set_extent) makes it an error.
        Buffer<void> k128 = to_buffer(HostTensor(TensorDesc{"k", DType::F16, {2, 2, 300, 128}}));
        rc = lesson_09_window_host(q, k128, v, out);
        std::printf("k of head dim 128: %d  %s\n", rc, take_messages().c_str());
        ok = ok && rc == halide_error_code_constraint_violated;
        // Prints: k of head dim 128: -8  Constraint violated: k.extent.0 (128) == 64 (64)

        // Shapes that disagree although every access is in bounds: 8 KV heads for 4 query heads
        // would make every query head read KV head 0. The generator's requirements catch it
        // (Generator::add_requirement, through generators/GeneratorSupport.h's require_attention_shapes).
        Buffer<void> k8 = to_buffer(HostTensor(TensorDesc{"k", DType::F16, {2, 8, 300, 64}}));
        rc = lesson_09_window_host(q, k8, v, out);
        std::printf("8 KV heads:        %d  %s\n", rc, take_messages().c_str());
        ok = ok && rc == halide_error_code_requirement_failed;
        // Prints: 8 KV heads:        -27  Requirement Failed: (...) q's heads (4) must be a multiple of k's (8)

        // The GPU library checks the same, and Neptune's stage adds what its kernels need, also
        // before any device work (so this runs without a GPU). Its kernels read tensors through
        // their strides, but rows must start on 16 bytes (8 elements): a k whose rows are 68
        // elements apart (a view of the first 64 of each) is refused. The stage reports why; Halide
        // then reports that the stage refused.
        Buffer<void> wider = to_buffer(HostTensor(TensorDesc{"k", DType::F16, {2, 2, 300, 68}}));
        wider.crop(0, 0, 64);
        rc = lesson_09_window(q, wider, v, out);
        std::printf("k rows 68 apart:   %d  %s\n", rc, take_messages().c_str());
        ok = ok && rc == halide_error_code_constraint_violated;
        // Prints:
        //   k rows 68 apart:   -8  Neptune extern stage out: buffer k has stride 68 in dimension 1: Neptune's ...
        //                      Bounds inference call to external stage neptune_halide_extern_4 returned ...: -8
    }

    if (!ok) {
        std::printf("lesson 9: a check failed\n");
        return 1;
    }
    std::printf("Success!\n");
    return 0;
}
