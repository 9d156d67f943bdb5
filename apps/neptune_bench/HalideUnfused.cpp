// Two ablations compiled by Halide's own CUDA backend, ahead of time (generators/meson.build):
//  halide_unfused  each attention operator's plain Halide algorithm, no directive (every reduction its
//                  own kernels, the f32 scores materialised): the <op>_unfused libraries;
//  halide_cuda     the row-wise operators' fused CPU form (lower_to_cpu) scheduled for Halide's CUDA
//                  backend, one thread per row: the <op>_halide_cuda libraries.
// The benchmark calls them on Halide buffers that wrap its device memory, in Neptune's CUDA context
// (NeptuneHalide.h), on the default stream its CUDA events time.
#include <HalideBuffer.h>
#include <HalideRuntimeCuda.h>

#include <mutex>
#include <sstream>
#include <string>

#include "Native.h"
#include "cross_entropy_halide_cuda.h"
#include "decode_alibi_unfused.h"
#include "decode_causal_unfused.h"
#include "decode_softcap_unfused.h"
#include "layernorm_halide_cuda.h"
#include "logsumexp_halide_cuda.h"
#include "neptune/runtime/HalideBuffers.h"
#include "neptune/runtime/NeptuneRuntime.h"
#include "prefill_alibi_unfused.h"
#include "prefill_causal_unfused.h"
#include "prefill_global_unfused.h"
#include "prefill_softcap_unfused.h"
#include "prefill_windowed_unfused.h"
#include "rmsnorm_halide_cuda.h"
#include "softmax_halide_cuda.h"

namespace neptune::bench {

namespace {

using Argv = int (*)(void **);
using Metadata = const halide_filter_metadata_t *(*)();

/** The library of an operator for one baseline: prefill_gqa and decode_gqa take the causal unfused
 * ones (the grouping is a run-time extent), everything else its own name. */
struct Library {
    const char *baseline, *op;
    Argv call;
    Metadata metadata;
};

const Library *library_for(const std::string &baseline, const std::string &op) {
    static const Library libs[] = {
        {"halide_unfused", "prefill_global", prefill_global_unfused_argv, prefill_global_unfused_metadata},
        {"halide_unfused", "prefill_causal", prefill_causal_unfused_argv, prefill_causal_unfused_metadata},
        {"halide_unfused", "prefill_gqa", prefill_causal_unfused_argv, prefill_causal_unfused_metadata},
        {"halide_unfused", "prefill_alibi", prefill_alibi_unfused_argv, prefill_alibi_unfused_metadata},
        {"halide_unfused", "prefill_softcap", prefill_softcap_unfused_argv, prefill_softcap_unfused_metadata},
        {"halide_unfused", "prefill_windowed", prefill_windowed_unfused_argv, prefill_windowed_unfused_metadata},
        {"halide_unfused", "decode_causal", decode_causal_unfused_argv, decode_causal_unfused_metadata},
        {"halide_unfused", "decode_gqa", decode_causal_unfused_argv, decode_causal_unfused_metadata},
        {"halide_unfused", "decode_alibi", decode_alibi_unfused_argv, decode_alibi_unfused_metadata},
        {"halide_unfused", "decode_softcap", decode_softcap_unfused_argv, decode_softcap_unfused_metadata},
        {"halide_cuda", "softmax", softmax_halide_cuda_argv, softmax_halide_cuda_metadata},
        {"halide_cuda", "logsumexp", logsumexp_halide_cuda_argv, logsumexp_halide_cuda_metadata},
        {"halide_cuda", "cross_entropy", cross_entropy_halide_cuda_argv, cross_entropy_halide_cuda_metadata},
        {"halide_cuda", "layernorm", layernorm_halide_cuda_argv, layernorm_halide_cuda_metadata},
        {"halide_cuda", "rmsnorm", rmsnorm_halide_cuda_argv, rmsnorm_halide_cuda_metadata},
    };
    for (const Library &l : libs)
        if (baseline == l.baseline && op == l.op) return &l;
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
    HalideUnfused(const OperatorInstance &inst, const Library &lib, int64_t max_call_scores) : inst_(inst), lib_(lib) {
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
        plan_calls(max_call_scores);
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
        const bool unfused = std::string(lib_.baseline) == "halide_unfused";
        os << lib_.baseline << ": " << lib_.metadata()->name << " (Halide's CUDA backend, " << lib_.metadata()->target
           << (unfused ? "), every reduction its own kernels" : "), the fused CPU form, one thread per row")
           << ", device allocations reused, " << calls_.size()
           << (calls_.size() == 1 ? " call\n" : " calls on (batch, head) chunks: Halide's extents are int32\n");
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
        throw std::logic_error(std::string(lib_.baseline) + ": no tensor " + name);
    }

    /** A halide_buffer_t's extents and strides are int32, and so are those of the f32 scores the
     * library allocates (batch x heads x queries x keys elements): past 2^31 - 1 Halide refuses them.
     * So the operator runs as one call per chunk of (batch, query heads), each on crops of the
     * buffers (their mins kept, so the head index the ALiBi slope reads stays global), with whole
     * GQA groups per chunk; one call where everything fits. */
    void plan_calls(int64_t limit) {
        const halide_filter_metadata_t *m = lib_.metadata();
        if (inst_.spec.family != Family::Attention) {  // row-wise: [rows, cols] stays within int32 extents
            Call c;
            for (int i = 0; i < m->num_arguments; i++) c.buffers.push_back(tensor(m->arguments[i].name).buffer);
            for (Halide::Runtime::Buffer<void> &b : c.buffers) c.args.push_back(b.raw_buffer());
            calls_.push_back(std::move(c));
            return;
        }
        const AttentionSpec &a = inst_.spec.attention;
        const int64_t per_head = inst_.input("q").shape[2] * inst_.input("k").shape[2];
        const int group = a.q_heads / a.kv_heads;
        const int64_t heads_fit = std::max<int64_t>(limit / per_head, 1);
        int hc = a.q_heads, bc = int(inst_.batch);
        // The algorithm maps query heads to KV heads by the ratio of their extents: whole groups only.
        if (heads_fit < group)
            throw Unsupported("one GQA group's scores (" + std::to_string(group * per_head) +
                              ") exceed Halide's int32 extents");
        if (heads_fit < a.q_heads) {  // head chunks of even size, whole groups each
            const int groups = a.kv_heads, fit = int(heads_fit / group);
            const int chunks = (groups + fit - 1) / fit;
            hc = (groups + chunks - 1) / chunks * group;
            bc = 1;
        } else {
            const int64_t batches_fit = heads_fit / a.q_heads;
            const int64_t chunks = (inst_.batch + batches_fit - 1) / batches_fit;
            bc = int((inst_.batch + chunks - 1) / chunks);
        }
        for (int b0 = 0; b0 < inst_.batch; b0 += bc)
            for (int h0 = 0; h0 < a.q_heads; h0 += hc) {
                Call c;
                const int nb = std::min(bc, int(inst_.batch) - b0), nh = std::min(hc, a.q_heads - h0);
                const bool whole = nb == inst_.batch && nh == a.q_heads;
                for (int i = 0; i < m->num_arguments; i++) {
                    const Halide::Runtime::Buffer<void> &full = tensor(m->arguments[i].name).buffer;
                    if (whole) {
                        c.buffers.push_back(full);
                    } else {
                        const int heads = full.dim(full.dimensions() == 1 ? 0 : 2).extent();
                        const int ratio = a.q_heads / heads;  // 1, or the group for K and V
                        // slopes [Hq] take the query heads' crop, the 4-D tensors [D, S, H, B] both.
                        Halide::Runtime::Buffer<void> crop =
                            full.dimensions() == 1 ? full.cropped(0, h0, nh)
                                                   : full.cropped(3, b0, nb).cropped(2, h0 / ratio, nh / ratio);
                        if (!crop.has_device_allocation())
                            throw std::runtime_error(std::string(lib_.baseline) + ": cropping " +
                                                     std::string(m->arguments[i].name) +
                                                     " on the device failed: " + take_messages());
                        c.buffers.push_back(std::move(crop));
                    }
                }
                for (Halide::Runtime::Buffer<void> &b : c.buffers) c.args.push_back(b.raw_buffer());
                calls_.push_back(std::move(c));
            }
    }

    void call() {
        for (Call &c : calls_)
            if (const int rc = lib_.call(c.args.data()))
                throw std::runtime_error(std::string(lib_.metadata()->name) + " returned " + std::to_string(rc) + ": " +
                                         take_messages());
    }

    OperatorInstance inst_;
    const Library &lib_;
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
    /** One library call: its arguments in the library's order (its metadata: inputs, then outputs),
     * the whole buffers or crops of them, which hold device memory only, so Halide copies nothing.
     * Declared after tensors_, so the crops go before the buffers they refer to. */
    struct Call {
        std::vector<Halide::Runtime::Buffer<void>> buffers;
        std::vector<void *> args;  // their halide_buffer_t pointers
    };
    std::vector<Call> calls_;
    std::unique_ptr<EventTimer> timer_;
};

}  // namespace

std::unique_ptr<NativeImpl> make_halide_unfused(const OperatorInstance &inst, const GpuOptions &) {
    return make_halide_unfused(inst, (int64_t(1) << 31) - 1);
}

std::unique_ptr<NativeImpl> make_halide_unfused(const OperatorInstance &inst, int64_t max_call_scores) {
    const OperatorSpec &s = inst.spec;
    if (s.family != Family::Attention) throw Unsupported("attention operators only");
    if (s.attention.page_size > 0) throw Unsupported("dense K and V only (the Python baselines read a paged cache)");
    if (s.row_stats != RowStats::None) throw Unsupported("computes the attention output only, not row statistics");
    const Library *lib = library_for("halide_unfused", s.name);
    if (!lib) throw Unsupported("no unfused library for " + s.name);
    const AttentionSpec &a = s.attention;
    if (s.dtype != DType::F16 || a.head_dim_qk != 128 || a.head_dim_v != 128)
        throw Unsupported("the unfused libraries are compiled for f16 and head dim 128");
    if (a.mask == Mask::Window && a.window != 4096)
        throw Unsupported("the windowed library is compiled for a window of 4096");
    if (a.mod == ScoreMod::Softcap && a.softcap != 50.0)
        throw Unsupported("the softcap libraries are compiled for a cap of 50");
    // The f32 scores it materialises: past 16 GiB a point takes minutes (and 32k keys do not fit).
    const double score_bytes =
        4.0 * double(inst.batch) * a.q_heads * double(inst.input("q").shape[2]) * double(inst.input("k").shape[2]);
    if (score_bytes > 16.0 * (1ull << 30))
        throw Unsupported("materialises " + std::to_string(int64_t(score_bytes / (1ull << 30))) +
                          " GiB of f32 scores; this baseline stops at 16 GiB (batch x heads x queries x keys x 4 B)");
    return std::make_unique<HalideUnfused>(inst, *lib, max_call_scores);
}

std::unique_ptr<NativeImpl> make_halide_cuda(const OperatorInstance &inst, const GpuOptions &) {
    const OperatorSpec &s = inst.spec;
    const Library *lib = library_for("halide_cuda", s.name);
    if (!lib) throw Unsupported("the row-wise operators only (softmax, logsumexp, cross_entropy, layernorm, rmsnorm)");
    if (s.dtype != DType::F16 || s.f32_outputs) throw Unsupported("the libraries are compiled for f16");
    if (double(inst.batch) * double(inst.seq) > double((int64_t(1) << 31) - 1))
        throw Unsupported("rows x columns passes Halide's int32 extents");
    return std::make_unique<HalideUnfused>(inst, *lib, 0);
}

}  // namespace neptune::bench
