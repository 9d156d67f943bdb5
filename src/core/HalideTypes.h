#ifndef NEPTUNE_CORE_HALIDE_TYPES_H
#define NEPTUNE_CORE_HALIDE_TYPES_H
/** \file
 * The suite's element types as Halide runtime types and back, for code that builds or reads
 * halide_buffer_ts without libHalide (HalideRuntime.h only). */
#include <HalideRuntime.h>

#include "neptune/Operators.h"

namespace neptune::internal {

inline halide_type_t halide_type_of(DType t) {
    switch (t) {
    case DType::F16: return halide_type_t(halide_type_float, 16);
    case DType::BF16: return halide_type_t(halide_type_bfloat, 16);
    case DType::F32: return halide_type_t(halide_type_float, 32);
    case DType::I32: return halide_type_t(halide_type_int, 32);
    }
    return halide_type_t(halide_type_float, 32);
}

/** The DType whose Halide type is `t`; false when there is none. */
inline bool dtype_of(const halide_type_t &t, DType &out) {
    for (DType d : {DType::F16, DType::BF16, DType::F32, DType::I32})
        if (halide_type_of(d) == t) {
            out = d;
            return true;
        }
    return false;
}

}  // namespace neptune::internal

#endif
