#ifndef NEPTUNE_REFERENCE_REFERENCE_H
#define NEPTUNE_REFERENCE_REFERENCE_H
/** \file
 * Plain C++ fp64 references of every operator in the suite: loops written
 * from the formulas of docs/design/operators.md, sharing no code with the Halide
 * algorithms they judge. */
#include <cstdint>
#include <vector>

#include "neptune/HostTensor.h"

namespace neptune::reference {

/** Computes rows [first, first + count) of every output of `inst` (rows as in OperatorInstance) into
 * `outputs`, which make_outputs(inst) sized. Other rows are left as they are. */
void compute_rows(const OperatorInstance &inst, const std::vector<HostTensor> &inputs, std::vector<HostTensor> &outputs,
                  int64_t first, int64_t count);

/** All rows. */
std::vector<HostTensor> compute(const OperatorInstance &inst, const std::vector<HostTensor> &inputs);

}  // namespace neptune::reference

#endif
