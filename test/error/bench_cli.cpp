// neptune_bench's command line: unknown operators, malformed shapes, --help, and profile without a backend.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>

namespace {

struct Outcome {
    int status;
    std::string output;
};

Outcome run_bench(const std::string &args) {
    const char *bench = std::getenv("NEPTUNE_BENCH");
    REQUIRE_MESSAGE(bench != nullptr, "NEPTUNE_BENCH must name the neptune_bench binary (meson test sets it)");
    const std::string cmd = std::string(bench) + " " + args + " 2>&1";
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
    for (const char *sub : {"", "list ", "check ", "profile ", "emit "}) {
        const Outcome o = run_bench(std::string(sub) + "--help");
        INFO(sub << ": " << o.output);
        CHECK(o.status == 0);
        CHECK(o.output.find("Usage") != std::string::npos);
    }
    CHECK(run_bench("").status != 0);
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
    CHECK(o.output.find("neptune_split_k_partial") != std::string::npos);
    CHECK(o.output.find("registers") != std::string::npos);
    CHECK(run_bench("emit softmax 4,100").output.find("lowers attention operators") != std::string::npos);
}
