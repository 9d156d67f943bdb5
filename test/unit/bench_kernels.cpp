// The unfused baselines without a GPU: the cuBLAS path's softmax kernel compiles with NVRTC for the
// GPU families Neptune targets, libcublas is found at run time, and operators the cuBLAS path or the
// Halide unfused libraries cannot run are refused with the reason before any device work.
#include <doctest/doctest.h>

#include <string>

#include "Native.h"
#include "neptune/CompileCuda.h"

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
}

TEST_CASE("bench kernels: the Halide CUDA and copy baselines refuse operators they do not measure") {
    const GpuOptions opt;
    CHECK_THROWS_WITH_AS(make_halide_cuda(instantiate(*find_operator("prefill_causal"), 1, 64), opt),
                         doctest::Contains("row-wise operators only"), Unsupported);
    OperatorSpec bf = *find_operator("softmax");
    bf.dtype = DType::BF16;
    CHECK_THROWS_WITH_AS(make_halide_cuda(instantiate(bf, 4, 100), opt), doctest::Contains("compiled for f16"),
                         Unsupported);
    CHECK_THROWS_WITH_AS(make_copy_bound(instantiate(*find_operator("prefill_causal"), 1, 64), opt),
                         doctest::Contains("memory-bound operators only"), Unsupported);
}

TEST_CASE("bench kernels: the Halide unfused baseline refuses what its libraries were not compiled for") {
    const GpuOptions opt;
    CHECK_THROWS_WITH_AS(make_halide_unfused(instantiate(*find_operator("softmax"), 4, 100), opt),
                         doctest::Contains("attention operators only"), Unsupported);
    CHECK_THROWS_WITH_AS(make_halide_unfused(instantiate(*find_operator("attention_row_stats"), 1, 64), opt),
                         doctest::Contains("not row statistics"), Unsupported);
    OperatorSpec bf = *find_operator("prefill_causal");
    bf.dtype = DType::BF16;
    CHECK_THROWS_WITH_AS(make_halide_unfused(instantiate(bf, 1, 64), opt), doctest::Contains("f16 and head dim 128"),
                         Unsupported);
    OperatorSpec d64 = *find_operator("decode_gqa");
    d64.attention.head_dim_qk = d64.attention.head_dim_v = 64;
    CHECK_THROWS_WITH_AS(make_halide_unfused(instantiate(d64, 1, 64), opt), doctest::Contains("head dim 128"),
                         Unsupported);
    OperatorSpec narrow = *find_operator("prefill_windowed");
    narrow.attention.window = 100;
    CHECK_THROWS_WITH_AS(make_halide_unfused(instantiate(narrow, 1, 64), opt), doctest::Contains("window of 4096"),
                         Unsupported);
    CHECK_THROWS_WITH_AS(make_halide_unfused(instantiate(*find_operator("prefill_causal"), 1, 32768), opt),
                         doctest::Contains("GiB of f32 scores"), Unsupported);
    // A supported operator gets as far as the device, which this machine lacks.
    CHECK_THROWS_WITH(make_halide_unfused(instantiate(*find_operator("prefill_causal"), 1, 64), opt),
                      doctest::Contains("CUDA"));
}
