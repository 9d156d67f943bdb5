#ifndef NEPTUNE_BENCH_RESULTS_H
#define NEPTUNE_BENCH_RESULTS_H
/** \file
 * What the benchmark measures and writes: one result per implementation at one (operator, shape)
 * point, Neptune's speedups over the other implementations (docs/design/operators.md, speedup), the table the
 * profile command prints, and the JSON file (schema "neptune-bench/1") that profile and sweep
 * write and scripts/plot_sweep.py reads. */
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace neptune::bench {

/** The schema tag of every JSON file the benchmark writes. */
inline constexpr const char *json_schema = "neptune-bench/1";

/** Neptune, a compiler (FlexAttention, Halide's CUDA backend) or a library (SDPA's backends, cuBLAS):
 * the original reported speedups against compilers and libraries separately. */
/** Neptune; another compiler; a library; or a bound: a device copy of the operator's bytes, timed in
 * the same call as the memory-bandwidth reference of memory-bound operators (never ranked). */
enum class ImplKind { Neptune, Compiler, Library, Bound };
const char *kind_name(ImplKind k);
ImplKind kind_of(const std::string &impl);

/** One implementation at one point. Figures not measured are empty (null in JSON). */
struct ImplResult {
    std::string impl;
    bool supported = false;
    std::string reason;  // why it is unsupported or failed, or a warning about a run that counted
    std::optional<double> median_ms, min_ms, max_ms;
    std::optional<double> ref_max_abs, ref_rms, ref_rel_rms;  // against the fp64 reference rows
    std::optional<double> max_abs_vs_neptune;  // over the whole output
    int64_t nonfinite = 0;
    // Device memory a call needs beyond its inputs and outputs (materialised intermediates, workspaces),
    // where measured: baselines.py's peak allocation, Neptune's workspaces.
    std::optional<double> peak_extra_bytes;
    bool correct = true;  // judged by judge_correctness(); a wrong result is never "the best"
};

/** A result is correct when it has no non-finite values, its relative RMS error against the fp64
 * reference rows is at most `ref_rel_rms_bound`, and it differs from Neptune's output by at most
 * `vs_neptune_bound` anywhere (the original's allclose(atol = 1e-2) against its first runner), times
 * the reference's RMS where that is above 1 (a loss near log(vocab) computed from bf16 logits). */
inline constexpr double ref_rel_rms_bound = 1e-2, vs_neptune_bound = 1e-2;
void judge_correctness(ImplResult &r);

/** One (operator, batch, seq) point: every implementation's result, or why the point failed. */
struct PointResult {
    std::string op;
    int64_t batch = 0, seq = 0;
    std::string unit;  // "TFLOP/s" or "TB/s"
    double work = 0;  // FLOPs or bytes (docs/design/operators.md, counting work)
    bool failed = false;
    std::string error;  // why it failed (then results may be partial)
    double seconds = 0;  // wall time spent on the point
    std::string date;
    int run = 0;  // index into the file's "runs" (the provenance of the command that measured it)
    nlohmann::json clocks;  // SM clock before and after timing, as nvidia-smi reads it
    std::vector<ImplResult> results;

    const ImplResult *find(const std::string &impl) const;
    /** Throughput of a timed result in `unit` (work / median time / 1e12); empty when not timed. */
    std::optional<double> throughput(const ImplResult &r) const;
};

/** Neptune's speedups at a point: the best other implementation's median latency over Neptune's,
 * overall and among compilers and among libraries. Only supported, correct, timed results count;
 * an empty figure means there was nothing to compare with. */
struct Speedups {
    std::optional<double> overall, compilers, libraries;
    std::string best, best_compiler, best_library;  // the implementation each figure compares with
};
Speedups speedups(const PointResult &p);
/** Neptune's time as a fraction of the copy bound's (the copy's median over Neptune's: 0.9 is 90 % of
 * the copy bandwidth measured in the same call); empty without both timed. */
std::optional<double> fraction_of_copy(const PointResult &p);

nlohmann::json to_json(const ImplResult &r);
nlohmann::json to_json(const PointResult &p);
/** Throws std::invalid_argument naming the missing or mistyped field. */
ImplResult impl_from_json(const nlohmann::json &j);
PointResult point_from_json(const nlohmann::json &j);

/** Folds the "results" of baselines.py's JSON into `p` (after Neptune's and the in-process results).
 * `ref_rms` is the RMS of the reference values on the checked rows: it turns the driver's absolute
 * RMS error into a relative one. Every folded result is judged. */
void add_baseline_results(PointResult &p, const nlohmann::json &doc, double ref_rms);

/** The table of a point, one row per implementation: times, throughput, errors, and the ratios
 * "vs neptune" (its median over Neptune's: above 1, Neptune is faster) and "vs best" (its median
 * over the fastest correct one's); then Neptune's speedups. */
std::string format_table(const PointResult &p);
/** One line: "neptune 312.1 TFLOP/s; best other sdpa_cudnn 540.2 (Neptune 0.58x)". */
std::string format_summary(const PointResult &p);

/** A benchmark file: the provenance of each command that wrote to it, and its points. */
struct ResultFile {
    nlohmann::json sweeps = nlohmann::json::object();  // the sweep definitions, when a sweep wrote it
    std::vector<nlohmann::json> runs;  // provenance records
    std::vector<PointResult> points;
};
/** Reads a file written by profile or sweep; throws std::runtime_error naming the file and the problem. */
ResultFile read_result_file(const std::string &path);
/** Writes the file atomically (a temporary file renamed over it), so a command killed while writing
 * leaves the previous version; throws std::runtime_error when it cannot. */
void write_result_file(const std::string &path, const ResultFile &f);

}  // namespace neptune::bench

#endif
