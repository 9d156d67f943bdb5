#include "AotBuffers.h"

#include <HalideRuntime.h>

#include <doctest/doctest.h>

#include <cmath>
#include <mutex>

#include "Compare.h"
#include "neptune/reference/Reference.h"
#include "neptune/runtime/HalideBuffers.h"

namespace neptune::testing {

namespace {

std::mutex lock;
std::vector<std::string> &messages() {
    static std::vector<std::string> m;
    return m;
}

void on_error(void *, const char *message) {
    std::lock_guard<std::mutex> hold(lock);
    messages().push_back(message);
}

// Installed before main: every test of these binaries sees the runtime's messages.
const bool installed = [] {
    halide_set_error_handler(on_error);
    return true;
}();

}  // namespace

Halide::Runtime::Buffer<void> host_buffer(const HostTensor &t) { return to_runtime_buffer(t); }

Halide::Runtime::Buffer<void> poisoned_buffer(const TensorDesc &d) {
    HostTensor t(d);
    for (double &v : t.values) v = d.dtype == DType::I32 ? -1.0 : std::nan("");
    return host_buffer(t);
}

HostTensor read_buffer(Halide::Runtime::Buffer<void> &b, const TensorDesc &d) {
    // An error of the kernels surfaces here at the latest (launches are asynchronous).
    REQUIRE_MESSAGE(b.copy_to_host() == 0, "copying " << d.name << " back failed: " << all_messages());
    return from_runtime_buffer(b, d);
}

void check_library(const OperatorInstance &inst, const LibraryCall &call, const RunOptions &o) {
    INFO(inst.spec.name << " at " << inst.batch << "," << inst.seq);
    const std::vector<HostTensor> in = make_inputs(inst, o.seed, o.style);
    Buffers ins, outs;
    for (const HostTensor &t : in) {
        ins.push_back(host_buffer(t));
        if (o.device) REQUIRE(ins.back().copy_to_device(o.device) == 0);
    }
    for (const TensorDesc &d : inst.outputs) outs.push_back(poisoned_buffer(d));
    clear_messages();
    const int rc = call(ins, outs);
    INFO(all_messages());
    REQUIRE(rc == 0);
    const std::vector<HostTensor> ref = reference::compute(inst, in);
    for (size_t k = 0; k < outs.size(); k++) {
        const HostTensor got = read_buffer(outs[k], inst.outputs[k]);
        int64_t unwritten = 0;
        for (double v : got.values) unwritten += std::isnan(v) ? 1 : 0;
        CHECK(unwritten == 0);
        const DType t = inst.outputs[k].dtype;
        check_close(inst.outputs[k].name, got, ref[k],
                    with_rounding(ref[k], o.tolerance ? o.tolerance(t) : tolerance_for(t)));
    }
}

OperatorInstance attention_instance(const std::string &op, int q_heads, int kv_heads, int64_t batch, int64_t seq) {
    OperatorSpec s = *find_operator(op);
    s.attention.q_heads = q_heads;
    s.attention.kv_heads = kv_heads;
    return instantiate(s, batch, seq);
}

const std::vector<std::string> &runtime_messages() { return messages(); }

void clear_messages() {
    std::lock_guard<std::mutex> hold(lock);
    messages().clear();
}

std::string all_messages() {
    std::lock_guard<std::mutex> hold(lock);
    std::string s;
    for (const std::string &m : messages()) s += m + "\n";
    (void)installed;
    return s;
}

}  // namespace neptune::testing
