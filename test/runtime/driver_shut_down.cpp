// The runtime once the driver has shut down, as it does at exit before the destructors of Halide's
// JIT pipelines and buffers run, which still ask for the context: NEPTUNE_ERROR_SHUT_DOWN, the code
// the acquire hooks give up on silently, and the thread's last message left alone. Runs against a
// stand-in libcuda.so.1 (fake_cuda/, through LD_LIBRARY_PATH), so on any machine.
#include <doctest/doctest.h>
#include <dlfcn.h>

#include <string>

#include "neptune/runtime/NeptuneRuntime.h"

TEST_CASE("runtime: after the driver shut down, the context is NEPTUNE_ERROR_SHUT_DOWN without a message") {
    void *context = nullptr;
    REQUIRE(neptune_get_context(&context) == NEPTUNE_OK);  // the stand-in driver's device
    CHECK(context != nullptr);
    CHECK(neptune_malloc(nullptr, 16) == NEPTUNE_ERROR_INVALID_ARGUMENT);
    const std::string before = neptune_last_error();
    CHECK(!before.empty());
    auto shut_down = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "fake_cuda_shut_down"));
    const bool stand_in = shut_down != nullptr;
    REQUIRE_MESSAGE(stand_in, "the stand-in libcuda.so.1 is not the driver loaded");
    shut_down();
    CHECK(neptune_get_context(&context) == NEPTUNE_ERROR_SHUT_DOWN);
    CHECK(context == nullptr);
    CHECK(neptune_init() == NEPTUNE_ERROR_SHUT_DOWN);
    CHECK(std::string(neptune_last_error()) == before);
}
