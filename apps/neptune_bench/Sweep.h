#ifndef NEPTUNE_BENCH_SWEEP_H
#define NEPTUNE_BENCH_SWEEP_H
/** \file
 * `neptune_bench sweep`: the original evaluation's sweeps (docs/design/operators.md, shapes) over the attention
 * operators, point by point, into one JSON file that the command resumes: a point already in the
 * file is not measured again, so a sweep runs in pieces of a few minutes (the GPU machine's limit
 * per command) and the pieces add up. Failing points are recorded and the sweep goes on. */
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "Profile.h"
#include "Results.h"

namespace neptune::bench {

struct SweepSpec {
    std::vector<std::string> ops;  // empty: every attention operator
    std::vector<std::string> sweeps = {"seq", "batch"};
    int64_t seq_batch = 1;  // the batch of the sequence sweep
    std::vector<int64_t> seq_values = {256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
    int64_t batch_seq = 8192;  // the sequence of the batch sweep
    std::vector<int64_t> batch_values = {1, 2, 4, 8, 16, 32};
};

struct SweepPoint {
    std::string op;
    int64_t batch = 0, seq = 0;
    bool operator==(const SweepPoint &o) const { return op == o.op && batch == o.batch && seq == o.seq; }
};

/** The ten attention operators of docs/design/operators.md (not the row-statistics variant), in list order. */
std::vector<std::string> attention_operators();
/** "all" or a comma-separated list of attention operators; throws std::invalid_argument otherwise. */
std::vector<std::string> parse_ops(const std::string &text);
/** "seq", "batch" or "seq,batch"; throws std::invalid_argument otherwise. */
std::vector<std::string> parse_sweeps(const std::string &text);
/** Positive integers separated by commas, for `option`; throws std::invalid_argument otherwise. */
std::vector<int64_t> parse_values(const std::string &text, const std::string &option);

/** Per operator, the sequence sweep's points then the batch sweep's, each point once (B = 1,
 * S = 8192 belongs to both). */
std::vector<SweepPoint> plan_sweep(const SweepSpec &s);
/** {"seq": {"batch": B, "values": [...]}, "batch": {"seq": S, "values": [...]}} for the chosen sweeps. */
nlohmann::json sweep_definitions(const SweepSpec &s);
/** `old` with the values of `now` added (a file that grows by pieces keeps every sweep it held). */
nlohmann::json merge_definitions(const nlohmann::json &old, const nlohmann::json &now);
/** The points of `plan` not in `done` yet; a failed point counts as done unless `retry_failed`. */
std::vector<SweepPoint> pending_points(const std::vector<SweepPoint> &plan, const ResultFile &done, bool retry_failed);
/** Puts `p` into `f`, replacing the record of the same point (a retried failure). */
void record_point(ResultFile &f, const PointResult &p);
/** "[ 17/130] 0:12:34 elapsed, ETA 1:02:03 | prefill_gqa 1,4096: <summary>"; the ETA assumes the
 * points left take as long as this command's points did on average. */
std::string format_progress(size_t done, size_t total, double elapsed_s, size_t measured_now, const std::string &last);

struct SweepArgs {
    SweepSpec spec;
    PointOptions point;
    std::string json = "sweep.json";
    std::string plots;  // folder for the plots and the Markdown table; empty: none
    std::string python = "python3", baselines, plot_script;
    double budget_s = 0;  // stop starting points after this many seconds (0: no limit)
    double baseline_timeout_s = 600;
    int cooldown_ms = 500;
    bool retry_failed = false, dry_run = false;
};

/** Runs the sweep: 0 when every planned point is in the file, 4 when the budget left points for
 * another run, 1 when a point failed in this run; 3 without a GPU (unless dry_run). */
int run_sweep(const SweepArgs &a, const std::vector<std::string> &command);

}  // namespace neptune::bench

#endif
