#ifndef NEPTUNE_TEST_COMMON_USER_CHAINS_H
#define NEPTUNE_TEST_COMMON_USER_CHAINS_H
/** \file
 * Row chains as a user writes them in Halide, beyond the suite's 2-D operators, each with inputs
 * and its answer computed directly in fp64: softmax and its log-sum-exp over a middle axis,
 * LayerNorm over a middle axis, softmax over the last axis of a 4-D tensor, cross-entropy over 3-D
 * logits with 2-D labels and an ignore index, and a row's entropy. */
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "Halide.h"
#include "neptune/Directives.h"
#include "neptune/HostTensor.h"

namespace neptune::testing {

struct UserChain {
    std::string name;
    std::vector<Halide::ImageParam> params;  // the pipeline's inputs, as `inputs`
    std::vector<HostTensor> inputs;
    std::vector<Halide::Func> outputs;
    std::vector<HostTensor> expected;  // the fp64 answers, one per output (its name, type and shape)
    std::map<std::string, int64_t> ints;  // the row-chain kernel's extents by name
    std::shared_ptr<FusedReduction> group;  // fuse_reduction over the chain's reduced axis
};

/** x[b, n, d] (d innermost) reduced over n: y[b, n, d] (`dtype`) and lse[b, d] (f32). */
UserChain middle_softmax(int64_t d, int64_t n, int64_t b, DType dtype);
/** LayerNorm over n of x[b, n, d] with gamma[n] and beta[n]: y[b, n, d] in f16. */
UserChain middle_layernorm(int64_t d, int64_t n, int64_t b);
/** Softmax over the last axis of x[b, h, q, c]: y (f16) and lse[b, h, q]. */
UserChain softmax_4d(int64_t c, int64_t q, int64_t h, int64_t b);
/** Cross-entropy of logits[b, q, c] (f16) with labels[b, q], -100 ignored (every fifth). */
UserChain cross_entropy_3d(int64_t c, int64_t q, int64_t b);
/** The entropy of softmax(x[r, c]) per row: log s + m - (sum of e^(x - m) x) / s. */
UserChain row_entropy(int64_t c, int64_t r);

}  // namespace neptune::testing

#endif
