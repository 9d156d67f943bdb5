// Neptune's generator main: Halide's generate_filter_main (every flag of docs/design/halide.md, generators: -g, -f, -n,
// -o, -e, -r, target=..., key=value), then, for a library whose pipeline has Neptune extern stages,
// the side outputs that show what was embedded:
//   <n>.neptune.json    a manifest: each stage, its kernel sets (GPU family, codes) and kernels
//                       with the registers, shared memory and spills ptxas reported
//   <n>.<stage>.<arch>[.<keys>x<stages>].fatbin / .cu / .tir / .log
//                       the image embedded in the library, its CUDA, tile program, nvcc's log
//                       (split-K stages: one set per tuning, named by its keys per tile and stages)
// The manifest is written for every library built with -n (an empty "stages" list when there are
// none), so a build system can name it as an output.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "Halide.h"
#include "neptune/GpuPipeline.h"
#include "neptune/CompileCuda.h"

namespace {

std::string flag_value(int argc, char **argv, const char *flag) {
    for (int i = 1; i + 1 < argc; i++)
        if (std::strcmp(argv[i], flag) == 0) return argv[i + 1];
    return "";
}

bool write(const std::string &path, const std::string &contents) {
    std::ofstream f(path, std::ios::binary);
    f << contents;
    if (!f) std::fprintf(stderr, "neptune gen: cannot write %s\n", path.c_str());
    return bool(f);
}

int write_side_outputs(const std::string &dir, const std::string &base) {
    nlohmann::json manifest = {{"library", base}, {"stages", nlohmann::json::array()}};
    bool ok = true;
    for (const neptune::ExternStageInfo &s : neptune::extern_stages_built()) {
        const nlohmann::json descriptor = nlohmann::json::parse(s.descriptor);
        nlohmann::json stage = {{"name", s.name},
                                {"extern_function", s.extern_function},
                                {"descriptor_id", descriptor.at("id")},
                                {"sets", nlohmann::json::array()}};
        for (size_t k = 0; k < s.sets.size(); k++) {
            const neptune::ExternStageInfo::KernelSet &set = s.sets[k];
            // Split-K stages carry a set per tuning: its keys per tile and stages name it. A row
            // chain's ladder shares one image (and source, log) among its sets: the kernel names them.
            const nlohmann::json &sd = descriptor.at("sets").at(k);
            const int holder = sd.at("image_of").get<int>();
            const std::string stem =
                base + "." + s.name + "." + set.arch +
                (set.stages ? "." + std::to_string(set.tile_keys) + "x" + std::to_string(set.stages) : "");
            const std::string kernel0 = sd.at("kernels").at(0).at("name");
            const bool ladder = holder >= 0 || !sd.at("when").get<std::string>().empty();
            if (!set.cuda.empty()) {
                ok = write(dir + "/" + stem + ".fatbin", set.image) && ok;
                ok = write(dir + "/" + stem + ".cu", set.cuda) && ok;
                ok = write(dir + "/" + stem + ".log", set.compile_log) && ok;
            }
            ok = write(dir + "/" + stem + (ladder ? "." + kernel0 : "") + ".tir", set.tile_program) && ok;
            const std::string &log = holder >= 0 ? s.sets.at(size_t(holder)).compile_log : set.compile_log;
            nlohmann::json kernels = nlohmann::json::array();
            for (const nlohmann::json &kd : sd.at("kernels")) {
                const std::string name = kd.at("name");
                const neptune::internal::ResourceUsage u = neptune::internal::parse_ptxas_report(log, name);
                kernels.push_back({{"name", name},
                                   {"threads", kd.at("threads")},
                                   {"dynamic_shared_bytes", kd.at("shared_bytes")},
                                   {"registers", u.registers},
                                   {"spill_stores", u.spill_stores},
                                   {"spill_loads", u.spill_loads},
                                   {"stack_bytes", u.stack_bytes}});
            }
            stage["sets"].push_back({{"arch", set.arch},
                                     {"codes", set.codes},
                                     {"tile_keys", set.tile_keys},
                                     {"stages", set.stages},
                                     {"fatbin", stem + ".fatbin"},
                                     {"cuda", stem + ".cu"},
                                     {"tile_program", stem + ".tir"},
                                     {"log", stem + ".log"},
                                     {"kernels", kernels}});
        }
        manifest["stages"].push_back(stage);
    }
    ok = write(dir + "/" + base + ".neptune.json", manifest.dump(2) + "\n") && ok;
    return ok ? 0 : 1;
}

}  // namespace

const char usage[] = R"(neptune_gen: Halide's generator main for Neptune's generators.

  neptune_gen -g GENERATOR -f FUNCTION -n BASE -o DIR [-e static_library,c_header,...] target=T [param=value ...]
  neptune_gen -r RUNTIME -e static_library -o DIR target=T

Generators: prefill_attention, decode_attention, softmax, logsumexp, norm, performer (generators/README.md
lists their parameters). Flags are Halide's (docs/design/halide.md, generators); with -n and -o, Neptune
also writes BASE.neptune.json and, per extern stage and kernel set (a GPU family; for decode, a tuning of
it), the embedded fatbin, its CUDA, tile program and nvcc log into DIR.
Targets spell their CPU features and CUDA capability, e.g.
  x86-64-linux-sse41-avx-avx2-fma-f16c-cuda-cuda_capability_86-strict_float-no_runtime
)";

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            std::fputs(usage, stdout);
            return 0;
        }
    int rc = 0;
    try {
        rc = Halide::Internal::generate_filter_main(argc, argv);
    } catch (const Halide::Error &e) {  // not a std::exception (docs/design/halide.md)
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    } catch (const std::exception &e) {  // neptune::CompileError and friends
        std::fprintf(stderr, "neptune gen: %s\n", e.what());
        return 1;
    }
    if (rc != 0) return rc;
    const std::string dir = flag_value(argc, argv, "-o"), base = flag_value(argc, argv, "-n");
    if (dir.empty() || base.empty()) return 0;  // -r runtimes, --help, listings
    return write_side_outputs(dir, base);
}
