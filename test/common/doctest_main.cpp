#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "Compare.h"

int main(int argc, char **argv) {
    neptune::testing::register_translators();
    return doctest::Context(argc, argv).run();
}
