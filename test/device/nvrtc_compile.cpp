/** \file
 * The device library compiles under NVRTC from in-memory headers alone, as the JIT path will use
 * it: compile_check.cu (every op for f16 and bf16, and the attention kernel) for sm_80, sm_90 and
 * sm_90a, with no spills and no stack frames. Needs no GPU: NVRTC and ptxas run on the CPU. */
#include <doctest/doctest.h>
#include <nvrtc.h>

#include "HopperKernels.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

/** The source tree, from the test's environment (set by test/device/meson.build). */
fs::path source_root() {
    const char *root = std::getenv("NEPTUNE_SOURCE_ROOT");
    REQUIRE_MESSAGE(root != nullptr, "NEPTUNE_SOURCE_ROOT is not set");
    return root;
}

std::string read_text(const fs::path &p) {
    std::ifstream in(p);
    REQUIRE_MESSAGE(in.good(), "cannot read " << p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/** Headers as NVRTC takes them: contents and the names #include directives use. */
struct header_set {
    std::vector<std::string> names, texts;

    void add_folder(const fs::path &dir, const std::string &prefix) {
        for (const fs::directory_entry &e : fs::directory_iterator(dir))
            if (e.path().extension() == ".cuh") {
                names.push_back(prefix + e.path().filename().string());
                texts.push_back(read_text(e.path()));
            }
    }
};

/** The library under "neptune/device/<file>", the test kernels under their bare names. */
header_set all_headers() {
    header_set h;
    h.add_folder(source_root() / "include" / "neptune" / "device", "neptune/device/");
    h.add_folder(source_root() / "test" / "device", "");
    return h;
}

struct compile_result {
    nvrtcResult status = NVRTC_SUCCESS;
    std::string log;
    size_t cubin_bytes = 0;
};

compile_result compile(const std::string &source, const header_set &h, const std::string &arch) {
    std::vector<const char *> texts, names;
    for (size_t i = 0; i < h.names.size(); ++i) {
        texts.push_back(h.texts[i].c_str());
        names.push_back(h.names[i].c_str());
    }
    nvrtcProgram prog;
    REQUIRE(nvrtcCreateProgram(&prog, source.c_str(), "compile_check.cu", static_cast<int>(texts.size()), texts.data(),
                               names.data()) == NVRTC_SUCCESS);
    const std::string arch_opt = "--gpu-architecture=" + arch;
    const char *opts[] = {arch_opt.c_str(), "-std=c++17", "--ptxas-options=-v"};
    compile_result r;
    r.status = nvrtcCompileProgram(prog, 3, opts);
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    r.log.resize(log_size);
    nvrtcGetProgramLog(prog, r.log.data());
    if (r.status == NVRTC_SUCCESS) nvrtcGetCUBINSize(prog, &r.cubin_bytes);
    nvrtcDestroyProgram(&prog);
    return r;
}

}  // namespace

TEST_CASE("device library: includes nothing outside itself") {
    const fs::path dir = source_root() / "include" / "neptune" / "device";
    const std::regex include_line(R"(^\s*#\s*include\s*(\S+))");
    int headers = 0;
    for (const fs::directory_entry &e : fs::directory_iterator(dir)) {
        if (e.path().extension() != ".cuh") continue;
        ++headers;
        std::istringstream text(read_text(e.path()));
        for (std::string line; std::getline(text, line);) {
            std::smatch m;
            if (!std::regex_search(line, m, include_line)) continue;
            CAPTURE(e.path().filename().string());
            CHECK_MESSAGE(m[1].str().rfind("\"neptune/device/", 0) == 0, "includes " << m[1].str());
        }
    }
    CHECK(headers >= 6);
}

TEST_CASE("device library: every op compiles under NVRTC from in-memory headers, without spills") {
    const header_set headers = all_headers();
    const std::string source = read_text(source_root() / "test" / "device" / "compile_check.cu");
    const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
    for (const char *arch : {"sm_80", "sm_90", "sm_90a"}) {
        CAPTURE(arch);
        const compile_result r = compile(source, headers, arch);
        INFO(r.log);
        REQUIRE(r.status == NVRTC_SUCCESS);
        CHECK(r.cubin_bytes > 0);
        int kernels = 0;
        for (std::sregex_iterator it(r.log.begin(), r.log.end(), frame), end; it != end; ++it, ++kernels)
            CHECK_MESSAGE((*it)[0].str() == "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                          "kernel " << kernels << ": " << (*it)[0].str());
        CHECK(kernels == 46);  // compile_check.cu's instantiations: 22 per element type, 2 reduce kernels
    }
}

TEST_CASE("device library: the Hopper test kernels (TMA, wgmma) compile for sm_90a without spills") {
    const compile_result r = compile(neptune::testing::hopper_kernels, all_headers(), "sm_90a");
    INFO(r.log);
    REQUIRE(r.status == NVRTC_SUCCESS);
    CHECK(r.log.find("bytes spill stores") != std::string::npos);  // ptxas reported the kernels
    const std::regex spills(R"(([1-9]\d*) bytes spill (stores|loads))");
    CHECK_FALSE(std::regex_search(r.log, spills));
}
