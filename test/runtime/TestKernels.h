#ifndef NEPTUNE_TEST_RUNTIME_TEST_KERNELS_H
#define NEPTUNE_TEST_RUNTIME_TEST_KERNELS_H
/** \file
 * CUDA sources shared by the runtime's tests. */
#include <string>

namespace neptune::testing {

/** c = a + b over n floats, one element per thread; extern "C", so its symbol is `vector_add`. */
inline const std::string vector_add_source = R"(
extern "C" __global__ void vector_add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
)";

}  // namespace neptune::testing

#endif
