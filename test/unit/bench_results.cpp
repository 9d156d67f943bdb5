// The benchmark's results: Neptune's speedups (docs/design/operators.md, speedup) and the profile table's ratios on
// hand-made points, correctness judgement, the JSON file (round trip, foreign files), and the
// sweep's plan, resumption and progress line. Every expected figure is computed by hand below.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "Provenance.h"
#include "Results.h"
#include "Sweep.h"

using namespace neptune::bench;

namespace {

ImplResult timed(const std::string &impl, double ms, double rel_rms = 1e-3, double vs_neptune = 1e-3) {
    ImplResult r;
    r.impl = impl;
    r.supported = true;
    r.median_ms = ms;
    r.min_ms = ms * 0.9;
    r.max_ms = ms * 1.2;
    r.ref_rel_rms = rel_rms;
    r.ref_max_abs = 10 * rel_rms;
    r.ref_rms = rel_rms / 10;
    if (impl != "neptune") r.max_abs_vs_neptune = vs_neptune;
    judge_correctness(r);
    return r;
}

// neptune 2 ms; flex (compiler) 3 ms; sdpa_cudnn (library) 1.5 ms; sdpa_flash 1 ms but wrong
// (relative RMS 0.5 against fp64); cublas_unfused 6 ms; halide_unfused unsupported.
PointResult sample_point() {
    PointResult p;
    p.op = "prefill_causal";
    p.batch = 1;
    p.seq = 8192;
    p.unit = "TFLOP/s";
    p.work = 1e12;
    p.results = {timed("neptune", 2.0), timed("cublas_unfused", 6.0)};
    ImplResult h;
    h.impl = "halide_unfused";
    h.reason = "needs the AOT generators";
    p.results.push_back(h);
    p.results.push_back(timed("sdpa_flash", 1.0, 0.5));
    p.results.push_back(timed("sdpa_cudnn", 1.5));
    p.results.push_back(timed("flex", 3.0));
    return p;
}

std::string temp_path(const char *name) {
    return std::string("/tmp/neptune_test_") + name + "_" + std::to_string(getpid());
}

}  // namespace

TEST_CASE("bench results: a result off the reference or off Neptune is judged wrong") {
    CHECK(timed("flex", 1, 9e-3, 9e-3).correct);
    CHECK_FALSE(timed("flex", 1, 1.1e-2).correct);
    CHECK_FALSE(timed("flex", 1, 1e-3, 0.02).correct);
    ImplResult nan = timed("flex", 1);
    nan.nonfinite = 3;
    judge_correctness(nan);
    CHECK_FALSE(nan.correct);
    ImplResult unchecked;  // ran but nothing compared it with anything
    unchecked.impl = "sdpa_flash";
    unchecked.supported = true;
    unchecked.median_ms = 1;
    judge_correctness(unchecked);
    CHECK_FALSE(unchecked.correct);
}

TEST_CASE("bench results: speedups use the fastest correct other implementation, by kind") {
    const PointResult p = sample_point();
    const Speedups s = speedups(p);
    // The wrong sdpa_flash (1 ms) is skipped: the best other is sdpa_cudnn, 1.5 ms / 2 ms.
    REQUIRE(s.overall);
    CHECK(s.best == "sdpa_cudnn");
    CHECK(*s.overall == doctest::Approx(0.75));
    REQUIRE(s.compilers);
    CHECK(s.best_compiler == "flex");
    CHECK(*s.compilers == doctest::Approx(1.5));
    REQUIRE(s.libraries);
    CHECK(s.best_library == "sdpa_cudnn");
    CHECK(*s.libraries == doctest::Approx(0.75));
    // 1e12 FLOP in 2 ms is 500 TFLOP/s.
    CHECK(*p.throughput(*p.find("neptune")) == doctest::Approx(500));
    CHECK_FALSE(p.throughput(*p.find("halide_unfused")));
    CHECK(kind_of("halide_unfused") == ImplKind::Compiler);
    CHECK(kind_of("cublas_unfused") == ImplKind::Library);

    PointResult alone = p;
    alone.results.resize(1);
    CHECK_FALSE(speedups(alone).overall);
}

TEST_CASE("bench results: the table holds every ratio and marks wrong and unsupported results") {
    const std::string t = format_table(sample_point());
    INFO(t);
    // vs neptune: flex 3/2 = 1.50, cudnn 1.5/2 = 0.75, cublas 6/2 = 3.00; vs best (cudnn, 1.5 ms):
    // neptune 2/1.5 = 1.33, flex 2.00, cublas 4.00.
    auto row = [&](const std::string &impl) {
        const size_t b = t.find("\n" + impl + " ");
        REQUIRE(b != std::string::npos);
        return t.substr(b + 1, t.find('\n', b + 1) - b - 1);
    };
    CHECK(row("flex").find("   1.50     2.00") != std::string::npos);
    CHECK(row("sdpa_cudnn").find("   0.75     1.00") != std::string::npos);
    CHECK(row("cublas_unfused").find("   3.00     4.00") != std::string::npos);
    CHECK(row("neptune").find("   1.00     1.33") != std::string::npos);
    CHECK(row("neptune").find("500.00") != std::string::npos);
    CHECK(row("sdpa_flash").find("WRONG") != std::string::npos);
    CHECK(row("halide_unfused").find("unsupported: needs the AOT generators") != std::string::npos);
    CHECK(t.find("over the best other (sdpa_cudnn) 0.75x") != std::string::npos);
    CHECK(t.find("over compilers (flex) 1.50x") != std::string::npos);
    CHECK(format_summary(sample_point()) == "neptune 500.00 TFLOP/s; best other sdpa_cudnn 666.67 (Neptune 0.75x)");
}

TEST_CASE("bench results: the baselines' JSON folds in with relative errors and judgement") {
    PointResult p = sample_point();
    p.results.resize(1);
    const nlohmann::json doc = {
        {"results",
         {{{"impl", "sdpa_cudnn"},
           {"supported", true},
           {"median_ms", 1.0},
           {"ref_rms", 5e-4},
           {"ref_max_abs", 3e-3},
           {"max_abs_vs_neptune", 2e-3},
           {"nonfinite", 0},
           {"reason", ""}},
          {{"impl", "flex"}, {"supported", true}, {"median_ms", 1.0}, {"ref_rms", 2e-3}, {"max_abs_vs_neptune", 2e-3}},
          {{"impl", "sdpa_efficient"}, {"supported", false}, {"median_ms", nullptr}, {"reason", "no softcap"}}}}};
    add_baseline_results(p, doc, 0.1);  // the RMS of the reference values
    REQUIRE(p.results.size() == 4);
    CHECK(*p.find("sdpa_cudnn")->ref_rel_rms == doctest::Approx(5e-3));
    CHECK(p.find("sdpa_cudnn")->correct);
    CHECK(*p.find("flex")->ref_rel_rms == doctest::Approx(2e-2));
    CHECK_FALSE(p.find("flex")->correct);
    CHECK_FALSE(p.find("sdpa_efficient")->supported);
    CHECK(p.find("sdpa_efficient")->reason == "no softcap");
    CHECK_THROWS_AS(add_baseline_results(p, nlohmann::json::object(), 1), std::invalid_argument);
    CHECK_THROWS_WITH_AS(add_baseline_results(p, {{"results", {{{"supported", true}}}}}, 1),
                         doctest::Contains("missing field 'impl'"), std::invalid_argument);
}

TEST_CASE("bench results: a result file round-trips, and a foreign or broken file is refused by name") {
    ResultFile f;
    f.runs.push_back({{"gpu", {{"name", "NVIDIA H200"}}}, {"date", "2026-11-29T00:00:00Z"}});
    f.points.push_back(sample_point());
    PointResult failed;
    failed.op = "decode_gqa";
    failed.batch = 32;
    failed.seq = 8192;
    failed.failed = true;
    failed.error = "out of memory";
    f.points.push_back(failed);
    const std::string path = temp_path("results.json");
    write_result_file(path, f);
    const ResultFile g = read_result_file(path);
    REQUIRE(g.points.size() == 2);
    CHECK(g.runs.at(0)["gpu"]["name"] == "NVIDIA H200");
    const PointResult &a = g.points[0];
    CHECK(a.op == "prefill_causal");
    CHECK(a.work == 1e12);
    REQUIRE(a.results.size() == 6);
    CHECK(*a.find("flex")->median_ms == 3.0);
    CHECK(*a.find("flex")->min_ms == doctest::Approx(2.7));
    CHECK_FALSE(a.find("sdpa_flash")->correct);
    CHECK_FALSE(a.find("halide_unfused")->median_ms);
    CHECK(*speedups(a).overall == doctest::Approx(0.75));
    CHECK(g.points[1].failed);
    CHECK(g.points[1].error == "out of memory");
    // The JSON also carries each result's throughput and kind, for the plots.
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in);
    CHECK(j["schema"] == "neptune-bench/1");
    CHECK(j["points"][0]["results"][0]["throughput"].get<double>() == doctest::Approx(500));
    CHECK(j["points"][0]["results"][5]["kind"] == "compiler");

    std::ofstream(path) << R"({"op": "prefill_causal"})";
    CHECK_THROWS_WITH_AS(read_result_file(path), doctest::Contains("not a neptune_bench result file"),
                         std::runtime_error);
    std::ofstream(path) << R"({"schema": "neptune-bench/1", "points": [{"op": "x", "batch": 1}]})";
    CHECK_THROWS_WITH_AS(read_result_file(path), doctest::Contains("point 0: missing field 'seq'"), std::runtime_error);
    std::ofstream(path) << "{not json";
    CHECK_THROWS_WITH_AS(read_result_file(path), doctest::Contains("not JSON"), std::runtime_error);
    std::remove(path.c_str());
    CHECK_THROWS_WITH_AS(read_result_file(path), doctest::Contains("cannot read"), std::runtime_error);
}

TEST_CASE("bench sweep: the plan covers both sweeps per operator, the shared point once") {
    SweepSpec s;
    s.ops = {"prefill_causal", "decode_gqa"};
    const std::vector<SweepPoint> plan = plan_sweep(s);
    // 8 sequence lengths + 6 batches, minus (1, 8192) which both hold: 13 per operator.
    CHECK(plan.size() == 26);
    CHECK(plan.front() == SweepPoint{"prefill_causal", 1, 256});
    CHECK(plan[7] == SweepPoint{"prefill_causal", 1, 32768});
    CHECK(plan[8] == SweepPoint{"prefill_causal", 2, 8192});
    CHECK(plan.back() == SweepPoint{"decode_gqa", 32, 8192});
    CHECK(plan_sweep(SweepSpec{}).size() == 130);  // ten operators
    s.sweeps = {"batch"};
    CHECK(plan_sweep(s).size() == 12);
    const nlohmann::json d = sweep_definitions(SweepSpec{});
    CHECK(d["seq"]["batch"] == 1);
    CHECK(d["batch"]["values"] == nlohmann::json({1, 2, 4, 8, 16, 32}));
}

TEST_CASE("bench sweep: options are validated with the reason") {
    CHECK(parse_ops("all").size() == 10);
    CHECK(parse_ops("decode_gqa,prefill_gqa,decode_gqa") == std::vector<std::string>{"decode_gqa", "prefill_gqa"});
    CHECK_THROWS_WITH_AS(parse_ops("softmax"), doctest::Contains("'softmax' is not an attention operator"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_sweeps("seq,heads"), doctest::Contains("'heads' is not seq or batch"),
                         std::invalid_argument);
    CHECK(parse_values("256,1024", "--seq-values") == std::vector<int64_t>{256, 1024});
    for (const char *bad : {"0", "-4", "2x", "", "8,,16"})
        CHECK_THROWS_WITH_AS(parse_values(bad, "--seq-values"), doctest::Contains("--seq-values"),
                             std::invalid_argument);
}

TEST_CASE("bench sweep: a resumed sweep measures only what the file lacks") {
    SweepSpec s;
    s.ops = {"decode_causal"};
    s.sweeps = {"batch"};
    s.batch_values = {1, 2, 4};
    const std::vector<SweepPoint> plan = plan_sweep(s);
    ResultFile f;
    PointResult ok, bad;
    ok.op = bad.op = "decode_causal";
    ok.batch = 1;
    bad.batch = 4;
    ok.seq = bad.seq = 8192;
    bad.failed = true;
    f.points = {ok, bad};
    CHECK(pending_points(plan, f, false) == std::vector<SweepPoint>{{"decode_causal", 2, 8192}});
    CHECK(pending_points(plan, f, true) ==
          std::vector<SweepPoint>{{"decode_causal", 2, 8192}, {"decode_causal", 4, 8192}});
    // A retried point replaces its failed record.
    bad.failed = false;
    record_point(f, bad);
    CHECK(f.points.size() == 2);
    CHECK_FALSE(f.points[1].failed);
    // Definitions grow with the pieces; a sweep at another fixed value replaces the old one.
    const nlohmann::json a = {{"seq", {{"batch", 1}, {"values", {256, 1024}}}}};
    const nlohmann::json b = {{"seq", {{"batch", 1}, {"values", {512, 1024}}}},
                              {"batch", {{"seq", 8192}, {"values", {2}}}}};
    const nlohmann::json m = merge_definitions(a, b);
    CHECK(m["seq"]["values"] == nlohmann::json({256, 512, 1024}));
    CHECK(m["batch"]["values"] == nlohmann::json({2}));
    CHECK(merge_definitions(a, {{"seq", {{"batch", 4}, {"values", {64}}}}})["seq"]["values"] == nlohmann::json({64}));
}

TEST_CASE("bench sweep: the progress line counts points and projects the time left") {
    // 5 of 10 done, 3 of them by this command in 90 s: 30 s each, 5 left, 150 s to go.
    CHECK(format_progress(5, 10, 90, 3, "decode_gqa 1,256: ok") ==
          "[ 5/10] 0:01:30 elapsed, ETA 0:02:30 | decode_gqa 1,256: ok");
    CHECK(format_progress(130, 130, 3725, 130, "x") == "[130/130] 1:02:05 elapsed, ETA 0:00:00 | x");
    CHECK(format_progress(0, 4, 0, 0, "x").find("ETA ?") != std::string::npos);
}

TEST_CASE("bench provenance: the command's record names the date, NVRTC and the command; PyTorch's fields join it") {
    const nlohmann::json p = provenance({"neptune_bench", "sweep"});
    CHECK(p["command"] == nlohmann::json({"neptune_bench", "sweep"}));
    CHECK(p["nvrtc"].get<std::string>().find('.') != std::string::npos);  // e.g. "13.0"
    const std::string date = p["date"];
    CHECK(date.size() == 20);  // 2026-11-29T10:11:12Z
    CHECK(date[4] == '-');
    CHECK(date[10] == 'T');
    CHECK(date.back() == 'Z');
    CHECK((p["gpu"].is_null() || p["gpu"]["sms"].get<int>() > 0));  // null without a GPU
    nlohmann::json run = {{"torch", "2.11.0"}};
    add_baseline_provenance(run, {{"torch", "other"}, {"triton", "3.6.0"}, {"cudnn", 91500}, {"cuda", "13.0"}});
    CHECK(run["torch"] == "2.11.0");  // what the run already has is kept
    CHECK(run["triton"] == "3.6.0");
    CHECK(run["cudnn"] == 91500);
    CHECK(run["torch_cuda"] == "13.0");
}
