// neptune_bench: the operator suite from the command line (apps/neptune_bench/README.md).
//   neptune_bench list
//   neptune_bench check prefill_global 1,8192      CPU: Halide algorithm and fused CPU forms vs fp64
//   neptune_bench emit decode_gqa 1,8192           CPU: tile program, CUDA, PTX, ptxas resources
//   neptune_bench profile prefill_global 1,8192    GPU: Neptune's kernels and the baselines, checked and timed
//   neptune_bench sweep --json sweep.json          GPU: the evaluation's sweeps, resumable; plots
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "Halide.h"
#include "Profile.h"
#include "Profiler.h"
#include "Provenance.h"
#include "Sweep.h"
#include "neptune/Check.h"
#include "neptune/GpuOperator.h"
#include "neptune/Operators.h"
#include "neptune/reference/Reference.h"
#include "neptune/runtime/NeptuneRuntime.h"

namespace {

using namespace neptune;

std::string operator_names() {
    std::string s;
    for (const OperatorSpec &op : operator_suite()) s += (s.empty() ? "" : ", ") + op.name;
    return s;
}

OperatorSpec lookup(const std::string &name) {
    if (auto op = find_operator(name)) return *op;
    throw std::invalid_argument("unknown operator '" + name + "'; known: " + operator_names() +
                                " (neptune_bench list describes them)");
}

int cmd_list() {
    fmt::print("{:<20} {:<7} {:<9} {:<8} {:<12} {}\n", "operator", "heads", "mask", "modifier", "B,S", "description");
    for (const OperatorSpec &op : operator_suite()) {
        const bool attn = op.family == Family::Attention || op.family == Family::Performer;
        const std::string heads = attn ? fmt::format("{}/{}", op.attention.q_heads, op.attention.kv_heads) : "-";
        const std::string shape = attn                                      ? "batch,seq"
                                  : op.family == Family::LinearCrossEntropy ? "tokens,vocab"
                                                                            : "rows,cols";
        fmt::print("{:<20} {:<7} {:<9} {:<8} {:<12} {}\n", op.name, heads,
                   op.family == Family::Attention ? mask_name(op.attention.mask) : "-",
                   op.family == Family::Attention && op.attention.mod != ScoreMod::None
                       ? score_mod_name(op.attention.mod)
                       : "-",
                   shape, op.description);
    }
    fmt::print(
        "\nAttention uses head dim 128 and fp16 by default; decode operators have one query row at the "
        "last position.\n");
    return 0;
}

struct CheckArgs {
    std::string op, shape = "1,8192", json;
    uint64_t seed = 20261129;
    bool rising = false, plan = false;
    double budget = 2e9;
    int tile = 64, chunks = 4;
};

void print_row(const std::string &what, const std::string &out, const ErrorStats &ref, const ErrorStats *unfused,
               bool pass) {
    fmt::print("{:<38} {:<9} {:>11.3e} {:>11.3e} {:>14}  {}\n", what, out, ref.max_abs, ref.rel_rms(),
               unfused ? fmt::format("{:.3e}", unfused->rel_rms()) : std::string("-"), pass ? "ok" : "FAIL");
}

int cmd_check(const CheckArgs &a) {
    const OperatorSpec spec = lookup(a.op);
    const auto [batch, seq] = parse_shape(a.shape);
    const OperatorInstance inst = instantiate(spec, batch, seq);
    CheckOptions opt;
    opt.seed = a.seed;
    opt.style = a.rising ? InputStyle::RisingScores : InputStyle::Normal;
    opt.work_budget = a.budget;

    fmt::print("check {} at {},{} on the CPU (Halide JIT) against the fp64 reference\n", spec.name, batch, seq);
    const auto t0 = std::chrono::steady_clock::now();
    const CheckResult r = check_algorithm_on_cpu(inst, opt);
    if (r.rows_checked < inst.rows)
        fmt::print("rows checked: {} of {} (a sample: {} runs over evenly spaced (batch, head) blocks)\n",
                   r.rows_checked, inst.rows, r.runs.size());
    else
        fmt::print("rows checked: all {}\n", inst.rows);
    fmt::print("{:<38} {:<9} {:>11} {:>11} {:>14}  {}\n", "variant", "output", "max |err|", "rel rms", "vs unfused f32",
               "verdict");

    bool ok = true;
    nlohmann::json out = {{"op", spec.name},   {"batch", batch},
                          {"seq", seq},        {"rows_checked", r.rows_checked},
                          {"rows", inst.rows}, {"variants", nlohmann::json::array()}};
    nlohmann::json plain = {{"variant", "unfused"}, {"outputs", nlohmann::json::array()}};
    for (size_t o = 0; o < r.outputs.size(); o++) {
        const TensorDesc &d = inst.outputs[o];
        const ErrorStats &e = r.outputs[o].error;
        const bool pass = tolerance_for(d.dtype).accepts(e);
        ok = ok && pass;
        print_row(fmt::format("unfused algorithm ({})", dtype_name(d.dtype)), d.name, e, nullptr, pass);
        if (!pass) fmt::print("  {}\n", e.describe(d));
        plain["outputs"].push_back(
            {{"name", d.name}, {"max_abs", e.max_abs}, {"rel_rms", e.rel_rms()}, {"pass", pass}});
    }
    out["variants"].push_back(plain);

    for (const FusedVariant v : {FusedVariant{false, a.tile, 1}, FusedVariant{true, a.tile, a.chunks}}) {
        const FusedCheckResult f = check_fused_on_cpu(inst, v, opt);
        if (a.plan && !v.split_k) fmt::print("\n{}\n", f.plan);
        nlohmann::json jv = {{"variant", v.name()}, {"outputs", nlohmann::json::array()}};
        for (size_t o = 0; o < f.vs_reference.size(); o++) {
            const ErrorStats &e = f.vs_reference[o].error, &u = f.vs_unfused[o].error;
            const bool pass =
                tolerance_for(DType::F32).accepts(e) && u.nonfinite == 0 && u.rel_rms() <= fused_rel_rms_bound;
            ok = ok && pass;
            print_row("fused " + v.name() + " (f32)", f.vs_reference[o].output, e, &u, pass);
            if (!pass) fmt::print("  vs unfused: {}\n", u.describe(inst.outputs[o]));
            jv["outputs"].push_back({{"name", f.vs_reference[o].output},
                                     {"max_abs", e.max_abs},
                                     {"rel_rms", e.rel_rms()},
                                     {"rel_rms_vs_unfused", u.rel_rms()},
                                     {"pass", pass}});
        }
        out["variants"].push_back(jv);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out["seconds"] = secs;
    fmt::print("{} in {:.1f} s (fused variants must match the unfused f32 algorithm to a relative RMS of {:g})\n",
               ok ? "check passed" : "check FAILED", secs, fused_rel_rms_bound);
    if (!a.json.empty()) {
        std::ofstream f(a.json);
        if (!f) throw std::runtime_error("cannot write " + a.json);
        f << out.dump(1) << "\n";
    }
    return ok ? 0 : 1;
}

struct ProfileArgs {
    std::string op, shape = "1,8192", json, baselines, python = "python3", impls = "all", profile_dir,
                    profiler = "auto";
    bench::PointOptions point;
    double baseline_timeout = 600;
    bool no_baselines = false, append = false;
};

// The command line without `--profile DIR` and `--profiler X`: what the profiler runs.
std::vector<std::string> without_profile_options(const std::vector<std::string> &args) {
    std::vector<std::string> out;
    for (size_t i = 0; i < args.size(); i++) {
        const std::string &s = args[i];
        if (s == "--profile" || s == "--profiler") {
            i++;
            continue;
        }
        if (s.rfind("--profile=", 0) == 0 || s.rfind("--profiler=", 0) == 0) continue;
        out.push_back(s);
    }
    return out;
}

// Runs this very command under nsys or ncu, then prints the report's path and a per-kernel summary.
int profile_under_profiler(const ProfileArgs &a, const OperatorInstance &inst, const std::vector<std::string> &args) {
    const bench::Profiler prof = bench::find_profiler(a.profiler);
    std::error_code ec;
    std::filesystem::create_directories(a.profile_dir, ec);
    if (ec || !std::filesystem::is_directory(a.profile_dir))
        throw std::invalid_argument("--profile: cannot create the folder '" + a.profile_dir + "' (" + ec.message() +
                                    ")");
    if (!gpu_available()) {
        fmt::print(stderr, "neptune_bench profile: no CUDA device here ({}); nothing to profile\n",
                   neptune_last_error());
        return 3;
    }
    std::vector<std::string> child = without_profile_options(args);
    child[0] = std::filesystem::read_symlink("/proc/self/exe").string();
    const std::string base = a.profile_dir + "/" + fmt::format("{}_{}x{}", inst.spec.name, inst.batch, inst.seq);
    const std::vector<std::string> cmd = bench::profile_command(prof, base, child);
    std::string line;
    for (const std::string &c : cmd) line += (line.empty() ? "" : " ") + c;
    fmt::print("profile: {}\n", line);
    std::fflush(stdout);
    const int rc = bench::run_command(cmd);
    const std::string report = bench::report_file(prof, base);
    if (!std::filesystem::exists(report)) {
        fmt::print(stderr, "neptune_bench profile: the profiler wrote no report {} (exit {})\n", report, rc);
        return rc ? rc : 1;
    }
    fmt::print("\nprofiler report: {}\n", std::filesystem::absolute(report).string());
    const bench::CommandOutput csv = bench::capture_command(bench::summary_command(prof, report));
    try {
        const std::vector<bench::KernelSummary> k = prof.kind == bench::ProfilerKind::Ncu
                                                        ? bench::parse_ncu_csv(csv.output)
                                                        : bench::parse_nsys_csv(csv.output);
        fmt::print("{} kernels profiled; the longest in total:\n{}", k.size(), bench::format_kernels(k, 30));
    } catch (const std::invalid_argument &e) {
        fmt::print("no kernel summary ({}; the profiler's export exited {})\n", e.what(), csv.status);
    }
    return rc;
}

int cmd_profile(const ProfileArgs &a, const char *argv0, const std::vector<std::string> &args) {
    const OperatorSpec spec = lookup(a.op);
    const auto [batch, seq] = parse_shape(a.shape);
    const OperatorInstance inst = instantiate(spec, batch, seq);
    bench::PointOptions opt = a.point;
    opt.impls = bench::parse_impls(a.no_baselines ? "none" : a.impls);
    if (!a.profile_dir.empty()) return profile_under_profiler(a, inst, args);
    if (!gpu_available()) {
        fmt::print(stderr,
                   "neptune_bench profile: no CUDA device here ({}).\nUse 'neptune_bench check {} {},{}' for "
                   "the CPU path.\n",
                   neptune_last_error(), spec.name, batch, seq);
        return 3;
    }
    // --append adds the point and its provenance to an existing result file (a table of points measured
    // one command at a time); otherwise the file holds this point alone.
    bench::ResultFile file;
    if (a.append && !a.json.empty() && std::filesystem::exists(a.json)) file = bench::read_result_file(a.json);
    const int run_index = int(file.runs.size());
    file.runs.push_back(bench::provenance(args));
    const nlohmann::json &run = file.runs.back();
    fmt::print("profile {} at {},{} on {}, driver {}, NVRTC {}\n", spec.name, batch, seq,
               run["gpu"].is_null() ? "?" : run["gpu"]["name"].get<std::string>(),
               run["driver"].is_null() ? "?" : run["driver"].get<std::string>(),
               run["nvrtc"].is_null() ? "?" : run["nvrtc"].get<std::string>());
    const std::string script =
        a.baselines.empty() ? bench::repo_file(argv0, "apps/neptune_bench/baselines.py") : a.baselines;
    std::unique_ptr<bench::BaselineServer> server;
    if (!opt.impls.python.empty() && !script.empty())
        server = std::make_unique<bench::BaselineServer>(a.python, script, a.baseline_timeout);
    else if (!opt.impls.python.empty())
        fmt::print("baselines.py not found next to the binary or in the repository; --baselines names it\n");
    nlohmann::json doc;
    bench::PointResult p = bench::measure_point(inst, opt, server.get(), &doc);
    server.reset();
    if (!doc.is_null()) bench::add_baseline_provenance(file.runs.back(), doc);
    p.run = run_index;
    fmt::print("\n{}", p.failed ? "" : bench::format_table(p));
    if (p.failed) fmt::print(stderr, "neptune_bench profile: {}\n", p.error);
    file.points.push_back(p);
    if (!a.json.empty()) bench::write_result_file(a.json, file);
    return p.failed ? 1 : 0;
}

struct EmitArgs {
    std::string op, shape = "1,8192", arch = "sm_90", out;
    GpuOptions gpu;
};

int cmd_emit(const EmitArgs &a) {
    const OperatorSpec spec = lookup(a.op);
    const auto [batch, seq] = parse_shape(a.shape);
    const OperatorInstance inst = instantiate(spec, batch, seq);
    const EmittedOperator e = emit_operator(inst, a.gpu, a.arch);
    if (!a.out.empty()) {
        std::system(("mkdir -p '" + a.out + "'").c_str());
        std::ofstream(a.out + "/" + spec.name + ".tir") << e.tile_program;
        std::ofstream(a.out + "/" + spec.name + ".cu") << e.cuda;
        std::ofstream(a.out + "/" + spec.name + ".ptx") << e.ptx;
        std::ofstream(a.out + "/" + spec.name + ".ptxas.txt") << e.ptxas_log;
        std::ofstream(a.out + "/" + spec.name + ".cubin", std::ios::binary)
            .write(e.cubin.data(), std::streamsize(e.cubin.size()));
        fmt::print("wrote {0}/{1}.tir, .cu, .ptx, .ptxas.txt and .cubin\n", a.out, spec.name);
    } else {
        fmt::print("{}\n{}\n", e.tile_program, e.cuda);
    }
    fmt::print("{:<26} {:>9} {:>12} {:>12} {:>11} {:>7}   ({}, nvcc -Xptxas -v)\n", "kernel", "registers", "shared (B)",
               "spill stores", "spill loads", "stack", a.arch);
    for (const KernelResources &r : e.resources)
        fmt::print("{:<26} {:>9} {:>12} {:>12} {:>11} {:>7}\n", r.kernel, r.registers, r.shared_bytes, r.spill_stores,
                   r.spill_loads, r.stack_bytes);
    return 0;
}

// The tile parameters profile and emit share; the defaults of 0 differ (see GpuOptions, emit_operator).
// They are expert overrides: every default is chosen per GPU and shape, and each override is kept
// because it measured better somewhere (docs/design/options.md).
void add_kernel_options(CLI::App *sub, GpuOptions &o, const std::string &chunks_default,
                        const std::string &min_blocks_default) {
    CLI::Option_group *g =
        sub->add_option_group("Expert overrides (defaults are chosen per GPU and shape)",
                              "Tuning overrides for experiments; the defaults need none (docs/design/options.md)");
    g->add_option("--block-n", o.block_n,
                  "keys per KV tile; 0 = 64 for prefill (192 for sm_90a's wgmma at head dims up to 128, 128 with "
                  "a window), 32 for decode (64 where groups leave one block per SM, on sm_90a at head dims up to 128)")
        ->capture_default_str();
    g->add_option("--chunks", o.chunks, "split-K chunks for decode; 0 = " + chunks_default)->capture_default_str();
    g->add_option("--min-blocks", o.min_blocks,
                  "blocks per SM the register allocation must allow; 0 = " + min_blocks_default)
        ->capture_default_str();
    g->add_option("--wgmma", o.wgmma, "sm_90a: 1 forces wgmma + TMA, 0 keeps mma.sync, -1 = by shape")
        ->capture_default_str()
        ->check(CLI::Range(-1, 1));
    g->add_option("--overlap", o.overlap,
                  "wgmma: 0 none, 1 async dots overlap the softmax, 2 and warpgroups take turns; -1 = 2")
        ->capture_default_str()
        ->check(CLI::Range(-1, 2));
    g->add_option("--stages", o.stages, "K/V tiles in flight (cp.async stages or TMA ring buffers); 0 = default")
        ->capture_default_str()
        ->check(CLI::Range(0, 8));
    g->add_option("--fold-combine", o.fold_combine,
                  "decode: 1 the last block of each (batch, KV head) group combines the chunks (one kernel), "
                  "0 a separate combine kernel; -1 = 1")
        ->capture_default_str()
        ->check(CLI::Range(-1, 1));
    g->add_option("--cluster-merge", o.cluster_merge,
                  "decode on sm_90a: 1 a group's chunk blocks are a thread block cluster and merge through shared "
                  "memory, 0 through the workspace and an arrival counter; -1 = 1 where the chunks are 2 to 8 "
                  "(profile; emit: 0)")
        ->capture_default_str()
        ->check(CLI::Range(-1, 1));
    g->add_option("--tma-loads", o.tma_loads,
                  "sm_90a mma.sync kernels (decode, prefill off the wgmma path): 1 the pipelined K/V copies by "
                  "TMA (one thread per tile, an mbarrier per buffer), 0 by cp.async; -1 = default")
        ->capture_default_str()
        ->check(CLI::Range(-1, 1));
    g->add_option("--row-threads", o.row_threads,
                  "row-wise operators: threads per row (or per block of a row's cluster), a power of two from 32 "
                  "to 1024; 0 = by the row length")
        ->capture_default_str();
    g->add_option("--row-cluster", o.row_cluster,
                  "row-wise operators: blocks per row, 1 to 8 (above 1: a thread block cluster, sm_90a); 0 = by "
                  "the row length (a cluster for rows longer than 32768 columns on sm_90a)")
        ->capture_default_str()
        ->check(CLI::Range(0, 8));
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{
        "neptune_bench: Neptune's operator suite (list, check and emit on the CPU; profile and sweep on the GPU)"};
    app.require_subcommand(1);
    app.fallthrough();

    app.add_subcommand("list", "List the operators, their heads, masks and modifiers");

    CheckArgs ca;
    CLI::App *check = app.add_subcommand(
        "check",
        "On the CPU: the Halide algorithm, and its fused CPU forms (rolling and split-K), against the fp64 "
        "reference and each other; prints max and RMS errors, exits 1 if out of tolerance");
    check->add_option("OP", ca.op, "operator name (see list)")->required();
    check->add_option("SHAPE", ca.shape, "B,S: batch,seq for attention; rows,cols for row-wise operators")
        ->capture_default_str();
    check->add_option("--seed", ca.seed, "random seed of the inputs")->capture_default_str();
    check->add_flag("--rising", ca.rising, "inputs whose row maximum rises along the keys (exercises rescaling)");
    check->add_flag("--plan", ca.plan, "print the fused plan: maps, derived repairs and their proofs");
    check->add_option("--tile", ca.tile, "tile of the fused variants")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    check->add_option("--chunks", ca.chunks, "chunks of the split-K variant")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    check->add_option("--budget", ca.budget, "reference flops to spend; larger shapes are checked on sampled rows")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    check->add_option("--json", ca.json, "also write the results to this JSON file");

    ProfileArgs pa;
    CLI::App *profile = app.add_subcommand(
        "profile",
        "On the GPU: Neptune's kernels checked against the fp64 reference, then timed (CUDA events, L2 "
        "flushed, median) beside the baselines on the same inputs (unfused cuBLAS here, PyTorch's SDPA "
        "backends and FlexAttention through baselines.py), every output checked; a table with ratios");
    profile->add_option("OP", pa.op, "operator name (see list)")->required();
    profile->add_option("SHAPE", pa.shape, "B,S: batch,seq")->capture_default_str();
    profile->add_option("--repeat", pa.point.repeat, "timed repeats per implementation")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    profile->add_option("--warmup", pa.point.warmup, "untimed calls per implementation before timing")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    profile->add_option("--seed", pa.point.seed, "random seed of the inputs")->capture_default_str();
    add_kernel_options(profile, pa.point.gpu, "from the SM count", "3 for prefill, any for decode");
    profile->add_option("--arch", pa.point.gpu.arch, "sm_80 (mma.sync) or sm_90a (wgmma + TMA); default: the device's");
    profile->add_option("--json", pa.json, "also write the results (and their provenance) to this JSON file");
    profile->add_flag("--append", pa.append,
                      "with --json: add this point to the file's points instead of replacing them");
    profile
        ->add_option("--impl", pa.impls,
                     "baselines: all, none, or a comma list of cublas_unfused, halide_unfused, sdpa_flash, "
                     "sdpa_cudnn, sdpa_efficient, flex (attention); halide_cuda, torch_eager, torch_compile "
                     "(row-wise operators); copy (the bandwidth bound of memory-bound operators). Each operator "
                     "runs those that apply to it")
        ->capture_default_str();
    profile->add_flag("--no-baselines", pa.no_baselines, "time Neptune only (same as --impl none)");
    profile->add_option("--baselines", pa.baselines, "the PyTorch driver (default: apps/neptune_bench/baselines.py)");
    profile->add_option("--python", pa.python, "the Python that has torch")->capture_default_str();
    profile->add_option("--baseline-timeout", pa.baseline_timeout, "seconds the PyTorch driver may take")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    profile->add_option("--workdir", pa.point.workdir,
                        "folder for the inputs handed to baselines.py (default $TMPDIR or /tmp)");
    profile->add_option("--profile", pa.profile_dir,
                        "run all of it under NVIDIA's profiler (nsys if on the PATH, else ncu) and write the report "
                        "into this folder; prints a per-kernel summary");
    profile->add_option("--profiler", pa.profiler, "auto, nsys or ncu")->capture_default_str();
    profile->add_flag("--dump", pa.point.dump, "print the tile program and the CUDA source");

    bench::SweepArgs sa;
    std::string sweep_ops = "all", sweep_names = "seq,batch", seq_values = "256,512,1024,2048,4096,8192,16384,32768",
                batch_values = "1,2,4,8,16,32", sweep_impls = "all";
    CLI::App *sweep = app.add_subcommand(
        "sweep",
        "On the GPU: the evaluation's sweeps (sequence 256..32768 at batch 1, batch 1..32 at sequence 8192) "
        "for the attention operators, each point as profile measures it, into one JSON file that a rerun "
        "resumes; progress per point; plots (PNG, SVG) and a Markdown table with --plots");
    sweep->add_option("--ops", sweep_ops, "all, or a comma list of attention operators")->capture_default_str();
    sweep->add_option("--sweeps", sweep_names, "seq, batch or both")->capture_default_str();
    sweep->add_option("--seq-values", seq_values, "sequence lengths of the sequence sweep")->capture_default_str();
    sweep->add_option("--seq-batch", sa.spec.seq_batch, "batch of the sequence sweep")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sweep->add_option("--batch-values", batch_values, "batches of the batch sweep")->capture_default_str();
    sweep->add_option("--batch-seq", sa.spec.batch_seq, "sequence of the batch sweep")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sa.point.repeat = 15;  // the original's repeats per sweep point
    sweep->add_option("--repeat", sa.point.repeat, "timed repeats per implementation and point")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sweep->add_option("--warmup", sa.point.warmup, "untimed calls per implementation")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sweep->add_option("--seed", sa.point.seed, "random seed of the inputs")->capture_default_str();
    sweep->add_option("--impl", sweep_impls, "baselines, as for profile")->capture_default_str();
    sweep->add_option("--json", sa.json, "the result file: created, or resumed when it exists")->capture_default_str();
    sweep->add_option("--plots", sa.plots, "write the plots and the Markdown table into this folder at the end");
    sweep
        ->add_option("--budget", sa.budget_s,
                     "seconds: start no point once the longest point so far would overrun this (0: no limit)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sweep->add_option("--cooldown-ms", sa.cooldown_ms, "pause between points")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sweep->add_flag("--retry-failed", sa.retry_failed, "measure again the points recorded as failed");
    sweep->add_flag("--dry-run", sa.dry_run, "list the points still to measure and stop (no GPU needed)");
    sweep->add_option("--baselines", sa.baselines, "the PyTorch driver (default: apps/neptune_bench/baselines.py)");
    sweep->add_option("--python", sa.python, "the Python that has torch (and matplotlib for --plots)")
        ->capture_default_str();
    sweep->add_option("--baseline-timeout", sa.baseline_timeout_s, "seconds the PyTorch driver may take per point")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sweep->add_option("--workdir", sa.point.workdir, "folder for the inputs handed to baselines.py");
    add_kernel_options(sweep, sa.point.gpu, "from the SM count", "3 for prefill, any for decode");

    EmitArgs ea;
    CLI::App *emit = app.add_subcommand(
        "emit",
        "Without a GPU: lower an operator and print or write its tile program, CUDA source, PTX (NVRTC) "
        "and ptxas resource report (nvcc)");
    emit->add_option("OP", ea.op, "operator name (see list)")->required();
    emit->add_option("SHAPE", ea.shape, "B,S: batch,seq")->capture_default_str();
    emit->add_option("--arch", ea.arch, "sm_80, sm_90 or sm_90a")->capture_default_str();
    emit->add_option("--out", ea.out, "write OP.tir, OP.cu, OP.ptx, OP.ptxas.txt and OP.cubin into this folder");
    add_kernel_options(emit, ea.gpu, "4", "no register cap");

    const std::vector<std::string> args(argv, argv + argc);
    try {
        app.parse(argc, argv);
        if (app.got_subcommand("list")) return cmd_list();
        if (app.got_subcommand("check")) return cmd_check(ca);
        if (app.got_subcommand("profile")) return cmd_profile(pa, argv[0], args);
        if (app.got_subcommand("emit")) return cmd_emit(ea);
        if (app.got_subcommand("sweep")) {
            sa.spec.ops = bench::parse_ops(sweep_ops);
            sa.spec.sweeps = bench::parse_sweeps(sweep_names);
            sa.spec.seq_values = bench::parse_values(seq_values, "--seq-values");
            sa.spec.batch_values = bench::parse_values(batch_values, "--batch-values");
            sa.point.impls = bench::parse_impls(sweep_impls);
            if (sa.baselines.empty()) sa.baselines = bench::repo_file(argv[0], "apps/neptune_bench/baselines.py");
            sa.plot_script = bench::repo_file(argv[0], "scripts/plot_sweep.py");
            return bench::run_sweep(sa, args);
        }
    } catch (const CLI::ParseError &e) { return app.exit(e); } catch (const std::invalid_argument &e) {
        fmt::print(stderr, "neptune_bench: {}\n", e.what());
        return 2;
    } catch (const std::exception &e) {
        fmt::print(stderr, "neptune_bench: error: {}\n", e.what());
        return 1;
    } catch (const Halide::Error &e) {
        fmt::print(stderr, "neptune_bench: Halide error: {}\n", e.what());
        return 1;
    }
    return 0;
}
