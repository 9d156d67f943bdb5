// neptune_bench: the operator suite from the command line.
//   neptune_bench list
//   neptune_bench check prefill_global 1,8192      CPU: Halide algorithm vs fp64 reference
//   neptune_bench profile prefill_global 1,8192    GPU kernels and baselines (needs the GPU backend)
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "Halide.h"
#include "neptune/Check.h"
#include "neptune/Operators.h"

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

int cmd_profile(const std::string &op_name, const std::string &shape_text) {
    const OperatorSpec spec = lookup(op_name);
    const auto [batch, seq] = parse_shape(shape_text);
    (void)instantiate(spec, batch, seq);  // reports bad extents first
    fmt::print(stderr,
               "neptune_bench profile: no GPU backend exists yet, so there are no Neptune kernels to time.\n"
               "Use 'neptune_bench check {} {},{}' for the CPU check of the algorithm.\n",
               spec.name, batch, seq);
    return 3;
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

    std::string pop, pshape = "1,8192";
    CLI::App *profile = app.add_subcommand("profile", "Time Neptune's GPU kernels against the baselines");
    profile->add_option("OP", pop, "operator name (see list)")->required();
    profile->add_option("SHAPE", pshape, "B,S: batch,seq for attention; rows,cols for row-wise operators")
        ->capture_default_str();

    try {
        app.parse(argc, argv);
        if (app.got_subcommand("list")) return cmd_list();
        if (app.got_subcommand("check")) return cmd_check(ca);
        if (app.got_subcommand("profile")) return cmd_profile(pop, pshape);
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
