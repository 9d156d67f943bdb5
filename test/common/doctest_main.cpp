#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "HalideErrors.h"

int main(int argc, char **argv) {
    neptune::testing::register_halide_translator();
    return doctest::Context(argc, argv).run();
}
