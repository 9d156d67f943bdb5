#ifndef NEPTUNE_APPS_COMMON_APP_SUPPORT_H
#define NEPTUNE_APPS_COMMON_APP_SUPPORT_H
/** \file
 * What the per-family apps share: the common command-line options, buffers for an operator of the
 * suite (on the GPU when there is one), the check of every output against the fp64 reference, and
 * timing (CUDA events with warm-up on the GPU; the host's wall clock otherwise, labelled as such).
 * libHalide-free: an app links its AOT libraries, Halide's runtime and Neptune's launcher only. */
#include <HalideBuffer.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "neptune/HostTensor.h"

namespace neptune::apps {

/** Exit statuses of every app (README files). */
enum ExitStatus { exit_ok = 0, exit_failed = 1, exit_bad_arguments = 2, exit_no_gpu = 3 };

/** Options every app takes. */
struct CommonOptions {
    std::string backend = "auto";  // auto: the GPU library when a GPU is present, else the host library
    int repeats = 20;  // timed calls
    int warmup = 3;  // untimed calls first (GPU: module loading, first-touch allocations)
    uint64_t seed = 1;  // of the random inputs
    double check_budget = 2e9;  // reference flops; larger problems are checked on sampled rows
    bool gpu = false;  // the backend chosen (parse_arguments)
};
void add_common_options(CLI::App &app, CommonOptions &options);

/** Parses the command line and resolves the backend: -1 to go on, else the status to exit with: 0
 * after --help, exit_bad_arguments after an error (CLI11 prints it), exit_no_gpu for --backend gpu
 * without a GPU. */
int parse_arguments(CLI::App &app, int argc, char **argv, CommonOptions &options);

using Buffers = std::vector<Halide::Runtime::Buffer<void>>;
/** A library function on (inputs, outputs) in the order of OperatorInstance. */
using LibraryCall = std::function<int(Buffers &inputs, Buffers &outputs)>;

/** One operator and its two libraries: `gpu` (backend=gpu) and `host` (backend=host). */
struct AppOperator {
    OperatorInstance inst;
    std::string title;  // a line describing the problem, printed first
    LibraryCall gpu, host;
    Tolerance gpu_tolerance;  // the GPU library's bound against fp64 (the host's: tolerance_for)
};

/** Runs the app: resolves the backend, makes random inputs (copied to the device on the GPU) and
 * outputs poisoned with NaN, calls the library once and checks every output against the fp64
 * reference (every element written), then times `repeats` calls after `warmup`, and prints the
 * time and throughput (docs/design/operators.md, counting work). Returns an ExitStatus; errors are printed with the
 * library's message. */
int run_app(const AppOperator &op, const CommonOptions &options);

/** A CLI11 validator of "B,S" (parse_shape): "" when it parses, else the reason. */
std::string check_shape(const std::string &text);

}  // namespace neptune::apps

#endif
