#include "AotBuffers.h"

#include <HalideRuntime.h>

#include <cmath>
#include <mutex>

namespace neptune::testing {

namespace {

halide_type_t type_of(DType t) {
    switch (t) {
    case DType::F16: return halide_type_t(halide_type_float, 16);
    case DType::BF16: return halide_type_t(halide_type_bfloat, 16);
    case DType::F32: return halide_type_t(halide_type_float, 32);
    case DType::I32: return halide_type_t(halide_type_int, 32);
    }
    return halide_type_t(halide_type_float, 32);
}

std::vector<int> extents(const TensorDesc &d) { return std::vector<int>(d.shape.rbegin(), d.shape.rend()); }

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

Halide::Runtime::Buffer<void> host_buffer(const HostTensor &t) {
    Halide::Runtime::Buffer<void> b(type_of(t.desc.dtype), extents(t.desc));
    t.store(b.data());
    b.set_host_dirty();
    return b;
}

Halide::Runtime::Buffer<void> poisoned_buffer(const TensorDesc &d) {
    HostTensor t(d);
    for (double &v : t.values) v = d.dtype == DType::I32 ? -1.0 : std::nan("");
    return host_buffer(t);
}

HostTensor read_buffer(Halide::Runtime::Buffer<void> &b, const TensorDesc &d) {
    b.copy_to_host();
    HostTensor t(d);
    t.load(b.data());
    return t;
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
