#ifndef NEPTUNE_CODEGEN_CODEGEN_STRIP_H
#define NEPTUNE_CODEGEN_CODEGEN_STRIP_H
/** \file
 * Row-strip kernels (the row-chain pattern) -> CUDA: each thread holds part of one row
 * (include/neptune/device/row_strip.cuh). */
#include <string>

#include "tir/IR.h"

namespace neptune::internal {

/** The CUDA source of one row-strip kernel (Kernel::strip_threads > 0). */
std::string emit_strip_kernel(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
