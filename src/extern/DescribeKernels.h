#ifndef NEPTUNE_EXTERN_DESCRIBE_KERNELS_H
#define NEPTUNE_EXTERN_DESCRIBE_KERNELS_H
/** \file
 * A tile program's launches as the run-time launcher reads them (interop/Descriptor.h): kernel names,
 * pointer and int arguments, grids and workspace sizes as integer expressions over the kernels' int
 * parameters, block size and dynamic shared memory. */
#include <string>

#include "Halide.h"
#include "interop/Descriptor.h"
#include "tir/IR.h"

namespace neptune::internal {

/** The prefix form of an integer Halide Expr over named parameters (after simplification):
 * integers, Variables and + - * / % min max. Throws InternalError for anything else. */
std::string int_expr_text(const Halide::Expr &e);

/** Threads per block of a kernel: the one place the launcher's block size comes from. */
int kernel_threads(const tir::Kernel &k);

/** The kernels and workspaces of `p`, in launch order; the set's image and capability range are
 * left for the caller. Throws InternalError for kernels with float parameters (none are lowered). */
interop::KernelSet describe_kernels(const tir::Program &p);

}  // namespace neptune::internal

#endif
