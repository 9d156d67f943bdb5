// softmax: softmax or log-sum-exp over the rows of x [rows, cols] through their AOT libraries
// (generators/meson.build): softmax and logsumexp run the fused form (max and sum in one pass, the
// sum repaired by exp(m - m')) on Halide's CUDA backend, softmax_host and logsumexp_host on the
// host. README.md has the details.
#include <CLI/CLI.hpp>

#include "AppSupport.h"
#include "logsumexp.h"
#include "logsumexp_host.h"
#include "softmax.h"
#include "softmax_host.h"

using namespace neptune;
using namespace neptune::apps;

int main(int argc, char **argv) {
    CLI::App app{
        "Softmax (y = exp(x - max) / sum, f16) or log-sum-exp (f32 per row) over the last axis of x [rows, cols] "
        "through Neptune's AOT libraries. Checks against the fp64 reference, then times the library.",
        "softmax"};
    std::string op_name = "softmax", shape;
    CommonOptions common;
    app.add_option("--op", op_name, "softmax or logsumexp")
        ->check(CLI::IsMember({"softmax", "logsumexp"}))
        ->capture_default_str();
    app.add_option("--shape", shape, "ROWS,COLS; default 4096,4096 on the GPU, 1024,1024 on the host")
        ->check(CLI::Validator(check_shape, "ROWS,COLS"));
    add_common_options(app, common);
    if (const int rc = parse_arguments(app, argc, argv, common); rc >= 0) return rc;
    if (shape.empty()) shape = common.gpu ? "4096,4096" : "1024,1024";

    const auto [rows, cols] = parse_shape(shape);
    AppOperator op;
    op.inst = instantiate(*find_operator(op_name), rows, cols);
    op.title = op_name + " over " + std::to_string(rows) + " rows of " + std::to_string(cols) + " columns, f16 in";
    if (op_name == "softmax") {
        op.gpu = [](Buffers &i, Buffers &o) { return softmax(i[0], o[0]); };
        op.host = [](Buffers &i, Buffers &o) { return softmax_host(i[0], o[0]); };
    } else {
        op.gpu = [](Buffers &i, Buffers &o) { return logsumexp(i[0], o[0]); };
        op.host = [](Buffers &i, Buffers &o) { return logsumexp_host(i[0], o[0]); };
    }
    // Halide's CUDA code uses the GPU's exp and log: a little looser than the host's bound for f32
    // statistics (generator/gpu_aot's bounds).
    const DType out = op.inst.outputs[0].dtype;
    op.gpu_tolerance = out == DType::F32 ? Tolerance{1e-3, 5e-3} : tolerance_for(out);
    return run_app(op, common);
}
