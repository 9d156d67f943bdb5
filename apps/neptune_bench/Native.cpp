#include "Native.h"

#include <algorithm>

#include "neptune/runtime/NeptuneRuntime.h"

namespace neptune::bench {

void check_runtime(int rc, const std::string &what) {
    if (rc != NEPTUNE_OK) throw std::runtime_error(what + ": " + neptune_last_error());
}

namespace {

constexpr size_t flush_bytes = size_t(256) << 20;

class NeptuneImpl : public NativeImpl {
public:
    NeptuneImpl(const OperatorInstance &inst, const GpuOptions &opt) : op_(inst, opt) {}
    void set_inputs(const std::vector<HostTensor> &inputs) override { op_.set_inputs(inputs); }
    std::vector<HostTensor> run() override { return op_.run(); }
    // GpuOperator::time flushes L2 before its start event; one repeat without warm-up is one timed call.
    double time_once() override { return op_.time(1, 0).median_ms; }
    std::string describe() const override { return op_.describe(); }
    std::string dump() const override { return op_.tile_program() + "\n" + op_.cuda_source() + "\n"; }
    std::optional<double> extra_bytes() const override { return double(op_.workspace_bytes()); }

private:
    GpuOperator op_;
};

// A device-to-device copy moving the operator's bytes (half read, half written): the memory
// bandwidth a memory-bound operator can reach, measured in the same call and by the same timer.
class CopyBound : public NativeImpl {
public:
    explicit CopyBound(const OperatorInstance &inst) : bytes_(size_t(operator_bytes(inst) / 2)) {
        check_runtime(neptune_malloc(&src_, bytes_), "allocating the copy's source");
        check_runtime(neptune_malloc(&dst_, bytes_), "allocating the copy's destination");
        check_runtime(neptune_memset_d8(src_, 0x3c, bytes_), "filling the copy's source");
    }
    ~CopyBound() override {
        neptune_free(src_);
        neptune_free(dst_);
    }
    void set_inputs(const std::vector<HostTensor> &) override {}
    std::vector<HostTensor> run() override {
        check_runtime(neptune_memcpy_dtod(dst_, src_, bytes_), "copying");
        check_runtime(neptune_synchronize(), "copying");
        return {};
    }
    double time_once() override {
        return timer_.time_ms([&] { check_runtime(neptune_memcpy_dtod(dst_, src_, bytes_), "copying"); });
    }
    std::string describe() const override {
        return "copy: cuMemcpyDtoD of " + std::to_string(bytes_) + " bytes (the operator's bytes read and written)\n";
    }

private:
    size_t bytes_;
    void *src_ = nullptr, *dst_ = nullptr;
    EventTimer timer_;
};

}  // namespace

std::unique_ptr<NativeImpl> make_copy_bound(const OperatorInstance &inst, const GpuOptions &) {
    if (!memory_bound(inst.spec)) throw Unsupported("the copy bound is measured for memory-bound operators only");
    return std::make_unique<CopyBound>(inst);
}

std::unique_ptr<NativeImpl> make_neptune(const OperatorInstance &inst, const GpuOptions &opt) {
    return std::make_unique<NeptuneImpl>(inst, opt);
}

const std::vector<NativeEntry> &native_baselines() {
    using Make = std::unique_ptr<NativeImpl> (*)(const OperatorInstance &, const GpuOptions &);
    static const std::vector<NativeEntry> all = {{"cublas_unfused", static_cast<Make>(make_cublas_unfused)},
                                                 {"halide_unfused", static_cast<Make>(make_halide_unfused)},
                                                 {"halide_cuda", static_cast<Make>(make_halide_cuda)},
                                                 {"copy", static_cast<Make>(make_copy_bound)}};
    return all;
}

std::vector<GpuTiming> time_interleaved(const std::vector<NativeImpl *> &impls, int repeats, int warmup) {
    const size_t n = impls.size();
    for (int w = 0; w < warmup; w++)
        for (NativeImpl *i : impls) i->time_once();
    std::vector<std::vector<double>> ms(n);
    for (int r = 0; r < repeats; r++)
        for (size_t k = 0; k < n; k++) {
            const size_t which = (k + size_t(r)) % n;
            ms[which].push_back(impls[which]->time_once());
        }
    std::vector<GpuTiming> out;
    for (std::vector<double> &m : ms) {
        std::sort(m.begin(), m.end());
        out.push_back(m.empty() ? GpuTiming{} : GpuTiming{m[m.size() / 2], m.front(), m.back(), int(m.size())});
    }
    return out;
}

EventTimer::EventTimer() {
    check_runtime(neptune_event_create(&start_), "creating an event");
    check_runtime(neptune_event_create(&stop_), "creating an event");
    check_runtime(neptune_malloc(&flush_, flush_bytes), "allocating the L2 flush buffer");
}

EventTimer::~EventTimer() {
    neptune_event_destroy(start_);
    neptune_event_destroy(stop_);
    neptune_free(flush_);
}

double EventTimer::time_ms(const std::function<void()> &launch) {
    // A different byte each round, so the flush writes rather than finding the lines already equal.
    check_runtime(neptune_memset_d8(flush_, static_cast<unsigned char>(++round_), flush_bytes), "L2 flush");
    check_runtime(neptune_event_record(start_, nullptr), "recording an event");
    launch();
    check_runtime(neptune_event_record(stop_, nullptr), "recording an event");
    float ms = 0;
    check_runtime(neptune_event_elapsed_ms(start_, stop_, &ms), "timing");
    return ms;
}

}  // namespace neptune::bench
