// The "no fusion" ablation compiled by a compiler: each attention operator's plain Halide algorithm
// (include/neptune/algorithms), no directive, scheduled for Halide's own CUDA backend (every reduction
// its own kernels, the f32 scores materialised), compiled ahead of time into the <op>_unfused
// libraries (generators/meson.build, backend=unfused). The benchmark calls them on Halide buffers
// that wrap its device memory, in Neptune's CUDA context (NeptuneHalide.h), on the default stream its
// CUDA events time.
#include <HalideBuffer.h>
#include <HalideRuntimeCuda.h>

#include <mutex>
#include <sstream>
#include <string>

#include "Native.h"
#include "decode_alibi_unfused.h"
#include "decode_causal_unfused.h"
#include "decode_softcap_unfused.h"
#include "neptune/runtime/HalideBuffers.h"
#include "neptune/runtime/NeptuneRuntime.h"
#include "prefill_alibi_unfused.h"
#include "prefill_causal_unfused.h"
#include "prefill_global_unfused.h"
#include "prefill_softcap_unfused.h"
#include "prefill_windowed_unfused.h"

namespace neptune::bench {

namespace {

using Argv = int (*)(void **);
using Metadata = const halide_filter_metadata_t *(*)();

/** The library of an operator: prefill_gqa and decode_gqa are the causal ones (the grouping is a
 * run-time extent), everything else by name. */
struct Library {
    const char *name;
    Argv call;
    Metadata metadata;
};

const Library *library_for(const std::string &op) {
    static const Library libs[] = {
        {"prefill_global", prefill_global_unfused_argv, prefill_global_unfused_metadata},
        {"prefill_causal", prefill_causal_unfused_argv, prefill_causal_unfused_metadata},
        {"prefill_gqa", prefill_causal_unfused_argv, prefill_causal_unfused_metadata},
        {"prefill_alibi", prefill_alibi_unfused_argv, prefill_alibi_unfused_metadata},
        {"prefill_softcap", prefill_softcap_unfused_argv, prefill_softcap_unfused_metadata},
        {"prefill_windowed", prefill_windowed_unfused_argv, prefill_windowed_unfused_metadata},
        {"decode_causal", decode_causal_unfused_argv, decode_causal_unfused_metadata},
        {"decode_gqa", decode_causal_unfused_argv, decode_causal_unfused_metadata},
        {"decode_alibi", decode_alibi_unfused_argv, decode_alibi_unfused_metadata},
        {"decode_softcap", decode_softcap_unfused_argv, decode_softcap_unfused_metadata},
    };
    for (const Library &l : libs)
        if (op == l.name) return &l;
    return nullptr;
}

// Halide's runtime reports through halide_error; the call then returns its code. The messages of the
// failing call go into the exception.
std::mutex messages_lock;
std::string messages;
void keep_message(void *, const char *m) {
    std::lock_guard<std::mutex> hold(messages_lock);
    messages += m;
}
std::string take_messages() {
    std::lock_guard<std::mutex> hold(messages_lock);
    std::string m;
    m.swap(messages);
    return m;
}

class HalideUnfused : public NativeImpl {
public:
    HalideUnfused(const OperatorInstance &inst, const Library &lib) : inst_(inst), lib_(lib) {
        check_runtime(neptune_init(), "CUDA");
        static const bool installed = [] {
            halide_set_error_handler(keep_message);
            // The scores (gigabytes at S = 8192) would be allocated and freed on every call otherwise.
            halide_reuse_device_allocations(nullptr, true);
            return true;
        }();
        (void)installed;
        for (const TensorDesc &t : inst.inputs) wrap(t);
        for (const TensorDesc &t : inst.outputs) wrap(t);
        // The arguments in the library's order (its metadata): inputs, then outputs. The buffers have
        // device memory only, so Halide copies nothing on a call.
        const halide_filter_metadata_t *m = lib_.metadata();
        for (int a = 0; a < m->num_arguments; a++) args_.push_back(tensor(m->arguments[a].name).buffer.raw_buffer());
        timer_ = std::make_unique<EventTimer>();
    }

    ~HalideUnfused() override {
        halide_reuse_device_allocations(nullptr, false);  // hands the cached scores back
    }

    void set_inputs(const std::vector<HostTensor> &inputs) override {
        for (const HostTensor &in : inputs) {
            Tensor &t = tensor(in.desc.name);
            std::vector<char> host(t.bytes);
            in.store(host.data());
            check_runtime(neptune_memcpy_htod(t.device, host.data(), t.bytes), "copying " + in.desc.name);
        }
    }

    std::vector<HostTensor> run() override {
        for (const TensorDesc &d : inst_.outputs) {
            Tensor &t = tensor(d.name);
            check_runtime(neptune_memset_d8(t.device, 0xff, t.bytes), "poisoning " + d.name);  // NaN in f16
        }
        call();
        check_runtime(neptune_synchronize(), "running " + std::string(lib_.metadata()->name));
        std::vector<HostTensor> out;
        for (const TensorDesc &d : inst_.outputs) {
            Tensor &t = tensor(d.name);
            std::vector<char> host(t.bytes);
            check_runtime(neptune_memcpy_dtoh(host.data(), t.device, t.bytes), "copying " + d.name);
            out.emplace_back(d);
            out.back().load(host.data());
        }
        return out;
    }

    double time_once() override {
        return timer_->time_ms([this] { call(); });
    }

    std::string describe() const override {
        std::ostringstream os;
        os << "halide_unfused: " << lib_.metadata()->name << " (Halide's CUDA backend, " << lib_.metadata()->target
           << "), every reduction its own kernels, device allocations reused\n";
        return os.str();
    }

private:
    struct Tensor {
        std::string name;
        void *device = nullptr;
        size_t bytes = 0;
        Halide::Runtime::Buffer<void> buffer;
    };

    void wrap(const TensorDesc &d) {
        Tensor t;
        t.name = d.name;
        t.bytes = size_t(d.numel()) * size_t(dtype_bytes(d.dtype));
        check_runtime(neptune_malloc(&t.device, std::max<size_t>(t.bytes, 16)), "allocating " + d.name);
        t.buffer = Halide::Runtime::Buffer<void>(halide_runtime_type(d.dtype), nullptr,
                                                 std::vector<int>(d.shape.rbegin(), d.shape.rend()));
        if (t.buffer.device_wrap_native(halide_cuda_device_interface(), uint64_t(uintptr_t(t.device))) != 0) {
            neptune_free(t.device);
            throw std::runtime_error("wrapping " + d.name + " as a Halide buffer: " + take_messages());
        }
        tensors_.all.push_back(std::move(t));
    }

    Tensor &tensor(const std::string &name) {
        for (Tensor &t : tensors_.all)
            if (t.name == name) return t;
        throw std::logic_error("halide_unfused: no tensor " + name);
    }

    void call() {
        if (const int rc = lib_.call(args_.data()))
            throw std::runtime_error(std::string(lib_.metadata()->name) + " returned " + std::to_string(rc) + ": " +
                                     take_messages());
    }

    OperatorInstance inst_;
    const Library &lib_;
    std::vector<void *> args_;  // halide_buffer_t pointers into tensors_
    // Released also when the constructor throws after some were allocated.
    struct Tensors {
        std::vector<Tensor> all;
        ~Tensors() {
            for (Tensor &t : all) {
                t.buffer.device_detach_native();
                neptune_free(t.device);
            }
        }
    } tensors_;
    std::unique_ptr<EventTimer> timer_;
};

}  // namespace

std::unique_ptr<NativeImpl> make_halide_unfused(const OperatorInstance &inst, const GpuOptions &) {
    const OperatorSpec &s = inst.spec;
    if (s.family != Family::Attention) throw Unsupported("attention operators only");
    if (s.with_row_stats) throw Unsupported("computes the attention output only, not row statistics");
    const Library *lib = library_for(s.name);
    if (!lib) throw Unsupported("no unfused library for " + s.name);
    const AttentionSpec &a = s.attention;
    if (s.dtype != DType::F16 || a.head_dim_qk != 128 || a.head_dim_v != 128)
        throw Unsupported("the unfused libraries are compiled for f16 and head dim 128");
    if (a.mask == Mask::Window && a.window != 4096) throw Unsupported("the windowed library is compiled for a window of 4096");
    if (a.mod == ScoreMod::Softcap && a.softcap != 50.0) throw Unsupported("the softcap libraries are compiled for a cap of 50");
    // The f32 scores it materialises: past 16 GiB a point takes minutes (and 32k keys do not fit).
    const double score_bytes = 4.0 * double(inst.batch) * a.q_heads * double(inst.input("q").shape[2]) *
                               double(inst.input("k").shape[2]);
    if (score_bytes > 16.0 * (1ull << 30))
        throw Unsupported("materialises " + std::to_string(int64_t(score_bytes / (1ull << 30))) +
                          " GiB of f32 scores; this baseline stops at 16 GiB (batch x heads x queries x keys x 4 B)");
    return std::make_unique<HalideUnfused>(inst, *lib);
}

}  // namespace neptune::bench
