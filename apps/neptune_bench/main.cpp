// neptune_bench: the operator suite from the command line.
//   neptune_bench list
//   neptune_bench check prefill_global 1,8192      CPU: Halide algorithm vs fp64 reference
//   neptune_bench profile prefill_global 1,8192    GPU kernels and baselines (needs the GPU backend)
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "Halide.h"
#include "neptune/Check.h"
#include "gpu/GpuOperator.h"
#include "neptune/Operators.h"
#include "neptune/reference/Reference.h"
#include "neptune/runtime/NeptuneRuntime.h"

namespace {

using namespace neptune;

const char *mask_name(Mask m) {
    switch (m) {
    case Mask::None: return "none";
    case Mask::Causal: return "causal";
    case Mask::Window: return "window";
    }
    return "?";
}

const char *mod_name(ScoreMod m) {
    switch (m) {
    case ScoreMod::None: return "-";
    case ScoreMod::Alibi: return "alibi";
    case ScoreMod::Softcap: return "softcap";
    }
    return "?";
}

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
    fmt::print("{:<20} {:<7} {:<9} {:<8} {:<8} {}\n", "operator", "heads", "mask", "modifier", "B,S", "description");
    for (const OperatorSpec &op : operator_suite()) {
        const bool attn = op.family == Family::Attention || op.family == Family::Performer;
        const std::string heads = attn ? fmt::format("{}/{}", op.attention.q_heads, op.attention.kv_heads) : "-";
        const std::string shape = attn ? "batch,seq" : "rows,cols";
        fmt::print("{:<20} {:<7} {:<9} {:<8} {:<8} {}\n", op.name, heads,
                   op.family == Family::Attention ? mask_name(op.attention.mask) : "-",
                   op.family == Family::Attention ? mod_name(op.attention.mod) : "-", shape, op.description);
    }
    fmt::print("\nAttention uses head dim 128 and fp16 by default; decode operators have one query row at the "
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
    fmt::print("{:<38} {:<9} {:>11} {:>11} {:>14}  {}\n", "variant", "output", "max |err|", "rel rms",
               "vs unfused f32", "verdict");

    bool ok = true;
    nlohmann::json out = {{"op", spec.name}, {"batch", batch}, {"seq", seq}, {"rows_checked", r.rows_checked},
                          {"rows", inst.rows}, {"variants", nlohmann::json::array()}};
    nlohmann::json plain = {{"variant", "unfused"}, {"outputs", nlohmann::json::array()}};
    for (size_t o = 0; o < r.outputs.size(); o++) {
        const TensorDesc &d = inst.outputs[o];
        const ErrorStats &e = r.outputs[o].error;
        const bool pass = tolerance_for(d.dtype).accepts(e);
        ok = ok && pass;
        print_row(fmt::format("unfused algorithm ({})", dtype_name(d.dtype)), d.name, e, nullptr, pass);
        if (!pass) fmt::print("  {}\n", e.describe(d));
        plain["outputs"].push_back({{"name", d.name}, {"max_abs", e.max_abs}, {"rel_rms", e.rel_rms()}, {"pass", pass}});
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
            jv["outputs"].push_back({{"name", f.vs_reference[o].output}, {"max_abs", e.max_abs},
                                     {"rel_rms", e.rel_rms()}, {"rel_rms_vs_unfused", u.rel_rms()}, {"pass", pass}});
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
    std::string op, shape = "1,8192", json, baselines, impls = "sdpa_flash,sdpa_cudnn,sdpa_efficient,flex";
    uint64_t seed = 20261129;
    int repeat = 30;
    GpuOptions gpu;
    bool dump = false, no_baselines = false;
};

std::string default_baselines_script(const char *argv0) {
    // The build tree sits in the repository: build/apps/neptune_bench/neptune_bench.
    std::string exe = argv0;
    const size_t slash = exe.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : exe.substr(0, slash);
    for (const char *rel : {"/../../../apps/neptune_bench/baselines.py", "/baselines.py"}) {
        std::ifstream f(dir + rel);
        if (f) return dir + rel;
    }
    return "";
}

void write_file(const std::string &path, const void *data, size_t bytes) {
    std::ofstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot write " + path);
    f.write(static_cast<const char *>(data), std::streamsize(bytes));
}

int cmd_profile(const ProfileArgs &a, const char *argv0) {
    const OperatorSpec spec = lookup(a.op);
    const auto [batch, seq] = parse_shape(a.shape);
    const OperatorInstance inst = instantiate(spec, batch, seq);
    if (!gpu_available()) {
        fmt::print(stderr, "neptune_bench profile: no CUDA device here ({}).\nUse 'neptune_bench check {} {},{}' for "
                           "the CPU path.\n", neptune_last_error(), spec.name, batch, seq);
        return 3;
    }
    const GpuOptions &go = a.gpu;
    fmt::print("profile {} at {},{} on the GPU\n", spec.name, batch, seq);
    GpuOperator op(inst, go);
    if (a.dump) fmt::print("{}\n{}\n", op.tile_program(), op.cuda_source());
    fmt::print("{}", op.describe());
    const std::vector<HostTensor> inputs = make_inputs(inst, a.seed);
    op.set_inputs(inputs);
    const std::vector<HostTensor> outs = op.run();

    // Correctness first: sampled rows against the fp64 reference; fail loudly.
    std::vector<HostTensor> ref = make_outputs(inst);
    const std::vector<RowRun> runs = choose_rows(inst, 2e9);
    for (const RowRun &r : runs) reference::compute_rows(inst, inputs, ref, r.first, r.second);
    bool ok = true;
    nlohmann::json jout = {{"op", spec.name}, {"batch", batch}, {"seq", seq}, {"outputs", nlohmann::json::array()}};
    const std::vector<OutputCheck> checks = compare_rows(inst, runs, outs, ref);
    for (size_t o = 0; o < outs.size(); o++) {
        const ErrorStats &e = checks[o].error;
        // Every element must have been written (outputs are poisoned with NaN before the run).
        int64_t unwritten = 0;
        for (double v : outs[o].values) unwritten += std::isnan(v) ? 1 : 0;
        const double bound = inst.outputs[o].dtype == DType::F32 ? 1e-3 : 2e-3;
        const bool pass = unwritten == 0 && e.nonfinite == 0 && e.rel_rms() <= bound;
        ok = ok && pass;
        fmt::print("check {:<9} rel rms {:.3e} (bound {:g}), max |err| {:.3e}, unwritten {}  {}\n", inst.outputs[o].name,
                   e.rel_rms(), bound, e.max_abs, unwritten, pass ? "ok" : "FAIL");
        if (!pass) fmt::print("  {}\n", e.describe(inst.outputs[o]));
        jout["outputs"].push_back({{"name", inst.outputs[o].name}, {"rel_rms", e.rel_rms()}, {"max_abs", e.max_abs},
                                   {"unwritten", unwritten}, {"pass", pass}});
    }
    if (!ok) {
        fmt::print(stderr, "neptune_bench profile: {} is wrong on the GPU; not timing it\n", spec.name);
        return 1;
    }
    const GpuTiming t = op.time(a.repeat);
    const bool by_bytes = memory_bound(spec);
    const double work = by_bytes ? operator_bytes(inst) : operator_flops(inst);
    const double rate = work / (t.median_ms * 1e-3) / 1e12;
    const char *unit = by_bytes ? "TB/s" : "TFLOP/s";
    fmt::print("neptune   median {:.4f} ms (min {:.4f}, max {:.4f}, {} repeats, L2 flushed): {:.1f} {}\n", t.median_ms,
               t.min_ms, t.max_ms, t.repeats, rate, unit);
    jout["neptune"] = {{"median_ms", t.median_ms}, {"min_ms", t.min_ms}, {"max_ms", t.max_ms}, {"throughput", rate},
                       {"unit", unit}};

    // Baselines on the same inputs, through the Python driver.
    const std::string script = a.baselines.empty() ? default_baselines_script(argv0) : a.baselines;
    if (!a.no_baselines && !script.empty()) {
        const std::string dir = "/tmp/neptune_bench_" + std::to_string(::getpid());
        std::system(("mkdir -p " + dir).c_str());
        for (const HostTensor &x : inputs) {
            std::vector<char> buf(size_t(x.desc.numel()) * size_t(dtype_bytes(x.desc.dtype)));
            x.store(buf.data());
            write_file(dir + "/" + x.desc.name + ".bin", buf.data(), buf.size());
        }
        std::vector<char> obuf(size_t(outs[0].desc.numel()) * 2);
        outs[0].store(obuf.data());
        write_file(dir + "/neptune_out.bin", obuf.data(), obuf.size());
        const AttentionSpec &at = spec.attention;
        nlohmann::json meta = {{"op", spec.name}, {"batch", batch}, {"seq", seq}, {"q_heads", at.q_heads},
                               {"kv_heads", at.kv_heads}, {"seq_q", inst.input("q").shape[2]}, {"seq_kv", seq},
                               {"head_dim", at.head_dim_qk},
                               {"mask", at.mask == Mask::None ? "none" : (at.mask == Mask::Causal ? "causal" : "window")},
                               {"window", at.window},
                               {"mod", at.mod == ScoreMod::None ? "none" : (at.mod == ScoreMod::Alibi ? "alibi" : "softcap")},
                               {"softcap", at.softcap}, {"scale", at.score_scale()}, {"decode", at.decode}};
        std::ofstream(dir + "/meta.json") << meta.dump(1);
        nlohmann::json rows = {{"rows", nlohmann::json::array()}, {"values", nlohmann::json::array()}};
        const int64_t dv = inst.outputs[0].shape.back();
        for (const RowRun &r : runs)
            for (int64_t row = r.first; row < r.first + r.second && rows["rows"].size() < 256; row++) {
                rows["rows"].push_back(row);
                rows["values"].push_back(std::vector<double>(ref[0].values.begin() + row * dv,
                                                             ref[0].values.begin() + (row + 1) * dv));
            }
        std::ofstream(dir + "/reference_rows.json") << rows.dump();
        const std::string bjson = dir + "/baselines.json";
        const std::string cmd = "python3 " + script + " --op " + spec.name + " --batch " + std::to_string(batch) +
                                " --seq " + std::to_string(seq) + " --inputs " + dir + " --outputs " + dir +
                                " --repeat " + std::to_string(a.repeat) + " --impl " + a.impls + " --json " + bjson;
        fmt::print("baselines: {}\n", cmd);
        std::fflush(stdout);
        const int rc = std::system(cmd.c_str());
        std::ifstream bj(bjson);
        if (rc == 0 && bj) {
            const nlohmann::json b = nlohmann::json::parse(bj);
            jout["baselines"] = b;
            fmt::print("\n{:<16} {:>10} {:>12}  {}\n", "implementation", "ms", unit, "Neptune speedup");
            fmt::print("{:<16} {:>10.4f} {:>12.1f}  {}\n", "neptune", t.median_ms, rate, "1.00");
            for (const auto &r : b["results"]) {
                if (!r.value("supported", false) || r["median_ms"].is_null()) {
                    fmt::print("{:<16} {:>10} {:>12}  unsupported\n", r.value("impl", "?"), "-", "-");
                    continue;
                }
                const double ms = r["median_ms"].get<double>();
                fmt::print("{:<16} {:>10.4f} {:>12.1f}  {:.2f}\n", r.value("impl", "?"), ms, work / (ms * 1e-3) / 1e12,
                           ms / t.median_ms);
            }
        } else {
            fmt::print("baselines did not run (exit {}); see the driver's message above\n", rc);
        }
    }
    if (!a.json.empty()) std::ofstream(a.json) << jout.dump(1) << "\n";
    return 0;
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
        std::ofstream(a.out + "/" + spec.name + ".cubin", std::ios::binary).write(e.cubin.data(), std::streamsize(e.cubin.size()));
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
void add_kernel_options(CLI::App *sub, GpuOptions &o, const std::string &chunks_default,
                        const std::string &min_blocks_default) {
    sub->add_option("--warps", o.warps, "warps per block (16 query rows each); 0 = default")->capture_default_str();
    sub->add_option("--block-n", o.block_n, "keys per KV tile; 0 = 64 for prefill, 32 for decode")
        ->capture_default_str();
    sub->add_option("--chunks", o.chunks, "split-K chunks for decode; 0 = " + chunks_default)->capture_default_str();
    sub->add_option("--min-blocks", o.min_blocks,
                    "blocks per SM the register allocation must allow; 0 = " + min_blocks_default)
        ->capture_default_str();
    sub->add_option("--wgmma", o.wgmma, "sm_90a: 1 forces wgmma + TMA, 0 keeps mma.sync, -1 = by shape")
        ->capture_default_str()
        ->check(CLI::Range(-1, 1));
    sub->add_option("--overlap", o.overlap,
                    "wgmma: 0 none, 1 async dots overlap the softmax, 2 and warpgroups take turns; -1 = 2")
        ->capture_default_str()
        ->check(CLI::Range(-1, 2));
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"neptune_bench: Neptune's operator suite (list, check on the CPU, profile on the GPU)"};
    app.require_subcommand(1);
    app.fallthrough();

    app.add_subcommand("list", "List the operators, their heads, masks and modifiers");

    CheckArgs ca;
    CLI::App *check = app.add_subcommand(
        "check", "On the CPU: the Halide algorithm, and its fused CPU forms (rolling and split-K), against the fp64 "
                 "reference and each other; prints max and RMS errors, exits 1 if out of tolerance");
    check->add_option("OP", ca.op, "operator name (see list)")->required();
    check->add_option("SHAPE", ca.shape, "B,S: batch,seq for attention; rows,cols for row-wise operators")
        ->capture_default_str();
    check->add_option("--seed", ca.seed, "random seed of the inputs")->capture_default_str();
    check->add_flag("--rising", ca.rising, "inputs whose row maximum rises along the keys (exercises rescaling)");
    check->add_flag("--plan", ca.plan, "print the fused plan: maps, derived repairs and their proofs");
    check->add_option("--tile", ca.tile, "tile of the fused variants")->capture_default_str()->check(CLI::PositiveNumber);
    check->add_option("--chunks", ca.chunks, "chunks of the split-K variant")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    check->add_option("--budget", ca.budget, "reference flops to spend; larger shapes are checked on sampled rows")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    check->add_option("--json", ca.json, "also write the results to this JSON file");

    ProfileArgs pa;
    CLI::App *profile = app.add_subcommand(
        "profile", "On the GPU: Neptune's kernels checked against the fp64 reference, then timed (CUDA events, L2 "
                   "flushed, median) beside the PyTorch baselines on the same inputs");
    profile->add_option("OP", pa.op, "operator name (see list)")->required();
    profile->add_option("SHAPE", pa.shape, "B,S: batch,seq")->capture_default_str();
    profile->add_option("--repeat", pa.repeat, "timed repeats")->capture_default_str()->check(CLI::PositiveNumber);
    profile->add_option("--seed", pa.seed, "random seed of the inputs")->capture_default_str();
    add_kernel_options(profile, pa.gpu, "from the SM count", "3 for prefill, any for decode");
    profile->add_option("--arch", pa.gpu.arch, "sm_80 (mma.sync) or sm_90a (wgmma + TMA); default: the device's");
    profile->add_option("--json", pa.json, "also write the results to this JSON file");
    profile->add_option("--baselines", pa.baselines, "the baseline driver (default: apps/neptune_bench/baselines.py)");
    profile->add_option("--impl", pa.impls, "baselines to run")->capture_default_str();
    profile->add_flag("--no-baselines", pa.no_baselines, "time Neptune only");
    profile->add_flag("--dump", pa.dump, "print the tile program and the CUDA source");

    EmitArgs ea;
    CLI::App *emit = app.add_subcommand(
        "emit", "Without a GPU: lower an operator and print or write its tile program, CUDA source, PTX (NVRTC) "
                "and ptxas resource report (nvcc)");
    emit->add_option("OP", ea.op, "operator name (see list)")->required();
    emit->add_option("SHAPE", ea.shape, "B,S: batch,seq")->capture_default_str();
    emit->add_option("--arch", ea.arch, "sm_80, sm_90 or sm_90a")->capture_default_str();
    emit->add_option("--out", ea.out, "write OP.tir, OP.cu, OP.ptx, OP.ptxas.txt and OP.cubin into this folder");
    add_kernel_options(emit, ea.gpu, "4", "no register cap");

    try {
        app.parse(argc, argv);
        if (app.got_subcommand("list")) return cmd_list();
        if (app.got_subcommand("check")) return cmd_check(ca);
        if (app.got_subcommand("profile")) return cmd_profile(pa, argv[0]);
        if (app.got_subcommand("emit")) return cmd_emit(ea);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    } catch (const std::invalid_argument &e) {
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
