// layernorm: LayerNorm or RMSNorm over the rows of x [rows, cols] through their AOT libraries
// (generators/meson.build): layernorm and rmsnorm run the fused form (LayerNorm's mean and sum of
// squared deviations in one pass, repaired by Neptune's companions) on Halide's CUDA backend,
// layernorm_host and rmsnorm_host on the host. README.md has the details.
#include <CLI/CLI.hpp>

#include "AppSupport.h"
#include "layernorm.h"
#include "layernorm_host.h"
#include "rmsnorm.h"
#include "rmsnorm_host.h"

using namespace neptune;
using namespace neptune::apps;

int main(int argc, char **argv) {
    CLI::App app{
        "LayerNorm (y = (x - mean) / sqrt(var + 1e-5) * gamma + beta) or RMSNorm (y = x / sqrt(mean(x^2) + 1e-5) "
        "* gamma) over the last axis of x [rows, cols], f16, through Neptune's AOT libraries. Checks against "
        "the fp64 reference, then times the library.",
        "layernorm"};
    std::string op_name = "layernorm", shape;
    CommonOptions common;
    app.add_option("--op", op_name, "layernorm or rmsnorm")
        ->check(CLI::IsMember({"layernorm", "rmsnorm"}))
        ->capture_default_str();
    app.add_option("--shape", shape, "ROWS,COLS; default 8192,4096 on the GPU, 1024,1024 on the host")
        ->check(CLI::Validator(check_shape, "ROWS,COLS"));
    add_common_options(app, common);
    if (const int rc = parse_arguments(app, argc, argv, common); rc >= 0) return rc;
    if (shape.empty()) shape = common.gpu ? "8192,4096" : "1024,1024";

    const auto [rows, cols] = parse_shape(shape);
    AppOperator op;
    op.inst = instantiate(*find_operator(op_name), rows, cols);
    op.title = op_name + " over " + std::to_string(rows) + " rows of " + std::to_string(cols) + " columns, f16";
    if (op_name == "layernorm") {
        op.gpu = [](Buffers &i, Buffers &o) { return layernorm(i[0], i[1], i[2], o[0]); };
        op.host = [](Buffers &i, Buffers &o) { return layernorm_host(i[0], i[1], i[2], o[0]); };
    } else {
        op.gpu = [](Buffers &i, Buffers &o) { return rmsnorm(i[0], i[1], o[0]); };
        op.host = [](Buffers &i, Buffers &o) { return rmsnorm_host(i[0], i[1], o[0]); };
    }
    op.gpu_tolerance = tolerance_for(op.inst.outputs[0].dtype);  // f16 outputs: their rounding dominates
    return run_app(op, common);
}
