#ifndef NEPTUNE_HOST_TENSOR_H
#define NEPTUNE_HOST_TENSOR_H
/** \file
 * Tensors on the host as the references see them: values in double that are
 * exactly representable in the tensor's element type, plus the operator's
 * random inputs and the error measures every check reports. Halide-free. */
#include <cstdint>
#include <string>
#include <vector>

#include "neptune/Operators.h"

namespace neptune {

struct HostTensor {
    TensorDesc desc;
    std::vector<double> values;  // row-major, desc.shape

    explicit HostTensor(TensorDesc d);
    /** Rounds every value to desc.dtype (no-op for f32/i32 beyond float rounding). */
    void round_to_dtype();
    /** Writes the values in desc.dtype's storage format (2 or 4 bytes each) to dst. */
    void store(void *dst) const;
    /** Reads values stored in desc.dtype's format from src. */
    void load(const void *src);
};

/** Input styles: plain N(0, 1) as the baselines use, or scores whose row maximum rises
 * across the KV axis, so that a fused kernel's rescale is exercised (docs/design/fusion.md, numerical stability). */
enum class InputStyle { Normal, RisingScores };

/** Random inputs of `inst`, reproducible from `seed`. */
std::vector<HostTensor> make_inputs(const OperatorInstance &inst, uint64_t seed, InputStyle style = InputStyle::Normal);
/** Zero-filled outputs of `inst`. */
std::vector<HostTensor> make_outputs(const OperatorInstance &inst);

/** Error of `actual` against `expected` over the elements [begin, end): the worst element and RMS figures. */
struct ErrorStats {
    double max_abs = 0, rms_abs = 0, rms_ref = 0;
    double max_scaled = 0;  // max |actual - expected| / (1 + |expected|): absolute near 0, relative beyond
    int64_t worst_index = -1, nonfinite = 0, count = 0;
    double worst_actual = 0, worst_expected = 0;
    double rel_rms() const { return rms_ref > 0 ? rms_abs / rms_ref : rms_abs; }
    std::string describe(const TensorDesc &d) const;  // "max |err| 3e-4 at [0, 5, 17, 3] (got .., want ..), rms .."
};
ErrorStats compare(const std::vector<double> &actual, const std::vector<double> &expected, int64_t begin = 0,
                   int64_t end = -1);
/** Acceptance bounds for an output of element type `t` computed from f16/bf16 inputs with f32
 * accumulation: its relative RMS error and its largest scaled error (ErrorStats::max_scaled). */
struct Tolerance {
    double rel_rms, max_scaled;
    bool accepts(const ErrorStats &e) const {
        return e.nonfinite == 0 && e.rel_rms() <= rel_rms && e.max_scaled <= max_scaled;
    }
};
Tolerance tolerance_for(DType t);

/** The error of `exact` rounded to its own type, over elements [begin, end): the floor under any
 * result of that type (f16 values near 1e-5 are subnormal and round coarsely). */
ErrorStats rounding_error(const HostTensor &exact, int64_t begin = 0, int64_t end = -1);
/** Merges the statistics of disjoint element sets. */
ErrorStats merge(const ErrorStats &a, const ErrorStats &b);
/** The multi-index of flat element `i` of a tensor with `shape`, as "[a, b, c]". */
std::string index_string(const std::vector<int64_t> &shape, int64_t i);

}  // namespace neptune

#endif
