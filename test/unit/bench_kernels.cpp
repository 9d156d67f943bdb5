// The unfused cuBLAS baseline without a GPU: its softmax kernel compiles with NVRTC for the GPU
// families Neptune targets, libcublas is found at run time, and operators it cannot run are refused
// with the reason before any device work.
#include <doctest/doctest.h>

#include <string>

#include "Native.h"
#include "runtime/Compile.h"

using namespace neptune;
using namespace neptune::bench;

TEST_CASE("bench kernels: the unfused baseline's softmax kernel compiles for sm_80 and sm_90") {
    for (const char *arch : {"sm_80", "sm_90"}) {
        internal::NvrtcOptions o;
        o.arch = arch;
        const internal::CompiledModule m = internal::nvrtc_compile(cublas_softmax_source(), "softmax", o);
        INFO(arch << ": " << m.log);
        CHECK(m.ptx.find(".entry neptune_bench_softmax") != std::string::npos);
        CHECK(m.ptx.find("cvt.rn.f16.f32") != std::string::npos);
        CHECK(m.ptx.find("cvt.rn.bf16.f32") != std::string::npos);
    }
}

TEST_CASE("bench kernels: libcublas opens at run time, and other operators are refused with the reason") {
    // The build machine has the CUDA toolkit, hence libcublas.so.13.
    CHECK(cublas_library().find("libcublas.so") != std::string::npos);
    const GpuOptions opt;
    CHECK_THROWS_WITH_AS(make_cublas_unfused(instantiate(*find_operator("softmax"), 4, 100), opt),
                         doctest::Contains("attention operators only"), Unsupported);
    CHECK_THROWS_WITH_AS(make_cublas_unfused(instantiate(*find_operator("attention_row_stats"), 1, 64), opt),
                         doctest::Contains("not row statistics"), Unsupported);
    CHECK_THROWS_WITH_AS(make_halide_unfused(instantiate(*find_operator("prefill_causal"), 1, 64), opt),
                         doctest::Contains("needs the AOT generators"), Unsupported);
}
