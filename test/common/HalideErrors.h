#ifndef NEPTUNE_TEST_COMMON_HALIDE_ERRORS_H
#define NEPTUNE_TEST_COMMON_HALIDE_ERRORS_H
/** \file
 * Lets doctest print Halide::Error, which is not a std::exception (CPU tests only:
 * GPU tests stay free of libHalide so they run on a GPU machine without the Halide SDK). */
namespace neptune::testing {
void register_halide_translator();
}
#endif
