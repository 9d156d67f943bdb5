#include "Profile.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/core.h>

#include "Native.h"
#include "Provenance.h"
#include "neptune/Check.h"
#include "neptune/reference/Reference.h"

namespace neptune::bench {

using nlohmann::json;

namespace {

// The row-wise reductions (one row of a [rows, cols] tensor per output row), whose baselines are
// torch eager and torch.compile rather than the attention libraries.
bool is_row_operator(const OperatorSpec &spec) { return row_wise(spec.family); }
// Operators whose PyTorch baselines are the expression a user writes, eager and compiled.
bool has_torch_baselines(const OperatorSpec &spec) {
    return is_row_operator(spec) || spec.family == Family::LinearCrossEntropy;
}

}  // namespace

const std::vector<std::string> &python_baselines() {
    static const std::vector<std::string> names = {"sdpa_flash", "sdpa_cudnn",  "sdpa_efficient",
                                                   "flex",       "torch_eager", "torch_compile"};
    return names;
}

bool python_baseline_applies(const std::string &impl, const OperatorSpec &spec) {
    const bool row_impl = impl == "torch_eager" || impl == "torch_compile";
    return row_impl == has_torch_baselines(spec);
}

ImplSelection parse_impls(const std::string &list) {
    std::vector<std::string> known;
    for (const NativeEntry &e : native_baselines()) known.push_back(e.name);
    for (const std::string &p : python_baselines()) known.push_back(p);
    ImplSelection s;
    if (list == "none" || list.empty()) return s;
    std::vector<std::string> want;
    if (list == "all") {
        want = known;
    } else {
        for (size_t b = 0; b <= list.size();) {
            size_t e = list.find(',', b);
            if (e == std::string::npos) e = list.size();
            if (e > b) want.push_back(list.substr(b, e - b));
            b = e + 1;
        }
    }
    std::string names;
    for (const std::string &k : known) names += (names.empty() ? "" : ", ") + k;
    for (const std::string &w : want) {
        if (w == "neptune") continue;  // always measured
        bool native = false, python = false;
        for (const NativeEntry &e : native_baselines()) native = native || e.name == w;
        for (const std::string &p : python_baselines()) python = python || p == w;
        if (!native && !python)
            throw std::invalid_argument("--impl: unknown implementation '" + w + "'; known: " + names +
                                        " (or all, none)");
        std::vector<std::string> &into = native ? s.native : s.python;
        if (std::find(into.begin(), into.end(), w) == into.end()) into.push_back(w);
    }
    return s;
}

namespace {

// The first rows of `runs`, at most `limit` of them.
std::vector<RowRun> first_rows(const std::vector<RowRun> &runs, int64_t limit) {
    std::vector<RowRun> out;
    for (const RowRun &r : runs) {
        if (limit <= 0) break;
        out.push_back({r.first, std::min(r.second, limit)});
        limit -= out.back().second;
    }
    return out;
}

// Errors of an output against the fp64 reference on the common rows and against Neptune's output.
void measure_errors(ImplResult &r, const OperatorInstance &inst, const std::vector<RowRun> &rows,
                    const std::vector<HostTensor> &out, const std::vector<HostTensor> &ref,
                    const std::vector<HostTensor> *neptune) {
    const ErrorStats e = compare_rows(inst, rows, out, ref)[0].error;
    r.ref_max_abs = e.max_abs;
    r.ref_rms = e.rms_abs;
    r.ref_rel_rms = e.rel_rms();
    r.nonfinite = 0;
    for (double v : out[0].values) r.nonfinite += std::isfinite(v) ? 0 : 1;
    if (neptune) r.max_abs_vs_neptune = compare(out[0].values, (*neptune)[0].values).max_abs;
    judge_correctness(r);
}

void write_raw(const std::string &path, const HostTensor &t) {
    std::vector<char> buf(size_t(t.desc.numel()) * size_t(dtype_bytes(t.desc.dtype)));
    t.store(buf.data());
    std::ofstream f(path, std::ios::binary);
    f.write(buf.data(), std::streamsize(buf.size()));
    if (!f) throw std::runtime_error("cannot write " + path);
}

// The files baselines.py reads (apps/neptune_bench/README.md, "Files").
void write_baseline_case(const std::string &dir, const OperatorInstance &inst, const std::vector<HostTensor> &inputs,
                         const HostTensor &neptune_out, const std::vector<RowRun> &rows,
                         const std::vector<HostTensor> &ref) {
    for (const HostTensor &x : inputs) write_raw(dir + "/" + x.desc.name + ".bin", x);
    write_raw(dir + "/neptune_out.bin", neptune_out);
    // Values per reference row: a row of the output (attention's head dim, softmax's columns), or one
    // value for per-row outputs (log-sum-exp, loss).
    const int64_t width = inst.outputs[0].numel() / inst.rows;
    json jr = {{"rows", json::array()}, {"values", json::array()}};
    for (const RowRun &r : rows)
        for (int64_t row = r.first; row < r.first + r.second; row++) {
            jr["rows"].push_back(row);
            jr["values"].push_back(
                std::vector<double>(ref[0].values.begin() + row * width, ref[0].values.begin() + (row + 1) * width));
        }
    std::ofstream(dir + "/reference_rows.json") << jr.dump();
    if (inst.spec.family == Family::LinearCrossEntropy) {
        const json meta = {{"op", inst.spec.name},       {"family", "linear_ce"},
                           {"batch", inst.batch},        {"seq", inst.seq},
                           {"hidden", inst.spec.hidden}, {"dtype", dtype_name(inst.inputs[0].dtype)},
                           {"out_dtype", "f32"}};
        std::ofstream(dir + "/meta.json") << meta.dump(1);
        return;
    }
    if (is_row_operator(inst.spec)) {
        const json meta = {{"op", inst.spec.name},
                           {"family", "row"},
                           {"batch", inst.batch},
                           {"seq", inst.seq},
                           {"dtype", dtype_name(inst.inputs[0].dtype)},
                           {"out_dtype", dtype_name(inst.outputs[0].dtype)},
                           {"eps", inst.spec.eps}};
        std::ofstream(dir + "/meta.json") << meta.dump(1);
        return;
    }
    const AttentionSpec &at = inst.spec.attention;
    const json meta = {{"op", inst.spec.name},
                       {"batch", inst.batch},
                       {"seq", inst.seq},
                       {"q_heads", at.q_heads},
                       {"kv_heads", at.kv_heads},
                       {"seq_q", inst.input("q").shape[2]},
                       {"seq_kv", attention_keys(inst)},
                       {"head_dim", at.head_dim_qk},
                       {"mask", mask_name(at.mask)},
                       {"window", at.window},
                       {"mod", score_mod_name(at.mod)},
                       {"softcap", at.softcap},
                       {"scale", at.score_scale()},
                       {"decode", at.decode},
                       {"page_size", at.page_size}};
    std::ofstream(dir + "/meta.json") << meta.dump(1);
}

ImplResult failed(const std::string &impl, const std::string &why) {
    ImplResult r;
    r.impl = impl;
    r.reason = why;
    r.correct = false;
    return r;
}

}  // namespace

PointResult measure_point(const OperatorInstance &inst, const PointOptions &opt, BaselineServer *server,
                          json *baseline_doc) {
    const auto t0 = std::chrono::steady_clock::now();
    const OperatorSpec &spec = inst.spec;
    PointResult p;
    p.op = spec.name;
    p.batch = inst.batch;
    p.seq = inst.seq;
    p.unit = memory_bound(spec) ? "TB/s" : "TFLOP/s";
    p.work = memory_bound(spec) ? operator_bytes(inst) : operator_flops(inst);
    p.date = utc_now();
    auto finish = [&]() -> PointResult {
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return p;
    };

    // 1. Neptune: compiled, run once, checked on the sampled rows before anything is timed.
    const std::vector<HostTensor> inputs = make_inputs(inst, opt.seed);
    std::vector<HostTensor> ref = make_outputs(inst);
    const std::vector<RowRun> runs = choose_rows(inst, 2e9);
    for (const RowRun &r : runs) reference::compute_rows(inst, inputs, ref, r.first, r.second);
    const std::vector<RowRun> common = first_rows(runs, common_reference_rows);
    std::unique_ptr<NativeImpl> neptune;
    std::vector<HostTensor> nout;
    ImplResult nres;
    nres.impl = "neptune";
    try {
        neptune = make_neptune(inst, opt.gpu);
        if (opt.dump) fmt::print("{}", neptune->dump());
        fmt::print("{}", neptune->describe());
        neptune->set_inputs(inputs);
        nout = neptune->run();
    } catch (const std::exception &e) {
        p.failed = true;
        p.error = std::string("neptune: ") + e.what();
        p.results.push_back(failed("neptune", e.what()));
        return finish();
    }
    bool ok = true;
    const std::vector<OutputCheck> checks = compare_rows(inst, runs, nout, ref);
    // No bound tighter than twice the exact answer's own rounding to the output type (softmax over
    // 524288 columns writes f16 values near 2e-6).
    const std::vector<double> floor = rounding_rel_rms(inst, runs, ref);
    for (size_t o = 0; o < nout.size(); o++) {
        const ErrorStats &e = checks[o].error;
        int64_t unwritten = 0;  // outputs are poisoned with NaN before the run
        for (double v : nout[o].values) unwritten += std::isnan(v) ? 1 : 0;
        const double bound = std::max(inst.outputs[o].dtype == DType::F32 ? 1e-3 : 2e-3, 2 * floor.at(o));
        const bool pass = unwritten == 0 && e.nonfinite == 0 && e.rel_rms() <= bound;
        ok = ok && pass;
        fmt::print("check {:<9} rel rms {:.3e} (bound {:g}), max |err| {:.3e}, unwritten {}  {}\n",
                   inst.outputs[o].name, e.rel_rms(), bound, e.max_abs, unwritten, pass ? "ok" : "FAIL");
        if (!pass) fmt::print("  {}\n", e.describe(inst.outputs[o]));
    }
    nres.supported = true;
    nres.peak_extra_bytes = neptune->extra_bytes();
    measure_errors(nres, inst, common, nout, ref, nullptr);
    if (!ok) {
        nres.correct = false;
        p.results.push_back(nres);
        p.failed = true;
        p.error = "neptune's output is off the fp64 reference (not timed)";
        return finish();
    }

    // 2. The native baselines, run and checked on the same inputs.
    struct Native {
        ImplResult r;
        std::unique_ptr<NativeImpl> impl;  // null when unsupported or failed
    };
    std::vector<Native> natives;
    for (const std::string &name : opt.impls.native) {
        Native n;
        n.r.impl = name;
        try {
            for (const NativeEntry &e : native_baselines())
                if (e.name == name) n.impl = e.make(inst, opt.gpu);
            if (!n.impl) throw std::invalid_argument("no native baseline called " + name);
            fmt::print("{}", n.impl->describe());
            n.impl->set_inputs(inputs);
            n.r.supported = true;
            if (kind_of(name) == ImplKind::Bound)
                n.impl->run();  // moves bytes, computes nothing to check
            else
                measure_errors(n.r, inst, common, n.impl->run(), ref, &nout);
        } catch (const Unsupported &e) {
            n.impl.reset();
            n.r.reason = e.what();
        } catch (const std::exception &e) {
            n.impl.reset();
            n.r = failed(name, e.what());
        }
        natives.push_back(std::move(n));
    }

    // 3. Timing, interleaved; the SM clock before and after (docs/design/operators.md, how it is measured: clocks).
    std::vector<NativeImpl *> timed = {neptune.get()};
    std::vector<ImplResult *> timed_res = {&nres};
    for (Native &n : natives)
        if (n.impl) {
            timed.push_back(n.impl.get());
            timed_res.push_back(&n.r);
        }
    p.clocks["before"] = sm_clocks();
    try {
        const std::vector<GpuTiming> t = time_interleaved(timed, opt.repeat, opt.warmup);
        for (size_t i = 0; i < t.size(); i++) {
            timed_res[i]->median_ms = t[i].median_ms;
            timed_res[i]->min_ms = t[i].min_ms;
            timed_res[i]->max_ms = t[i].max_ms;
        }
    } catch (const std::exception &e) {
        p.failed = true;
        p.error = std::string("timing: ") + e.what();
    }
    p.clocks["after"] = sm_clocks();
    p.results.push_back(nres);
    for (Native &n : natives) p.results.push_back(n.r);
    // Free the device memory before the PyTorch process allocates its own.
    natives.clear();
    neptune.reset();
    if (p.failed) return finish();

    // 4. The PyTorch baselines on the same inputs, through baselines.py.
    bool any_python = false;
    for (const std::string &n : opt.impls.python) any_python = any_python || python_baseline_applies(n, spec);
    if (server && any_python) {
        const char *tmp = std::getenv("TMPDIR");
        const std::string root = opt.workdir.empty() ? std::string(tmp && *tmp ? tmp : "/tmp") : opt.workdir;
        const std::string dir =
            fmt::format("{}/neptune_bench_{}_{}_{}x{}", root, ::getpid(), spec.name, inst.batch, inst.seq);
        std::string impls;
        for (const std::string &n : opt.impls.python)
            if (python_baseline_applies(n, spec)) impls += (impls.empty() ? "" : ",") + n;
        try {
            std::filesystem::create_directories(dir);
            write_baseline_case(dir, inst, inputs, nout[0], common, ref);
            const json doc = server->request({"--op", spec.name, "--batch", std::to_string(inst.batch), "--seq",
                                              std::to_string(inst.seq), "--inputs", dir, "--outputs", dir, "--repeat",
                                              std::to_string(opt.repeat), "--impl", impls});
            // The relative RMS of the Python results uses the same reference rows as ours.
            const ErrorStats e = compare_rows(inst, common, nout, ref)[0].error;
            add_baseline_results(p, doc, e.rms_ref);
            if (doc.contains("sm_clock_mhz")) p.clocks["baselines"] = doc["sm_clock_mhz"];
            if (baseline_doc) *baseline_doc = doc;
        } catch (const std::exception &e) {
            for (const std::string &n : opt.impls.python)
                if (python_baseline_applies(n, spec))
                    p.results.push_back(failed(n, std::string("baselines.py: ") + e.what()));
        }
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    return finish();
}

}  // namespace neptune::bench
