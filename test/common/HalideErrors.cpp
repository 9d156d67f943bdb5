#include "HalideErrors.h"

#include <doctest/doctest.h>

#include "Halide.h"

namespace neptune::testing {

namespace {
doctest::String translate_halide_error(Halide::Error e) { return doctest::String(e.what()); }
}  // namespace

void register_halide_translator() { doctest::registerExceptionTranslator<Halide::Error>(translate_halide_error); }

}  // namespace neptune::testing
