#ifndef NEPTUNE_CODEGEN_CODEGEN_CUDA_H
#define NEPTUNE_CODEGEN_CODEGEN_CUDA_H
/** \file
 * Tile program -> CUDA C++ over the device library (include/neptune/device/): one extern "C"
 * kernel per tir::Kernel, parameters in the order the launcher passes them. */
#include <string>

#include "tir/IR.h"

namespace neptune::internal {

/** The CUDA source of every kernel of `p`. A kernel takes its tensors (pointers, in
 * Kernel::tensors order) then its int parameters (in Kernel::int_params order); it is launched
 * with 32 * warps threads and Kernel::shared_bytes of dynamic shared memory. */
std::string emit_cuda(const tir::Program &p);

}  // namespace neptune::internal

#endif
