// Every row-wise operator's row-chain program (softmax, log-sum-exp, cross-entropy, LayerNorm,
// RMSNorm), executed by the tile-IR interpreter on the CPU, against the fp64 reference: rows of one
// and odd lengths (the masked edges of strips), a row per warp and per block, the chunked form for
// rows longer than a strip, a cluster of blocks per row (each block a part of the row, the partial
// reductions combined across the cluster), fully masked (-inf) rows, maxima rising along the row, f16
// and bf16; and chains a user writes beyond the suite's 2-D operators (a middle axis, rows over
// several dimensions, 3-D cross-entropy with an ignore index, a row's entropy) against fp64.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "Compare.h"
#include "UserChains.h"
#include "lower/BuildRowChain.h"
#include "lower/Lower.h"
#include "suite/LowerOperator.h"
#include "neptune/Error.h"
#include "neptune/HostTensor.h"
#include "neptune/algorithms/Schedules.h"
#include "neptune/reference/Reference.h"
#include "tir/Interpreter.h"

using namespace neptune;

namespace {

enum class Rows { Normal, Rising, Masked };

struct Case {
    int64_t rows, cols;
    Rows style = Rows::Normal;
    DType dtype = DType::F16;
    // A forced kernel shape (0 threads: the default for the length).
    int threads = 0, vectors = 1, rows_per_block = 1;
    bool chunked = false;
    int cluster = 1;  // blocks per row (sm_90a clusters)
    GpuArch arch = GpuArch::Sm80;  // lower_operator's target (no forced shape)
};

// The program of `inst`: lower_operator's, or the forced shape's straight from the builder.
internal::OperatorLowering lower(const OperatorInstance &inst, const Case &c) {
    if (!c.threads) {
        internal::LoweringChoices choices;
        choices.arch = c.arch;
        return internal::lower_operator(inst, choices);
    }
    const algorithms::OperatorFuncs funcs = algorithms::build(inst.spec);
    const auto groups = algorithms::fuse_operator(inst.spec, funcs, algorithms::FusionChoice{});
    internal::RowChainShape s;
    s.threads_per_row = c.threads;
    s.vector = 16 / dtype_bytes(c.dtype);
    s.vectors = c.vectors;
    s.rows_per_block = c.rows_per_block;
    s.chunked = c.chunked;
    s.cluster = c.cluster;
    internal::OperatorLowering l;
    l.program = internal::build_row_chain(groups.at(0).plan(), funcs.outputs,
                                          c.cluster > 1 ? GpuArch::Sm90a : GpuArch::Sm80, s);
    l.ints = {{"rows", c.rows}, {"cols", c.cols}};
    return l;
}

void run(const OperatorSpec &op, const Case &c) {
    OperatorSpec spec = op;
    spec.dtype = c.dtype;
    const OperatorInstance inst = instantiate(spec, c.rows, c.cols);
    INFO(op.name << " " << c.rows << "x" << c.cols << " " << dtype_name(c.dtype) << " style " << int(c.style)
                 << " threads " << c.threads << " chunked " << c.chunked << " cluster " << c.cluster);
    internal::OperatorLowering l = lower(inst, c);
    REQUIRE(l.program.kernels.size() == 1);
    std::vector<HostTensor> in = make_inputs(inst, 7);
    HostTensor &x = in.at(0);
    REQUIRE(x.desc.name == "x");
    const bool softmax_like = op.family == Family::Softmax || op.family == Family::LogSumExp;
    for (int64_t r = 0; r < c.rows; r++)
        for (int64_t k = 0; k < c.cols; k++) {
            double &v = x.values[size_t(r * c.cols + k)];
            if (c.style == Rows::Rising) v += 8.0 * double(k) / double(c.cols);  // each chunk's max above the last
            if (c.style == Rows::Masked && softmax_like && r % 3 == 1) v = -std::numeric_limits<double>::infinity();
        }
    x.round_to_dtype();
    std::vector<HostTensor> out = make_outputs(inst);
    for (HostTensor &t : out) std::fill(t.values.begin(), t.values.end(), NAN);  // unwritten elements fail
    tir::LaunchArgs args;
    for (HostTensor &t : in) args.tensors[t.desc.name] = &t;
    for (HostTensor &t : out) args.tensors[t.desc.name] = &t;
    args.ints = l.ints;
    tir::interpret(l.program, args);
    const std::vector<HostTensor> ref = reference::compute(inst, in);
    for (size_t o = 0; o < out.size(); o++) {
        const TensorDesc &d = inst.outputs[o];
        std::vector<double> got = out[o].values, want = ref[o].values;
        if (c.style == Rows::Masked && softmax_like) {
            // A fully masked row: its log-sum-exp is -inf; its softmax 0 / 0 in both. Compared apart.
            const int64_t per_row = int64_t(want.size()) / c.rows;
            for (int64_t r = 1; r < c.rows; r += 3)
                for (int64_t k = 0; k < per_row; k++) {
                    const size_t i = size_t(r * per_row + k);
                    if (op.family == Family::LogSumExp) CHECK(got[i] == -std::numeric_limits<double>::infinity());
                    if (op.family == Family::Softmax) CHECK(std::isnan(got[i]));
                    got[i] = want[i] = 0;
                }
        }
        const ErrorStats e = compare(got, want);
        INFO(d.name << ": " << e.describe(d));
        CHECK(testing::with_rounding(ref[o], tolerance_for(d.dtype)).accepts(e));
    }
}

const std::vector<std::string> kOps = {"softmax", "logsumexp", "cross_entropy", "layernorm", "rmsnorm"};

}  // namespace

TEST_CASE("interpret row chains: odd shapes on chip, a warp or a block per row") {
    const std::vector<Case> cases = {
        {1, 1},    {7, 7}, {1, 1000}, {7, 1000, Rows::Rising}, {5, 8191}, {2, 3000, Rows::Normal, DType::BF16},
        {300, 64},  // many rows, four to a block with a masked last block
    };
    for (const std::string &name : kOps)
        for (const Case &c : cases) run(*find_operator(name), c);
}

TEST_CASE("interpret row chains: fully masked rows and rising maxima") {
    for (const char *name : {"softmax", "logsumexp"}) {
        run(*find_operator(name), {7, 100, Rows::Masked});
        run(*find_operator(name), {4, 5000, Rows::Masked, DType::BF16});
    }
}

TEST_CASE("interpret row chains: the chunked form for rows longer than a strip") {
    for (const std::string &name : kOps) {
        // Strips of 32 x 8 columns over rows of 1000 (4 chunks, the last partial) and 7.
        run(*find_operator(name), {3, 1000, Rows::Rising, DType::F16, 32, 1, 1, true});
        run(*find_operator(name), {2, 7, Rows::Normal, DType::BF16, 32, 1, 2, true});
        // What lower_operator picks for 131072 columns.
        run(*find_operator(name), {2, 131072, Rows::Rising});
    }
    run(*find_operator("softmax"), {3, 700, Rows::Masked, DType::F16, 32, 1, 1, true});
}

TEST_CASE("interpret row chains: a cluster of blocks per row") {
    for (const std::string &name : kOps) {
        // Four blocks of 32 x 8 x 2 columns over rows of 1000 (the last block partial), of 300 (the
        // last two blocks hold no column) and of 7; three blocks over 1500 columns in bf16.
        run(*find_operator(name), {3, 1000, Rows::Rising, DType::F16, 32, 2, 1, false, 4});
        run(*find_operator(name), {2, 300, Rows::Normal, DType::F16, 32, 2, 1, false, 4});
        run(*find_operator(name), {2, 7, Rows::Normal, DType::F16, 32, 2, 1, false, 4});
        run(*find_operator(name), {2, 1500, Rows::Rising, DType::BF16, 32, 2, 1, false, 3});
    }
    run(*find_operator("softmax"), {7, 1000, Rows::Masked, DType::F16, 32, 2, 1, false, 4});
    run(*find_operator("logsumexp"), {7, 1000, Rows::Masked, DType::F16, 32, 2, 1, false, 4});
    // What lower_operator picks on sm_90a for 131072 columns: four blocks of 32768.
    const OperatorInstance inst = instantiate(*find_operator("rmsnorm"), 2, 131072);
    internal::LoweringChoices choices;
    choices.arch = GpuArch::Sm90a;
    CHECK(internal::lower_operator(inst, choices).program.kernels.at(0).cluster_x.defined());
    // Log-sum-exp reads x once in the chunked form too: no cluster, unless its rows are few (split).
    const OperatorInstance lse = instantiate(*find_operator("logsumexp"), 100, 131072);
    CHECK(!internal::lower_operator(lse, choices).program.kernels.at(0).cluster_x.defined());
}

TEST_CASE("interpret row chains: a row split over a cluster's blocks, their states combined with the repair") {
    for (const std::string &name : kOps) {
        // Four blocks of 32 x 8 columns a chunk over rows of 5000 (20 chunks, five a block, the last
        // partial), of 600 (the last block without a chunk) and of 100 (three without); eight blocks
        // over bf16 rows of 3000.
        run(*find_operator(name), {3, 5000, Rows::Rising, DType::F16, 32, 1, 1, true, 4});
        run(*find_operator(name), {2, 600, Rows::Normal, DType::F16, 32, 1, 1, true, 4});
        run(*find_operator(name), {2, 100, Rows::Rising, DType::F16, 32, 1, 1, true, 4});
        run(*find_operator(name), {2, 3000, Rows::Rising, DType::BF16, 64, 1, 1, true, 8});
    }
    run(*find_operator("softmax"), {7, 2000, Rows::Masked, DType::F16, 32, 1, 1, true, 4});
    run(*find_operator("logsumexp"), {7, 2000, Rows::Masked, DType::F16, 32, 1, 1, true, 4});
    // What lower_operator picks on sm_90a for few long rows: split, log-sum-exp past a block's row,
    // softmax past a cluster's.
    internal::LoweringChoices choices;
    choices.arch = GpuArch::Sm90a;
    const auto kernel = [&](const char *op, int64_t rows, int64_t cols) {
        return internal::lower_operator(instantiate(*find_operator(op), rows, cols), choices).program.kernels.at(0);
    };
    const tir::Kernel lse = kernel("logsumexp", 8, 262144);
    CHECK(lse.cluster_x.defined());
    CHECK(lse.scalars.size() > 3);
    CHECK(!kernel("logsumexp", 8, 16384).cluster_x.defined());
    CHECK(!kernel("logsumexp", 65, 262144).cluster_x.defined());
    const GpuArch sm90 = GpuArch::Sm90a;
    run(*find_operator("logsumexp"), {2, 40000, Rows::Rising, DType::F16, 0, 1, 1, false, 1, sm90});
    run(*find_operator("cross_entropy"), {3, 20000, Rows::Normal, DType::F16, 0, 1, 1, false, 1, sm90});
    run(*find_operator("softmax"), {2, 300000, Rows::Rising, DType::F16, 0, 1, 1, false, 1, sm90});
}

TEST_CASE("interpret row chains: 1000 rows") {
    for (const std::string &name : kOps) run(*find_operator(name), {1000, 200});
}

namespace {

// A user's chain lowered for rows of `row_cols` (0: any length, the chunked form) and interpreted.
void run_chain(const testing::UserChain &c, int64_t row_cols) {
    internal::LowerOptions lo;
    lo.dtype = c.inputs.at(0).desc.dtype;
    lo.row_cols = row_cols;
    const tir::Program p = internal::lower_to_tiles(c.group->plan(), c.outputs, lo);
    REQUIRE(p.kernels.size() == 1);
    tir::verify(p);
    std::vector<HostTensor> in = c.inputs, out = c.expected;
    for (HostTensor &t : out) std::fill(t.values.begin(), t.values.end(), NAN);  // unwritten elements fail
    tir::LaunchArgs args;
    for (HostTensor &t : in) args.tensors[t.desc.name] = &t;
    for (HostTensor &t : out) args.tensors[t.desc.name] = &t;
    args.ints = c.ints;
    tir::interpret(p, args);
    for (size_t o = 0; o < out.size(); o++) {
        INFO(c.name << ": " << out[o].desc.name << " (row length " << row_cols << ")");
        testing::check_close(out[o].desc.name, out[o], c.expected[o],
                             testing::with_rounding(c.expected[o], tolerance_for(c.expected[o].desc.dtype)));
    }
}

}  // namespace

TEST_CASE("interpret row chains: softmax and its log-sum-exp over a middle axis (strided columns)") {
    // 32 rows per block with a partial last block; a thread per row, 32 per row, the chunked form.
    run_chain(testing::middle_softmax(37, 7, 3, DType::F16), 7);
    run_chain(testing::middle_softmax(37, 7, 3, DType::F16), 0);
    run_chain(testing::middle_softmax(1, 100, 4, DType::F16), 100);
    run_chain(testing::middle_softmax(33, 1000, 2, DType::F16), 1000);
    run_chain(testing::middle_softmax(5, 3000, 3, DType::F16), 3000);
    run_chain(testing::middle_softmax(40, 100, 2, DType::BF16), 100);
    run_chain(testing::middle_softmax(9, 300, 2, DType::F32), 0);
}

TEST_CASE("interpret row chains: LayerNorm over a middle axis with gamma and beta along it") {
    run_chain(testing::middle_layernorm(37, 7, 3), 7);
    run_chain(testing::middle_layernorm(33, 1000, 2), 1000);
    run_chain(testing::middle_layernorm(5, 3000, 2), 0);
}

TEST_CASE("interpret row chains: rows over several dimensions, 3-D cross-entropy, a row's entropy") {
    run_chain(testing::softmax_4d(100, 3, 5, 2), 100);
    run_chain(testing::softmax_4d(3000, 2, 2, 2), 0);
    run_chain(testing::cross_entropy_3d(1000, 7, 3), 1000);
    run_chain(testing::cross_entropy_3d(20000, 2, 3), 0);
    run_chain(testing::row_entropy(7, 5), 7);
    run_chain(testing::row_entropy(1000, 9), 1000);
    run_chain(testing::row_entropy(20000, 3), 0);
}
