#include "AppSupport.h"

#include <HalideRuntime.h>
#include <HalideRuntimeCuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>

#include "neptune/CheckRows.h"
#include "neptune/reference/Reference.h"
#include "neptune/runtime/HalideBuffers.h"
#include "neptune/runtime/NeptuneRuntime.h"

namespace neptune::apps {

namespace {

using Halide::Runtime::Buffer;

std::mutex message_lock;
std::string last_message;

// Halide's runtime reports through halide_error before the library returns the error code.
void keep_message(void *, const char *message) {
    std::lock_guard<std::mutex> hold(message_lock);
    last_message = message;
}

std::string take_message() {
    std::lock_guard<std::mutex> hold(message_lock);
    std::string m = last_message;
    last_message.clear();
    while (!m.empty() && m.back() == '\n') m.pop_back();
    return m;
}

// A dense buffer holding `t` (dimensions innermost first), on the device too when `device`.
Buffer<void> make_buffer(const HostTensor &t, const halide_device_interface_t *device) {
    Buffer<void> b = to_runtime_buffer(t);
    if (device && b.copy_to_device(device) != 0)
        throw std::runtime_error("copying " + t.desc.name + " to the device failed: " + take_message());
    return b;
}

// NaN (or -1) everywhere: an element the library does not write fails the check.
HostTensor poisoned(const TensorDesc &d) {
    HostTensor t(d);
    std::fill(t.values.begin(), t.values.end(), d.dtype == DType::I32 ? -1.0 : std::nan(""));
    return t;
}

// A clock for one call at a time: CUDA events on the default stream (where Halide's kernels and
// Neptune's run, in one context), or the host's steady clock.
class CallTimer {
public:
    explicit CallTimer(bool gpu) : gpu_(gpu) {
        if (gpu_ && (neptune_event_create(&start_) != NEPTUNE_OK || neptune_event_create(&end_) != NEPTUNE_OK))
            throw std::runtime_error(std::string("creating CUDA events: ") + neptune_last_error());
    }
    ~CallTimer() {
        if (start_) neptune_event_destroy(start_);
        if (end_) neptune_event_destroy(end_);
    }
    CallTimer(const CallTimer &) = delete;
    CallTimer &operator=(const CallTimer &) = delete;

    /** Milliseconds of one call of `f`; `f`'s error code in `rc`. */
    double time(const std::function<int()> &f, int &rc) {
        if (!gpu_) {
            const auto t0 = std::chrono::steady_clock::now();
            rc = f();
            return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }
        float ms = 0;
        if (neptune_event_record(start_, nullptr) != NEPTUNE_OK) throw std::runtime_error(neptune_last_error());
        rc = f();
        if (neptune_event_record(end_, nullptr) != NEPTUNE_OK ||
            neptune_event_elapsed_ms(start_, end_, &ms) != NEPTUNE_OK)
            throw std::runtime_error(std::string("timing with CUDA events: ") + neptune_last_error());
        return double(ms);
    }

private:
    bool gpu_;
    void *start_ = nullptr, *end_ = nullptr;
};

std::string backend_line(bool gpu) {
    if (!gpu) return "host library (backend=host: the fused CPU form, compiled ahead of time)";
    neptune_device_info info{};
    if (neptune_get_device_info(&info) != NEPTUNE_OK) return "GPU library";
    return "GPU library on " + std::string(info.name) + " (compute capability " + std::to_string(info.cc_major) + "." +
           std::to_string(info.cc_minor) + ", " + std::to_string(info.sm_count) + " SMs)";
}

// Every output against the fp64 reference on the rows choose_rows picks; prints one line each.
bool check_outputs(const AppOperator &op, const std::vector<HostTensor> &inputs, Buffers &outs, const Tolerance &bound,
                   double budget) {
    const OperatorInstance &inst = op.inst;
    const std::vector<RowRun> runs = choose_rows(inst, budget);
    std::vector<HostTensor> want = make_outputs(inst), got;
    int64_t rows = 0;
    for (const RowRun &r : runs) {
        reference::compute_rows(inst, inputs, want, r.first, r.second);
        rows += r.second;
    }
    for (size_t o = 0; o < outs.size(); o++) {
        if (outs[o].copy_to_host() != 0) {
            std::printf("copying %s back failed: %s\n", inst.outputs[o].name.c_str(), take_message().c_str());
            return false;
        }
        got.push_back(from_runtime_buffer(outs[o], inst.outputs[o]));
    }
    // No bound tighter than twice the exact answer's own rounding to the output type (softmax over
    // 131072 columns writes f16 values near 1e-5).
    const std::vector<double> floor = rounding_rel_rms(inst, runs, want);
    bool ok = true;
    const std::vector<OutputCheck> checks = compare_rows(inst, runs, got, want);
    for (size_t i = 0; i < checks.size(); i++) {
        const OutputCheck &c = checks[i];
        Tolerance b = bound;
        b.rel_rms = std::max(bound.rel_rms, 2 * floor.at(i));
        const bool pass = b.accepts(c.error);
        std::printf(
            "check vs fp64 (%lld of %lld rows): %s relative RMS %.1e, max scaled %.1e (bounds %.1e, %.0e)%s%s\n",
            static_cast<long long>(rows), static_cast<long long>(inst.rows), c.output.c_str(), c.error.rel_rms(),
            c.error.max_scaled, b.rel_rms, b.max_scaled,
            c.error.nonfinite ? (", " + std::to_string(c.error.nonfinite) + " non-finite or unwritten").c_str() : "",
            pass ? ": ok" : ": WRONG");
        if (!pass) std::printf("  %s\n", c.error.describe(inst.output(c.output)).c_str());
        ok = ok && pass;
    }
    return ok;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

void add_common_options(CLI::App &app, CommonOptions &o) {
    app.add_option("--backend", o.backend,
                   "gpu: the GPU library (fails without a GPU); host: the host library; "
                   "auto: gpu when a GPU is present")
        ->check(CLI::IsMember({"auto", "gpu", "host"}))
        ->capture_default_str();
    app.add_option("--repeats", o.repeats, "timed calls")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--warmup", o.warmup, "untimed calls before timing")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the random inputs")->capture_default_str();
    app.add_option("--check-budget", o.check_budget,
                   "fp64 reference flops to spend; larger problems are checked on sampled rows")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
}

int parse_arguments(CLI::App &app, int argc, char **argv, CommonOptions &o) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) { return app.exit(e) == 0 ? exit_ok : exit_bad_arguments; }
    const bool present = neptune_cuda_available();
    if (o.backend == "gpu" && !present) {
        std::printf("--backend gpu: no CUDA device (%s)\n", neptune_last_error());
        return exit_no_gpu;
    }
    o.gpu = o.backend == "gpu" || (o.backend == "auto" && present);
    return -1;
}

std::string check_shape(const std::string &text) {
    try {
        parse_shape(text);
        return "";
    } catch (const std::invalid_argument &e) { return e.what(); }
}

int run_app(const AppOperator &op, const CommonOptions &o) {
    halide_set_error_handler(keep_message);
    const bool gpu = o.gpu;
    const OperatorInstance &inst = op.inst;
    std::printf("%s\nbackend: %s\n", op.title.c_str(), backend_line(gpu).c_str());
    const LibraryCall &library = gpu ? op.gpu : op.host;
    try {
        const halide_device_interface_t *device = gpu ? halide_cuda_device_interface() : nullptr;
        const std::vector<HostTensor> inputs = make_inputs(inst, o.seed);
        Buffers ins, outs;
        for (const HostTensor &t : inputs) ins.push_back(make_buffer(t, device));
        for (const TensorDesc &d : inst.outputs) outs.push_back(make_buffer(poisoned(d), device));

        auto call = [&]() { return library(ins, outs); };
        auto failed = [&](int rc) {
            std::printf("the library returned %d: %s\n", rc, take_message().c_str());
            return exit_failed;
        };
        if (const int rc = call()) return failed(rc);
        if (!check_outputs(op, inputs, outs, gpu ? op.gpu_tolerance : tolerance_for(inst.outputs[0].dtype),
                           o.check_budget))
            return exit_failed;

        CallTimer timer(gpu);
        std::vector<double> ms;
        for (int n = 0; n < o.warmup + o.repeats; n++) {
            int rc = 0;
            const double t = timer.time(call, rc);
            if (rc) return failed(rc);
            if (n >= o.warmup) ms.push_back(t);
        }
        const double med = median(ms), best = *std::min_element(ms.begin(), ms.end());
        // Throughput as docs/design/operators.md counts work: bytes for memory-bound operators, else FLOPs.
        const bool bytes = memory_bound(inst.spec);
        const double per_s = (bytes ? operator_bytes(inst) : operator_flops(inst)) / (med * 1e-3);
        const bool tera = !bytes && per_s >= 1e12;
        std::printf("time (%s, %d warm-up + %d timed calls): median %.3f ms, min %.3f ms; %.3g %s at the median\n",
                    gpu ? "CUDA events" : "host wall clock", o.warmup, o.repeats, med, best,
                    per_s / (tera ? 1e12 : 1e9),
                    bytes  ? "GB/s"
                    : tera ? "TFLOP/s"
                           : "GFLOP/s");
    } catch (const std::exception &e) {
        std::printf("error: %s\n", e.what());
        return exit_failed;
    }
    std::printf("Success!\n");
    return exit_ok;
}

}  // namespace neptune::apps
