// The NVRTC and nvcc drivers and the ptxas report parser: they need the CUDA toolkit, not a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "TestKernels.h"
#include "neptune/CompileCuda.h"

using namespace neptune::internal;

namespace {

const std::string &vector_add = neptune::testing::vector_add_source;

// Compiles only for an arch-specific target: the a in sm_90a must reach the compiler.
const std::string needs_sm90a = R"(
#ifndef __CUDA_ARCH_FEAT_SM90_ALL
#error "this kernel needs sm_90a"
#endif
extern "C" __global__ void hopper_only(float *p) { p[threadIdx.x] = 1.0f; }
)";

bool is_elf(const std::vector<char> &image) {
    return image.size() > 4 && std::memcmp(image.data(),
                                           "\x7f"
                                           "ELF",
                                           4) == 0;
}

bool holds(const std::vector<char> &image, const std::string &text) {
    return std::search(image.begin(), image.end(), text.begin(), text.end()) != image.end();
}

std::string read_text(const std::filesystem::path &p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

NvrtcOptions options_for(const std::string &arch, bool cubin) {
    NvrtcOptions o;
    o.arch = arch;
    o.cubin = cubin;
    return o;
}

}  // namespace

TEST_CASE("nvrtc_compile: PTX for compute_80 and compute_90 targets that architecture") {
    for (const std::string cc : {"80", "90"}) {
        CAPTURE(cc);
        const CompiledModule m = nvrtc_compile(vector_add, "vector_add_ptx", options_for("compute_" + cc, false));
        CHECK(m.cubin.empty());
        CHECK(m.ptx.find(".target sm_" + cc + "\n") != std::string::npos);
        CHECK(m.ptx.find(".entry vector_add(") != std::string::npos);
        CHECK(m.ptx.find(".loc") != std::string::npos);  // -lineinfo
    }
    // The defaults: sm_90 without cubin means PTX for compute_90.
    CHECK(nvrtc_compile(vector_add, "vector_add_default").ptx.find(".target sm_90\n") != std::string::npos);
}

TEST_CASE("nvrtc_compile: cubins for sm_80, sm_90 and sm_90a are ELF images holding the kernel") {
    for (const char *arch : {"sm_80", "sm_90", "sm_90a"}) {
        CAPTURE(arch);
        const CompiledModule m = nvrtc_compile(vector_add, "vector_add_cubin", options_for(arch, true));
        CHECK(m.ptx.empty());
        CHECK(is_elf(m.cubin));
        CHECK(holds(m.cubin, "vector_add"));
    }
    CHECK(is_elf(nvrtc_compile(needs_sm90a, "hopper_only", options_for("sm_90a", true)).cubin));
    CHECK(nvrtc_compile(needs_sm90a, "hopper_only", options_for("compute_90a", false)).ptx.find(".target sm_90a") !=
          std::string::npos);
    CHECK_THROWS_WITH_AS(nvrtc_compile(needs_sm90a, "hopper_only", options_for("sm_90", true)),
                         doctest::Contains("this kernel needs sm_90a"), CompileFailure);
}

TEST_CASE("nvrtc_compile: in-memory headers, include directories and extra options reach the compiler") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "neptune_test_nvrtc_include";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "neptune_bias.h") << "#define NEPTUNE_BIAS 5.0f\n";
    NvrtcOptions o = options_for("compute_90", false);
    o.headers = {{"neptune_scale.h", "#define NEPTUNE_SCALE 3.0f\n"}};
    o.include_dirs = {dir.string()};
    o.extra = {"-DNEPTUNE_TERM=7.0f"};
    const std::string source = R"(
#include "neptune_scale.h"
#include "neptune_bias.h"
extern "C" __global__ void affine(float *p) { p[threadIdx.x] = p[threadIdx.x] * NEPTUNE_SCALE + NEPTUNE_BIAS + NEPTUNE_TERM; }
)";
    const std::string ptx = nvrtc_compile(source, "affine", o).ptx;
    CHECK(ptx.find("0f40400000") != std::string::npos);  // 3.0f
    CHECK((ptx.find("0f40A00000") != std::string::npos || ptx.find("0f41400000") != std::string::npos));  // 5 or 5+7
    std::filesystem::remove_all(dir);
}

TEST_CASE("nvrtc_compile: the toolkit's cuda_fp16.h and cuda_bf16.h are found") {
    const std::string source = R"(
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" __global__ void halves(__half *h, __nv_bfloat16 *b) {
    h[threadIdx.x] = __hadd(h[threadIdx.x], h[threadIdx.x]);
    b[threadIdx.x] = __hmul(b[threadIdx.x], b[threadIdx.x]);
}
)";
    CHECK(nvrtc_compile(source, "halves", options_for("sm_90", true)).cubin.size() > 0);
}

TEST_CASE("nvrtc_compile: a syntax error throws CompileFailure carrying NVRTC's log") {
    const std::string broken = "extern \"C\" __global__ void broken(float *p) { p[0] = ; }\n";
    CHECK_THROWS_WITH_AS(nvrtc_compile(broken, "broken"), doctest::Contains("expected an expression"), CompileFailure);
    CHECK_THROWS_WITH_AS(nvrtc_compile(broken, "broken"), doctest::Contains("broken.cu"), CompileFailure);
    CHECK_THROWS_WITH_AS(nvrtc_compile(vector_add, "bad_arch", options_for("volta", false)),
                         doctest::Contains("arch 'volta'"), CompileFailure);
}

TEST_CASE("nvrtc_compile: NEPTUNE_DUMP_CUDA leaves the source, the PTX and the log behind") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "neptune_test_dump_cuda";
    std::filesystem::remove_all(dir);
    setenv("NEPTUNE_DUMP_CUDA", dir.c_str(), 1);
    const CompiledModule m = nvrtc_compile(vector_add, "dumped/vector_add", options_for("compute_80", false));
    unsetenv("NEPTUNE_DUMP_CUDA");
    CHECK(read_text(dir / "dumped_vector_add.cu") == vector_add);
    CHECK(read_text(dir / "dumped_vector_add.ptx") == m.ptx);
    CHECK(std::filesystem::exists(dir / "dumped_vector_add.log"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("nvrtc_compile: NEPTUNE_CUDA_OVERRIDE compiles <dir>/<stem>.cu in place of the emitted source") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "neptune_test_override_cuda";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::string edited = "extern \"C\" __global__ void edited_by_hand(float *p) { p[threadIdx.x] = 2.0f; }\n";
    std::ofstream(dir / "over_vector_add.cu") << edited;
    setenv("NEPTUNE_CUDA_OVERRIDE", dir.c_str(), 1);
    const CompiledModule replaced = nvrtc_compile(vector_add, "over/vector_add", options_for("compute_80", false));
    const CompiledModule kept = nvrtc_compile(vector_add, "not_in_dir", options_for("compute_80", false));
    unsetenv("NEPTUNE_CUDA_OVERRIDE");
    CHECK(replaced.ptx.find("edited_by_hand") != std::string::npos);
    CHECK(replaced.ptx.find(".entry vector_add") == std::string::npos);
    CHECK(kept.ptx.find(".entry vector_add") != std::string::npos);  // no file for this stem: the emitted source
    std::filesystem::remove_all(dir);
}

TEST_CASE("nvcc_compile: a cubin and ptxas's report, which parse_ptxas_report reads") {
    const std::string source = vector_add + R"(
__global__ void reverse_tile(float *p) {
    __shared__ float tile[1024];
    tile[threadIdx.x] = p[threadIdx.x];
    __syncthreads();
    p[threadIdx.x] = tile[1023 - threadIdx.x];
}
)";
    for (const char *arch : {"sm_90", "sm_90a"}) {
        CAPTURE(arch);
        const CompiledModule m = nvcc_compile(source, "nvcc_kernels", arch);
        CHECK(is_elf(m.cubin));
        CHECK(m.log.find(std::string("for '") + arch + "'") != std::string::npos);
        const ResourceUsage add = parse_ptxas_report(m.log, "vector_add");
        CHECK(add.registers > 0);
        CHECK(add.spill_stores == 0);
        CHECK(add.spill_loads == 0);
        CHECK(add.shared_bytes == 0);
        const ResourceUsage tile = parse_ptxas_report(m.log, "reverse_tile");  // found through its mangled name
        CHECK(tile.registers > 0);
        CHECK(tile.shared_bytes == 4096);
        CHECK(parse_ptxas_report(m.log, "no_such_kernel").registers == -1);
    }
    CHECK_THROWS_WITH_AS(nvcc_compile("__global__ void k() { undeclared(); }", "nvcc_broken", "sm_80"),
                         doctest::Contains("identifier \"undeclared\" is undefined"), CompileFailure);
}

TEST_CASE("parse_ptxas_report: a hand-written report, with a device function's spills kept apart") {
    const std::string report = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_ZN7neptune5spillEPfi' for 'sm_90a'
ptxas info    : Function properties for _ZN7neptune5spillEPfi
    256 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 256 bytes cumulative stack size
ptxas info    : Compile time = 13.291 ms
ptxas info    : Function properties for _Z6helperPfi
    64 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function '_Z4smemPf' for 'sm_90a'
ptxas info    : Function properties for _Z4smemPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 1 barriers, 49152 bytes smem, 384 bytes cmem[0]
ptxas info    : Compiling entry function 'plain' for 'sm_90a'
ptxas info    : Function properties for plain
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
)";
    const ResourceUsage spill = parse_ptxas_report(report, "neptune::spill");
    CHECK(spill.registers == 255);
    CHECK(spill.stack_bytes == 256);
    CHECK(spill.spill_stores == 24);
    CHECK(spill.spill_loads == 16);
    CHECK(spill.shared_bytes == 0);
    CHECK(parse_ptxas_report(report, "spill").spill_stores == 24);  // without the namespace
    const ResourceUsage smem = parse_ptxas_report(report, "smem");
    CHECK(smem.registers == 12);
    CHECK(smem.shared_bytes == 49152);
    CHECK(smem.spill_stores == 0);
    CHECK(smem.stack_bytes == 0);
    const ResourceUsage helper = parse_ptxas_report(report, "helper");  // a device function: properties only
    CHECK(helper.spill_stores == 8);
    CHECK(helper.registers == -1);
    const ResourceUsage plain = parse_ptxas_report(report, "plain");
    CHECK(plain.registers == 8);
    CHECK(plain.shared_bytes == 0);
    const ResourceUsage missing = parse_ptxas_report(report, "smem2");
    CHECK(missing.registers == -1);
    CHECK(missing.shared_bytes == -1);
    CHECK(missing.spill_stores == -1);
    CHECK(missing.spill_loads == -1);
    CHECK(missing.stack_bytes == -1);
}
