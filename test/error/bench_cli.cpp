// neptune_bench's command line: unknown operators, malformed shapes, --help, profile and sweep without
// a GPU, every bad option of profile and sweep, and a sweep's plan resumed from its file (--dry-run).
#include <doctest/doctest.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>

namespace {

struct Outcome {
    int status;
    std::string output;
};

// Runs the benchmark with `args`; `env` ("NAME=value ...") is set for it by the shell.
Outcome run_bench(const std::string &args, const std::string &env = "") {
    const char *bench = std::getenv("NEPTUNE_BENCH");
    REQUIRE_MESSAGE(bench != nullptr, "NEPTUNE_BENCH must name the neptune_bench binary (meson test sets it)");
    const std::string cmd = env + " " + std::string(bench) + " " + args + " 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    std::array<char, 4096> buf{};
    while (fgets(buf.data(), int(buf.size()), p)) out += buf.data();
    const int st = pclose(p);
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

}  // namespace

TEST_CASE("bench cli: an unknown operator is rejected with the list of known ones") {
    const Outcome o = run_bench("check prefill_nothing 1,8");
    CHECK(o.status == 2);
    CHECK(o.output.find("unknown operator 'prefill_nothing'") != std::string::npos);
    CHECK(o.output.find("prefill_global") != std::string::npos);
}

TEST_CASE("bench cli: malformed shapes are rejected with the expected form") {
    for (const char *shape : {"8192", "1,", "a,b", "0,8", "1,2,3"}) {
        const Outcome o = run_bench(std::string("check softmax ") + shape);
        INFO(shape << ": " << o.output);
        CHECK(o.status == 2);
        CHECK(o.output.find("expected B,S") != std::string::npos);
    }
}

TEST_CASE("bench cli: every subcommand has --help, and a missing subcommand is an error") {
    for (const char *sub : {"", "list ", "check ", "profile ", "emit ", "sweep "}) {
        const Outcome o = run_bench(std::string(sub) + "--help");
        INFO(sub << ": " << o.output);
        CHECK(o.status == 0);
        CHECK(o.output.find("Usage") != std::string::npos);
    }
    CHECK(run_bench("").status != 0);
}

TEST_CASE("bench cli: the tuning flags are expert overrides in a group of their own; removed options are refused") {
    for (const char *sub : {"profile ", "emit "}) {
        const Outcome o = run_bench(std::string(sub) + "--help");
        INFO(sub << ": " << o.output);
        const size_t group = o.output.find("Expert overrides (defaults are chosen per GPU and shape)");
        REQUIRE(group != std::string::npos);
        for (const char *flag : {"--block-n", "--chunks", "--min-blocks", "--stages", "--fold-combine", "--tma-loads"})
            CHECK(o.output.find(flag, group) != std::string::npos);
    }
    // Options that never measured better than their defaults are gone (docs/design/options.md).
    for (const char *gone : {"--warps 2", "--key-warps 2", "--two-pass-combine 1", "--warp-rows-combine 0",
                             "--interleave-chunks 0", "--unroll-chunks 2", "--tma-l2-promotion 128"}) {
        const Outcome o = run_bench(std::string("emit decode_causal 1,100 --arch sm_90 ") + gone);
        INFO(gone << ": " << o.output);
        CHECK(o.status != 0);
    }
}

TEST_CASE("bench cli: list names every operator; profile without a GPU says so and exits 3") {
    const Outcome l = run_bench("list");
    CHECK(l.status == 0);
    for (const char *n : {"prefill_windowed", "decode_softcap", "layernorm_matmul", "performer"})
        CHECK(l.output.find(n) != std::string::npos);
    const Outcome p = run_bench("profile prefill_global 1,8192");
    CHECK(p.status == 3);
    CHECK(p.output.find("no CUDA device") != std::string::npos);
}

TEST_CASE("bench cli: check runs the CPU path and reports max and RMS errors") {
    const Outcome o = run_bench("check decode_gqa 2,300");
    INFO(o.output);
    CHECK(o.status == 0);
    CHECK(o.output.find("rel rms") != std::string::npos);
    CHECK(o.output.find("check passed") != std::string::npos);
}

TEST_CASE("bench cli: emit lowers an operator without a GPU and prints its ptxas resources") {
    const Outcome o = run_bench("emit decode_causal 1,100 --arch sm_90");
    INFO(o.output);
    CHECK(o.status == 0);
    CHECK(o.output.find("kernel neptune_split_k\n") != std::string::npos);  // the combine folded in
    CHECK(o.output.find("if last of chunks arrivals at ws_arrivals") != std::string::npos);
    CHECK(o.output.find("registers") != std::string::npos);
    const Outcome two = run_bench("emit decode_causal 1,100 --arch sm_90 --fold-combine 0");
    CHECK(two.status == 0);
    CHECK(two.output.find("kernel neptune_split_k_partial") != std::string::npos);
    CHECK(two.output.find("kernel neptune_split_k_combine") != std::string::npos);
    // Row-wise operators lower to the row-chain kernel; the others are refused by name.
    const Outcome rows = run_bench("emit softmax 4,100");
    CHECK(rows.status == 0);
    CHECK(rows.output.find("kernel row_chain\n") != std::string::npos);
    CHECK(run_bench("emit performer 1,100").output.find("lowers attention and row-wise operators") !=
          std::string::npos);
    // KV tiles that mma's k16 steps cannot cover are refused by the lowering, not by NVRTC.
    for (const char *bad : {"--block-n 24", "--block-n 8"}) {
        const Outcome o = run_bench(std::string("emit decode_causal 1,100 --arch sm_90 ") + bad);
        INFO(bad << ": " << o.output);
        CHECK(o.status != 0);
        CHECK(o.output.find("KV tiles of") != std::string::npos);
        CHECK(o.output.find("a positive multiple of 16") != std::string::npos);
        CHECK(o.output.find("nvrtc") == std::string::npos);
    }
}

namespace {

std::string temp_path(const char *name) {
    return std::string("/tmp/neptune_cli_") + name + "_" + std::to_string(getpid());
}

void expect(const std::string &args, int status, const std::string &phrase) {
    const Outcome o = run_bench(args);
    INFO(args << ": " << o.output);
    CHECK(o.status == status);
    CHECK(o.output.find(phrase) != std::string::npos);
}

}  // namespace

TEST_CASE("bench cli: profile's bad options are refused with the reason, before any GPU work") {
    expect("profile prefill_causal 1,64 --impl sdpa_flash,magic", 2, "unknown implementation 'magic'");
    expect("profile prefill_causal 1,64 --repeat 0", 105, "--repeat");
    expect("profile prefill_causal 1,64 --profile /tmp/x --profiler perf", 2, "'perf' is not auto, nsys or ncu");
    expect("profile prefill_causal 1,64 --profile /tmp/x --profiler nsys", 2, "nsys is not on the PATH");
    // With a profiler at hand (a stand-in ncu on the PATH), an unusable report folder is named,
    // and without a GPU there is nothing to profile.
    const std::string bin = temp_path("bin");
    REQUIRE(std::system(
                ("mkdir -p " + bin + " && printf '#!/bin/sh\\nexit 0\\n' > " + bin + "/ncu && chmod +x " + bin + "/ncu")
                    .c_str()) == 0);
    const std::string path = "PATH=" + bin + ":$PATH";
    const Outcome bad_dir = run_bench("profile decode_gqa 1,64 --profile /proc/no/such/folder", path);
    INFO(bad_dir.output);
    CHECK(bad_dir.status == 2);
    CHECK(bad_dir.output.find("cannot create the folder '/proc/no/such/folder'") != std::string::npos);
    const Outcome no_gpu = run_bench("profile decode_gqa 1,64 --profile " + temp_path("reports"), path);
    INFO(no_gpu.output);
    CHECK(no_gpu.status == 3);
    CHECK(no_gpu.output.find("nothing to profile") != std::string::npos);
    std::system(("rm -rf " + bin + " " + temp_path("reports")).c_str());
}

TEST_CASE("bench cli: sweep's bad options are refused with the reason") {
    expect("sweep --dry-run --ops softmax", 2, "'softmax' is not an attention operator");
    expect("sweep --dry-run --ops prefill_causal,prefill_nothing", 2, "'prefill_nothing' is not an attention operator");
    expect("sweep --dry-run --sweeps seq,heads", 2, "'heads' is not seq or batch");
    expect("sweep --dry-run --seq-values 256,0", 2, "--seq-values: '0' is not a positive integer");
    expect("sweep --dry-run --batch-values 1,two", 2, "--batch-values: 'two' is not a positive integer");
    expect("sweep --dry-run --impl flex,magic", 2, "unknown implementation 'magic'");
    const std::string foreign = temp_path("foreign.json");
    std::ofstream(foreign) << R"({"results": []})";
    expect("sweep --dry-run --json " + foreign, 2, "not a neptune_bench result file");
    std::remove(foreign.c_str());
    // Without a GPU a sweep with points to measure stops and says so.
    expect("sweep --ops decode_gqa --sweeps batch --batch-values 1 --json " + temp_path("none.json"), 3,
           "no CUDA device");
}

TEST_CASE("bench cli: a sweep resumes from its file: --dry-run lists only the points it lacks") {
    const std::string file = temp_path("sweep.json");
    std::ofstream(file) << R"({"schema": "neptune-bench/1", "runs": [{}], "points": [
        {"op": "decode_gqa", "batch": 1, "seq": 8192, "status": "ok", "results": []},
        {"op": "decode_gqa", "batch": 4, "seq": 8192, "status": "failed", "error": "out of memory", "results": []}]})";
    const std::string cmd = "sweep --dry-run --ops decode_gqa --sweeps batch --batch-values 1,2,4 --json " + file;
    const Outcome o = run_bench(cmd);
    INFO(o.output);
    CHECK(o.status == 0);
    CHECK(o.output.find("3 points planned, 2 already in") != std::string::npos);
    CHECK(o.output.find("decode_gqa 2,8192") != std::string::npos);
    CHECK(o.output.find("decode_gqa 1,8192") == std::string::npos);
    CHECK(o.output.find("decode_gqa 4,8192") == std::string::npos);
    const Outcome retry = run_bench(cmd + " --retry-failed");
    CHECK(retry.output.find("decode_gqa 4,8192") != std::string::npos);
    // The whole default plan: ten operators, 13 points each.
    CHECK(run_bench("sweep --dry-run --json " + temp_path("empty.json")).output.find("130 points planned") !=
          std::string::npos);
    std::remove(file.c_str());
}

TEST_CASE("bench cli: a complete sweep file needs no GPU: --plots turns it into plots and a table") {
    const std::string file = temp_path("done.json"), plots = temp_path("plots");
    std::ofstream(file) << R"({"schema": "neptune-bench/1", "runs": [{}], "points": [
        {"op": "decode_gqa", "batch": 1, "seq": 8192, "unit": "TB/s", "work": 1e8, "status": "ok", "results": [
          {"impl": "neptune", "supported": true, "correct": true, "median_ms": 0.05},
          {"impl": "sdpa_cudnn", "supported": true, "correct": true, "median_ms": 0.04}]}]})";
    const Outcome o =
        run_bench("sweep --ops decode_gqa --sweeps batch --batch-values 1 --json " + file + " --plots " + plots);
    INFO(o.output);
    CHECK(o.status == 0);
    CHECK(o.output.find("0 to measure") != std::string::npos);
    // scripts/plot_sweep.py ran on the file: 1e8 bytes in 0.05 ms is 2.00 TB/s, 0.04 / 0.05 = 0.80x.
    std::ifstream md(plots + "/sweep_tables.md");
    const std::string table((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    if (o.output.find("no matplotlib") != std::string::npos) {
        MESSAGE("matplotlib is missing (scripts/setup.sh installs it): the plots were not made");
    } else {
        CHECK(table.find("| decode_gqa | 1 | TB/s | 2.00 | 2.50 | 0.80x (sdpa_cudnn) |") != std::string::npos);
        CHECK(std::ifstream(plots + "/sweep_batch.svg").good());
    }
    std::system(("rm -rf " + file + " " + plots).c_str());
}
