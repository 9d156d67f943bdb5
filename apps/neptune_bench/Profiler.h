#ifndef NEPTUNE_BENCH_PROFILER_H
#define NEPTUNE_BENCH_PROFILER_H
/** \file
 * `profile ... --profile DIR`: the whole setup (Neptune's kernels, the native baselines and the
 * PyTorch driver, a child process) run again under NVIDIA's profiler: Nsight Systems when `nsys`
 * is on the PATH, else Nsight Compute (`ncu --clock-control none --target-processes all`); the
 * report goes to DIR, and a per-kernel summary is read back from the profiler's CSV export. */
#include <optional>
#include <string>
#include <vector>

namespace neptune::bench {

enum class ProfilerKind { Nsys, Ncu };

struct Profiler {
    ProfilerKind kind;
    std::string path;  // the executable
};

/** `want` is "auto" (nsys on the PATH, else ncu), "nsys" or "ncu". ncu is looked for on the PATH,
 * then in $CUDA_PATH/bin, /usr/local/cuda/bin and /opt/nvidia/nsight-compute/<version>/. Throws
 * std::invalid_argument saying what was looked for when nothing is found. */
Profiler find_profiler(const std::string &want);

/** The report file the profiler writes for `base` (base.nsys-rep or base.ncu-rep). */
std::string report_file(const Profiler &p, const std::string &base);
/** The command that runs `child` under the profiler, writing `base`'s report. */
std::vector<std::string> profile_command(const Profiler &p, const std::string &base,
                                         const std::vector<std::string> &child);
/** The command that prints the report's per-kernel figures as CSV. */
std::vector<std::string> summary_command(const Profiler &p, const std::string &report);

/** Per kernel name, over its launches. Throughputs are percentages of the peak, as ncu's
 * SpeedOfLight section reports them (nsys reports none). */
struct KernelSummary {
    std::string name;
    int launches = 0;
    double total_us = 0;  // over the launches that report a duration
    int timed = 0;  // those launches: none, and the table says n/a
    std::optional<double> sm_pct, memory_pct, dram_pct;  // means over the launches that report them
};

/** Reads `ncu --import R --csv --page raw` (a header of "ID", "Kernel Name", ... and metric names, a
 * row of their units, then one row per kernel launch: gpu__time_duration.sum in its unit,
 * sm__throughput, gpu__compute_memory_throughput and gpu__dram_throughput as % of peak), or the
 * details page (one row per launch and metric: "Metric Name", "Metric Unit", "Metric Value").
 * Numbers may carry thousands separators; a figure a launch lacks, or not in a known unit, stays
 * unset. Kernels in order of total duration, longest first. Throws std::invalid_argument when the
 * header is missing. */
std::vector<KernelSummary> parse_ncu_csv(const std::string &csv);
/** Reads `nsys stats --report cuda_gpu_kern_sum --format csv` ("Total Time (ns)", "Instances", "Name"). */
std::vector<KernelSummary> parse_nsys_csv(const std::string &csv);
/** The `top` longest kernels as a table: name, launches, total and mean time, SM, memory and DRAM %
 * ("n/a" where the profiler reported none). */
std::string format_kernels(const std::vector<KernelSummary> &kernels, size_t top);

/** Splits one CSV record (RFC 4180 quoting: "a,b" and "" inside quotes). */
std::vector<std::string> split_csv_line(const std::string &line);

}  // namespace neptune::bench

#endif
