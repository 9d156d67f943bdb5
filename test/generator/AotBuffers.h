#ifndef NEPTUNE_TEST_GENERATOR_AOT_BUFFERS_H
#define NEPTUNE_TEST_GENERATOR_AOT_BUFFERS_H
/** \file
 * Host tensors as the halide_buffer_ts an AOT library takes (dense, dimensions innermost first),
 * and the messages Halide's runtime reports (halide_set_error_handler). libHalide-free: these tests
 * link only the generated libraries, Halide's runtime and Neptune's launcher. */
#include <HalideBuffer.h>

#include <functional>
#include <string>
#include <vector>

#include "neptune/HostTensor.h"

namespace neptune::testing {

/** A dense host buffer holding `t`'s values in its element type. */
Halide::Runtime::Buffer<void> host_buffer(const HostTensor &t);
/** A dense host buffer of `d`'s shape, filled with NaN (or -1 for integers): unwritten elements show. */
Halide::Runtime::Buffer<void> poisoned_buffer(const TensorDesc &d);
/** `b`'s values (copied to the host first when the device has them). */
HostTensor read_buffer(Halide::Runtime::Buffer<void> &b, const TensorDesc &d);

using Buffers = std::vector<Halide::Runtime::Buffer<void>>;
/** An AOT library's function on (inputs, outputs) in the order of OperatorInstance. */
using LibraryCall = std::function<int(Buffers &inputs, Buffers &outputs)>;

struct RunOptions {
    InputStyle style = InputStyle::Normal;
    uint64_t seed = 11;
    /** Inputs are copied there first (halide_cuda_device_interface()); nullptr: host buffers. */
    const halide_device_interface_t *device = nullptr;
    /** The bound per output element type; tolerance_for when empty. */
    std::function<Tolerance(DType)> tolerance;
};

/** Calls `call` on random inputs of `inst` and poisoned outputs, requires success, and checks every
 * output against the fp64 reference, with no element left unwritten. */
void check_library(const OperatorInstance &inst, const LibraryCall &call, const RunOptions &options = {});

/** An attention operator of the suite with other head counts. */
OperatorInstance attention_instance(const std::string &op, int q_heads, int kv_heads, int64_t batch, int64_t seq);

/** Every message Halide's runtime reported since the last clear_messages(). */
const std::vector<std::string> &runtime_messages();
void clear_messages();
/** The reported messages joined, for CHECKs on substrings. */
std::string all_messages();

}  // namespace neptune::testing

#endif
