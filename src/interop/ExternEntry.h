#ifndef NEPTUNE_INTEROP_EXTERN_ENTRY_H
#define NEPTUNE_INTEROP_EXTERN_ENTRY_H
/** \file
 * The C entry points Halide calls for a Neptune extern stage. Their calling convention is fixed so
 * that one launcher serves every group: a stage with N buffers calls
 *   int neptune_halide_extern_<N>(void *user_context, const char *descriptor,
 *                                 const halide_device_interface_t *cuda,
 *                                 int32_t s0, ..., int32_t s7,        // the descriptor's scalars, 0-padded
 *                                 halide_buffer_t *b0, ..., b<N-1>);  // inputs, then outputs
 * and returns 0 or a halide_error_code_t. `descriptor` is the JSON text of interop/Descriptor.h;
 * `cuda` is halide_cuda_device_interface(), which the stage uses to put host-only inputs on the
 * device through Halide's own runtime (AOT or JIT alike). */
#include <cstdint>
#include <string>

struct halide_buffer_t;
struct halide_device_interface_t;

namespace neptune::interop {

constexpr int max_extern_buffers = 12;
constexpr int extern_scalars = 8;

/** "neptune_halide_extern_<n>" for 1 <= n <= max_extern_buffers. */
std::string extern_function_name(int num_buffers);
/** What every entry point runs: `scalars` holds extern_scalars values, `buffers` the stage's
 * `num_buffers` buffers (inputs, then outputs). Callers outside a Halide pipeline (the C ABI's
 * variants compiled on first use) call it with buffers they built themselves. */
int run_extern_stage(void *user_context, const char *descriptor, const halide_device_interface_t *cuda,
                     const int32_t *scalars, halide_buffer_t **buffers, int num_buffers);
/** The entry point's address (for Halide's JIT externs); nullptr outside the range. */
void *extern_function_address(int num_buffers);

}  // namespace neptune::interop

#endif
