#ifndef NEPTUNE_DTYPE_H
#define NEPTUNE_DTYPE_H
/** \file
 * Element types of tensors and tiles. Its own header so the tile IR, the runtime and the operator
 * catalogue (neptune/Operators.h) share it without including each other. */

namespace neptune {

/** Element type of a tensor. Inputs are fp16 or bf16; per-row statistics are fp32. */
enum class DType { F16, BF16, F32, I32 };
const char *dtype_name(DType t);
int dtype_bytes(DType t);

}  // namespace neptune

#endif
