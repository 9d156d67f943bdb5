#ifndef NEPTUNE_OPS_OPS_DTYPE_H
#define NEPTUNE_OPS_OPS_DTYPE_H
/** \file
 * The suite's element types as neptune_ops_dtype codes (include/neptune/NeptuneOps.h). */
#include "neptune/NeptuneOps.h"
#include "neptune/Operators.h"

namespace neptune::ops {

inline int ops_dtype(DType t) {
    switch (t) {
    case DType::F16: return NEPTUNE_OPS_F16;
    case DType::BF16: return NEPTUNE_OPS_BF16;
    case DType::F32: return NEPTUNE_OPS_F32;
    case DType::I32: return NEPTUNE_OPS_I32;
    }
    return -1;
}

}  // namespace neptune::ops

#endif
