// Every attention operator lowers to a verified tile program whose emitted CUDA compiles with NVRTC
// for sm_80 and sm_90 (no GPU needed).
#include <doctest/doctest.h>

#include <algorithm>

#include "codegen/CodeGenCuda.h"
#include "gpu/GpuOperator.h"
#include "lower/LowerOperator.h"
#include "runtime/Compile.h"
#include "tir/IR.h"

using namespace neptune;

namespace neptune::internal {
const std::vector<std::pair<std::string, std::string>> &device_headers();
}

namespace {

tir::Program lower(const OperatorSpec &spec, GpuArch arch = GpuArch::Sm80) {
    internal::LoweringChoices c;
    c.arch = arch;
    return internal::lower_operator(instantiate(spec, 1, 256), c).program;
}

}  // namespace

TEST_CASE("lower: every attention operator gives a verified tile program and CUDA that NVRTC compiles") {
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention) continue;
        INFO(op.name);
        for (const GpuArch target : {GpuArch::Sm80, GpuArch::Sm90a}) {
            const tir::Program p = lower(op, target);
            tir::verify(p);
            CHECK(p.kernels.size() == (op.attention.decode ? 2u : 1u));
            const std::string src = internal::emit_cuda(p);
            internal::NvrtcOptions no;
            no.cubin = true;
            no.headers = internal::device_headers();
            for (const char *arch : target == GpuArch::Sm90a ? std::vector<const char *>{"sm_90a"}
                                                               : std::vector<const char *>{"sm_80", "sm_90"}) {
                no.arch = arch;
                INFO(arch << "\n" << tir::to_string(p) << "\n" << src);
                CHECK_NOTHROW(internal::nvrtc_compile(src, op.name + ".cu", no));
            }
        }
    }
}

TEST_CASE("lower: causal and windowed masks narrow the KV loop and mask only partial tiles") {
    // The window bounds the loop from below and the causal mask from above; no mask, no bound.
    const std::string window = tir::to_string(lower(*find_operator("prefill_windowed")));
    INFO(window);
    CHECK(window.find("for j in [max(") != std::string::npos);
    CHECK(window.find("if (") != std::string::npos);
    const std::string causal = tir::to_string(lower(*find_operator("prefill_causal")));
    CHECK(causal.find("q0") != causal.find("for j in [0, min("));
    CHECK(causal.find("for j in [0, min(") != std::string::npos);
    const std::string global = tir::to_string(lower(*find_operator("prefill_global")));
    CHECK(global.find("for j in [0, ") != std::string::npos);
}

TEST_CASE("lower: the flagship kernels compile with nvcc for sm_80, sm_90 and sm_90a without spills (ptxas report)") {
    for (const char *name : {"prefill_causal", "decode_gqa"})
        for (const char *arch : {"sm_80", "sm_90", "sm_90a"}) {
            const EmittedOperator e = emit_operator(instantiate(*find_operator(name), 1, 4096), GpuOptions{}, arch);
            INFO(std::string(name) << " " << std::string(arch) << "\n" << e.ptxas_log);
            CHECK(e.ptx.find(".entry") != std::string::npos);
            REQUIRE(!e.resources.empty());
            for (const KernelResources &r : e.resources) {
                MESSAGE(std::string(name) << " " << std::string(arch) << " " << r.kernel << ": " << r.registers << " registers, "
                             << r.spill_stores << " B spill stores, " << r.stack_bytes << " B stack");
                CHECK(r.registers > 0);
                CHECK(r.spill_stores == 0);
                CHECK(r.spill_loads == 0);
            }
        }
}

TEST_CASE("lower: unroll_chunk_loops unrolls the combine's loops over chunks only, and the CUDA compiles") {
    internal::LoweringChoices c;
    c.arch = GpuArch::Sm90a;
    c.unroll_chunks = 4;
    const tir::Program p = internal::lower_operator(instantiate(*find_operator("decode_gqa"), 1, 1000), c).program;
    tir::verify(p);
    REQUIRE(p.kernels.size() == 2u);
    // The partial kernel's KV loop reads shared tiles (cp.async): left alone. The combine loops over
    // the chunks three times: row maxima (row loads only: x4), row sums and acc (acc loads a tile: x2).
    std::vector<int> partial, combine;
    for (const tir::Stmt &s : p.kernels[0].body)
        if (s->kind == tir::NodeKind::CarriedLoop) partial.push_back(s->unroll);
    for (const tir::Stmt &s : p.kernels[1].body)
        if (s->kind == tir::NodeKind::CarriedLoop) combine.push_back(s->unroll);
    INFO(tir::to_string(p));
    CHECK(partial == std::vector<int>{1});
    REQUIRE(!combine.empty());
    CHECK(combine.front() == 4);
    CHECK(std::count(combine.begin(), combine.end(), 2) >= 1);
    const std::string src = internal::emit_cuda(p);
    CHECK(src.find("#pragma unroll 4\n") != std::string::npos);
    internal::NvrtcOptions no;
    no.cubin = true;
    no.headers = internal::device_headers();
    no.arch = "sm_90a";
    CHECK_NOTHROW(internal::nvrtc_compile(src, "decode_gqa_unrolled.cu", no));
    // The default leaves every loop as it was.
    const tir::Program d = internal::lower_operator(instantiate(*find_operator("decode_gqa"), 1, 1000),
                                                    internal::LoweringChoices{GpuArch::Sm90a}).program;
    for (const tir::Kernel &k : d.kernels)
        for (const tir::Stmt &s : k.body)
            if (s->kind == tir::NodeKind::CarriedLoop) CHECK(s->unroll == 1);
}
