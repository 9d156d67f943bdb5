// Every attention operator lowers to a verified tile program whose emitted CUDA compiles with NVRTC
// for sm_80 and sm_90 (no GPU needed).
#include <doctest/doctest.h>

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
