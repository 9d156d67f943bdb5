#include "Results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include <fmt/core.h>

namespace neptune::bench {

using nlohmann::json;

const char *kind_name(ImplKind k) {
    switch (k) {
    case ImplKind::Neptune: return "neptune";
    case ImplKind::Compiler: return "compiler";
    case ImplKind::Library: return "library";
    case ImplKind::Bound: return "bound";
    }
    return "?";
}

ImplKind kind_of(const std::string &impl) {
    if (impl == "neptune") return ImplKind::Neptune;
    if (impl == "copy") return ImplKind::Bound;
    if (impl == "flex" || impl == "halide_unfused" || impl == "halide_cuda" || impl == "torch_compile")
        return ImplKind::Compiler;
    return ImplKind::Library;
}

void judge_correctness(ImplResult &r) {
    // Outputs of magnitude above 1 (a loss near log(vocab)) are compared relatively: the bound scales
    // with the reference's RMS, |error| / RMS error relative.
    const double magnitude =
        r.ref_rms && r.ref_rel_rms && *r.ref_rel_rms > 0 ? std::max(1.0, *r.ref_rms / *r.ref_rel_rms) : 1.0;
    r.correct = r.nonfinite == 0 && (!r.ref_rel_rms || *r.ref_rel_rms <= ref_rel_rms_bound) &&
                (!r.max_abs_vs_neptune || *r.max_abs_vs_neptune <= vs_neptune_bound * magnitude);
    // A run that produced an output but no error figure at all cannot be judged correct.
    if (r.supported && !r.ref_rel_rms && !r.max_abs_vs_neptune && r.impl != "neptune" &&
        kind_of(r.impl) != ImplKind::Bound)
        r.correct = false;
}

const ImplResult *PointResult::find(const std::string &impl) const {
    for (const ImplResult &r : results)
        if (r.impl == impl) return &r;
    return nullptr;
}

std::optional<double> PointResult::throughput(const ImplResult &r) const {
    if (!r.supported || !r.median_ms || *r.median_ms <= 0) return std::nullopt;
    return work / (*r.median_ms * 1e-3) / 1e12;
}

namespace {

bool counts(const ImplResult &r) { return r.supported && r.correct && r.median_ms && *r.median_ms > 0; }

// The fastest counting result other than Neptune whose kind passes `keep`, or null.
template <class Keep>
const ImplResult *fastest_other(const PointResult &p, Keep keep) {
    const ImplResult *best = nullptr;
    for (const ImplResult &r : p.results)
        if (r.impl != "neptune" && counts(r) && kind_of(r.impl) != ImplKind::Bound && keep(kind_of(r.impl)) &&
            (!best || *r.median_ms < *best->median_ms))
            best = &r;
    return best;
}

json opt(const std::optional<double> &v) { return v && std::isfinite(*v) ? json(*v) : json(nullptr); }

std::optional<double> get_opt(const json &j, const char *key) {
    if (!j.contains(key) || j[key].is_null()) return std::nullopt;
    if (!j[key].is_number()) throw std::invalid_argument(std::string("field '") + key + "' is not a number");
    return j[key].get<double>();
}

template <class T>
T get_req(const json &j, const char *key) {
    if (!j.contains(key)) throw std::invalid_argument(std::string("missing field '") + key + "'");
    try {
        return j[key].get<T>();
    } catch (const json::exception &e) { throw std::invalid_argument(std::string("field '") + key + "': " + e.what()); }
}

std::string num(const std::optional<double> &v, const char *spec) {
    return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
}

}  // namespace

Speedups speedups(const PointResult &p) {
    Speedups s;
    const ImplResult *n = p.find("neptune");
    if (!n || !counts(*n)) return s;
    auto ratio = [&](const ImplResult *b, std::optional<double> &out, std::string &name) {
        if (!b) return;
        out = *b->median_ms / *n->median_ms;
        name = b->impl;
    };
    ratio(fastest_other(p, [](ImplKind) { return true; }), s.overall, s.best);
    ratio(fastest_other(p, [](ImplKind k) { return k == ImplKind::Compiler; }), s.compilers, s.best_compiler);
    ratio(fastest_other(p, [](ImplKind k) { return k == ImplKind::Library; }), s.libraries, s.best_library);
    return s;
}

std::optional<double> fraction_of_copy(const PointResult &p) {
    const ImplResult *n = p.find("neptune"), *c = p.find("copy");
    if (!n || !c || !counts(*n) || !counts(*c)) return std::nullopt;
    return *c->median_ms / *n->median_ms;
}

json to_json(const ImplResult &r) {
    return {{"impl", r.impl},
            {"kind", kind_name(kind_of(r.impl))},
            {"supported", r.supported},
            {"reason", r.reason},
            {"median_ms", opt(r.median_ms)},
            {"min_ms", opt(r.min_ms)},
            {"max_ms", opt(r.max_ms)},
            {"ref_max_abs", opt(r.ref_max_abs)},
            {"ref_rms", opt(r.ref_rms)},
            {"ref_rel_rms", opt(r.ref_rel_rms)},
            {"max_abs_vs_neptune", opt(r.max_abs_vs_neptune)},
            {"nonfinite", r.nonfinite},
            {"peak_extra_bytes", opt(r.peak_extra_bytes)},
            {"correct", r.correct}};
}

json to_json(const PointResult &p) {
    json results = json::array();
    for (const ImplResult &r : p.results) {
        json j = to_json(r);
        j["throughput"] = opt(p.throughput(r));
        results.push_back(j);
    }
    return {{"op", p.op},
            {"batch", p.batch},
            {"seq", p.seq},
            {"unit", p.unit},
            {"work", p.work},
            {"status", p.failed ? "failed" : "ok"},
            {"error", p.error},
            {"seconds", p.seconds},
            {"date", p.date},
            {"run", p.run},
            {"clocks", p.clocks.is_null() ? json::object() : p.clocks},
            {"fraction_of_copy", opt(fraction_of_copy(p))},
            {"results", results}};
}

ImplResult impl_from_json(const json &j) {
    ImplResult r;
    r.impl = get_req<std::string>(j, "impl");
    r.supported = get_req<bool>(j, "supported");
    r.reason = j.value("reason", "");
    r.median_ms = get_opt(j, "median_ms");
    r.min_ms = get_opt(j, "min_ms");
    r.max_ms = get_opt(j, "max_ms");
    r.ref_max_abs = get_opt(j, "ref_max_abs");
    r.ref_rms = get_opt(j, "ref_rms");
    r.ref_rel_rms = get_opt(j, "ref_rel_rms");
    r.max_abs_vs_neptune = get_opt(j, "max_abs_vs_neptune");
    r.nonfinite = j.value("nonfinite", int64_t(0));
    r.peak_extra_bytes = get_opt(j, "peak_extra_bytes");
    r.correct = j.value("correct", true);
    return r;
}

PointResult point_from_json(const json &j) {
    PointResult p;
    p.op = get_req<std::string>(j, "op");
    p.batch = get_req<int64_t>(j, "batch");
    p.seq = get_req<int64_t>(j, "seq");
    p.unit = j.value("unit", "");
    p.work = j.value("work", 0.0);
    const std::string status = j.value("status", "ok");
    if (status != "ok" && status != "failed")
        throw std::invalid_argument("status '" + status + "' is not ok or failed");
    p.failed = status == "failed";
    p.error = j.value("error", "");
    p.seconds = j.value("seconds", 0.0);
    p.date = j.value("date", "");
    p.run = j.value("run", 0);
    p.clocks = j.value("clocks", json::object());
    for (const json &r : j.value("results", json::array())) p.results.push_back(impl_from_json(r));
    return p;
}

void add_baseline_results(PointResult &p, const json &doc, double ref_rms) {
    if (!doc.contains("results") || !doc["results"].is_array())
        throw std::invalid_argument("the baselines' JSON has no \"results\" array");
    for (const json &j : doc["results"]) {
        ImplResult r = impl_from_json(j);
        if (r.ref_rms && ref_rms > 0) r.ref_rel_rms = *r.ref_rms / ref_rms;
        judge_correctness(r);
        p.results.push_back(r);
    }
}

std::string format_table(const PointResult &p) {
    const ImplResult *best = nullptr;
    for (const ImplResult &r : p.results)
        if (counts(r) && kind_of(r.impl) != ImplKind::Bound && (!best || *r.median_ms < *best->median_ms)) best = &r;
    const ImplResult *n = p.find("neptune");
    const bool n_timed = n && counts(*n);
    std::string out = fmt::format("{:<16}{:<10}{:>10}{:>9}{:>9}{:>9}{:>12}{:>10}{:>13}{:>11}{:>9}  {}\n",
                                  "implementation", "kind", "median ms", "min ms", "max ms", p.unit, "ref rel rms",
                                  "max|err|", "max|d| nept.", "vs neptune", "vs best", "note");
    for (const ImplResult &r : p.results) {
        out += fmt::format("{:<16}{:<10}", r.impl, kind_name(kind_of(r.impl)));
        if (!r.supported) {  // a failure is also marked incorrect (never "the best")
            out += fmt::format("{}: {}\n", r.correct ? "unsupported" : "FAILED", r.reason);
            continue;
        }
        const bool timed = counts(r) || (r.median_ms && *r.median_ms > 0);
        std::string note = r.reason;
        if (!r.correct)
            note = "WRONG (off the reference or Neptune beyond 1e-2; not ranked)" + (note.empty() ? "" : "; " + note);
        if (r.nonfinite) note += fmt::format(" {} non-finite outputs", r.nonfinite);
        out +=
            fmt::format("{:>10}{:>9}{:>9}{:>9}{:>12}{:>10}{:>13}{:>11}{:>9}  {}\n", num(r.median_ms, "{:.4f}"),
                        num(r.min_ms, "{:.4f}"), num(r.max_ms, "{:.4f}"), num(p.throughput(r), "{:.2f}"),
                        num(r.ref_rel_rms, "{:.2e}"), num(r.ref_max_abs, "{:.2e}"), num(r.max_abs_vs_neptune, "{:.2e}"),
                        timed && n_timed ? fmt::format("{:.2f}", *r.median_ms / *n->median_ms) : "-",
                        timed && best ? fmt::format("{:.2f}", *r.median_ms / *best->median_ms) : "-", note);
    }
    const Speedups s = speedups(p);
    auto part = [](const char *what, const std::optional<double> &v, const std::string &who) {
        return v ? fmt::format("{} ({}) {:.2f}x", what, who, *v) : fmt::format("{} -", what);
    };
    out += fmt::format("Neptune's speedup (best other's median over Neptune's): {}; {}; {}\n",
                       part("over the best other", s.overall, s.best),
                       part("over compilers", s.compilers, s.best_compiler),
                       part("over libraries", s.libraries, s.best_library));
    if (const std::optional<double> f = fraction_of_copy(p))
        out += fmt::format(
            "Neptune moves the operator's bytes at {:.1f} % of the copy bandwidth measured in this call\n", 100 * *f);
    std::string extra;
    for (const ImplResult &r : p.results)
        if (r.peak_extra_bytes)
            extra += fmt::format("{}{} {:.3f} MiB", extra.empty() ? "" : ", ", r.impl, *r.peak_extra_bytes / 1048576.0);
    if (!extra.empty()) out += "Device memory per call beside inputs and outputs: " + extra + "\n";
    return out;
}

std::string format_summary(const PointResult &p) {
    if (p.failed) return "FAILED: " + p.error;
    const ImplResult *n = p.find("neptune");
    std::string s = n && p.throughput(*n) ? fmt::format("neptune {:.2f} {}", *p.throughput(*n), p.unit)
                                          : std::string("neptune not timed");
    const Speedups sp = speedups(p);
    if (sp.overall) {
        const ImplResult *b = p.find(sp.best);
        s += fmt::format("; best other {} {:.2f} (Neptune {:.2f}x)", sp.best, *p.throughput(*b), *sp.overall);
    } else {
        s += "; no other implementation to compare with";
    }
    if (const std::optional<double> f = fraction_of_copy(p)) s += fmt::format("; {:.1f} % of copy", 100 * *f);
    return s;
}

ResultFile read_result_file(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    json j;
    try {
        j = json::parse(in);
    } catch (const json::exception &e) { throw std::runtime_error(path + ": not JSON (" + e.what() + ")"); }
    if (!j.is_object() || j.value("schema", "") != json_schema)
        throw std::runtime_error(path + ": not a neptune_bench result file (\"schema\" is not \"" +
                                 std::string(json_schema) + "\")");
    ResultFile f;
    f.sweeps = j.value("sweeps", json::object());
    for (const json &r : j.value("runs", json::array())) f.runs.push_back(r);
    size_t k = 0;
    try {
        for (const json &p : j.value("points", json::array())) {
            f.points.push_back(point_from_json(p));
            k++;
        }
    } catch (const std::invalid_argument &e) {
        throw std::runtime_error(fmt::format("{}: point {}: {}", path, k, e.what()));
    }
    return f;
}

void write_result_file(const std::string &path, const ResultFile &f) {
    json points = json::array();
    for (const PointResult &p : f.points) points.push_back(to_json(p));
    const json j = {{"schema", json_schema}, {"sweeps", f.sweeps}, {"runs", f.runs}, {"points", points}};
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp);
        if (!out) throw std::runtime_error("cannot write " + tmp);
        out << j.dump(1) << "\n";
        if (!out) throw std::runtime_error("error writing " + tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp + " to " + path);
}

}  // namespace neptune::bench
