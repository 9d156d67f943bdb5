#include "extern/DescribeKernels.h"

#include "neptune/Error.h"

namespace neptune::internal {

namespace HI = Halide::Internal;

namespace {

class PrefixPrinter : public HI::IRVisitor {
public:
    std::string out;

private:
    using HI::IRVisitor::visit;
    template <typename T>
    void binary(const char *op, const T *n) {
        out += std::string("(") + op + " ";
        n->a.accept(this);
        out += " ";
        n->b.accept(this);
        out += ")";
    }
    void visit(const HI::IntImm *n) override { out += std::to_string(n->value); }
    void visit(const HI::UIntImm *n) override { out += std::to_string(n->value); }
    void visit(const HI::Variable *n) override { out += n->name; }
    void visit(const HI::Cast *n) override {
        if (!n->type.is_int() && !n->type.is_uint()) unsupported("a cast to a non-integer type");
        n->value.accept(this);
    }
    void visit(const HI::Add *n) override { binary("+", n); }
    void visit(const HI::Sub *n) override { binary("-", n); }
    void visit(const HI::Mul *n) override { binary("*", n); }
    void visit(const HI::Div *n) override { binary("/", n); }
    void visit(const HI::Mod *n) override { binary("%", n); }
    void visit(const HI::Min *n) override { binary("min", n); }
    void visit(const HI::Max *n) override { binary("max", n); }
    void visit(const HI::FloatImm *) override { unsupported("a float"); }
    void visit(const HI::Select *) override { unsupported("a select"); }
    void visit(const HI::Call *n) override { unsupported("a call to " + n->name); }
    void visit(const HI::Let *) override { unsupported("a let"); }
    [[noreturn]] void unsupported(const std::string &what) {
        throw InternalError("int_expr_text: a launch expression holds " + what);
    }
};

}  // namespace

std::string int_expr_text(const Halide::Expr &e) {
    if (!e.defined()) throw InternalError("int_expr_text: undefined expression");
    PrefixPrinter p;
    HI::simplify(e).accept(&p);
    return p.out;
}

int kernel_threads(const tir::Kernel &k) { return k.threads(); }

interop::KernelSet describe_kernels(const tir::Program &p) {
    interop::KernelSet s;
    for (const tir::Kernel &k : p.kernels) {
        if (!k.float_params.empty()) throw InternalError(k.name + ": extern stages pass no float kernel parameters");
        interop::KernelSpec ks;
        ks.name = k.name;
        ks.grid[0] = int_expr_text(k.grid_x);
        ks.grid[1] = int_expr_text(k.grid_y);
        ks.grid[2] = int_expr_text(k.grid_z);
        ks.threads = kernel_threads(k);
        ks.shared_bytes = k.shared_bytes;
        if (k.cluster_x.defined()) ks.cluster = int_expr_text(k.cluster_x);
        for (const tir::TensorParam &t : k.tensors) ks.tensors.push_back(t.name);
        for (const tir::TensorMap &m : k.tensor_maps) {
            const tir::TensorView &v = k.views.at(m.tensor);
            ks.maps.push_back(
                {m.tensor,
                 {int_expr_text(v.cols), int_expr_text(v.rows), int_expr_text(v.heads), int_expr_text(v.batch)},
                 {int_expr_text(v.row_stride), int_expr_text(v.head_stride), int_expr_text(v.batch_stride)},
                 m.box_rows,
                 m.l2_promotion});
        }
        ks.ints = k.int_params;
        s.kernels.push_back(ks);
    }
    for (const tir::Workspace &w : p.workspaces) s.workspaces.push_back({w.name, int_expr_text(w.elements), w.zeroed});
    return s;
}

}  // namespace neptune::internal
