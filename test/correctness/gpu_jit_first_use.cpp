// Kernel sets compiled on first use through compile_gpu, on the GPU: a row chain's rung is compiled
// by the installed kernel compiler when a call first takes it, once, and a call that takes a rung
// not yet compiled while none is installed is refused with the reason. A process of its own: the
// launcher keeps a descriptor's loaded sets for the process, so the rungs an earlier case's pipeline
// of the same operator took would be loaded already.
// Skips (77) without a GPU.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "Compare.h"
#include "neptune/GpuPipeline.h"
#include "neptune/HalideCpu.h"
#include "neptune/algorithms/Schedules.h"
#include "neptune/reference/Reference.h"
#include "neptune/runtime/NeptuneHalide.h"

using namespace neptune;
using namespace neptune::testing;

namespace {

Tolerance gpu_tolerance(const HostTensor &want) { return with_rounding(want, tolerance_for(want.desc.dtype)); }

HostTensor read(Halide::Buffer<> &b, const TensorDesc &d) {
    REQUIRE((b.raw_buffer()->device_interface == nullptr || b.copy_to_host() == 0));
    HostTensor t(d);
    t.load(b.data());
    return t;
}

// The compiler compile_gpu installed, and how many kernel sets went through it.
neptune_halide_kernel_compiler_fn installed_compiler = nullptr;
int sets_compiled = 0;

int counting_compiler(const char *source, const char *arch, const char *name, char **image, size_t *size,
                      char **message) {
    sets_compiled++;
    return installed_compiler(source, arch, name, image, size, message);
}

}  // namespace

TEST_CASE(
    "gpu jit first use: a row chain's rung is compiled when a call first takes it, and needs the installed compiler") {
    const OperatorSpec spec = *find_operator("softmax");
    algorithms::OperatorFuncs f = algorithms::build(spec);
    algorithms::fuse_operator(spec, f, algorithms::FusionChoice());
    GpuPipeline p = compile_gpu(f.outputs, ExternOptions());
    auto run = [&](int64_t rows, int64_t cols) {
        const OperatorInstance inst = instantiate(spec, rows, cols);
        const std::vector<HostTensor> in = make_inputs(inst, 5);
        f.inputs[0].set(to_halide_buffer(in[0]));
        Halide::Buffer<> out = to_halide_buffer(make_outputs(inst)[0]);
        p.realize(out);
        const HostTensor want = reference::compute(inst, in)[0];
        check_close("y", read(out, inst.outputs[0]), want, gpu_tolerance(want));
    };
    installed_compiler = neptune_halide_set_kernel_compiler(counting_compiler);
    REQUIRE(bool(installed_compiler));
    run(64, 3000);  // compiles the rung of rows up to 4096 columns
    CHECK(sets_compiled == 1);
    run(32, 4000);  // the same rung, already compiled
    CHECK(sets_compiled == 1);
    // Rows longer than a cluster holds take the chunked rung (65 rows: more than split). Without a
    // compiler a call that takes it is refused with the reason.
    neptune_halide_set_kernel_compiler(nullptr);
    try {
        run(65, 300000);
        FAIL("ran without compiling its rung");
    } catch (const Halide::RuntimeError &e) {
        CHECK(std::string(e.what()).find("compiled on first use, and no kernel compiler is installed") !=
              std::string::npos);
    }
    CHECK(sets_compiled == 1);
    neptune_halide_set_kernel_compiler(counting_compiler);
    run(65, 300000);  // compiled now
    CHECK(sets_compiled == 2);
    run(64, 3000);
    CHECK(sets_compiled == 2);
    neptune_halide_set_kernel_compiler(installed_compiler);
}
