// libneptune_ops_jit.so, the compiler libneptune_ops.so opens for variants compiled on first use,
// without a GPU: opened as the ops library opens it (dlopen, its two entry points), it compiles
// operators at head dims, groupings and element types no AOT library has (NVRTC, for sm_90a and
// sm_80; a variant of several kernel sets defers them, and its second entry point compiles a set's
// source), and the descriptors it returns describe the operator's own tensors: buffers named and
// shaped as the suite's tensors (innermost first), scalars that are extents of those buffers,
// kernels for the requested family, the grouping checked at run time. What the tile backend does not
// lower is refused with the reason.
#include <doctest/doctest.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "interop/Descriptor.h"
#include "neptune/NeptuneOps.h"
#include "ops/JitCompiler.h"

using neptune::interop::GroupDescriptor;

namespace {

struct Compiler {
    void *handle = nullptr;
    neptune_ops_jit_compile_fn compile = nullptr;
    neptune_ops_jit_version_fn version = nullptr;
    neptune_ops_jit_compile_kernels_fn compile_kernels = nullptr;
};

const Compiler &compiler() {
    static const Compiler c = [] {
        Compiler c;
        const char *path = std::getenv("NEPTUNE_OPS_JIT");
        REQUIRE_MESSAGE(path, "NEPTUNE_OPS_JIT names the compiler library (meson test sets it)");
        c.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        REQUIRE_MESSAGE(c.handle, dlerror());
        c.compile = reinterpret_cast<neptune_ops_jit_compile_fn>(dlsym(c.handle, NEPTUNE_OPS_JIT_COMPILE_SYMBOL));
        c.version = reinterpret_cast<neptune_ops_jit_version_fn>(dlsym(c.handle, NEPTUNE_OPS_JIT_VERSION_SYMBOL));
        c.compile_kernels = reinterpret_cast<neptune_ops_jit_compile_kernels_fn>(
            dlsym(c.handle, NEPTUNE_OPS_JIT_COMPILE_KERNELS_SYMBOL));
        REQUIRE_MESSAGE(bool(c.compile && c.version && c.compile_kernels), "the library lacks its entry points");
        return c;
    }();
    return c;
}

struct Result {
    int rc = -1;
    std::string descriptor, message;
};

Result compile(const char *op, int dtype, int head_dim, int group, const char *arch, int head_dim_v = 0) {
    const neptune_ops_jit_request r{op, dtype, head_dim, head_dim_v, group, arch};
    char *d = nullptr, *m = nullptr;
    Result out;
    out.rc = compiler().compile(&r, &d, &m);
    const std::unique_ptr<char, decltype(&std::free)> dd(d, &std::free), mm(m, &std::free);
    if (d) out.descriptor = d;
    if (m) out.message = m;
    return out;
}

GroupDescriptor compiled(const char *op, int dtype, int head_dim, int group, const char *arch, int head_dim_v = 0) {
    const Result r = compile(op, dtype, head_dim, group, arch, head_dim_v);
    REQUIRE_MESSAGE(r.rc == 0, r.message);
    CHECK(r.message.empty());
    return neptune::interop::read_descriptor(r.descriptor);
}

std::string names(const GroupDescriptor &d) {
    std::string s;
    for (const auto &b : d.buffers) s += (s.empty() ? "" : ",") + b.name + (b.output ? "*" : "");
    return s;
}

/** A deferred set's source compiled through the library's second entry point: a cubin (ELF). */
std::string compiled_kernels(const std::string &source, const char *arch) {
    char *image = nullptr, *message = nullptr;
    size_t size = 0;
    const int rc = compiler().compile_kernels(source.c_str(), arch, "deferred", &image, &size, &message);
    const std::unique_ptr<char, decltype(&std::free)> i(image, &std::free), m(message, &std::free);
    REQUIRE_MESSAGE(rc == 0, (message ? message : ""));
    REQUIRE(image != nullptr);
    return std::string(image, size);
}

/** Every set is deferred: its source, no image, and the source compiles for the set's codes. */
void check_deferred(const GroupDescriptor &d, size_t compile_set) {
    for (const auto &s : d.sets) {
        CHECK(s.image.empty());
        CHECK(s.image_of == -1);
        CHECK(s.source.find("extern \"C\" __global__") != std::string::npos);
    }
    REQUIRE(compile_set < d.sets.size());
    const std::string cubin = compiled_kernels(d.sets[compile_set].source, d.sets[compile_set].codes.c_str());
    CHECK(cubin.substr(0, 4) ==
          "\x7f"
          "ELF");
}

bool has_constraint(const GroupDescriptor &d, const std::string &expr) {
    return std::any_of(d.constraints.begin(), d.constraints.end(), [&](const auto &c) { return c.expr == expr; });
}

/** Every scalar is an extent of some buffer (the ops library reads it from the call's tensors). */
void check_scalars(const GroupDescriptor &d) {
    for (const std::string &s : d.scalars) {
        bool found = false;
        for (const auto &b : d.buffers) found = found || std::find(b.dims.begin(), b.dims.end(), s) != b.dims.end();
        CHECK_MESSAGE(found, "scalar " << s << " is no buffer's extent");
    }
}

}  // namespace

TEST_CASE("ops jit compiler: the interface version") { CHECK(compiler().version() == NEPTUNE_OPS_JIT_VERSION); }

TEST_CASE("ops jit compiler: decode at a head dim and grouping no AOT library has") {
    const GroupDescriptor d = compiled("decode_gqa", NEPTUNE_OPS_BF16, 64, 4, "sm_90a");
    CHECK(names(d) == "q,k,v,out*");
    REQUIRE(d.buffers.size() == 4);
    CHECK(d.buffers[0].dims == std::vector<std::string>{"64", "seq_q", "q_heads", "batch"});
    CHECK(d.buffers[1].dims == std::vector<std::string>{"64", "seq_kv", "kv_heads", "batch"});
    CHECK(d.buffers[0].type_code == 4);  // bfloat
    CHECK(d.buffers[3].type_code == 4);
    CHECK(has_constraint(d, "(== q_heads (* 4 kv_heads))"));
    CHECK(d.chunks == -1);  // chosen per call from the device and shape
    CHECK_FALSE(d.jit);  // errors through Halide's handler, as the ops library reports them
    check_scalars(d);
    REQUIRE(!d.sets.empty());
    for (const auto &s : d.sets) {
        CHECK(s.arch == "sm_90a");
        CHECK(s.min_cc == 90);
        CHECK(s.max_cc == 90);
    }
    // Several tunings, of which a call takes one: each compiled when a call first takes it.
    CHECK(d.sets.size() > 1);
    check_deferred(d, 0);
}

TEST_CASE("ops jit compiler: prefill at other head dims, for Hopper and for sm_80") {
    for (int hd : {40, 80, 96}) {
        CAPTURE(hd);
        const GroupDescriptor d = compiled("prefill_causal", NEPTUNE_OPS_F16, hd, 0, hd == 80 ? "sm_80" : "sm_90a");
        CHECK(names(d) == "q,k,v,out*");
        CHECK(d.buffers[0].dims[0] == std::to_string(hd));
        CHECK(d.buffers[0].type_code == 2);  // float (f16)
        CHECK(d.chunks == 0);
        check_scalars(d);
        REQUIRE(d.sets.size() == 1);
        CHECK(d.sets[0].arch == (hd == 80 ? "sm_80" : "sm_90a"));
        CHECK(!d.sets[0].image.empty());
    }
    // Different head dims of q·k and v.
    const GroupDescriptor d = compiled("prefill_global", NEPTUNE_OPS_BF16, 64, 0, "sm_90a", 128);
    CHECK(d.buffers[0].dims[0] == "64");
    CHECK(d.buffers[2].dims[0] == "128");
    CHECK(d.buffers[3].dims[0] == "128");
}

TEST_CASE("ops jit compiler: row-wise operators in bf16") {
    const GroupDescriptor sm = compiled("softmax", NEPTUNE_OPS_BF16, 0, 0, "sm_90a");
    CHECK(names(sm) == "x,y*");
    CHECK(sm.buffers[0].dims == std::vector<std::string>{"cols", "rows"});
    CHECK(sm.buffers[0].type_code == 4);
    check_scalars(sm);
    CHECK(sm.sets.size() > 1);  // a ladder of kernel shapes by row length
    check_deferred(sm, 1);
    const GroupDescriptor ce = compiled("cross_entropy", NEPTUNE_OPS_BF16, 0, 0, "sm_90a");
    CHECK(names(ce) == "x,labels,loss*");
    CHECK(ce.buffers[1].type_code == 0);  // int32 labels
    check_scalars(ce);
    const GroupDescriptor ln = compiled("layernorm", NEPTUNE_OPS_BF16, 0, 0, "sm_80");
    CHECK(names(ln) == "x,beta,gamma,y*");  // the group's order; the ops library maps buffers by name
    check_scalars(ln);
    check_deferred(ln, ln.sets.size() - 1);  // sm_80's chunked form, for rows of any length
}

TEST_CASE("ops jit compiler: what it does not compile is refused with the reason") {
    const Result odd = compile("prefill_causal", NEPTUNE_OPS_F16, 59, 0, "sm_90a");
    CHECK(odd.rc != 0);
    CHECK(odd.descriptor.empty());
    CHECK(odd.message.find("head dims must be multiples of 8") != std::string::npos);
    const Result perf = compile("performer", NEPTUNE_OPS_F16, 0, 0, "sm_90a");
    CHECK(perf.rc != 0);
    CHECK(perf.message.find("performer: the tile backend does not lower this operator") != std::string::npos);
    const Result unknown = compile("prefill_sideways", NEPTUNE_OPS_F16, 64, 0, "sm_90a");
    CHECK(unknown.message == "unknown operator 'prefill_sideways'");
    const Result f32 = compile("softmax", NEPTUNE_OPS_F32, 0, 0, "sm_90a");
    CHECK(f32.message.find("take f16 or bf16 tensors") != std::string::npos);
    const Result old = compile("prefill_causal", NEPTUNE_OPS_F16, 64, 0, "sm_70");
    CHECK(old.message.find("need sm_80 or later") != std::string::npos);
    char *d = nullptr, *m = nullptr;
    CHECK(compiler().compile(nullptr, &d, &m) != 0);
    CHECK(d == nullptr);
    REQUIRE(m != nullptr);
    CHECK(std::string(m).find("incomplete request") != std::string::npos);
    std::free(m);
    // A deferred set's source that does not compile: NVRTC's log as the message, no image.
    char *image = nullptr;
    size_t size = 0;
    m = nullptr;
    CHECK(compiler().compile_kernels("this is not CUDA", "sm_90a", "broken", &image, &size, &m) != 0);
    CHECK(image == nullptr);
    CHECK(size == 0);
    REQUIRE(m != nullptr);
    CHECK(std::string(m).find("broken") != std::string::npos);
    std::free(m);
}
