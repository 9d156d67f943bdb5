// Bad inputs at run time: errors with messages, never crashes or silently wrong answers.
#include <doctest/doctest.h>

#include "neptune/HalideCpu.h"
#include "neptune/algorithms/Algorithms.h"

using namespace neptune;

TEST_CASE("runtime inputs: an out-of-range cross-entropy label is a run-time error naming the label") {
    const OperatorInstance inst = instantiate(*find_operator("cross_entropy"), 2, 5);
    std::vector<HostTensor> in = make_inputs(inst, 1);
    in[1].values = {1, 5};  // 5 is out of [0, 5)
    algorithms::OperatorFuncs f = algorithms::build(inst.spec);
    HalideCpuRunner runner(inst, f.inputs, f.outputs);
    runner.set_inputs(in);
    std::vector<HostTensor> out = make_outputs(inst);
    CHECK_THROWS_WITH_AS(runner.run(out), doctest::Contains("label out of range"), Halide::RuntimeError);
}

TEST_CASE("runtime inputs: a buffer of the wrong element type or rank is rejected by name") {
    const OperatorInstance inst = instantiate(*find_operator("softmax"), 2, 5);
    algorithms::OperatorFuncs f = algorithms::build(inst.spec);
    Halide::Buffer<float> wrong_type(5, 2);
    CHECK_THROWS_WITH_AS(f.inputs[0].set(wrong_type), doctest::Contains("x"), Halide::CompileError);
    Halide::Buffer<> wrong_rank(Halide::Float(16), {5, 2, 3});
    f.inputs[0].set(wrong_rank);  // the rank is checked when the pipeline runs
    Halide::Pipeline p(f.outputs[0]);
    CHECK_THROWS_WITH_AS(p.realize({5, 2}, cpu_target()),
                         doctest::Contains("Input buffer x requires a buffer of exactly 2 dimensions"),
                         Halide::RuntimeError);
}

TEST_CASE("runtime inputs: a runner refuses the wrong number of inputs and rows outside one block") {
    const OperatorInstance inst = instantiate(*find_operator("prefill_causal"), 1, 4);
    algorithms::OperatorFuncs f = algorithms::build(inst.spec);
    HalideCpuRunner runner(inst, f.inputs, f.outputs);
    CHECK_THROWS_WITH_AS(runner.set_inputs({}), doctest::Contains("wrong number of inputs"), std::invalid_argument);
    std::vector<HostTensor> out = make_outputs(inst);
    CHECK_THROWS_WITH_AS(runner.run_rows(out, 2, 4), doctest::Contains("one row block"), std::invalid_argument);
}
