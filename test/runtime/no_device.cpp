// The C ABI where there may be no GPU: init reports what is missing, bad arguments are refused with
// a message before any driver call, and nothing crashes. On a GPU machine init must succeed instead.
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "GpuProbe.h"
#include "neptune/runtime/NeptuneRuntime.h"
#include "neptune/CompileCuda.h"

namespace {
bool mentions(const std::string &text, const std::string &what) { return text.find(what) != std::string::npos; }
}  // namespace

TEST_CASE("neptune_init: without a driver or a device it says which is missing; with a GPU it succeeds") {
    const int rc = neptune_init();
    if (neptune::testing::cuda_device_present()) {
        CHECK(rc == NEPTUNE_OK);
        CHECK(neptune_cuda_available() == 1);
        return;
    }
    CHECK((rc == NEPTUNE_ERROR_NO_DRIVER || rc == NEPTUNE_ERROR_NO_DEVICE));
    const std::string message = neptune_last_error();
    CAPTURE(message);
    CHECK(mentions(message, rc == NEPTUNE_ERROR_NO_DRIVER ? "libcuda.so.1" : "device"));
    CHECK(neptune_init() == rc);  // idempotent: the same answer again
    CHECK(neptune_cuda_available() == 0);
    // Calls that need the driver report the same failure rather than crashing.
    void *p = nullptr;
    CHECK(neptune_malloc(&p, 16) == rc);
    CHECK(p == nullptr);
    CHECK(neptune_synchronize() == rc);
    neptune_device_info info;
    CHECK(neptune_get_device_info(&info) == rc);
    CHECK(std::string(neptune_last_error()) == message);
    // So does the module cache, before compiling anything.
    neptune::internal::ModuleCache cache;
    try {
        cache.get("extern \"C\" __global__ void k() {}", "k");
        FAIL("ModuleCache::get succeeded without a device");
    } catch (const neptune::internal::RuntimeFailure &e) {
        CHECK(e.code == rc);
        CHECK(std::string(e.what()) == message);
    }
}

TEST_CASE("runtime C ABI: null pointers and zero sizes are invalid arguments with a message naming the call") {
    neptune_module *module = nullptr;
    neptune_function *function = nullptr;
    void *p = nullptr, *event = nullptr;
    float ms = 0, host[4] = {};
    const unsigned dims[3] = {1, 1, 1};
    const char image[] = "not an image";
    const struct {
        const char *call;
        int rc;
    } cases[] = {
        {"neptune_get_device_info", neptune_get_device_info(nullptr)},
        {"neptune_module_load", neptune_module_load(nullptr, &module)},
        {"neptune_module_load", neptune_module_load(image, nullptr)},
        {"neptune_module_unload", neptune_module_unload(nullptr)},
        {"neptune_module_get_function", neptune_module_get_function(nullptr, "k", &function)},
        {"neptune_launch", neptune_launch(nullptr, dims, dims, 0, nullptr, nullptr)},
        {"neptune_launch_cluster", neptune_launch_cluster(nullptr, dims, dims, dims, 0, nullptr, nullptr)},
        {"neptune_malloc", neptune_malloc(nullptr, 16)},
        {"neptune_malloc", neptune_malloc(&p, 0)},
        {"neptune_memcpy_htod", neptune_memcpy_htod(nullptr, host, sizeof host)},
        {"neptune_memcpy_dtoh", neptune_memcpy_dtoh(host, nullptr, sizeof host)},
        {"neptune_memset_d8", neptune_memset_d8(nullptr, 0, 4)},
        {"neptune_event_create", neptune_event_create(nullptr)},
        {"neptune_event_record", neptune_event_record(nullptr, nullptr)},
        {"neptune_event_elapsed_ms", neptune_event_elapsed_ms(nullptr, event, &ms)},
        {"neptune_event_destroy", neptune_event_destroy(nullptr)},
    };
    for (const auto &c : cases) {
        CAPTURE(c.call);
        CHECK(c.rc == NEPTUNE_ERROR_INVALID_ARGUMENT);
    }
    // The message is the last failure's.
    CHECK(neptune_module_get_function(nullptr, "k", &function) == NEPTUNE_ERROR_INVALID_ARGUMENT);
    CHECK(mentions(neptune_last_error(), "neptune_module_get_function"));
    CHECK(mentions(neptune_last_error(), "NULL"));
    // Zero-byte copies and freeing NULL do nothing and succeed, with or without a driver.
    CHECK(neptune_memcpy_htod(nullptr, nullptr, 0) == NEPTUNE_OK);
    CHECK(neptune_memcpy_dtoh(nullptr, nullptr, 0) == NEPTUNE_OK);
    CHECK(neptune_memset_d8(nullptr, 0, 0) == NEPTUNE_OK);
    CHECK(neptune_free(nullptr) == NEPTUNE_OK);
}

TEST_CASE("neptune_tensor_map_encode: bad arguments are refused before any driver call, naming the rule") {
    struct alignas(64) Map {
        unsigned char bytes[128];
    } map;
    alignas(16) static unsigned short data[64 * 8];
    const unsigned long long dims[3] = {64, 8, 1}, strides[2] = {128, 1024};
    const unsigned box[2] = {64, 8};
    CHECK(neptune_tensor_map_encode(&map, data, 2, 3, dims, strides, box, 100) == NEPTUNE_ERROR_INVALID_ARGUMENT);
    CHECK(mentions(neptune_last_error(), "L2 promotion is 0, 64, 128 or 256 bytes, not 100"));
    const unsigned wide[2] = {128, 8};
    CHECK(neptune_tensor_map_encode(&map, data, 2, 3, dims, strides, wide, 128) == NEPTUNE_ERROR_INVALID_ARGUMENT);
    CHECK(mentions(neptune_last_error(), "boxes are 64 elements"));
    CHECK(neptune_tensor_map_encode(&map, data, 4, 3, dims, strides, box, 128) == NEPTUNE_ERROR_INVALID_ARGUMENT);
    CHECK(mentions(neptune_last_error(), "16-bit elements"));
    CHECK(neptune_tensor_map_encode(&map, data, 2, 6, dims, strides, box, 128) == NEPTUNE_ERROR_INVALID_ARGUMENT);
    CHECK(mentions(neptune_last_error(), "rank is 2 to 5, not 6"));
    const unsigned long long odd[2] = {128, 1000};  // a plane stride that is not a multiple of 16 bytes
    CHECK(neptune_tensor_map_encode(&map, data, 2, 3, dims, odd, box, 128) == NEPTUNE_ERROR_INVALID_ARGUMENT);
    CHECK(mentions(neptune_last_error(), "positive multiples of 16 bytes"));
}

TEST_CASE("neptune_last_error: each thread keeps its own message") {
    CHECK(neptune_malloc(nullptr, 16) == NEPTUNE_ERROR_INVALID_ARGUMENT);
    std::string other;
    std::thread([&other] {
        CHECK(std::string(neptune_last_error()).empty());  // a new thread has no failure yet
        neptune_event_create(nullptr);
        other = neptune_last_error();
    }).join();
    CHECK(mentions(other, "neptune_event_create"));
    CHECK(mentions(neptune_last_error(), "neptune_malloc"));
}
