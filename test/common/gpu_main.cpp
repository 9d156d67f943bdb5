#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "GpuProbe.h"

int main(int argc, char **argv) {
    if (!neptune::testing::cuda_device_present()) {
        std::puts("[SKIP] no CUDA device");
        return 77;
    }
    return doctest::Context(argc, argv).run();
}
