// The runtime on a GPU: device info, kernels compiled by NVRTC through ModuleCache, memory, launches
// (with more than 48 KiB of dynamic shared memory), launch errors and event timing. Inputs are small
// integers, so every result is exact.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "TestKernels.h"
#include "neptune/runtime/NeptuneRuntime.h"
#include "neptune/CompileCuda.h"

using namespace neptune::internal;

namespace {

const std::string kernels = neptune::testing::vector_add_source + R"(
// Reverses n floats through dynamic shared memory, so every byte of it is written and read.
extern "C" __global__ void reverse_in_shared(const float *in, float *out, int n) {
    extern __shared__ float buffer[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buffer[i] = in[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buffer[n - 1 - i];
}
// A serial dependency chain long enough to take measurable time.
extern "C" __global__ void spin(float *out, int iterations) {
    float x = threadIdx.x;
    for (int i = 0; i < iterations; i++) x = x * 0.999f + 1.0f;
    out[threadIdx.x] = x;
}
)";

/** Device memory freed at scope exit. */
struct DeviceBuffer {
    void *ptr = nullptr;
    explicit DeviceBuffer(size_t bytes) { REQUIRE(neptune_malloc(&ptr, bytes) == NEPTUNE_OK); }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    ~DeviceBuffer() { neptune_free(ptr); }
};

/** The last failure as a string (doctest would print a bare `const char *` as an address). */
std::string last_error() { return neptune_last_error(); }

neptune_device_info device_info() {
    neptune_device_info info;
    REQUIRE_MESSAGE(neptune_get_device_info(&info) == NEPTUNE_OK, last_error());
    return info;
}

bool mentions(const std::string &text, const std::string &what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("runtime: init succeeds and reports an Ampere-or-newer device") {
    REQUIRE_MESSAGE(neptune_init() == NEPTUNE_OK, last_error());
    CHECK(neptune_init() == NEPTUNE_OK);
    CHECK(neptune_cuda_available() == 1);
    const neptune_device_info info = device_info();
    MESSAGE("device: ", info.name, ", sm_", info.cc_major, info.cc_minor, ", ", info.sm_count, " SMs");
    CHECK(std::strlen(info.name) > 0);
    CHECK(info.cc_major >= 8);
    CHECK(info.sm_count > 0);
    CHECK(info.max_shared_per_block_optin >= 48 * 1024);
    CHECK(info.l2_bytes > 0);
    CHECK(info.total_memory > (size_t(1) << 30));
}

TEST_CASE("runtime: a vector add compiled by ModuleCache matches the CPU sum exactly") {
    ModuleCache cache;
    neptune_function *add = cache.get(kernels, "vector_add");
    CHECK(cache.get(kernels, "vector_add") == add);  // compiled and looked up once
    int n = 1000003;  // not a multiple of the block
    std::vector<float> a(n), b(n), c(n), expected(n);
    for (int i = 0; i < n; i++) {
        a[i] = float(i % 1000);
        b[i] = float((7 * i) % 1001);
        expected[i] = a[i] + b[i];
    }
    const size_t bytes = n * sizeof(float);
    DeviceBuffer da(bytes), db(bytes), dc(bytes);
    REQUIRE(neptune_memcpy_htod(da.ptr, a.data(), bytes) == NEPTUNE_OK);
    REQUIRE(neptune_memcpy_htod(db.ptr, b.data(), bytes) == NEPTUNE_OK);
    REQUIRE(neptune_memset_d8(dc.ptr, 0xff, bytes) == NEPTUNE_OK);  // NaNs wherever the kernel fails to write
    void *args[] = {&da.ptr, &db.ptr, &dc.ptr, &n};
    const unsigned grid[3] = {unsigned((n + 255) / 256), 1, 1}, block[3] = {256, 1, 1};
    REQUIRE_MESSAGE(neptune_launch(add, grid, block, 0, nullptr, args) == NEPTUNE_OK, last_error());
    REQUIRE_MESSAGE(neptune_synchronize() == NEPTUNE_OK, last_error());
    REQUIRE(neptune_memcpy_dtoh(c.data(), dc.ptr, bytes) == NEPTUNE_OK);
    CHECK(std::memcmp(c.data(), expected.data(), bytes) == 0);
}

TEST_CASE("runtime: a PTX module loads (driver JIT) and its kernel runs") {
    const neptune_device_info info = device_info();
    NvrtcOptions o;
    o.arch = "compute_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor);
    const CompiledModule m = nvrtc_compile(kernels, "runtime_ptx", o);
    neptune_module *module = nullptr;
    REQUIRE_MESSAGE(neptune_module_load(m.ptx.c_str(), &module) == NEPTUNE_OK, last_error());
    neptune_function *add = nullptr;
    REQUIRE(neptune_module_get_function(module, "vector_add", &add) == NEPTUNE_OK);
    neptune_function *again = nullptr;
    CHECK(neptune_module_get_function(module, "vector_add", &again) == NEPTUNE_OK);
    CHECK(again == add);
    CHECK(neptune_module_get_function(module, "no_such_kernel", &again) == NEPTUNE_ERROR_INVALID_ARGUMENT);
    CHECK(mentions(neptune_last_error(), "no_such_kernel"));
    CHECK(mentions(neptune_last_error(), "CUDA_ERROR_NOT_FOUND"));
    int n = 100;
    std::vector<float> a(n, 2.0f), c(n, 0.0f);
    DeviceBuffer da(n * sizeof(float)), dc(n * sizeof(float));
    REQUIRE(neptune_memcpy_htod(da.ptr, a.data(), n * sizeof(float)) == NEPTUNE_OK);
    void *args[] = {&da.ptr, &da.ptr, &dc.ptr, &n};
    const unsigned grid[3] = {1, 1, 1}, block[3] = {128, 1, 1};
    REQUIRE_MESSAGE(neptune_launch(add, grid, block, 0, nullptr, args) == NEPTUNE_OK, last_error());
    REQUIRE(neptune_memcpy_dtoh(c.data(), dc.ptr, n * sizeof(float)) == NEPTUNE_OK);
    CHECK(c == std::vector<float>(n, 4.0f));
    CHECK(neptune_module_unload(module) == NEPTUNE_OK);
    // Garbage is a driver error, not a crash.
    CHECK(neptune_module_load("not a module", &module) == NEPTUNE_ERROR_CUDA);
    CHECK(mentions(neptune_last_error(), "cuModuleLoadDataEx"));
}

TEST_CASE("runtime: 100 KiB of dynamic shared memory raises the kernel's limit; beyond the opt-in limit is refused") {
    const neptune_device_info info = device_info();
    ModuleCache cache;
    neptune_function *reverse = cache.get(kernels, "reverse_in_shared");
    int n = 100 * 1024 / sizeof(float);
    const unsigned smem = n * sizeof(float);
    std::vector<float> in(n), out(n);
    for (int i = 0; i < n; i++) in[i] = float(i);
    DeviceBuffer din(smem), dout(smem);
    REQUIRE(neptune_memcpy_htod(din.ptr, in.data(), smem) == NEPTUNE_OK);
    void *args[] = {&din.ptr, &dout.ptr, &n};
    const unsigned grid[3] = {1, 1, 1}, block[3] = {1024, 1, 1};
    if (info.max_shared_per_block_optin >= int(smem)) {
        for (int launch = 0; launch < 2; launch++) {  // the second launch takes the cached limit
            REQUIRE(neptune_memset_d8(dout.ptr, 0, smem) == NEPTUNE_OK);
            REQUIRE_MESSAGE(neptune_launch(reverse, grid, block, smem, nullptr, args) == NEPTUNE_OK, last_error());
            REQUIRE_MESSAGE(neptune_synchronize() == NEPTUNE_OK, last_error());
            REQUIRE(neptune_memcpy_dtoh(out.data(), dout.ptr, smem) == NEPTUNE_OK);
            for (int i = 0; i < n; i++) REQUIRE(out[i] == in[n - 1 - i]);
        }
    } else {
        MESSAGE("the device's opt-in limit is ", info.max_shared_per_block_optin, " bytes: 100 KiB must be refused");
        CHECK(neptune_launch(reverse, grid, block, smem, nullptr, args) == NEPTUNE_ERROR_INVALID_ARGUMENT);
    }
    const unsigned too_much = unsigned(info.max_shared_per_block_optin) + 1;
    CHECK(neptune_launch(reverse, grid, block, too_much, nullptr, args) == NEPTUNE_ERROR_INVALID_ARGUMENT);
    CHECK(mentions(neptune_last_error(), "reverse_in_shared"));
    CHECK(mentions(neptune_last_error(), "opt-in"));
}

TEST_CASE("runtime: a launch with 2048 threads per block fails with CUDA_ERROR_INVALID_VALUE naming the kernel") {
    ModuleCache cache;
    neptune_function *add = cache.get(kernels, "vector_add");
    DeviceBuffer d(4 * sizeof(float));
    int n = 4;
    void *args[] = {&d.ptr, &d.ptr, &d.ptr, &n};
    const unsigned grid[3] = {1, 1, 1}, block[3] = {2048, 1, 1};
    CHECK(neptune_launch(add, grid, block, 0, nullptr, args) == NEPTUNE_ERROR_CUDA);
    const std::string message = neptune_last_error();
    CAPTURE(message);
    CHECK(mentions(message, "cuLaunchKernel"));
    CHECK(mentions(message, "vector_add"));
    CHECK(mentions(message, "CUDA_ERROR_INVALID_VALUE"));
    CHECK(neptune_synchronize() == NEPTUNE_OK);  // a refused launch leaves the context usable
}

TEST_CASE("runtime: events time a kernel") {
    ModuleCache cache;
    neptune_function *spin = cache.get(kernels, "spin");
    DeviceBuffer d(32 * sizeof(float));
    int iterations = 1 << 20;
    void *args[] = {&d.ptr, &iterations};
    const unsigned grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
    void *start = nullptr, *end = nullptr;
    REQUIRE(neptune_event_create(&start) == NEPTUNE_OK);
    REQUIRE(neptune_event_create(&end) == NEPTUNE_OK);
    REQUIRE(neptune_event_record(start, nullptr) == NEPTUNE_OK);
    REQUIRE_MESSAGE(neptune_launch(spin, grid, block, 0, nullptr, args) == NEPTUNE_OK, last_error());
    REQUIRE(neptune_event_record(end, nullptr) == NEPTUNE_OK);
    float ms = -1;
    REQUIRE_MESSAGE(neptune_event_elapsed_ms(start, end, &ms) == NEPTUNE_OK, last_error());
    MESSAGE("spin: ", ms, " ms");
    CHECK(ms > 0);
    CHECK(neptune_event_destroy(start) == NEPTUNE_OK);
    CHECK(neptune_event_destroy(end) == NEPTUNE_OK);
}
