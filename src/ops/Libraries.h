#ifndef NEPTUNE_OPS_LIBRARIES_H
#define NEPTUNE_OPS_LIBRARIES_H
/** \file
 * The AOT libraries of generators/ that libneptune_ops.so links, each with the operator of the suite
 * it computes and where its tensors live: the one list a new library is added to. What a variant
 * was compiled for (element type, ranks, input names) is read back from the library's own metadata;
 * the operator's semantics (mask, modifier, head dims, scale) are the suite's (neptune/Operators.h),
 * which the library's generator parameters must realize (the ops suite checks every host variant
 * against the fp64 reference, and the GPU ones on the GPU). */
#include <vector>

struct halide_filter_metadata_t;

namespace neptune::ops {

struct Library {
    const char *name;  // the library and its function, e.g. "prefill_causal_host"
    const char *op;  // the suite's operator, e.g. "prefill_gqa"
    int device;  // neptune_ops_device of every tensor
    int (*argv)(void **args);
    const halide_filter_metadata_t *(*metadata)();
};

/** In selection order: for one operator, the first library that fits a call is used. */
const std::vector<Library> &libraries();

}  // namespace neptune::ops

#endif
