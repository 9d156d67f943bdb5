#include "Profiler.h"

#include <glob.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>

#include "Process.h"

namespace neptune::bench {

namespace {

std::string find_ncu() {
    if (std::string p = find_on_path("ncu"); !p.empty()) return p;
    std::vector<std::string> dirs;
    if (const char *c = std::getenv("CUDA_PATH")) dirs.push_back(std::string(c) + "/bin");
    dirs.push_back("/usr/local/cuda/bin");
    for (const std::string &d : dirs)
        if (std::string p = find_on_path(d + "/ncu"); !p.empty()) return p;
    glob_t g{};
    std::string found;
    if (glob("/opt/nvidia/nsight-compute/*/ncu", 0, nullptr, &g) == 0 && g.gl_pathc > 0)
        found = g.gl_pathv[g.gl_pathc - 1];  // sorted: the newest version last
    globfree(&g);
    return found;
}

// A number as ncu prints it ("1,234.5"), or empty.
std::optional<double> number(std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ','), s.end());
    if (s.empty()) return std::nullopt;
    char *end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0') return std::nullopt;
    return v;
}

// Microseconds per unit of time as ncu names units ("nsecond" and "ns" alike).
std::optional<double> us_per(const std::string &unit) {
    if (unit == "nsecond" || unit == "ns") return 1e-3;
    if (unit == "usecond" || unit == "us") return 1.0;
    if (unit == "msecond" || unit == "ms") return 1e3;
    if (unit == "second" || unit == "s") return 1e6;
    return std::nullopt;
}

// The table under the first line holding every one of `columns`: the header and the records.
struct Csv {
    std::map<std::string, size_t> col;
    std::vector<std::vector<std::string>> rows;
};
Csv read_csv(const std::string &text, const std::vector<std::string> &columns, const char *what) {
    std::istringstream in(text);
    std::string line;
    Csv t;
    bool header = false;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const std::vector<std::string> f = split_csv_line(line);
        if (!header) {
            std::map<std::string, size_t> col;
            for (size_t i = 0; i < f.size(); i++) col[f[i]] = i;
            header =
                std::all_of(columns.begin(), columns.end(), [&](const std::string &c) { return col.count(c) > 0; });
            if (header) t.col = col;
            continue;
        }
        if (f.size() >= t.col.size()) t.rows.push_back(f);
    }
    if (!header) {
        std::string cols;
        for (const std::string &c : columns) cols += (cols.empty() ? "\"" : ", \"") + c + "\"";
        throw std::invalid_argument(std::string(what) + ": no CSV header with the columns " + cols);
    }
    return t;
}

std::vector<KernelSummary> longest_first(std::map<std::string, KernelSummary> by_name) {
    std::vector<KernelSummary> out;
    for (auto &[n, k] : by_name) out.push_back(k);
    std::stable_sort(out.begin(), out.end(),
                     [](const KernelSummary &a, const KernelSummary &b) { return a.total_us > b.total_us; });
    return out;
}

}  // namespace

std::vector<std::string> split_csv_line(const std::string &line) {
    std::vector<std::string> out(1);
    bool quoted = false;
    for (size_t i = 0; i < line.size(); i++) {
        const char c = line[i];
        if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
            out.back() += '"';
            i++;
        } else if (c == '"') {
            quoted = !quoted;
        } else if (c == ',' && !quoted) {
            out.emplace_back();
        } else {
            out.back() += c;
        }
    }
    return out;
}

Profiler find_profiler(const std::string &want) {
    if (want != "auto" && want != "nsys" && want != "ncu")
        throw std::invalid_argument("--profiler: '" + want + "' is not auto, nsys or ncu");
    if (want != "ncu") {
        if (std::string p = find_on_path("nsys"); !p.empty()) return {ProfilerKind::Nsys, p};
        if (want == "nsys") throw std::invalid_argument("--profile: nsys is not on the PATH");
    }
    if (std::string p = find_ncu(); !p.empty()) return {ProfilerKind::Ncu, p};
    throw std::invalid_argument(want == "ncu" ? "--profile: ncu not found (PATH, $CUDA_PATH/bin, /usr/local/cuda/bin, "
                                                "/opt/nvidia/nsight-compute)"
                                              : "--profile: neither nsys (PATH) nor ncu (PATH, $CUDA_PATH/bin, "
                                                "/usr/local/cuda/bin, /opt/nvidia/nsight-compute) was found");
}

std::string report_file(const Profiler &p, const std::string &base) {
    return base + (p.kind == ProfilerKind::Nsys ? ".nsys-rep" : ".ncu-rep");
}

std::vector<std::string> profile_command(const Profiler &p, const std::string &base,
                                         const std::vector<std::string> &child) {
    std::vector<std::string> cmd;
    if (p.kind == ProfilerKind::Nsys)
        cmd = {p.path, "profile", "--force-overwrite", "true", "--trace", "cuda,nvtx", "--output", base};
    else  // leave the clocks alone (the benchmark records them); follow the PyTorch child too
        cmd = {p.path, "--clock-control", "none", "--target-processes", "all", "--force-overwrite", "--export", base};
    cmd.insert(cmd.end(), child.begin(), child.end());
    return cmd;
}

std::vector<std::string> summary_command(const Profiler &p, const std::string &report) {
    if (p.kind == ProfilerKind::Nsys)
        return {p.path, "stats", "--force-export", "true", "--report", "cuda_gpu_kern_sum", "--format", "csv", report};
    // The raw page names metrics as ncu defines them (stable across versions, unlike the sections'
    // labels) and gives their units in a row of their own.
    return {p.path, "--import", report, "--csv", "--page", "raw"};
}

namespace {

// One kernel launch as ncu reports it; figures it does not report stay empty (n/a, never 0).
struct Launch {
    std::string name;
    std::optional<double> us, sm, mem, dram;
};

// A figure of ncu's in its unit: a duration in microseconds, a throughput only as a percentage.
std::optional<double> duration_us(const std::string &value, const std::string &unit) {
    const std::optional<double> v = number(value), k = us_per(unit);
    if (!v || !k) return std::nullopt;
    return *v * *k;
}
std::optional<double> percent(const std::string &value, const std::string &unit) {
    return unit == "%" ? number(value) : std::nullopt;
}

// The details page: one row per launch and metric, named as ncu's sections show them.
void read_details(const Csv &t, std::vector<std::string> &order, std::map<std::string, Launch> &launches) {
    for (const std::vector<std::string> &f : t.rows) {
        const std::string &id = f[t.col.at("ID")];
        if (!launches.count(id)) order.push_back(id);
        Launch &l = launches[id];
        l.name = f[t.col.at("Kernel Name")];
        const std::string &metric = f[t.col.at("Metric Name")], &unit = f[t.col.at("Metric Unit")],
                          &value = f[t.col.at("Metric Value")];
        if (metric == "Duration") {
            if (const std::optional<double> v = duration_us(value, unit)) l.us = v;
        } else if (metric == "Compute (SM) Throughput" || metric == "SM [%]") {  // the latter: ncu before 2022
            if (const std::optional<double> v = percent(value, "%")) l.sm = v;
        } else if (metric == "Memory Throughput" || metric == "Memory [%]") {
            if (const std::optional<double> v = percent(value, metric == "Memory [%]" ? "%" : unit)) l.mem = v;
        } else if (metric == "DRAM Throughput") {
            if (const std::optional<double> v = percent(value, unit)) l.dram = v;
        }
    }
}

// The raw page: a header of metric names, a row of their units, then one row per launch.
void read_raw(const Csv &t, std::vector<std::string> &order, std::map<std::string, Launch> &launches) {
    const std::vector<std::string> *units = nullptr;
    for (const std::vector<std::string> &f : t.rows)
        if (f[t.col.at("ID")].empty()) units = &f;  // the units row: no launch ID
    auto column = [&](std::initializer_list<const char *> names) -> std::optional<size_t> {
        for (const char *n : names)
            if (auto it = t.col.find(n); it != t.col.end()) return it->second;
        return std::nullopt;
    };
    const std::optional<size_t> duration = column({"gpu__time_duration.sum"}),
                                sm = column({"sm__throughput.avg.pct_of_peak_sustained_elapsed"}),
                                mem = column({"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"}),
                                dram = column({"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                                               "dram__throughput.avg.pct_of_peak_sustained_elapsed"});
    auto unit = [&](size_t c) { return units && c < units->size() ? (*units)[c] : std::string(); };
    for (const std::vector<std::string> &f : t.rows) {
        const std::string &id = f[t.col.at("ID")];
        if (id.empty()) continue;
        if (!launches.count(id)) order.push_back(id);
        Launch &l = launches[id];
        l.name = f[t.col.at("Kernel Name")];
        if (duration) l.us = duration_us(f[*duration], unit(*duration));
        if (sm) l.sm = percent(f[*sm], unit(*sm));
        if (mem) l.mem = percent(f[*mem], unit(*mem));
        if (dram) l.dram = percent(f[*dram], unit(*dram));
    }
}

}  // namespace

std::vector<KernelSummary> parse_ncu_csv(const std::string &text) {
    const Csv t = read_csv(text, {"ID", "Kernel Name"}, "ncu --csv");
    std::map<std::string, Launch> launches;  // by ID
    std::vector<std::string> order;
    if (t.col.count("Metric Name") && t.col.count("Metric Unit") && t.col.count("Metric Value")) {
        read_details(t, order, launches);
    } else {
        read_raw(t, order, launches);
    }
    std::map<std::string, KernelSummary> by_name;
    std::map<std::string, std::array<int, 3>> counts;  // launches reporting sm, memory, dram
    for (const std::string &id : order) {
        const Launch &l = launches[id];
        KernelSummary &k = by_name[l.name];
        std::array<int, 3> &c = counts[l.name];
        k.name = l.name;
        k.launches++;
        if (l.us) {
            k.total_us += *l.us;
            k.timed++;
        }
        const std::optional<double> *src[3] = {&l.sm, &l.mem, &l.dram};
        std::optional<double> *dst[3] = {&k.sm_pct, &k.memory_pct, &k.dram_pct};
        for (int i = 0; i < 3; i++)
            if (*src[i]) {
                *dst[i] = dst[i]->value_or(0) + **src[i];
                c[i]++;
            }
    }
    for (auto &[n, k] : by_name) {
        std::optional<double> *dst[3] = {&k.sm_pct, &k.memory_pct, &k.dram_pct};
        for (int i = 0; i < 3; i++)
            if (*dst[i]) **dst[i] /= counts[n][size_t(i)];
    }
    return longest_first(by_name);
}

std::vector<KernelSummary> parse_nsys_csv(const std::string &text) {
    const Csv t = read_csv(text, {"Total Time (ns)", "Instances", "Name"}, "nsys stats --format csv");
    std::map<std::string, KernelSummary> by_name;
    for (const std::vector<std::string> &f : t.rows) {
        KernelSummary &k = by_name[f[t.col.at("Name")]];
        k.name = f[t.col.at("Name")];
        const int launches = int(number(f[t.col.at("Instances")]).value_or(0));
        k.launches += launches;
        if (const std::optional<double> ns = number(f[t.col.at("Total Time (ns)")])) {
            k.total_us += *ns * 1e-3;
            k.timed += launches;
        }
    }
    return longest_first(by_name);
}

std::string format_kernels(const std::vector<KernelSummary> &kernels, size_t top) {
    auto pct = [](const std::optional<double> &v) { return v ? fmt::format("{:.1f}", *v) : std::string("n/a"); };
    std::string out = fmt::format("{:<60} {:>8} {:>12} {:>11} {:>6} {:>6} {:>6}\n", "kernel", "launches", "total us",
                                  "mean us", "SM %", "mem %", "DRAM %");
    for (size_t i = 0; i < kernels.size() && i < top; i++) {
        const KernelSummary &k = kernels[i];
        const std::string name = k.name.size() > 60 ? k.name.substr(0, 57) + "..." : k.name;
        const std::string total = k.timed ? fmt::format("{:.1f}", k.total_us) : "n/a",
                          mean = k.timed ? fmt::format("{:.2f}", k.total_us / k.timed) : "n/a";
        out += fmt::format("{:<60} {:>8} {:>12} {:>11} {:>6} {:>6} {:>6}\n", name, k.launches, total, mean,
                           pct(k.sm_pct), pct(k.memory_pct), pct(k.dram_pct));
    }
    if (kernels.size() > top) out += fmt::format("... and {} more kernels\n", kernels.size() - top);
    return out;
}

}  // namespace neptune::bench
