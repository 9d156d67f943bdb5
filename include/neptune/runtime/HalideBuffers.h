#ifndef NEPTUNE_RUNTIME_HALIDE_BUFFERS_H
#define NEPTUNE_RUNTIME_HALIDE_BUFFERS_H
/** \file
 * Host tensors (neptune/HostTensor.h) as the halide_buffer_ts that generated libraries take: dense,
 * dimensions in Halide's order (innermost first), values in the tensor's element type. Header-only
 * and libHalide-free: Halide's runtime headers only, for programs that link AOT libraries. */
#include <HalideBuffer.h>

#include <vector>

#include "neptune/HostTensor.h"

namespace neptune {

/** Halide's runtime type of an element type. */
inline halide_type_t halide_runtime_type(DType t) {
    switch (t) {
    case DType::F16: return halide_type_t(halide_type_float, 16);
    case DType::BF16: return halide_type_t(halide_type_bfloat, 16);
    case DType::F32: return halide_type_t(halide_type_float, 32);
    case DType::I32: return halide_type_t(halide_type_int, 32);
    }
    return halide_type_t(halide_type_float, 32);
}

/** The element type whose Halide runtime type is `t`; false when there is none. */
inline bool dtype_of_runtime_type(const halide_type_t &t, DType &out) {
    for (DType d : {DType::F16, DType::BF16, DType::F32, DType::I32})
        if (halide_runtime_type(d) == t) {
            out = d;
            return true;
        }
    return false;
}

/** A dense host buffer holding `t`'s values, marked host-dirty (copy_to_device moves it). */
inline Halide::Runtime::Buffer<void> to_runtime_buffer(const HostTensor &t) {
    Halide::Runtime::Buffer<void> b(halide_runtime_type(t.desc.dtype),
                                    std::vector<int>(t.desc.shape.rbegin(), t.desc.shape.rend()));
    t.store(b.data());
    b.set_host_dirty();
    return b;
}

/** The values of `b`'s host memory as a tensor of `d` (call copy_to_host first where the device
 * has the newer data). */
inline HostTensor from_runtime_buffer(const Halide::Runtime::Buffer<void> &b, const TensorDesc &d) {
    HostTensor t(d);
    t.load(b.data());
    return t;
}

}  // namespace neptune

#endif
