#ifndef NEPTUNE_BENCH_PROFILE_H
#define NEPTUNE_BENCH_PROFILE_H
/** \file
 * One benchmark point: Neptune's kernels checked against the fp64 reference; the native baselines
 * (unfused cuBLAS, unfused Halide) run and checked on the same inputs; all of these timed
 * interleaved; then the PyTorch baselines through baselines.py on the same inputs, checked on the
 * same reference rows and against Neptune's whole output. */
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "Baselines.h"
#include "Results.h"
#include "neptune/GpuOperator.h"
#include "neptune/Operators.h"

namespace neptune::bench {

/** The baselines a command measures besides Neptune: in this process, and through baselines.py. */
struct ImplSelection {
    std::vector<std::string> native, python;
};
/** baselines.py's implementations, in table order. */
const std::vector<std::string> &python_baselines();
/** Whether baselines.py's `impl` measures operators like `spec`: the attention libraries for
 * attention, torch_eager and torch_compile for the row-wise reductions. */
bool python_baseline_applies(const std::string &impl, const OperatorSpec &spec);
/** "all", "none" (or empty), or a comma-separated list of baseline names; throws
 * std::invalid_argument naming an unknown one and listing the known ones. */
ImplSelection parse_impls(const std::string &list);

struct PointOptions {
    uint64_t seed = 20261129;
    int repeat = 30, warmup = 5;
    GpuOptions gpu;
    ImplSelection impls;
    bool dump = false;  // print Neptune's tile program and CUDA
    std::string workdir;  // where baselines.py's input files go; empty: $TMPDIR or /tmp
};

/** Reference rows shared by every implementation's error figures: at most this many. */
inline constexpr int64_t common_reference_rows = 256;

/** Measures `inst`. A failure of Neptune's (compile, launch, wrong output) marks the point failed
 * and stops it; a baseline's failure marks that baseline only. `server` null: no PyTorch baselines.
 * `baseline_doc`, when given, receives the driver's answer (its provenance fields). */
PointResult measure_point(const OperatorInstance &inst, const PointOptions &opt, BaselineServer *server,
                          nlohmann::json *baseline_doc = nullptr);

}  // namespace neptune::bench

#endif
