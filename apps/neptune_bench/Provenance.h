#ifndef NEPTUNE_BENCH_PROVENANCE_H
#define NEPTUNE_BENCH_PROVENANCE_H
/** \file
 * Where and when a result was measured (docs/design/operators.md, provenance): the GPU, its driver and clocks, the
 * NVRTC that compiled Neptune's kernels, the host, the date and the command line; the PyTorch side
 * (torch, Triton, cuDNN and CUDA versions) is added from the baseline driver's answer. */
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace neptune::bench {

/** The current time in UTC, ISO 8601 to the second ("2026-11-29T10:11:12Z"). */
std::string utc_now();

/** The provenance of a command: "gpu" (name, SMs, compute capability, memory), "driver",
 * "nvrtc", "host", "date", "command". Fields that cannot be read are null. */
nlohmann::json provenance(const std::vector<std::string> &command);

/** The SM clock now and its maximum in MHz, as nvidia-smi reports them ({"sm_mhz", "max_sm_mhz"},
 * null where unreadable). */
nlohmann::json sm_clocks();

/** Copies the baseline driver's version fields (torch, triton, cudnn, its CUDA) into `run` where
 * `run` lacks them. */
void add_baseline_provenance(nlohmann::json &run, const nlohmann::json &baselines_doc);

}  // namespace neptune::bench

#endif
