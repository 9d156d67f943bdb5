#ifndef NEPTUNE_TEST_OPS_OPS_CHECK_H
#define NEPTUNE_TEST_OPS_OPS_CHECK_H
/** \file
 * What the tests of libneptune_ops.so share: host tensors as neptune_ops_tensors, the per-operator
 * entry of an operator, and one check of an operator through the ABI against the fp64 reference,
 * on the host or in device memory. */
#include <functional>
#include <string>
#include <vector>

#include "neptune/HostTensor.h"
#include "neptune/NeptuneOps.h"

namespace neptune::testing {

/** Bytes in a tensor's storage format and the header pointing at them (for host tensors). */
struct OpsTensor {
    std::vector<unsigned char> bytes;
    neptune_ops_tensor t{};
};
OpsTensor ops_tensor(const HostTensor &h);
/** An output of `d`'s shape filled with NaN (-1 for integers): unwritten elements show. */
OpsTensor ops_output(const TensorDesc &d);
HostTensor read_ops(const OpsTensor &o, const TensorDesc &d);

/** A 4-D [B, H, S, D] tensor's bytes moved into [B, S, H, D] memory whose heads are D + `pad`
 * elements apart (NaN between), its strides set to describe the same [B, H, S, D] view; and back. */
void to_bshd(OpsTensor &o, int64_t pad);
void from_bshd(OpsTensor &o);

/** Random inputs of `inst` (seed) as host tensors and as ops tensors, and poisoned outputs. */
struct OpsCase {
    std::vector<HostTensor> inputs;
    std::vector<OpsTensor> in, out;
};
OpsCase ops_case(const OperatorInstance &inst, uint64_t seed, InputStyle style = InputStyle::Normal);

/** The operator's per-operator entry (neptune_ops_prefill_causal, ...) on the case's tensors. */
int call_entry(const std::string &op, const OpsCase &c, void *stream = nullptr);

/** An attention operator of the suite with other head counts. */
OperatorInstance attention_instance(const std::string &op, int q_heads, int kv_heads, int64_t batch, int64_t seq);

struct CheckOptions {
    int device = NEPTUNE_OPS_HOST;  // NEPTUNE_OPS_CUDA: the tensors are copied to device memory first
    InputStyle style = InputStyle::Normal;
    int64_t first_row = 0, rows = -1;  // the output rows compared (all when rows < 0)
    std::function<Tolerance(DType)> tolerance;  // tolerance_for when empty
    int64_t bshd_pad = -1;  // >= 0: every 4-D tensor as [B, S, H, D] memory with this head padding (to_bshd)
};

/** The variant called `expect` is selected for `inst`'s tensors, the operator's entry succeeds, and
 * every output matches the fp64 reference on the compared rows, with no element left unwritten. */
void check_op(const OperatorInstance &inst, const std::string &expect, const CheckOptions &options = {});

}  // namespace neptune::testing

#endif
