#include "Sweep.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>

#include <fmt/core.h>

#include "Baselines.h"
#include "Process.h"
#include "Provenance.h"
#include "neptune/GpuOperator.h"

namespace neptune::bench {

using nlohmann::json;

namespace {

std::vector<std::string> split(const std::string &text) {
    std::vector<std::string> out;
    for (size_t b = 0; b <= text.size();) {
        size_t e = text.find(',', b);
        if (e == std::string::npos) e = text.size();
        out.push_back(text.substr(b, e - b));
        b = e + 1;
    }
    return out;
}

// Errors after which the CUDA context of this process is unusable (every later call fails too).
bool sticky_cuda_error(const std::string &message) {
    for (const char *e :
         {"CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
          "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "CUDA_ERROR_INVALID_PC",
          "CUDA_ERROR_LAUNCH_TIMEOUT"})
        if (message.find(e) != std::string::npos) return true;
    return false;
}

std::string clock_time(double s) {
    const long t = long(s + 0.5);
    return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
}

}  // namespace

std::vector<std::string> attention_operators() {
    std::vector<std::string> out;
    // The ten attention operators of docs/design/operators.md (the evaluation's; a paged cache is
    // measured on its own).
    for (const OperatorSpec &op : operator_suite())
        if (op.family == Family::Attention && op.row_stats == RowStats::None && op.attention.page_size == 0)
            out.push_back(op.name);
    return out;
}

std::vector<std::string> parse_ops(const std::string &text) {
    const std::vector<std::string> all = attention_operators();
    if (text == "all") return all;
    std::string known;
    for (const std::string &n : all) known += (known.empty() ? "" : ", ") + n;
    std::vector<std::string> out;
    for (const std::string &n : split(text)) {
        if (std::find(all.begin(), all.end(), n) == all.end())
            throw std::invalid_argument("--ops: '" + n + "' is not an attention operator; the sweeps cover " + known);
        if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
    return out;
}

std::vector<std::string> parse_sweeps(const std::string &text) {
    std::vector<std::string> out;
    for (const std::string &s : split(text)) {
        if (s != "seq" && s != "batch") throw std::invalid_argument("--sweeps: '" + s + "' is not seq or batch");
        if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
    return out;
}

std::vector<int64_t> parse_values(const std::string &text, const std::string &option) {
    std::vector<int64_t> out;
    for (const std::string &s : split(text)) {
        size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(s, &used);
        } catch (const std::exception &) { used = 0; }
        if (s.empty() || used != s.size() || v <= 0)
            throw std::invalid_argument(option + ": '" + s +
                                        "' is not a positive integer (expected e.g. 256,512,1024)");
        out.push_back(v);
    }
    return out;
}

std::vector<SweepPoint> plan_sweep(const SweepSpec &s) {
    std::vector<SweepPoint> out;
    auto add = [&](const SweepPoint &p) {
        if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    };
    for (const std::string &op : s.ops.empty() ? attention_operators() : s.ops)
        for (const std::string &sw : s.sweeps) {
            if (sw == "seq")
                for (int64_t v : s.seq_values) add({op, s.seq_batch, v});
            if (sw == "batch")
                for (int64_t v : s.batch_values) add({op, v, s.batch_seq});
        }
    return out;
}

json sweep_definitions(const SweepSpec &s) {
    json d = json::object();
    for (const std::string &sw : s.sweeps) {
        if (sw == "seq") d["seq"] = {{"batch", s.seq_batch}, {"values", s.seq_values}};
        if (sw == "batch") d["batch"] = {{"seq", s.batch_seq}, {"values", s.batch_values}};
    }
    return d;
}

json merge_definitions(const json &old, const json &now) {
    json out = old.is_object() ? old : json::object();
    for (const auto &[name, def] : now.items()) {
        const char *fixed = name == "seq" ? "batch" : "seq";
        if (!out.contains(name) || out[name].value(fixed, int64_t(0)) != def.value(fixed, int64_t(0))) {
            out[name] = def;  // a sweep at another fixed value replaces the old definition
            continue;
        }
        std::set<int64_t> values;
        for (const json &v : out[name]["values"]) values.insert(v.get<int64_t>());
        for (const json &v : def["values"]) values.insert(v.get<int64_t>());
        out[name]["values"] = std::vector<int64_t>(values.begin(), values.end());
    }
    return out;
}

std::vector<SweepPoint> pending_points(const std::vector<SweepPoint> &plan, const ResultFile &done, bool retry_failed) {
    std::vector<SweepPoint> out;
    for (const SweepPoint &p : plan) {
        bool have = false;
        for (const PointResult &r : done.points)
            if (r.op == p.op && r.batch == p.batch && r.seq == p.seq && (!r.failed || !retry_failed)) have = true;
        if (!have) out.push_back(p);
    }
    return out;
}

void record_point(ResultFile &f, const PointResult &p) {
    for (PointResult &r : f.points)
        if (r.op == p.op && r.batch == p.batch && r.seq == p.seq) {
            r = p;
            return;
        }
    f.points.push_back(p);
}

std::string format_progress(size_t done, size_t total, double elapsed_s, size_t measured_now, const std::string &last) {
    const size_t left = total - std::min(done, total);
    const std::string eta = measured_now ? clock_time(elapsed_s / double(measured_now) * double(left)) : "?";
    return fmt::format("[{:>{}}/{}] {} elapsed, ETA {} | {}", done, std::to_string(total).size(), total,
                       clock_time(elapsed_s), eta, last);
}

int run_sweep(const SweepArgs &a, const std::vector<std::string> &command) {
    const std::vector<SweepPoint> plan = plan_sweep(a.spec);
    ResultFile file;
    if (std::ifstream(a.json)) {  // resume
        try {
            file = read_result_file(a.json);
        } catch (const std::runtime_error &e) {
            throw std::invalid_argument(std::string("--json: ") + e.what() + "; name another file");
        }
    }
    const std::vector<SweepPoint> todo = pending_points(plan, file, a.retry_failed);
    fmt::print("sweep: {} points planned, {} already in {}, {} to measure\n", plan.size(), plan.size() - todo.size(),
               a.json, todo.size());
    if (a.dry_run) {
        for (const SweepPoint &p : todo) fmt::print("  {} {},{}\n", p.op, p.batch, p.seq);
        return 0;
    }
    if (!todo.empty() && !gpu_available()) {
        fmt::print(stderr, "neptune_bench sweep: no CUDA device here; --dry-run lists the points without one\n");
        return 3;
    }
    file.sweeps = merge_definitions(file.sweeps, sweep_definitions(a.spec));
    if (!todo.empty()) file.runs.push_back(provenance(command));
    const int run = int(file.runs.size()) - 1;
    std::unique_ptr<BaselineServer> server;
    if (!a.point.impls.python.empty() && !a.baselines.empty())
        server = std::make_unique<BaselineServer>(a.python, a.baselines, a.baseline_timeout_s);
    else if (!a.point.impls.python.empty())
        fmt::print("sweep: baselines.py not found; the PyTorch baselines are left out (--baselines names it)\n");

    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    double longest = 0;
    size_t measured = 0, failures = 0;
    size_t done = plan.size() - todo.size();
    for (const SweepPoint &sp : todo) {
        if (a.budget_s > 0 && measured > 0 && elapsed() + longest > a.budget_s) {
            fmt::print(
                "sweep: stopping at the budget of {:.0f} s with {} points left; run the same command again to "
                "continue\n",
                a.budget_s, plan.size() - done);
            break;
        }
        fmt::print("\n=== {} {},{}\n", sp.op, sp.batch, sp.seq);
        std::fflush(stdout);
        const auto p0 = std::chrono::steady_clock::now();
        PointResult p;
        json doc;
        try {
            p = measure_point(instantiate(*find_operator(sp.op), sp.batch, sp.seq), a.point, server.get(), &doc);
        } catch (const std::exception &e) {  // e.g. host memory, bad shape: recorded, and the sweep goes on
            p = PointResult{};
            p.op = sp.op;
            p.batch = sp.batch;
            p.seq = sp.seq;
            p.failed = true;
            p.error = e.what();
            p.date = utc_now();
        }
        p.run = run;
        if (!doc.is_null()) add_baseline_provenance(file.runs[size_t(run)], doc);
        record_point(file, p);
        write_result_file(a.json, file);
        longest = std::max(longest, std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count());
        measured++;
        done++;
        failures += p.failed ? 1 : 0;
        if (!p.failed) fmt::print("{}", format_table(p));
        fmt::print("{}\n", format_progress(done, plan.size(), elapsed(), measured,
                                           fmt::format("{} {},{}: {}", sp.op, sp.batch, sp.seq, format_summary(p))));
        std::fflush(stdout);
        if (p.failed && sticky_cuda_error(p.error)) {
            fmt::print(
                "sweep: stopping: after {} this process's CUDA context is unusable; the point is recorded as "
                "failed, and running the command again continues after it\n",
                p.error);
            break;
        }
        if (a.cooldown_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.cooldown_ms));
    }
    server.reset();
    const size_t left = pending_points(plan, file, false).size();
    fmt::print("sweep: {} points measured in {}, {} failed; {} of {} in {}{}\n", measured, clock_time(elapsed()),
               failures, plan.size() - left, plan.size(), a.json, left ? "" : " (complete)");
    if (!a.plots.empty()) {
        if (a.plot_script.empty()) {
            fmt::print("sweep: scripts/plot_sweep.py not found; no plots\n");
        } else {
            const int rc = run_command({a.python, a.plot_script, a.json, "--out", a.plots});
            if (rc != 0) fmt::print("sweep: plot_sweep.py exited with {}\n", rc);
        }
    }
    return left ? 4 : failures ? 1 : 0;
}

}  // namespace neptune::bench
