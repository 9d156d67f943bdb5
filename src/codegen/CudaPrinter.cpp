#include "codegen/CudaPrinter.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "neptune/Error.h"

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

std::string ident(const std::string &n) {
    std::string s = n;
    for (char &c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    return s;
}

const char *elem_type(DType t) {
    switch (t) {
    case DType::F16: return "nd::f16";
    case DType::BF16: return "nd::bf16";
    case DType::F32: return "float";
    case DType::I32: return "int";
    }
    return "?";
}

std::string float_literal(double v) {
    if (std::isinf(v)) return v < 0 ? "nd::neg_inf()" : "(-nd::neg_inf())";
    if (std::isnan(v)) return "__int_as_float(0x7fffffff)";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9gf", v);
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos) s.insert(s.size() - 1, ".0");
    return s;
}

/** The per-row copy of a warp-rows row vector that a tile map reads (every lane, all 16 rows). */
std::string row_copy(const std::string &n) { return ident(n) + "_by_row"; }

// The kernel's declaration up to its opening brace: launch bounds, then the tensors, the TMA
// descriptors (by value: __grid_constant__ keeps them in parameter space, where TMA reads them) and
// the int parameters, in the order every launcher passes them.
std::string signature(const Kernel &k) {
    std::ostringstream os;
    os << "extern \"C\" __global__ void __launch_bounds__(" << k.threads();
    if (k.min_blocks_per_sm > 0) os << ", " << k.min_blocks_per_sm;
    os << ") " << k.name << "(";
    bool first = true;
    for (const TensorParam &t : k.tensors) {
        os << (first ? "" : ", ") << (t.output ? "" : "const ") << elem_type(t.elem) << " *__restrict__ "
           << ident(t.name);
        first = false;
    }
    for (const TensorMap &m : k.tensor_maps) os << ", const __grid_constant__ nd::tensor_map " << ident(m.name);
    for (const std::string &p : k.int_params) os << ", int " << ident(p);
    os << ") {\n";
    return os.str();
}

std::string ExprPrinter::print(const Expr &e) const {
    if (const auto *i = e.as<HI::IntImm>()) return std::to_string(i->value);
    if (const auto *u = e.as<HI::UIntImm>()) return std::to_string(u->value);
    if (const auto *f = e.as<HI::FloatImm>()) return float_literal(f->value);
    if (const auto *v = e.as<HI::Variable>()) return variable(v->name);
    if (const auto *c = e.as<HI::Cast>()) {
        if (c->type.is_float()) return "((float)(" + print(c->value) + "))";
        if (c->type.is_bool()) return "((bool)(" + print(c->value) + "))";
        return "((int)(" + print(c->value) + "))";
    }
    if (const auto *op = e.as<HI::Add>()) return bin(op->a, "+", op->b);
    if (const auto *op = e.as<HI::Sub>()) return bin(op->a, "-", op->b);
    if (const auto *op = e.as<HI::Mul>()) return bin(op->a, "*", op->b);
    // Halide's integer division and modulus are Euclidean, C's truncate: bounds of skipped
    // tiles divide negative numbers.
    if (const auto *op = e.as<HI::Div>()) {
        if (op->type.is_float()) return bin(op->a, "/", op->b);
        return "nd::div_euclid(" + print(op->a) + ", " + print(op->b) + ")";
    }
    if (const auto *op = e.as<HI::Mod>()) {
        if (op->type.is_float()) {
            const std::string a = print(op->a), b = print(op->b);
            return "((" + a + ") - (" + b + ") * floorf((" + a + ") / (" + b + ")))";
        }
        return "nd::mod_euclid(" + print(op->a) + ", " + print(op->b) + ")";
    }
    if (const auto *op = e.as<HI::Min>())
        return (op->type.is_float() ? "fminf(" : "min(") + print(op->a) + ", " + print(op->b) + ")";
    if (const auto *op = e.as<HI::Max>())
        return (op->type.is_float() ? "fmaxf(" : "max(") + print(op->a) + ", " + print(op->b) + ")";
    if (const auto *op = e.as<HI::EQ>()) return bin(op->a, "==", op->b);
    if (const auto *op = e.as<HI::NE>()) return bin(op->a, "!=", op->b);
    if (const auto *op = e.as<HI::LT>()) return bin(op->a, "<", op->b);
    if (const auto *op = e.as<HI::LE>()) return bin(op->a, "<=", op->b);
    if (const auto *op = e.as<HI::GT>()) return bin(op->a, ">", op->b);
    if (const auto *op = e.as<HI::GE>()) return bin(op->a, ">=", op->b);
    if (const auto *op = e.as<HI::And>()) return bin(op->a, "&&", op->b);
    if (const auto *op = e.as<HI::Or>()) return bin(op->a, "||", op->b);
    if (const auto *op = e.as<HI::Not>()) return "(!" + print(op->a) + ")";
    if (const auto *op = e.as<HI::Select>())
        return "(" + print(op->condition) + " ? " + print(op->true_value) + " : " + print(op->false_value) + ")";
    if (const auto *c = e.as<HI::Call>()) return call(c);
    std::ostringstream os;
    os << e;
    throw InternalError("emit_cuda: cannot print " + os.str());
}

std::string ExprPrinter::bin(const Expr &a, const char *op, const Expr &b) const {
    return "(" + print(a) + " " + op + " " + print(b) + ")";
}

std::string ExprPrinter::call(const HI::Call *c) const {
    if (c->call_type == HI::Call::Image) {
        if (c->args.size() != 1) throw InternalError("emit_cuda: only 1-D tensors are read inside maps");
        if (column_vectors_) {  // every read of such a tensor is at its one offset from the column
            auto it = column_vectors_->find(c->name);
            if (it != column_vectors_->end()) return it->second + "[e]";
        }
        for (const TensorParam &t : k_.tensors)
            if (t.name == c->name && (t.elem == DType::F16 || t.elem == DType::BF16))
                return "nd::to_float(" + ident(c->name) + "[" + print(c->args[0]) + "])";
        return ident(c->name) + "[" + print(c->args[0]) + "]";
    }
    const std::string a = c->args.empty() ? "" : print(c->args[0]);
    if (c->name == "exp_f32") return "nd::fast_exp2((" + a + ") * 1.44269504f)";  // exp(x) = 2^(x log2 e)
    if (c->name == "fast_exp2") return "nd::fast_exp2(" + a + ")";
    if (c->name == "log_f32") return "logf(" + a + ")";
    if (c->name == "tanh_f32") return "nd::fast_tanh(" + a + ")";
    if (c->name == "sqrt_f32") return "sqrtf(" + a + ")";
    if (c->name == "abs" || c->name == "abs_f32") return "fabsf(" + a + ")";
    if (c->name == "pow_f32") return "powf(" + a + ", " + print(c->args[1]) + ")";
    throw InternalError("emit_cuda: no CUDA form for the call " + c->name);
}

std::string ExprPrinter::variable(const std::string &n) const {
    if (n == "row" || n == "col") return n;
    auto it = k_.values.find(n);
    if (it != k_.values.end()) {
        const TileType &t = it->second;
        if (t.layout == Layout::RowVector) return ident(n) + (ctx_ == Context::Tile ? ".v[mt][e >> 1]" : ".v[mt][hh]");
        // A warp-rows map reads row r of a row vector from the shuffled copy the map made (row_copy).
        if (t.layout == Layout::WarpRowVector) return ctx_ == Context::Tile ? row_copy(n) + "[r]" : ident(n) + ".v";
        if (t.layout == Layout::WarpRows) return ident(n) + ".v[r][q][e]";
        if (t.layout == Layout::RowStrip) return "nd::at(" + ident(n) + ", i, e)";  // a thread's vector i, element e
        if (t.layout == Layout::StripRowVector) return ident(n) + ".v";  // the thread's row
        return ident(n) + ".v[mt][nt][e]";
    }
    return ident(n);
}

}  // namespace neptune::internal
