#ifndef NEPTUNE_CORE_STRIDE_PARAMS_H
#define NEPTUNE_CORE_STRIDE_PARAMS_H
/** \file
 * How kernels that address a tensor through strides receive them: one int parameter per dimension
 * above the innermost (which is contiguous), named stride_param(tensor, dim), holding the stride in
 * units of kStrideUnit elements. The unit is 16 bytes of 16-bit elements: vector copies and TMA
 * need rows that start on 16 bytes, and a stride written as a multiple of 8 lets the lowering prove
 * it. The lowering names the parameters, the launcher of extern stages fills them from the buffers'
 * strides (refusing strides that are not multiples of the unit), and a dense tensor's are its
 * products of extents. Halide-free: shared by the lowering and the run-time launcher. */
#include <string>

namespace neptune::internal {

/** Elements per unit of a stride parameter. */
constexpr int kStrideUnit = 8;

/** "q_vstride_2": the stride parameter of `tensor`'s dimension `dim` (innermost is 0, never strided here). */
std::string stride_param(const std::string &tensor, int dim);

/** Whether `param` is stride_param(t, d) for some tensor t and dim d in [1, 9]; sets both. */
bool parse_stride_param(const std::string &param, std::string *tensor, int *dim);

}  // namespace neptune::internal

#endif
