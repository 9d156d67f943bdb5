// Every operator's plain Halide algorithm, realized by Halide's JIT on the CPU, against the fp64
// reference, on odd shapes: sequence 1, 7, 1000, 8191; batch 3; head dims 64, 96, 128; f16 and bf16;
// rows whose maximum rises along the keys; rows with no visible key.
#include <doctest/doctest.h>

#include "SmallShapes.h"
#include "neptune/Check.h"
#include "neptune/HalideCpu.h"

using namespace neptune;

namespace {

using Case = testing::ShapeCase;

void run_case(const OperatorSpec &op, const Case &c) {
    const OperatorInstance inst = instantiate(testing::shrink(op, c, 8, 64, 32, 48), c.batch, c.seq);
    CheckOptions opt;
    opt.style = c.style;
    opt.work_budget = 6e7;
    const CheckResult r = check_algorithm_on_cpu(inst, opt);
    CHECK(r.rows_checked > 0);
    for (size_t o = 0; o < r.outputs.size(); o++) {
        const ErrorStats &e = r.outputs[o].error;
        INFO(op.name << " B=" << c.batch << " S=" << c.seq << " D=" << c.head_dim << " "
                     << std::string(dtype_name(c.dtype)) << " seq_q=" << c.seq_q << " rows " << r.rows_checked << "/"
                     << inst.rows << " output " << r.outputs[o].output << ": " << e.describe(inst.outputs[o]));
        CHECK(tolerance_for(inst.outputs[o].dtype).accepts(e));
    }
}

const std::vector<Case> attention_cases = {
    {1, 1},
    {1, 7, 64},
    {3, 7, 96, DType::BF16},
    {1, 1000, 128, DType::F16, InputStyle::RisingScores},
    {1, 8191, 64},
    {2, 33, 128, DType::F16, InputStyle::Normal, 40, 5},
};

}  // namespace

TEST_CASE("algorithms: attention operators match the fp64 reference") {
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family != Family::Attention) continue;
        for (const Case &c : attention_cases) {
            if (op.attention.decode && c.seq_q) continue;
            run_case(op, c);
        }
    }
}

TEST_CASE("algorithms: row-wise operators and Performer match the fp64 reference") {
    const std::vector<Case> cases = {{1, 1}, {3, 7}, {5, 1000, 128, DType::BF16}, {2, 8191}};
    for (const OperatorSpec &op : operator_suite()) {
        if (op.family == Family::Attention) continue;
        for (const Case &c : cases) run_case(op, op.family == Family::Performer && c.seq > 1000 ? Case{1, 1000} : c);
    }
}
