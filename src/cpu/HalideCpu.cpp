#include "neptune/HalideCpu.h"

#include <cstdlib>
#include <stdexcept>

#include "neptune/algorithms/Algorithms.h"

namespace neptune {

Halide::Buffer<> to_halide_buffer(const HostTensor &t) {
    std::vector<int> extents(t.desc.shape.rbegin(), t.desc.shape.rend());
    Halide::Buffer<> buf(algorithms::halide_type(t.desc.dtype), extents);
    t.store(buf.data());
    // Written through data(), which leaves the flag alone: without it, copy_to_device allocates device
    // memory and copies nothing into it (Halide copies only a dirty host).
    buf.set_host_dirty();
    return buf;
}

Halide::Target host_target() {
    Halide::Target t = Halide::get_host_target();
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) {
        for (Halide::Target::Feature f :
             {Halide::Target::AVX512, Halide::Target::AVX512_KNL, Halide::Target::AVX512_Skylake,
              Halide::Target::AVX512_Cannonlake, Halide::Target::AVX512_SapphireRapids, Halide::Target::AVX512_Zen4,
              Halide::Target::AVX512_Zen5, Halide::Target::AVX10_1})
            t = t.without_feature(f);
    }
#endif
    return t;
}

Halide::Target cpu_target() {
    const char *env = std::getenv("HL_JIT_TARGET");
    const Halide::Target t = env && *env ? Halide::get_jit_target_from_environment() : host_target();
    return t.with_feature(Halide::Target::StrictFloat);
}

void schedule_reductions_at_root(const std::vector<Halide::Func> &outputs) {
    for (const Halide::Func &out : outputs) {
        for (auto &[name, fn] : Halide::Internal::find_transitive_calls(out.function())) {
            (void)name;
            if (fn.has_update_definition()) Halide::Func(fn).compute_root();
        }
    }
}

HalideCpuRunner::HalideCpuRunner(const OperatorInstance &inst, std::vector<Halide::ImageParam> inputs,
                                 std::vector<Halide::Func> outputs)
    : inst_(inst), params_(std::move(inputs)) {
    if (params_.size() != inst.inputs.size() || outputs.size() != inst.outputs.size())
        throw std::invalid_argument("HalideCpuRunner: Funcs do not match the tensors of " + inst.spec.name);
    schedule_reductions_at_root(outputs);
    for (Halide::Func &f : outputs) pipelines_.emplace_back(f);
}

void HalideCpuRunner::set_inputs(const std::vector<HostTensor> &values) {
    if (values.size() != params_.size()) throw std::invalid_argument("HalideCpuRunner: wrong number of inputs");
    bound_.clear();
    for (size_t i = 0; i < values.size(); i++) {
        bound_.push_back(to_halide_buffer(values[i]));
        params_[i].set(bound_.back());
    }
}

void HalideCpuRunner::run_rows(std::vector<HostTensor> &outputs, int64_t first, int64_t count) {
    if (count <= 0) return;
    if (first < 0 || first + count > inst_.rows || first / inst_.row_block != (first + count - 1) / inst_.row_block)
        throw std::invalid_argument("HalideCpuRunner: rows must lie inside one row block");
    for (size_t o = 0; o < outputs.size(); o++) {
        const TensorDesc &d = inst_.outputs[o];
        const int64_t inner = d.numel() / inst_.rows;  // elements per row (1 for per-row statistics)
        // Output dims, innermost first: [inner], then the row dims. Rows vary only along the innermost row dim.
        const size_t row_dims = size_t(inst_.row_dims);
        const bool has_inner = d.shape.size() > row_dims;
        std::vector<int> mins, extents;
        if (has_inner) {
            mins.push_back(0);
            extents.push_back(int(inner));
        }
        int64_t rest = first;
        std::vector<int64_t> row_index(row_dims);
        for (size_t k = row_dims; k-- > 0;) {
            row_index[k] = rest % d.shape[k];
            rest /= d.shape[k];
        }
        for (size_t k = row_dims; k-- > 0;) {
            mins.push_back(int(row_index[k]));
            extents.push_back(k + 1 == row_dims ? int(count) : 1);
        }
        Halide::Buffer<> buf(algorithms::halide_type(d.dtype), extents);
        buf.set_min(mins);
        pipelines_[o].realize(buf, cpu_target());
        HostTensor part(TensorDesc{d.name, d.dtype, {count * inner}});
        part.load(buf.data());
        std::copy(part.values.begin(), part.values.end(), outputs[o].values.begin() + first * inner);
    }
}

void HalideCpuRunner::run(std::vector<HostTensor> &outputs) {
    for (int64_t r = 0; r < inst_.rows; r += inst_.row_block) run_rows(outputs, r, inst_.row_block);
}

}  // namespace neptune
