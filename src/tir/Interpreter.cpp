#include "tir/Interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "neptune/Error.h"
#include "neptune/Half.h"

namespace neptune::tir {

namespace {

namespace HI = Halide::Internal;

/** An expression the interpreter cannot evaluate; the statement that holds it adds the context. */
struct EvalError {
    std::string what;
};

/** `x` rounded to the nearest value of element type `t` (f16/bf16 to nearest even; i32 truncates
 * as Halide's float-to-int cast does). */
float round_to(DType t, float x) {
    switch (t) {
    case DType::F16: return f16_to_float(float_to_f16(x));
    case DType::BF16: return bf16_to_float(float_to_bf16(x));
    case DType::F32: return x;
    case DType::I32: return std::trunc(x);
    }
    return x;
}

// ---- Expressions ---------------------------------------------------------------------------
// A map's Expr is compiled once per execution of the statement: scalars become constants and
// Variables naming values become pointers into them, so evaluating one element is a plain walk.

enum class Op {
    Const,
    Tile,
    Row,
    RowIndex,
    ColIndex,  // leaves
    ToFloat,
    Truncate,
    ToBool,  // casts
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Min,
    Max,  // arithmetic (f32 or integer)
    EQ,
    NE,
    LT,
    LE,
    GT,
    GE,
    And,
    Or,
    Not,
    Select,  // logic
    Exp,
    Exp2,
    Log,
    Log2,
    Tanh,
    Sqrt,
    Abs,
    Floor,
    Ceil,
    Pow,  // calls
    Load  // a 1-D input read inside a map (ALiBi slopes, a length per batch)
};

struct Code {
    Op op = Op::Const;
    bool flt = false;  // f32 arithmetic (else integer or bool)
    double k = 0;  // Const
    const float *data = nullptr;  // Tile: data[row * cols + col]; Row: data[row]
    const HostTensor *tensor = nullptr;  // Load: tensor->values[args[0]]
    int cols = 0;
    std::vector<Code> args;
};

/** Halide's integer division and modulus: Euclidean, and 0 for a zero divisor. */
int64_t euclid_div(int64_t a, int64_t b) {
    if (b == 0) return 0;
    int64_t q = a / b;
    if (a % b < 0) q += b > 0 ? -1 : 1;
    return q;
}

int64_t euclid_mod(int64_t a, int64_t b) {
    if (b == 0) return 0;
    const int64_t r = a % b;
    return r < 0 ? r + (b > 0 ? b : -b) : r;
}

double eval(const Code &c, int r, int col);

double arith(const Code &c, double x, double y) {
    if (c.flt) {
        const float a = float(x), b = float(y);
        switch (c.op) {
        case Op::Add: return double(a + b);
        case Op::Sub: return double(a - b);
        case Op::Mul: return double(a * b);
        case Op::Div: return double(a / b);
        case Op::Mod: return double(a - b * std::floor(a / b));
        case Op::Min: return double(b < a ? b : a);
        case Op::Max: return double(b > a ? b : a);
        case Op::Pow: return double(std::pow(a, b));
        default: break;
        }
    }
    const int64_t a = int64_t(x), b = int64_t(y);
    switch (c.op) {
    case Op::Add: return double(a + b);
    case Op::Sub: return double(a - b);
    case Op::Mul: return double(a * b);
    case Op::Div: return double(euclid_div(a, b));
    case Op::Mod: return double(euclid_mod(a, b));
    case Op::Min: return double(std::min(a, b));
    case Op::Max: return double(std::max(a, b));
    default: break;
    }
    throw EvalError{"an integer operator without an integer meaning"};
}

double unary(Op op, double x) {
    const float a = float(x);
    switch (op) {
    case Op::Exp: return double(std::exp(a));
    case Op::Exp2: return double(std::exp2(a));
    case Op::Log: return double(std::log(a));
    case Op::Log2: return double(std::log2(a));
    case Op::Tanh: return double(std::tanh(a));
    case Op::Sqrt: return double(std::sqrt(a));
    case Op::Floor: return double(std::floor(a));
    case Op::Ceil: return double(std::ceil(a));
    default: break;
    }
    throw EvalError{"not a unary function"};
}

double eval(const Code &c, int r, int col) {
    const auto arg = [&](size_t i) { return eval(c.args[i], r, col); };
    switch (c.op) {
    case Op::Const: return c.k;
    case Op::Tile: return double(c.data[size_t(r) * size_t(c.cols) + size_t(col)]);
    case Op::Row: return double(c.data[r]);
    case Op::RowIndex: return r;
    case Op::ColIndex: return col;
    case Op::ToFloat: return double(float(arg(0)));
    case Op::Truncate: return std::trunc(arg(0));
    case Op::ToBool: return arg(0) != 0;
    case Op::EQ: return arg(0) == arg(1);
    case Op::NE: return arg(0) != arg(1);
    case Op::LT: return arg(0) < arg(1);
    case Op::LE: return arg(0) <= arg(1);
    case Op::GT: return arg(0) > arg(1);
    case Op::GE: return arg(0) >= arg(1);
    case Op::And: return arg(0) != 0 && arg(1) != 0;
    case Op::Or: return arg(0) != 0 || arg(1) != 0;
    case Op::Not: return arg(0) == 0;
    case Op::Select: return arg(0) != 0 ? arg(1) : arg(2);
    case Op::Abs: return c.flt ? double(std::fabs(float(arg(0)))) : std::fabs(arg(0));
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Mod:
    case Op::Min:
    case Op::Max:
    case Op::Pow: return arith(c, arg(0), arg(1));
    case Op::Load: {
        const double i = arg(0);
        if (i < 0 || i >= double(c.tensor->values.size()))
            throw EvalError{"read of " + c.tensor->desc.name + " at " + std::to_string(int64_t(i)) +
                            " is out of bounds"};
        const double v = c.tensor->values[size_t(i)];
        return c.flt ? double(float(v)) : v;  // an int32 input keeps every value, as the kernel's int does
    }
    default: return unary(c.op, arg(0));
    }
}

/** Extern and intrinsic calls the interpreter knows, by name. */
const std::map<std::string, Op> &calls() {
    static const std::map<std::string, Op> table = {
        {"exp_f32", Op::Exp},     {"exp2_f32", Op::Exp2}, {"fast_exp2", Op::Exp2}, {"fast_exp2_f32", Op::Exp2},
        {"log_f32", Op::Log},     {"log2_f32", Op::Log2}, {"tanh_f32", Op::Tanh},  {"sqrt_f32", Op::Sqrt},
        {"floor_f32", Op::Floor}, {"ceil_f32", Op::Ceil}, {"abs", Op::Abs},        {"pow_f32", Op::Pow},
    };
    return table;
}

struct Value {
    TileType type;
    std::vector<float> data;  // row-major, rows x cols
};

/** Turns Halide Exprs into Code, resolving Variables: values of the map's destination shape, "row"
 * and "col" (when `dst` is given), then scalars. */
class Compiler {
public:
    Compiler(const std::map<std::string, double> &scalars, const std::map<std::string, Value> &values,
             const TileType *dst, bool tile_map, const std::map<std::string, HostTensor *> *tensors = nullptr)
        : scalars_(scalars), values_(values), dst_(dst), tile_map_(tile_map), tensors_(tensors) {}

    Code compile(const Halide::Expr &e) const {
        Code c;
        c.flt = e.type().is_float();
        if (const auto *f = e.as<HI::FloatImm>()) {
            c.k = double(float(f->value));
        } else if (const auto *i = e.as<HI::IntImm>()) {
            c.k = double(i->value);
        } else if (const auto *u = e.as<HI::UIntImm>()) {
            c.k = double(u->value);
        } else if (const auto *v = e.as<HI::Variable>()) {
            variable(v, c);
        } else if (const auto *cast = e.as<HI::Cast>()) {
            return convert(cast, c);
        } else if (const auto *call = e.as<HI::Call>(); call && call->call_type == HI::Call::Image) {
            auto t = tensors_ ? tensors_->find(call->name) : decltype(tensors_->find(call->name))();
            if (!tensors_ || t == tensors_->end() || call->args.size() != 1) unknown(e);
            c.op = Op::Load;
            c.tensor = t->second;
            c.args = {compile(call->args[0])};
        } else if (const auto *call = e.as<HI::Call>()) {
            auto it = calls().find(call->name);
            if (it == calls().end()) unknown(e);
            c.op = it->second;
            for (const Halide::Expr &a : call->args) c.args.push_back(compile(a));
            if (c.args.size() != (c.op == Op::Pow ? 2u : 1u)) unknown(e);
        } else if (const auto *s = e.as<HI::Select>()) {
            c.op = Op::Select;
            c.args = {compile(s->condition), compile(s->true_value), compile(s->false_value)};
        } else if (const auto *n = e.as<HI::Not>()) {
            c.op = Op::Not;
            c.args = {compile(n->a)};
        } else if (!binary(e, c)) {
            unknown(e);
        }
        return c;
    }

private:
    const std::map<std::string, double> &scalars_;
    const std::map<std::string, Value> &values_;
    const TileType *dst_;
    bool tile_map_;
    const std::map<std::string, HostTensor *> *tensors_;

    [[noreturn]] static void unknown(const Halide::Expr &e) {
        std::ostringstream os;
        os << e;
        throw EvalError{"cannot evaluate " + os.str()};
    }

    void variable(const HI::Variable *v, Code &c) const {
        auto value = dst_ ? values_.find(v->name) : values_.end();
        if (value != values_.end()) {
            c.op = is_row_vector(value->second.type) ? Op::Row : Op::Tile;
            c.data = value->second.data.data();
            c.cols = value->second.type.cols;
            c.flt = true;
            return;
        }
        if (dst_ && v->name == "row") {
            c.op = Op::RowIndex;
            return;
        }
        if (dst_ && tile_map_ && v->name == "col") {
            c.op = Op::ColIndex;
            return;
        }
        auto s = scalars_.find(v->name);
        if (s == scalars_.end()) throw EvalError{"'" + v->name + "' is not bound"};
        c.k = c.flt ? double(float(s->second)) : s->second;
    }

    Code convert(const HI::Cast *cast, Code &c) const {
        Code from = compile(cast->value);
        if (cast->type.is_float()) {
            c.op = Op::ToFloat;
        } else if (cast->type.is_bool()) {
            c.op = Op::ToBool;
        } else if (from.flt) {
            c.op = Op::Truncate;
        } else {
            return from;  // integer to integer: the value (no wrap-around on the small values here)
        }
        c.args = {std::move(from)};
        return c;
    }

    template <typename T>
    bool match(const Halide::Expr &e, Op op, Code &c) const {
        const T *n = e.as<T>();
        if (!n) return false;
        c.op = op;
        c.flt = n->a.type().is_float();  // comparisons: how the operands compare; all read as doubles
        c.args = {compile(n->a), compile(n->b)};
        return true;
    }

    bool binary(const Halide::Expr &e, Code &c) const {
        return match<HI::Add>(e, Op::Add, c) || match<HI::Sub>(e, Op::Sub, c) || match<HI::Mul>(e, Op::Mul, c) ||
               match<HI::Div>(e, Op::Div, c) || match<HI::Mod>(e, Op::Mod, c) || match<HI::Min>(e, Op::Min, c) ||
               match<HI::Max>(e, Op::Max, c) || match<HI::EQ>(e, Op::EQ, c) || match<HI::NE>(e, Op::NE, c) ||
               match<HI::LT>(e, Op::LT, c) || match<HI::LE>(e, Op::LE, c) || match<HI::GT>(e, Op::GT, c) ||
               match<HI::GE>(e, Op::GE, c) || match<HI::And>(e, Op::And, c) || match<HI::Or>(e, Op::Or, c);
    }
};

// ---- Statements ----------------------------------------------------------------------------

class Interpreter {
public:
    Interpreter(const Kernel &k, const LaunchArgs &args) : k_(k) {
        for (const TensorParam &t : k.tensors) {
            auto it = args.tensors.find(t.name);
            if (it == args.tensors.end() || !it->second) fail(nullptr, "no tensor '" + t.name + "' in the arguments");
            if (it->second->desc.dtype != t.elem)
                fail(nullptr, "tensor '" + t.name + "' is " + dtype_name(it->second->desc.dtype) +
                                  ", the kernel reads " + dtype_name(t.elem));
            tensors_[t.name] = it->second;
        }
        for (const std::string &p : k.int_params) {
            auto it = args.ints.find(p);
            if (it == args.ints.end()) fail(nullptr, "no int parameter '" + p + "' in the arguments");
            params_[p] = double(it->second);
        }
        for (const std::string &p : k.float_params) {
            auto it = args.floats.find(p);
            if (it == args.floats.end()) fail(nullptr, "no float parameter '" + p + "' in the arguments");
            params_[p] = it->second;
        }
        params_["sm_count"] = double(args.sm_count);
        for (const auto &[name, type] : k.values)
            values_[name] = Value{type, std::vector<float>(size_t(type.rows) * size_t(type.cols))};
    }

    void run() {
        try {
            blocks();
        } catch (const EvalError &e) {  // in the grid or a scalar definition
            fail(nullptr, e.what);
        }
    }

private:
    /** A ring tile's protocol in this block: loads and releases so far (both in ring order). */
    struct Ring {
        int64_t loads = 0, releases = 0;
    };
    /** What one block of a cluster holds while another runs. */
    struct BlockState {
        std::map<std::string, double> scalars;
        std::map<std::string, Value> values;
        std::map<std::string, Ring> rings;
    };

    void blocks() {
        scalars_ = params_;
        const int64_t gx = grid_dim(k_.grid_x), gy = grid_dim(k_.grid_y), gz = grid_dim(k_.grid_z);
        const int64_t cx = grid_dim(k_.cluster_x);
        if (cx < 1 || gx % cx)
            fail(nullptr,
                 "clusters of " + std::to_string(cx) + " blocks do not divide the grid's " + std::to_string(gx));
        for (int64_t bz = 0; bz < gz; bz++)
            for (int64_t by = 0; by < gy; by++)
                for (int64_t bx = 0; bx < gx; bx += cx) {
                    if (!k_.cluster_x.defined()) {
                        start_block(bx, by, bz, gx, gy, gz);
                        block(k_.body);
                    } else {
                        cluster(bx, by, bz, gx, gy, gz, cx);
                    }
                }
    }

    void start_block(int64_t bx, int64_t by, int64_t bz, int64_t gx, int64_t gy, int64_t gz) {
        scalars_ = params_;
        scalars_["block_x"] = double(bx);
        scalars_["block_y"] = double(by);
        scalars_["block_z"] = double(bz);
        scalars_["grid_x"] = double(gx);
        scalars_["grid_y"] = double(gy);
        scalars_["grid_z"] = double(gz);
        for (const ScalarDef &d : k_.scalars) scalars_[d.name] = scalar(d.value);
        for (auto &entry : values_) std::fill(entry.second.data.begin(), entry.second.data.end(), std::nanf(""));
        rings_.clear();
    }

    /** The blocks [bx, bx + cx) of one cluster, top-level statement by statement: blocks interact only
     * at a ClusterMerge, where rank 0 runs the body with every block's shared tiles in reach. */
    void cluster(int64_t bx, int64_t by, int64_t bz, int64_t gx, int64_t gy, int64_t gz, int64_t cx) {
        std::vector<BlockState> members(static_cast<size_t>(cx));
        for (int64_t i = 0; i < cx; i++) {
            start_block(bx + i, by, bz, gx, gy, gz);
            members[size_t(i)] =
                BlockState{scalars_, values_, rings_};  // copies: values_ stays the kernel's declarations
        }
        members_ = &members;
        for (const Stmt &s : k_.body) {
            for (int64_t i = 0; i < cx; i++) {
                if (s->kind == NodeKind::ClusterMerge && i > 0) break;
                current_ = i;
                swap_in(members[size_t(i)]);
                block({s});
                swap_in(members[size_t(i)]);
            }
        }
        members_ = nullptr;
        current_ = 0;
    }

    void swap_in(BlockState &b) {
        std::swap(scalars_, b.scalars);
        std::swap(values_, b.values);
        std::swap(rings_, b.rings);
    }

    /** Shared tile `name` of the cluster's block `rank`. */
    const Value &cluster_value(const Stmt &s, const std::string &name, int64_t rank) const {
        const int64_t cx = members_ ? int64_t(members_->size()) : 1;
        if (rank < 0 || rank >= cx)
            fail(s, "rank " + std::to_string(rank) + " is outside the cluster of " + std::to_string(cx) + " blocks");
        if (rank == current_) return values_.at(name);
        return members_->at(size_t(rank)).values.at(name);
    }

    /** A cluster load: rows of another block's published shared tile (nothing read where none are valid). */
    void cluster_load(const Stmt &s) {
        Value &dst = values_.at(s->dst);
        const bool row_load = s->kind == NodeKind::RowLoad;
        const int64_t rows = clamp(index(s->valid_rows), dst.type.rows);
        const int64_t cols = row_load ? 1 : clamp(index(s->valid_cols), dst.type.cols);
        std::fill(dst.data.begin(), dst.data.end(), row_load ? float(scalar(s->value)) : 0.0f);
        if (rows == 0 || cols == 0) return;
        const Value &src = cluster_value(s, s->src, index(s->rank));
        const int64_t row0 = index(s->row);
        if (row0 < 0 || row0 + rows > src.type.rows)
            fail(s, "rows [" + std::to_string(row0) + ", " + std::to_string(row0 + rows) + ") are outside '" + s->src +
                        "'");
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                dst.data[size_t(r * dst.type.cols + c)] = src.data[size_t((row0 + r) * src.type.cols + c)];
    }

    const Kernel &k_;
    std::map<std::string, HostTensor *> tensors_;
    std::map<std::string, double> params_, scalars_;
    std::map<std::string, Value> values_;
    std::map<std::string, Ring> rings_;
    std::vector<BlockState> *members_ = nullptr;  // the cluster being run (clustered kernels)
    int64_t current_ = 0;  // the rank whose state is in scalars_, values_, rings_

    // The producer refills a ring buffer only after its previous occupant's release: a TMA load at ring
    // position p waits for the release of p - stages. Loads and releases must come in ring order, each
    // release after its load, or the kernel would hang or overwrite a buffer still being read.
    void ring_load(const Stmt &s) {
        Ring &r = rings_[s->dst];
        const int64_t p = index(s->ring), stages = k_.pipeline_stages;
        if (p != r.loads)
            fail(s, "ring position " + std::to_string(p) + " of " + s->dst + " is loaded out of order (expected " +
                        std::to_string(r.loads) + ")");
        if (r.releases < p - stages + 1)
            fail(s, "would hang: buffer " + std::to_string(p % stages) + " of " + s->dst + " still holds position " +
                        std::to_string(r.releases) + ", never released before this load");
        r.loads++;
    }
    void ring_release(const Stmt &s) {
        Ring &r = rings_[s->src];
        const int64_t p = index(s->ring);
        if (p != r.releases || p >= r.loads)
            fail(s, "releases ring position " + std::to_string(p) + " of " + s->src + " with " +
                        std::to_string(r.loads) + " loaded and " + std::to_string(r.releases) + " released");
        r.releases++;
    }

    [[noreturn]] void fail(const Stmt &s, const std::string &what) const {
        std::string where = "tir::interpret: kernel '" + k_.name + "'";
        if (s) where += ": `" + to_string(s, false) + "`";
        throw InternalError(where + ": " + what);
    }

    int64_t grid_dim(const Halide::Expr &e) { return e.defined() ? int64_t(scalar(e)) : 1; }

    double scalar(const Halide::Expr &e) const {
        return eval(Compiler(scalars_, values_, nullptr, false, &tensors_).compile(e), 0, 0);
    }

    int64_t index(const Halide::Expr &e) const { return int64_t(scalar(e)); }

    /** The valid extent of a slice, clamped to the tile's. */
    static int64_t clamp(int64_t valid, int extent) { return std::max<int64_t>(0, std::min<int64_t>(valid, extent)); }

    double &element(const Stmt &s, int64_t i) {
        HostTensor &t = *tensors_.at(s->tensor);
        if (i < 0 || i >= int64_t(t.values.size()))
            fail(s, "element " + std::to_string(i) + " of '" + s->tensor + "' is outside its " +
                        std::to_string(t.values.size()) + " elements");
        return t.values[size_t(i)];
    }

    DType tensor_type(const Stmt &s) const { return tensors_.at(s->tensor)->desc.dtype; }

    /** A TMA load: by (batch, head, row) of the tensor's view, zeros beyond its rows and columns. */
    void view_load(const Stmt &s) {
        Value &v = values_.at(s->dst);
        const TensorView &t = k_.views.at(s->tensor);
        const int64_t batch = index(s->batch), head = index(s->head), row = index(s->row), rows = index(t.rows),
                      cols = index(t.cols);
        if (batch < 0 || batch >= index(t.batch) || head < 0 || head >= index(t.heads) || row < 0)
            fail(s, "batch " + std::to_string(batch) + ", head " + std::to_string(head) + ", row " +
                        std::to_string(row) + " is outside '" + s->tensor + "'");
        const int64_t base = batch * index(t.batch_stride) + head * index(t.head_stride), stride = index(t.row_stride);
        std::fill(v.data.begin(), v.data.end(), 0.0f);
        for (int64_t r = 0; r < v.type.rows && row + r < rows; r++)
            for (int64_t c = 0; c < v.type.cols && c < cols; c++)
                v.data[size_t(r * v.type.cols + c)] =
                    round_to(v.type.elem, float(element(s, base + (row + r) * stride + c)));
    }

    void tile_io(const Stmt &s, bool load) {
        if (load && s->copy == CopyKind::Tma && s->ring.defined()) ring_load(s);
        if (load && s->copy == CopyKind::Tma) return view_load(s);
        Value &v = values_.at(load ? s->dst : s->src);
        const int64_t base = index(s->base), stride = index(s->row_stride);
        const int64_t col_stride = s->col_stride.defined() ? index(s->col_stride) : 1;
        const int64_t rows = clamp(index(s->valid_rows), v.type.rows), cols = clamp(index(s->valid_cols), v.type.cols);
        if (load) std::fill(v.data.begin(), v.data.end(), 0.0f);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                float &x = v.data[size_t(r * v.type.cols + c)];
                double &g = element(s, base + r * stride + c * col_stride);
                if (load)
                    x = round_to(v.type.elem, float(g));
                else
                    g = double(round_to(tensor_type(s), x));
            }
    }

    void row_io(const Stmt &s, bool load) {
        Value &v = values_.at(load ? s->dst : s->src);
        const int64_t base = index(s->base), rows = clamp(index(s->valid_rows), v.type.rows);
        if (!load) {
            for (int64_t r = 0; r < rows; r++)
                element(s, base + r) = double(round_to(tensor_type(s), v.data[size_t(r)]));
            return;
        }
        const int64_t stride = index(s->row_stride);
        const float fill = float(scalar(s->value));
        for (int64_t r = 0; r < v.type.rows; r++)
            v.data[size_t(r)] = r < rows ? float(element(s, base + r * stride)) : fill;
    }

    void map(const Stmt &s, bool tile_map) {
        Value &dst = values_.at(s->dst);
        const Code code = Compiler(scalars_, values_, &dst.type, tile_map, &tensors_).compile(s->value);
        // Row-strip maps compute the elements within their bounds only; the others are 0.
        const int64_t rows = s->valid_rows.defined() ? clamp(index(s->valid_rows), dst.type.rows) : dst.type.rows;
        const int64_t cols = s->valid_cols.defined() ? clamp(index(s->valid_cols), dst.type.cols) : dst.type.cols;
        for (int r = 0; r < dst.type.rows; r++)
            for (int c = 0; c < dst.type.cols; c++)
                dst.data[size_t(r * dst.type.cols + c)] =
                    r < rows && c < cols ? round_to(dst.type.elem, float(eval(code, r, c))) : 0.0f;
    }

    void reduce(const Stmt &s) {
        Value &dst = values_.at(s->dst);
        const Value &src = values_.at(s->src);
        const bool max = s->op == ReduceOp::Max;
        const int64_t cols = s->valid_cols.defined() ? clamp(index(s->valid_cols), src.type.cols) : src.type.cols;
        for (int r = 0; r < src.type.rows; r++) {
            float acc = max ? -std::numeric_limits<float>::infinity() : 0.0f;
            for (int c = 0; c < cols; c++) {
                const float x = src.data[size_t(r * src.type.cols + c)];
                acc = max ? (x > acc ? x : acc) : acc + x;
            }
            float &d = dst.data[size_t(r)];
            d = max ? (acc > d ? acc : d) : d + acc;
        }
    }

    // Every rank has run the statements before this one (clusters run top-level statement by statement).
    void cluster_reduce(const Stmt &s) {
        const bool max = s->op == ReduceOp::Max;
        const int64_t cx = members_ ? int64_t(members_->size()) : 1;
        std::vector<float> acc(values_.at(s->dst).data.size(), max ? -std::numeric_limits<float>::infinity() : 0.0f);
        for (int64_t q = 0; q < cx; q++) {
            std::vector<float> term;
            if (s->value.defined()) {
                // The term with the peers' row vectors as rank q holds them, the others this block's.
                std::map<std::string, Value> at_q = values_;
                for (const std::string &p : s->peers) at_q[p] = cluster_value(s, p, q);
                const Value &dst = values_.at(s->dst);
                const Code code = Compiler(scalars_, at_q, &dst.type, false, &tensors_).compile(s->value);
                for (int r = 0; r < int(acc.size()); r++) term.push_back(float(eval(code, r, 0)));
            } else {
                term = cluster_value(s, s->src, q).data;
            }
            for (size_t r = 0; r < acc.size(); r++) {
                const float x = term[r];
                acc[r] = max ? (x > acc[r] ? x : acc[r]) : acc[r] + x;
            }
        }
        values_.at(s->dst).data = acc;
    }

    void dot(const Stmt &s) {
        const bool keep = s->accumulate && !(s->restart.defined() && index(s->restart) != 0);
        Value &acc = values_.at(s->dst);
        const Value &a = values_.at(s->a), &b = values_.at(s->b);
        const int depth = a.type.cols, bcols = b.type.cols;
        for (int m = 0; m < acc.type.rows; m++)
            for (int n = 0; n < acc.type.cols; n++) {
                float sum = 0;
                for (int kk = 0; kk < depth; kk++) {
                    const float y = s->transpose_b ? b.data[size_t(n * bcols + kk)] : b.data[size_t(kk * bcols + n)];
                    sum += a.data[size_t(m * depth + kk)] * y;
                }
                float &d = acc.data[size_t(m * acc.type.cols + n)];
                d = (keep ? d : 0.0f) + sum;
            }
    }

    void loop(const Stmt &s) {
        const int64_t begin = index(s->begin), end = index(s->end);
        for (int64_t i = begin; i < end; i++) {
            scalars_[s->var] = double(i);
            block(s->body);
        }
        scalars_.erase(s->var);
    }

    void stmt(const Stmt &s) {
        switch (s->kind) {
        case NodeKind::TileLoad:
            if (s->rank.defined())
                cluster_load(s);
            else
                tile_io(s, true);
            break;
        case NodeKind::TileStore: tile_io(s, false); break;
        case NodeKind::RowLoad:
            if (s->rank.defined())
                cluster_load(s);
            else
                row_io(s, true);
            break;
        case NodeKind::RowStore: row_io(s, false); break;
        case NodeKind::Fill: {
            Value &v = values_.at(s->dst);
            std::fill(v.data.begin(), v.data.end(), round_to(v.type.elem, float(scalar(s->value))));
            break;
        }
        case NodeKind::TileMap: map(s, true); break;
        case NodeKind::RowMap: map(s, false); break;
        case NodeKind::TileReduce: reduce(s); break;
        case NodeKind::ClusterReduce: cluster_reduce(s); break;
        case NodeKind::TileDot: dot(s); break;
        case NodeKind::Convert: {
            Value &dst = values_.at(s->dst);
            const Value &src = values_.at(s->src);
            // With valid_rows (a block publishing its state), rows past it stay as they were.
            const size_t n = s->valid_rows.defined()
                                 ? size_t(clamp(index(s->valid_rows), dst.type.rows)) * size_t(dst.type.cols)
                                 : dst.data.size();
            for (size_t i = 0; i < n; i++) dst.data[i] = round_to(dst.type.elem, src.data[i]);
            break;
        }
        case NodeKind::CarriedLoop: loop(s); break;
        case NodeKind::IfThen:
            if (scalar(s->cond) != 0) block(s->body);
            break;
        case NodeKind::Release:
            if (s->ring.defined()) ring_release(s);
            break;
        case NodeKind::LastArrival: {
            // Blocks run one after another here, so every earlier block's writes are already visible.
            double &count = element(s, index(s->base));
            const int64_t arrivals = index(s->value);
            if (count < 0 || count >= double(arrivals) || count != std::floor(count))
                fail(s, "the counter holds " + std::to_string(count) +
                            " before this arrival; it must start at 0 (a zeroed "
                            "workspace) and count at most " +
                            std::to_string(arrivals) + " arrivals");
            if (++count == double(arrivals)) {
                count = 0;
                block(s->body);
            }
            break;
        }
        case NodeKind::ClusterMerge:
            // Run by rank 0 (the cluster loop runs no other rank here); every block's writes so far are in reach.
            block(s->body);
            break;
        case NodeKind::Barrier:
        case NodeKind::DotWait:  // asynchronous dots took effect at issue
        case NodeKind::WarpgroupTurn: break;
        }
    }

    void block(const Block &b) {
        for (const Stmt &s : b) {
            try {
                stmt(s);
            } catch (const EvalError &e) { fail(s, e.what); }
        }
    }
};

}  // namespace

void interpret(const Kernel &k, LaunchArgs &args) {
    verify(k);
    Interpreter(k, args).run();
}

void interpret(const Program &p, LaunchArgs &args) {
    verify(p);
    for (const Workspace &w : p.workspaces) {
        auto it = args.tensors.find(w.name);
        if (it == args.tensors.end() || !it->second)
            throw InternalError("tir::interpret: no workspace '" + w.name + "' in the arguments");
        if (it->second->desc.dtype != DType::F32)
            throw InternalError("tir::interpret: workspace '" + w.name + "' must be an f32 tensor");
    }
    auto check_zeroed = [&](const char *when) {
        for (const Workspace &w : p.workspaces) {
            if (!w.zeroed) continue;
            for (double v : args.tensors.at(w.name)->values)
                if (v != 0)
                    throw InternalError("tir::interpret: workspace '" + w.name + "' must be zero " + when +
                                        " (it counts arrivals), but holds " + std::to_string(v));
        }
    };
    check_zeroed("before the launch");
    for (const Kernel &k : p.kernels) Interpreter(k, args).run();
    check_zeroed("after the launch (the last block of each group resets its counter)");
}

}  // namespace neptune::tir
