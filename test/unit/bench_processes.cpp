// The benchmark's child processes: the profiler's CSV exports read into a kernel summary (ncu's
// details page, nsys's kernel summary; synthetic exports in their formats, totals by hand), and the
// long-lived baseline server (its protocol, failures, time-outs and restarts) against a stand-in
// driver written by the test, and baselines.py --serve's answer to a bad request.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "Baselines.h"
#include "Process.h"
#include "Profiler.h"

using namespace neptune::bench;

namespace {

std::string temp_path(const char *name) {
    return std::string("/tmp/neptune_test_") + name + "_" + std::to_string(getpid());
}

// A stand-in for baselines.py --serve: answers each request by its first argument.
const char *fake_server = R"(import json, sys, time
for line in sys.stdin:
    argv = json.loads(line)["argv"]
    print("driver output for " + argv[0], flush=True)
    if argv[0] == "ok":
        print("@@neptune-baselines " + json.dumps({"rc": 0, "result": {"results": [], "n": len(argv)}}), flush=True)
    elif argv[0] == "fail":
        print("@@neptune-baselines " + json.dumps({"rc": 1, "result": None, "error": "bad inputs: q.bin"}), flush=True)
    elif argv[0] == "garbled":
        print("@@neptune-baselines {oops", flush=True)
    elif argv[0] == "hang":
        time.sleep(60)
    elif argv[0] == "die":
        sys.exit(3)
)";

}  // namespace

TEST_CASE("bench profiler: CSV records split with RFC 4180 quoting") {
    CHECK(split_csv_line(R"("a","b,c",,"say ""hi""")") == std::vector<std::string>{"a", "b,c", "", "say \"hi\""});
    CHECK(split_csv_line("1,2") == std::vector<std::string>{"1", "2"});
}

TEST_CASE("bench profiler: ncu's details page becomes a per-kernel summary, longest first") {
    // Two launches of the partial kernel (8 us and 12 us), one combine (1.5 us, reported in nsecond),
    // the unit of one launch's Duration in msecond; numbers with thousands separators.
    const std::string csv =
        "==PROF== Disconnected\n"
        R"x("ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value")x"
        "\n"
        R"x("0","42","neptune_bench","h","neptune_split_k_partial","1","7","(128, 1, 1)","(4, 8, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","usecond","8.00")x"
        "\n"
        R"x("0","42","neptune_bench","h","neptune_split_k_partial","1","7","(128, 1, 1)","(4, 8, 1)","0","9.0","GPU Speed Of Light Throughput","Compute (SM) Throughput","%","40.0")x"
        "\n"
        R"x("0","42","neptune_bench","h","neptune_split_k_partial","1","7","(128, 1, 1)","(4, 8, 1)","0","9.0","GPU Speed Of Light Throughput","DRAM Throughput","%","70.0")x"
        "\n"
        R"x("0","42","neptune_bench","h","neptune_split_k_partial","1","7","(128, 1, 1)","(4, 8, 1)","0","9.0","Memory Workload Analysis","Memory Throughput","Gbyte/second","3,000.00")x"
        "\n"
        R"x("1","42","neptune_bench","h","neptune_split_k_combine","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","nsecond","1,500")x"
        "\n"
        R"x("2","42","neptune_bench","h","neptune_split_k_partial","1","7","(128, 1, 1)","(4, 8, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","msecond","0.012")x"
        "\n"
        R"x("2","42","neptune_bench","h","neptune_split_k_partial","1","7","(128, 1, 1)","(4, 8, 1)","0","9.0","GPU Speed Of Light Throughput","Compute (SM) Throughput","%","50.0")x"
        "\n"
        R"x("2","42","neptune_bench","h","neptune_split_k_partial","1","7","(128, 1, 1)","(4, 8, 1)","0","9.0","GPU Speed Of Light Throughput","Memory Throughput","%","80.0")x"
        "\n";
    const std::vector<KernelSummary> k = parse_ncu_csv(csv);
    REQUIRE(k.size() == 2);
    CHECK(k[0].name == "neptune_split_k_partial");
    CHECK(k[0].launches == 2);
    CHECK(k[0].total_us == doctest::Approx(20.0));
    CHECK(*k[0].sm_pct == doctest::Approx(45.0));  // (40 + 50) / 2
    CHECK(*k[0].memory_pct == doctest::Approx(80.0));  // the Gbyte/second figure is not a percentage
    CHECK(*k[0].dram_pct == doctest::Approx(70.0));  // one launch reports it
    CHECK(k[1].name == "neptune_split_k_combine");
    CHECK(k[1].total_us == doctest::Approx(1.5));
    CHECK_FALSE(k[1].sm_pct);
    const std::string table = format_kernels(k, 1);
    CHECK(table.find("neptune_split_k_partial") != std::string::npos);
    CHECK(table.find("10.00") != std::string::npos);  // mean of 8 and 12 us
    CHECK(table.find("... and 1 more kernels") != std::string::npos);
    CHECK_THROWS_WITH_AS(parse_ncu_csv("==ERROR== no kernels were profiled\n"), doctest::Contains("\"Kernel Name\""),
                         std::invalid_argument);
}

TEST_CASE("bench profiler: a raw page as ncu wrote it on an H200 (decode_gqa 1,1024, three launches)") {
    // `ncu --import R --csv --page raw --metrics gpu__time_duration.sum` on the H200 (ncu of CUDA 13.0,
    // driver 580.159.04), verbatim: the unit row says "us", the values carry six decimals.
    const std::string csv =
        R"x("ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum")x"
        "\n"
        R"x("","","","","","","","","","","","us")x"
        "\n"
        R"x("0","755","neptune_bench","127.0.0.1","neptune_split_k","1","7","(32, 1, 1)","(6, 8, 1)","0","9.0","12.352000")x"
        "\n"
        R"x("1","755","neptune_bench","127.0.0.1","neptune_split_k","1","7","(32, 1, 1)","(6, 8, 1)","0","9.0","12.256000")x"
        "\n"
        R"x("2","755","neptune_bench","127.0.0.1","neptune_split_k","1","7","(32, 1, 1)","(6, 8, 1)","0","9.0","12.384000")x"
        "\n";
    const std::vector<KernelSummary> k = parse_ncu_csv(csv);
    REQUIRE(k.size() == 1);
    CHECK(k[0].name == "neptune_split_k");
    CHECK(k[0].launches == 3);
    CHECK(k[0].total_us == doctest::Approx(12.352 + 12.256 + 12.384));
    CHECK_FALSE(k[0].sm_pct);  // not collected: n/a, never 0
}

TEST_CASE("bench profiler: ncu's raw page, metric names over a row of units, becomes the per-kernel summary") {
    // As ncu 2025 prints `--import R --csv --page raw`: the launch columns and the collected metrics
    // by name (a subset here, in ncu's order), their units, then one row per launch. Durations in
    // nsecond, usecond and msecond; thousands separators; a launch without the throughputs; a kernel
    // without a duration (n/a in the table, not 0).
    const std::string csv =
        "==PROF== Disconnected from process 42\n"
        R"x("ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_read.sum","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed")x"
        "\n"
        R"x("","","","","","","","","","","","Mbyte","%","%","nsecond","%")x"
        "\n"
        R"x("0","42","neptune_bench","h","neptune_rolling","1","7","(256, 1, 1)","(8, 32, 2)","0","9.0","1,024.50","61.25","58.50","12,345","43.10")x"
        "\n"
        R"x("1","42","neptune_bench","h","neptune_rolling","1","7","(256, 1, 1)","(8, 32, 2)","0","9.0","1,024.50","","","7,655","")x"
        "\n"
        R"x("2","42","neptune_bench","h","void at::native::(anonymous namespace)::softmax_warp_forward<float, 2>(float *, int)","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","12.00","10.00","9.00","","5.00")x"
        "\n";
    const std::vector<KernelSummary> k = parse_ncu_csv(csv);
    REQUIRE(k.size() == 2);
    CHECK(k[0].name == "neptune_rolling");
    CHECK(k[0].launches == 2);
    CHECK(k[0].timed == 2);
    CHECK(k[0].total_us == doctest::Approx(20.0));  // 12,345 + 7,655 ns
    CHECK(*k[0].sm_pct == doctest::Approx(43.1));  // the one launch that reports it
    CHECK(*k[0].memory_pct == doctest::Approx(61.25));
    CHECK(*k[0].dram_pct == doctest::Approx(58.5));
    CHECK(k[1].name == "void at::native::(anonymous namespace)::softmax_warp_forward<float, 2>(float *, int)");
    CHECK(k[1].timed == 0);
    CHECK(*k[1].sm_pct == doctest::Approx(5.0));
    const std::string table = format_kernels(k, 2);
    INFO(table);
    CHECK(table.find("20.0") != std::string::npos);
    CHECK(table.find("10.00") != std::string::npos);  // mean of 12.345 and 7.655 us
    CHECK(table.find("43.1") != std::string::npos);
    CHECK(table.find("n/a") != std::string::npos);  // the softmax's duration
    CHECK(table.find(" 0.0 ") == std::string::npos);

    // Units as the row gives them: microseconds and milliseconds; a throughput not in % is not one.
    const std::string other_units =
        R"x("ID","Kernel Name","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed")x"
        "\n"
        R"x("","","usecond","")x"
        "\n"
        R"x("0","k","2.50","40")x"
        "\n";
    const std::vector<KernelSummary> u = parse_ncu_csv(other_units);
    REQUIRE(u.size() == 1);
    CHECK(u[0].total_us == doctest::Approx(2.5));
    CHECK_FALSE(u[0].sm_pct);
    const std::string ms = R"x("ID","Kernel Name","gpu__time_duration.sum")x"
                           "\n"
                           R"x("","","msecond")x"
                           "\n"
                           R"x("0","k","1.5")x"
                           "\n";
    CHECK(parse_ncu_csv(ms).at(0).total_us == doctest::Approx(1500.0));
}

TEST_CASE("bench profiler: nsys's kernel summary is read by column name") {
    const std::string csv =
        " ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n"
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
        "70.0,7000,2,3500.0,3500.0,3000,4000,707.1,neptune_rolling\n"
        "30.0,3000,3,1000.0,1000.0,900,1100,100.0,\"void cutlass::Kernel<T, 2>(Params)\"\n";
    const std::vector<KernelSummary> k = parse_nsys_csv(csv);
    REQUIRE(k.size() == 2);
    CHECK(k[0].name == "neptune_rolling");
    CHECK(k[0].total_us == doctest::Approx(7.0));
    CHECK(k[1].name == "void cutlass::Kernel<T, 2>(Params)");
    CHECK(k[1].launches == 3);
}

TEST_CASE("bench profiler: the profiler is chosen by name and its absence is explained") {
    CHECK_THROWS_WITH_AS(find_profiler("perf"), doctest::Contains("'perf' is not auto, nsys or ncu"),
                         std::invalid_argument);
    const std::string old = std::getenv("PATH");
    setenv("PATH", "/nonexistent", 1);
    CHECK_THROWS_WITH_AS(find_profiler("nsys"), doctest::Contains("nsys is not on the PATH"), std::invalid_argument);
    // A fake ncu on the PATH is found, and the commands carry ncu's options (clocks as they are, every process).
    const std::string dir = temp_path("bin");
    CHECK(run_command({"/bin/mkdir", "-p", dir}) == 0);
    std::ofstream(dir + "/ncu") << "#!/bin/sh\nexit 0\n";
    CHECK(run_command({"/bin/chmod", "+x", dir + "/ncu"}) == 0);
    setenv("PATH", dir.c_str(), 1);
    const Profiler p = find_profiler("auto");
    CHECK(p.kind == ProfilerKind::Ncu);
    CHECK(p.path == dir + "/ncu");
    const std::vector<std::string> cmd = profile_command(p, "out/x", {"bench", "profile"});
    CHECK(cmd == std::vector<std::string>{dir + "/ncu", "--clock-control", "none", "--target-processes", "all",
                                          "--force-overwrite", "--export", "out/x", "bench", "profile"});
    CHECK(report_file(p, "out/x") == "out/x.ncu-rep");
    CHECK(summary_command(p, "out/x.ncu-rep") ==
          std::vector<std::string>{dir + "/ncu", "--import", "out/x.ncu-rep", "--csv", "--page", "raw"});
    setenv("PATH", old.c_str(), 1);
    CHECK(run_command({"rm", "-rf", dir}) == 0);
}

TEST_CASE("bench processes: commands run without a shell and report their exit status") {
    CHECK(run_command({"true"}) == 0);
    CHECK(run_command({"sh", "-c", "exit 5"}) == 5);
    CHECK(run_command({"/nonexistent/program"}) == 127);
    const CommandOutput o = capture_command({"sh", "-c", "echo out; echo err >&2"}, true);
    CHECK(o.status == 0);
    CHECK(o.output.find("out") != std::string::npos);
    CHECK(o.output.find("err") != std::string::npos);
    CHECK(capture_command({"printf", "a b"}).output == "a b");
    CHECK(find_on_path("sh").find("/sh") != std::string::npos);
    CHECK(find_on_path("no_such_program_here").empty());
}

TEST_CASE("bench baselines: the server answers, fails, times out and dies one request at a time") {
    const std::string script = temp_path("fake_server.py");
    std::ofstream(script) << fake_server;
    BaselineServer s("python3", script, 2.0);
    const nlohmann::json r = s.request({"ok", "x", "y"});
    CHECK(r["n"] == 3);
    CHECK(s.starts() == 1);
    CHECK_THROWS_WITH_AS(s.request({"fail"}), doctest::Contains("bad inputs: q.bin"), BaselineError);
    CHECK_THROWS_WITH_AS(s.request({"garbled"}), doctest::Contains("not JSON"), BaselineError);
    CHECK(s.request({"ok"})["n"] == 1);  // the same server still serves
    CHECK(s.starts() == 1);
    CHECK_THROWS_WITH_AS(s.request({"hang"}), doctest::Contains("did not answer within 2 s"), BaselineError);
    CHECK(s.request({"ok"})["n"] == 1);  // a new server
    CHECK(s.starts() == 2);
    CHECK_THROWS_WITH_AS(s.request({"die"}), doctest::Contains("exited with status 3"), BaselineError);
    CHECK(s.request({"ok"})["n"] == 1);
    CHECK(s.starts() == 3);
    std::remove(script.c_str());

    BaselineServer missing("/nonexistent/python3", script, 2.0);
    CHECK_THROWS_AS(missing.request({"ok"}), BaselineError);
}

TEST_CASE("bench baselines: baselines.py --serve answers a bad request without ending") {
    const char *src = std::getenv("NEPTUNE_SOURCE_ROOT");
    REQUIRE_MESSAGE(src != nullptr, "NEPTUNE_SOURCE_ROOT must name the repository (meson test sets it)");
    BaselineServer s("python3", std::string(src) + "/apps/neptune_bench/baselines.py", 60.0);
    CHECK_THROWS_WITH_AS(s.request({"--op", "prefill_causal"}), doctest::Contains("bad request"), BaselineError);
    CHECK_THROWS_WITH_AS(s.request({"--op", "prefill_causal", "--batch", "1", "--seq", "8", "--impl", "sdpa_magic"}),
                         doctest::Contains("--impl: unknown"), BaselineError);
    CHECK(s.starts() == 1);
}
