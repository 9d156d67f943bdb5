// Row chains through compile_gpu on the GPU: each row-wise operator of the suite at odd and long
// rows (every rung of the kernel ladder, clusters and the chunked form) against the fp64 reference;
// softmax with its log-sum-exp written by one kernel; cross-entropy's NaN for a label out of range;
// users' chains over a middle axis and over rows of several dimensions.
// Skips (77) without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "Compare.h"
#include "UserChains.h"
#include "neptune/GpuPipeline.h"
#include "neptune/HalideCpu.h"
#include "neptune/algorithms/Schedules.h"
#include "neptune/reference/Reference.h"
#include "neptune/runtime/NeptuneHalide.h"

using namespace neptune;
using namespace neptune::testing;

namespace {

// f32 statistics through the GPU's exp and log: a little looser than the CPU's bound; outputs no
// tighter than the exact answer rounded to their type.
Tolerance gpu_tolerance(const HostTensor &want) {
    const DType t = want.desc.dtype;
    return with_rounding(want, t == DType::F32 ? Tolerance{1e-3, 5e-3} : tolerance_for(t));
}

HostTensor read(Halide::Buffer<> &b, const TensorDesc &d) {
    REQUIRE((b.raw_buffer()->device_interface == nullptr || b.copy_to_host() == 0));
    HostTensor t(d);
    t.load(b.data());
    return t;
}

/** (rows, cols) covering the ladder: one column, odd lengths, each family of shapes, clusters on
 * sm_90a (65536 and past) and the chunked form past 262144. */
const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1},     {7, 7},     {1000, 1000}, {33, 3000},  {7, 8191},
                                                         {5, 20000}, {3, 40000}, {2, 131072},  {1, 300001}, {300, 256}};

void check_operator(const std::string &op) {
    const OperatorSpec spec = *find_operator(op);
    algorithms::OperatorFuncs f = algorithms::build(spec);
    algorithms::fuse_operator(spec, f, algorithms::FusionChoice());
    GpuPipeline p = compile_gpu(f.outputs, ExternOptions());
    for (auto [rows, cols] : shapes) {
        INFO(op << " " << rows << "x" << cols);
        const OperatorInstance inst = instantiate(spec, rows, cols);
        const std::vector<HostTensor> in = make_inputs(inst, 17);
        for (size_t i = 0; i < in.size(); i++) f.inputs[i].set(to_halide_buffer(in[i]));
        Halide::Buffer<> out = to_halide_buffer(make_outputs(inst)[0]);
        p.realize(out);
        const HostTensor want = reference::compute(inst, in)[0];
        check_close(inst.outputs[0].name, read(out, inst.outputs[0]), want, gpu_tolerance(want));
    }
}

}  // namespace

TEST_CASE("gpu jit rowchain: softmax and log-sum-exp match fp64 at every rung of the ladder") {
    check_operator("softmax");
    check_operator("logsumexp");
}

TEST_CASE("gpu jit rowchain: cross-entropy (with ignored rows), LayerNorm and RMSNorm match fp64") {
    check_operator("cross_entropy");
    check_operator("layernorm");
    check_operator("rmsnorm");
}

TEST_CASE("gpu jit rowchain: softmax and its log-sum-exp from one kernel, in one pipeline") {
    const OperatorSpec spec = *find_operator("softmax");
    algorithms::OperatorFuncs f = algorithms::build(spec);
    Halide::Var r("r");
    Halide::Func lse("lse");
    lse(r) = f.stage("row_max")(r) + Halide::log(f.stage("row_sum")(r));
    algorithms::fuse_operator(spec, f, algorithms::FusionChoice());
    GpuPipeline p = compile_gpu({f.outputs[0], lse}, ExternOptions());
    REQUIRE(p.stages().size() == 2);
    for (auto [rows, cols] : shapes) {
        INFO(rows << "x" << cols);
        const OperatorInstance soft = instantiate(spec, rows, cols),
                               lse_inst = instantiate(*find_operator("logsumexp"), rows, cols);
        const std::vector<HostTensor> in = make_inputs(soft, 29);
        f.inputs[0].set(to_halide_buffer(in[0]));
        Halide::Buffer<> y = to_halide_buffer(make_outputs(soft)[0]), l = to_halide_buffer(make_outputs(lse_inst)[0]);
        p.realize({y, l});
        const HostTensor want_y = reference::compute(soft, in)[0], want_lse = reference::compute(lse_inst, in)[0];
        check_close("y", read(y, soft.outputs[0]), want_y, gpu_tolerance(want_y));
        check_close("lse", read(l, lse_inst.outputs[0]), want_lse, gpu_tolerance(want_lse));
    }
}

TEST_CASE("gpu jit rowchain: a cross-entropy label out of range gives its row a NaN loss, the others theirs") {
    const OperatorSpec spec = *find_operator("cross_entropy");
    algorithms::OperatorFuncs f = algorithms::build(spec);
    algorithms::fuse_operator(spec, f, algorithms::FusionChoice());
    GpuPipeline p = compile_gpu(f.outputs, ExternOptions());
    const OperatorInstance inst = instantiate(spec, 9, 1000);
    std::vector<HostTensor> in = make_inputs(inst, 3);
    std::vector<HostTensor> valid = in;
    in[1].values[2] = -1;
    in[1].values[6] = 1000;
    valid[1].values[2] = valid[1].values[6] = 0;
    for (size_t i = 0; i < in.size(); i++) f.inputs[i].set(to_halide_buffer(in[i]));
    Halide::Buffer<> out = to_halide_buffer(make_outputs(inst)[0]);
    p.realize(out);
    const HostTensor got = read(out, inst.outputs[0]), want = reference::compute(inst, valid)[0];
    for (int64_t row = 0; row < 9; row++) {
        INFO("row " << row);
        if (row == 2 || row == 6) {
            CHECK(std::isnan(got.values[size_t(row)]));
        } else {
            CHECK(std::abs(got.values[size_t(row)] - want.values[size_t(row)]) <=
                  1e-3 * (1 + std::abs(want.values[size_t(row)])));
        }
    }
}

namespace {

void check_chain(const testing::UserChain &c) {
    INFO(c.name << ", x " << c.inputs[0].desc.numel() << " elements");
    GpuPipeline p = compile_gpu(c.outputs, ExternOptions());
    for (size_t i = 0; i < c.params.size(); i++) {
        Halide::ImageParam param = c.params[i];
        param.set(to_halide_buffer(c.inputs[i]));
    }
    std::vector<Halide::Buffer<>> outs;
    for (const HostTensor &t : c.expected) outs.push_back(to_halide_buffer(HostTensor(t.desc)));
    if (outs.size() == 1)
        p.realize(outs[0]);
    else
        p.realize(Halide::Realization(outs));
    for (size_t o = 0; o < outs.size(); o++)
        check_close(c.expected[o].desc.name, read(outs[o], c.expected[o].desc), c.expected[o],
                    gpu_tolerance(c.expected[o]));
}

}  // namespace

TEST_CASE("gpu jit rowchain: softmax with its log-sum-exp and LayerNorm over a middle axis match fp64") {
    // A thread per row, 32 per row, the chunked form; partial blocks of 32 rows.
    check_chain(testing::middle_softmax(37, 7, 3, DType::F16));
    check_chain(testing::middle_softmax(100, 1000, 3, DType::F16));
    check_chain(testing::middle_softmax(128, 4096, 8, DType::F16));
    check_chain(testing::middle_softmax(1, 3000, 5, DType::BF16));
    check_chain(testing::middle_layernorm(37, 7, 3));
    check_chain(testing::middle_layernorm(256, 2048, 4));
}

TEST_CASE("gpu jit rowchain: rows over several dimensions, 3-D cross-entropy and a row's entropy match fp64") {
    check_chain(testing::softmax_4d(1000, 7, 3, 2));
    check_chain(testing::softmax_4d(4096, 4, 2, 2));
    check_chain(testing::cross_entropy_3d(7, 5, 3));
    check_chain(testing::cross_entropy_3d(32000, 4, 3));
    check_chain(testing::row_entropy(1, 1));
    check_chain(testing::row_entropy(50257, 9));
}
