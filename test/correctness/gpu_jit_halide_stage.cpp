// Halide's own JIT CUDA pipeline, no Neptune stage in it: a Halide CUDA stage that halves an f16
// tensor, realized on the GPU before and after neptune::share_cuda_context() hands Halide's JIT runtime
// Neptune's CUDA context, with the input on the host and on the device. It separates a fault of the
// context sharing from one of the extern stage (correctness/gpu_jit_extern: a Halide stage before
// Neptune's returns zeros there). Its own process: the first realizations must run before the
// handlers are installed. Skips (77) without a GPU.
#include <doctest/doctest.h>

#include "neptune/GpuPipeline.h"

namespace {

struct Halving {
    Halide::ImageParam q{Halide::Float(16), 4, "q"};
    Halide::Func half{"half"};
    Halide::Buffer<Halide::float16_t> in{128, 129, 4, 1};

    Halving() {
        Halide::Var d("d"), i("i"), h("h"), b("b"), di("di"), ii("ii");
        half(d, i, h, b) = Halide::cast<Halide::float16_t>(Halide::cast<float>(q(d, i, h, b)) * 0.5f);
        half.gpu_tile(d, i, di, ii, 32, 4, Halide::TailStrategy::GuardWithIf);
        // Small integers and halves: exact in f16, and so are their halves.
        in.for_each_element([&](int x, int y, int z, int w) {
            in(x, y, z, w) = Halide::float16_t(float((x * 7 + y * 3 + z) % 17 - 8) * 0.5f + float(w));
        });
    }

    /** Realizes half on the GPU (input on the device first when asked); the number of wrong values. */
    int wrong(bool input_on_device) {
        Halide::Buffer<Halide::float16_t> src = in.copy();
        if (input_on_device) REQUIRE(src.copy_to_device(Halide::DeviceAPI::CUDA, neptune::gpu_jit_target()) == 0);
        q.set(src);
        Halide::Buffer<Halide::float16_t> out(128, 129, 4, 1);
        out.fill(Halide::float16_t(99.0f));
        half.realize(out, neptune::gpu_jit_target());
        REQUIRE(out.copy_to_host() == 0);
        int bad = 0;
        out.for_each_element(
            [&](int x, int y, int z, int w) { bad += float(out(x, y, z, w)) != float(in(x, y, z, w)) * 0.5f ? 1 : 0; });
        return bad;
    }
};

}  // namespace

TEST_CASE("gpu jit halide stage: a Halide CUDA stage alone is right in Halide's context and in Neptune's") {
    Halving h;
    CHECK_MESSAGE(h.wrong(false) == 0, "Halide's own context, input on the host");
    CHECK_MESSAGE(h.wrong(true) == 0, "Halide's own context, input on the device");
    neptune::share_cuda_context();
    CHECK_MESSAGE(h.wrong(false) == 0, "Neptune's context, input on the host");
    CHECK_MESSAGE(h.wrong(true) == 0, "Neptune's context, input on the device");
    // A new pipeline object for the same Func after the handlers changed (gpu_jit_extern's order).
    Halving fresh;
    CHECK_MESSAGE(fresh.wrong(true) == 0, "Neptune's context, a pipeline compiled after the change");
}
