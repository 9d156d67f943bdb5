// The doctest main of tests that link no libHalide (generated libraries, the runtime alone).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
