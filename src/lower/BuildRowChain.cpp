#include "lower/BuildRowChain.h"

#include <algorithm>
#include <limits>
#include <set>

#include "frontend/DeriveRepair.h"
#include "lower/Patterns.h"
#include "neptune/Error.h"

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

Expr fvar(const std::string &n) { return HI::Variable::make(Halide::Float(32), n); }

DType dtype_of(const Halide::Type &t) {
    if (t.is_bfloat()) return DType::BF16;
    if (t.is_float()) return t.bits() == 16 ? DType::F16 : DType::F32;
    return DType::I32;
}

// The column and row of the chain while an expression is analysed: placeholders bound per kernel.
const char *const kCol = "rc.col";
const char *const kRow = "rc.row";

// An input buffer used as a Func is a wrapper Func (x_im(c, r) = x(c, r)): read the buffer.
const HI::Call *input_of(const HI::Call *op) {
    if (op->call_type == HI::Call::Image) return op;
    if (op->call_type != HI::Call::Halide || !op->func.defined()) return nullptr;
    return wrapped_buffer(HI::Function(op->func));
}

class Builder {
public:
    Builder(const FusedPlan &plan, const std::vector<Halide::Func> &outputs) : plan_(plan), outputs_(outputs) {}

    // Throws CompileError unless the plan is a row chain; fills the analysed stages and outputs.
    void recognise() {
        if (plan_.stages.empty()) fail("the group has no stages");
        const std::vector<std::string> &args0 = plan_.stages[0].args;
        for (const FusedStage &s : plan_.stages) {
            if (s.args.size() != 1)
                fail(s.name + " is indexed by " + std::to_string(s.args.size()) +
                     " variables: row chains reduce the innermost axis of rows indexed by one variable (a middle "
                     "axis, or rows over several dimensions, are not lowered yet)");
            if (s.args != args0) fail(s.name + "'s variable must be named as " + plan_.stages[0].name + "'s");
            for (auto &[p, where] : s.producer_args)
                if (where.size() != 1 || !HI::equal(where[0], HI::Variable::make(Halide::Int(32), s.args[0])))
                    fail(s.name + " reads " + p + " at another row than its own");
        }
        row_var_ = args0[0];
        for (const FusedStage &s : plan_.stages) names_[s.name] = unique(base_name(s.name));
        // x: the input every stage reads at (column, row).
        for (const FusedStage &s : plan_.stages) {
            Stage st;
            st.st = &s;
            st.name = names_.at(s.name);
            st.term = analyse(s.map, s.name, plan_.rvar, row_var_);
            st.raw = st.term;
            for (const std::string &p : s.producers) {
                const Reducer pr = plan_.stage(p).reducer;
                st.term = HI::substitute(p, guarded_producer(pr, fvar(names_.at(p))), st.term);
            }
            if (s.reducer == Reducer::Min)
                st.op = ReduceOp::Max;  // min(a, b) = -max(-a, -b)
            else
                st.op = s.reducer == Reducer::Max ? ReduceOp::Max : ReduceOp::Sum;
            if (!HI::is_const(s.init)) fail(s.name + "'s initial value must be a constant");
            stages_.push_back(st);
        }
        if (x_.empty()) fail("no stage reads an input at (" + plan_.rvar + ", " + row_var_ + "): nothing to reduce");
        for (const Halide::Func &o : outputs_) output(o);
        if (outs_.empty()) fail("the group has no outputs");
    }

    bool streams() {
        recognise();
        if (!online()) return false;
        for (const Output &o : outs_)
            if (o.per_element) return false;
        return true;
    }

    Program build(GpuArch arch, const RowChainShape &shape) {
        recognise();
        shape_ = shape;
        Kernel k;
        k.name = "row_chain";
        k.warps = shape.rows_per_block * shape.threads_per_row / 32;
        k.strip_threads = shape.threads_per_row;
        k.strip_vector = shape.vector;
        k.min_blocks_per_sm = shape.min_blocks;
        k.int_params = {"rows", "cols"};
        if (shape.cluster > 1) {
            // Block q of a row's cluster holds the row's q-th strip of columns.
            k.cluster_x = Expr(shape.cluster);
            k.grid_x = int_var("rows") * shape.cluster;
            k.scalars = {{"row0", int_var("block_x") / shape.cluster},
                         {kRank, int_var("block_x") % shape.cluster},
                         {"valid_rows", int_var("rows") - int_var("row0")}};
        } else {
            k.grid_x = (int_var("rows") + shape.rows_per_block - 1) / shape.rows_per_block;
            k.scalars = {{"row0", int_var("block_x") * shape.rows_per_block},
                         {"valid_rows", int_var("rows") - int_var("row0")}};
        }
        k.tensors.push_back({x_, x_type_, false, "", {"cols", "rows"}});
        for (auto &[name, t] : other_inputs_)
            k.tensors.push_back({name, t, false, "", {one_d_by_col_.at(name) ? "cols" : "rows"}});
        k.values["x_t"] = strip();
        for (const Stage &s : stages_) k.values[s.name] = row_vec();
        Block &b = k.body;
        if (!shape.chunked) b.push_back(load_x(false));
        if (shape.chunked && online()) {
            online_pass(k, b);
        } else {
            stage_passes(k, b);
        }
        outputs(k, b, shape);
        Program p;
        p.arch = arch;
        p.kernels.push_back(k);
        return p;
    }

private:
    // One pass over the row per stage (on chip: over the registers; chunked: re-reading x), each
    // stage reducing its term with its producers final: the two-pass values, no repair needed.
    void stage_passes(Kernel &k, Block &b) {
        const RowChainShape &shape = shape_;
        for (size_t i = 0; i < stages_.size(); i++) {
            const Stage &s = stages_[i];
            const float id = s.op == ReduceOp::Max ? -std::numeric_limits<float>::infinity() : 0.0f;
            b.push_back(make_fill(s.name, id));
            Block step;
            if (shape.chunked) step.push_back(load_x(true));
            std::string src = "x_t";
            Expr term = s.term;
            if (s.st->reducer == Reducer::Min) term = -term;
            if (!HI::equal(term, fvar(kX))) {
                src = "t" + std::to_string(i);
                k.values[src] = strip();
                step.push_back(with_role(bounded(make_map(src, bind(term, shape.chunked), "term of " + s.name), true),
                                         Role::Term));
            }
            reduce_row(k, step, s.name, s.op, src);
            append(b, step, shape.chunked);
            // Final before the next stage reads it: min as -max(-x), the initial value folded in.
            if (s.st->reducer == Reducer::Min) b.push_back(make_row_map(s.name, -fvar(s.name), "min as -max(-x)"));
            if (has_initial_value(s)) b.push_back(initial_value(s));
        }
    }

    // Whether one pass over the chunks can carry every stage: each stage with producers has a
    // single-state repair (new = shift + scale * old) the plan derived; no min reductions.
    bool online() const {
        for (const Stage &s : stages_) {
            if (s.st->reducer == Reducer::Min) return false;
            if (s.st->producers.empty()) continue;
            const Repair &r = s.st->repair;
            if (r.kind == RepairKind::None || r.maps.size() != 1) return false;
        }
        return true;
    }

    // One pass over the column chunks: each stage's state repaired to its producers' new values, then
    // the chunk's terms reduced into it (the online form: softmax's running max and rescaled sum).
    void online_pass(Kernel &k, Block &b) {
        // A producer starts from its initial value, so that its readers' terms and repairs see the value
        // the plain algorithm's final producer has; a target's is added once the row is done (a repair
        // would rescale it).
        std::vector<std::string> carried;
        for (const Stage &s : stages_) {
            b.push_back(make_fill(s.name, s.op == ReduceOp::Max ? -std::numeric_limits<float>::infinity() : 0.0f));
            if (is_producer(s) && has_initial_value(s)) b.push_back(initial_value(s));
            carried.push_back(s.name);
        }
        Block step = {load_x(true)};
        for (size_t i = 0; i < stages_.size(); i++) {
            const Stage &s = stages_[i];
            const FusedStage &st = *s.st;
            const std::string nw = s.name + "_new";
            k.values[nw] = row_vec();
            std::map<std::string, Expr> prod_new, rb;
            for (const std::string &p : st.producers) {
                const Reducer pr = plan_.stage(p).reducer;
                prod_new[p] = guarded_producer(pr, fvar(names_.at(p) + "_new"));
                rb[p] = guarded_producer(pr, fvar(names_.at(p)));
                rb[sym::Context::primed(p)] = prod_new[p];
            }
            Expr carried_value = fvar(s.name);
            if (!st.producers.empty()) {
                Expr v = carried_value;
                const Expr coeff = st.repair.coeff[0][0], shift = st.repair.shift[0];
                if (coeff.defined() && !HI::is_const_one(coeff)) v = v * HI::substitute(rb, coeff);
                if (shift.defined()) v = v + HI::substitute(rb, shift);
                // h(identity) = identity, without evaluating h (exp(-inf - -inf) is NaN).
                carried_value = Halide::select(carried_value == reducer_identity(st.reducer), carried_value, v);
            }
            step.push_back(with_role(
                make_row_map(nw, bind(carried_value, true), st.producers.empty() ? "" : "repair of " + s.name),
                st.producers.empty() ? Role::None : Role::Repair));
            const Expr term = HI::substitute(prod_new, s.raw);
            std::string src = "x_t";
            if (!HI::equal(term, fvar(kX))) {
                src = "t" + std::to_string(i);
                k.values[src] = strip();
                step.push_back(
                    with_role(bounded(make_map(src, bind(term, true), "term of " + s.name), true), Role::Term));
            }
            step.push_back(with(make_reduce(nw, s.op, src), [&](Node &n) { n.valid_cols = valid_cols(true); }));
        }
        for (const Stage &s : stages_) step.push_back(make_row_map(s.name, fvar(s.name + "_new")));
        const Expr chunks = (int_var("cols") + shape_.cols() - 1) / shape_.cols();
        b.push_back(make_loop("j", Expr(0), chunks, carried, step));
        for (const Stage &s : stages_)
            if (!is_producer(s) && has_initial_value(s)) b.push_back(initial_value(s));
    }

    // The per-element outputs and per-row outputs after the stages.
    void outputs(Kernel &k, Block &b, const RowChainShape &shape) {
        Block tiles;
        if (shape.chunked) tiles.push_back(load_x(true));
        for (const Output &o : outs_) {
            const std::string v = "o_" + o.tensor;
            if (o.per_element) {
                k.values[v] = strip();
                tiles.push_back(with_role(
                    bounded(make_map(v, bind(o.value, shape.chunked), "output " + o.tensor), true), Role::Epilogue));
                tiles.push_back(make_store(v, o.tensor,
                                           HI::simplify(int_var("row0") * int_var("cols") + chunk0(shape.chunked)),
                                           int_var("cols"), int_var("valid_rows"), valid_cols(shape.chunked)));
            } else {
                k.values[v] = row_vec();
                b.push_back(with_role(bounded(make_row_map(v, bind(o.value, false), "output " + o.tensor), false),
                                      Role::Epilogue));
                // A row's value once: from the first block of its cluster.
                const Expr rows = shape.cluster > 1
                                      ? Halide::select(int_var(kRank) == 0, int_var("valid_rows"), Expr(0))
                                      : int_var("valid_rows");
                b.push_back(make_row_store(v, o.tensor, int_var("row0"), rows));
            }
            k.tensors.push_back(
                {o.tensor, o.dtype, true, "",
                 o.per_element ? std::vector<std::string>{"cols", "rows"} : std::vector<std::string>{"rows"}});
        }
        if (tiles.size() > (shape.chunked ? 1u : 0u)) append(b, tiles, shape.chunked);
    }

    static constexpr const char *kX = "x_t";
    static constexpr const char *kRank = "rank";  // the block's rank in its row's cluster
    struct Stage {
        const FusedStage *st;
        std::string name;
        Expr term;  // over kX, stage names (row vectors), kCol, kRow
        Expr raw;  // term with the producers as the plan's symbols (the repair's variables)
        ReduceOp op = ReduceOp::Sum;
    };
    struct Output {
        std::string tensor;
        DType dtype;
        bool per_element;
        Expr value;
    };

    bool has_initial_value(const Stage &s) const {
        const Expr init = s.st->init;
        return !HI::equal(init, reducer_identity(s.st->reducer)) &&
               !(s.st->reducer == Reducer::Sum && HI::is_const_zero(init));
    }
    Stmt initial_value(const Stage &s) const {
        return make_row_map(s.name, reducer_combine(s.st->reducer, s.st->init, fvar(s.name)), "initial value");
    }
    bool is_producer(const Stage &s) const {
        for (const FusedStage &t : plan_.stages)
            for (const std::string &p : t.producers)
                if (p == s.st->name) return true;
        return false;
    }

    [[noreturn]] void fail(const std::string &why) const {
        throw CompileError(plan_.directive + ": the row-chain pattern cannot lower this group: " + why);
    }

    std::string unique(const std::string &n) {
        std::string r = n;
        for (int k = 2; used_.count(r) || r == "x_t" || r == "row0" || r == "valid_rows" || r == kRank; k++)
            r = n + std::to_string(k);
        used_.insert(r);
        return r;
    }

    TileType strip() const {
        return {DType::F32, shape_.rows_per_block, shape_.cols(), Scope::Register, Layout::RowStrip};
    }
    TileType row_vec() const { return {DType::F32, shape_.rows_per_block, 1, Scope::Register, Layout::StripRowVector}; }

    // The first column of the strip: chunk j's, the block's in its cluster, or 0; and its valid columns.
    Expr chunk0(bool chunked) const {
        if (chunked) return int_var("j") * shape_.cols();
        return shape_.cluster > 1 ? int_var(kRank) * shape_.cols() : Expr(0);
    }
    Expr valid_cols(bool chunked) const { return HI::simplify(int_var("cols") - chunk0(chunked)); }

    Stmt load_x(bool chunked) const {
        return make_load("x_t", x_, HI::simplify(int_var("row0") * int_var("cols") + chunk0(chunked)), int_var("cols"),
                         int_var("valid_rows"), valid_cols(chunked));
    }

    // dst = op(dst, op over the row of src): over the strip, then (a row over a cluster) over the
    // cluster's blocks, whose partial results a row vector of its own carries.
    void reduce_row(Kernel &k, Block &step, const std::string &dst, ReduceOp op, const std::string &src) const {
        const auto bounded_cols = [&](Node &n) { n.valid_cols = valid_cols(shape_.chunked); };
        if (shape_.cluster == 1) {
            step.push_back(with(make_reduce(dst, op, src), bounded_cols));
            return;
        }
        const std::string part = dst + "_block";
        k.values[part] = row_vec();
        // Filled ahead of the term, which then stays inside the reduction (the emitter fuses a map
        // into the statement right after it).
        step.insert(step.begin(),
                    make_fill(part, op == ReduceOp::Max ? -std::numeric_limits<float>::infinity() : 0.0f));
        step.push_back(with(make_reduce(part, op, src), bounded_cols));
        step.push_back(make_cluster_reduce(part + "_all", op, part));
        k.values[part + "_all"] = row_vec();
        step.push_back(make_row_map(
            dst, reducer_combine(op == ReduceOp::Max ? Reducer::Max : Reducer::Sum, fvar(dst), fvar(part + "_all"))));
    }

    // A map computing only the valid rows (and columns): gathers read no element past the tensors.
    Stmt bounded(const Stmt &s, bool cols) const {
        return with(s, [&](Node &n) {
            n.valid_rows = int_var("valid_rows");
            if (cols) n.valid_cols = valid_cols(shape_.chunked);
        });
    }

    // `step` once (on chip), or in a loop over the column chunks.
    void append(Block &b, const Block &step, bool chunked) const {
        if (!chunked) {
            b.insert(b.end(), step.begin(), step.end());
            return;
        }
        const Expr chunks = (int_var("cols") + shape_.cols() - 1) / shape_.cols();
        b.push_back(make_loop("j", Expr(0), chunks, {}, step));
    }

    // The placeholders bound for the kernel: the row is row0 + row, the column col (+ the chunk's first).
    Expr bind(const Expr &e, bool chunked) const {
        std::map<std::string, Expr> m;
        m[kRow] = int_var("row0") + int_var("row");
        m[kCol] = int_var("col") + chunk0(chunked);
        class Extents : public HI::IRGraphVisitor {
        public:
            std::set<std::string> names;
            using HI::IRGraphVisitor::visit;
            void visit(const HI::Variable *op) override {
                if (op->name.find(".extent.") != std::string::npos) names.insert(op->name);
            }
        } ext;
        e.accept(&ext);
        for (const std::string &n : ext.names) {
            const size_t dot = n.find(".extent.");
            m[n] = extent(n.substr(0, dot), std::atoi(n.c_str() + dot + 8));
        }
        return HI::simplify(HI::substitute(m, e));
    }

    // The extents of the inputs as the kernel's parameters.
    Expr extent(const std::string &tensor, int dim) const {
        if (tensor == x_) return int_var(dim == 0 ? "cols" : "rows");
        auto it = one_d_by_col_.find(tensor);
        if (it == one_d_by_col_.end()) fail("cannot tell the extent of input " + tensor);
        return int_var(it->second ? "cols" : "rows");
    }

    /** `e` (a stage's map or an output's value) over the placeholders: x at (column, row) is the strip,
     * other input reads flat tensor reads, stages row vectors, pure Funcs inlined. */
    Expr analyse(const Expr &e, const std::string &who, const std::string &col, const std::string &row) {
        class Analyse : public HI::IRMutator {
        public:
            Builder *b;
            std::string who, col, row;
            using HI::IRMutator::visit;
            Expr visit(const HI::Variable *op) override {
                if (op->name == col) return int_var(kCol);
                if (op->name == row) return int_var(kRow);
                if (op->name.find(".min.") != std::string::npos) return Expr(0);
                return op;  // a producer's value, or an input's extent (bound per kernel)
            }
            Expr visit(const HI::Cast *op) override {
                const Expr v = mutate(op->value);
                if (op->type == Halide::Float(32) && v.as<HI::Variable>() && v.as<HI::Variable>()->name == kX) return v;
                return HI::Cast::make(op->type, v);
            }
            Expr visit(const HI::Call *op) override {
                if (op->is_intrinsic(HI::Call::likely) || op->is_intrinsic(HI::Call::likely_if_innermost))
                    return mutate(op->args[0]);  // a hint for Halide's own loop partitioning
                if (op->is_intrinsic(HI::Call::require)) {
                    b->requirements_.push_back(mutate(op->args[0]));
                    return mutate(op->args[1]);
                }
                if (const HI::Call *in = input_of(op)) return b->input(in, op->args, who, col, row, this);
                if (op->call_type == HI::Call::Halide) {
                    for (const FusedStage &s : b->plan_.stages)
                        if (s.name == op->name) {
                            const Expr a = mutate(op->args[0]);
                            if (!HI::equal(a, int_var(kRow)))
                                b->fail(who + " reads " + s.name + " at another row than its own");
                            return fvar(b->names_.at(s.name));
                        }
                    const HI::Function f(op->func);
                    if (f.has_update_definition())
                        b->fail(who + " reads " + op->name +
                                ", a reduction outside the fused group: fuse it into the group or compute it first");
                    if (f.values().size() != 1) b->fail(who + " reads " + op->name + ", a Func of several values");
                    std::map<std::string, Expr> args;
                    for (size_t i = 0; i < f.args().size(); i++) args[f.args()[i]] = op->args[i];
                    return mutate(HI::substitute(args, HI::substitute_in_all_lets(f.values()[0])));
                }
                return HI::IRMutator::visit(op);
            }
        } a;
        a.b = this;
        a.who = who;
        a.col = col;
        a.row = row;
        return a.mutate(HI::substitute_in_all_lets(e));
    }

    // An input read at `args`: x at (column, row) is the strip; anything else a flat read.
    template <typename M>
    Expr input(const HI::Call *in, const std::vector<Expr> &raw_args, const std::string &who, const std::string &col,
               const std::string &row, M *m) {
        std::vector<Expr> args;
        for (const Expr &a : raw_args) args.push_back(m->mutate(a));
        const std::string &t = in->name;
        const bool at_cell = args.size() == 2 && HI::equal(args[0], int_var(kCol)) && HI::equal(args[1], int_var(kRow));
        if (at_cell && (x_.empty() || x_ == t)) {
            if (x_.empty()) {
                x_ = t;
                x_type_ = dtype_of(in->type);
                if (x_type_ == DType::I32)
                    fail(who + " reduces " + t + ", an integer input: row chains reduce f16, bf16 or f32 inputs");
            }
            return fvar(kX);
        }
        if (args.size() == 2) {
            if (!x_.empty() && x_ != t)
                fail(who + " reads a second 2-D input " + t + " (beside " + x_ +
                     "): row chains reduce one input (a dot product is another pattern)");
            if (x_.empty()) {
                x_ = t;
                x_type_ = dtype_of(in->type);
            }
            if (!HI::expr_uses_var(args[1], kRow) || HI::expr_uses_var(args[1], kCol))
                fail(who + " reads " + t + " at a row other than its own");
            // A gather: one element of the row, e.g. cross-entropy's logit of the label.
            return HI::Call::make(in->type, t, {args[1] * int_var("cols") + args[0]}, HI::Call::Image, in->func, 0,
                                  in->image, in->param);
        }
        if (args.size() != 1)
            fail(who + " reads " + t + " of " + std::to_string(args.size()) +
                 " dimensions: row chains read x(c, r) and 1-D inputs indexed by c or r");
        const bool by_col = HI::expr_uses_var(args[0], kCol), by_row = HI::expr_uses_var(args[0], kRow);
        if (by_col == by_row) fail(who + " reads " + t + " at an index that is neither the column nor the row alone");
        auto it = one_d_by_col_.find(t);
        if (it != one_d_by_col_.end() && it->second != by_col)
            fail(t + " is read both along the row and along the columns");
        one_d_by_col_[t] = by_col;
        other_inputs_[t] = dtype_of(in->type);
        (void)col;
        (void)row;
        return HI::Call::make(in->type, t, {args[0]}, HI::Call::Image, in->func, 0, in->image, in->param);
    }

    void output(const Halide::Func &o) {
        const HI::Function fn = o.function();
        if (fn.has_update_definition()) fail("output " + o.name() + " must be a pure Func");
        const size_t n = fn.args().size();
        if (n != 1 && n != 2)
            fail("output " + o.name() + " must be indexed by (r) (per row) or (c, r) (per element), not " +
                 std::to_string(n) + " variables");
        Output out;
        out.tensor = base_name(o.name());
        out.dtype = dtype_of(fn.output_types()[0]);
        if (out.dtype == DType::I32) fail("output " + o.name() + " is an integer; row chains write f16, bf16 or f32");
        out.per_element = n == 2;
        Expr v = analyse(fn.values()[0], "output " + o.name(), n == 2 ? fn.args()[0] : std::string("\x01"),
                         fn.args()[n - 1]);
        while (const HI::Cast *c = v.as<HI::Cast>()) v = c->value;
        if (!out.per_element && HI::expr_uses_var(v, kX))
            fail("output " + o.name() + " is per row but reads " + x_ + " at every column");
        if (!out.per_element && HI::expr_uses_var(v, kCol)) fail("output " + o.name() + " reads a column");
        // A kernel cannot raise the algorithm's run-time errors (an out-of-range label): where a
        // requirement fails, the row's outputs are NaN rather than a value computed from clamped reads.
        for (const Expr &r : requirements_) {
            if (!out.per_element && (HI::expr_uses_var(r, kX) || HI::expr_uses_var(r, kCol)))
                fail("a requirement (Halide::require) of " + o.name() +
                     " reads the row's elements; only "
                     "requirements on per-row values are checked by the kernels");
            v = Halide::select(r, v, Halide::Expr(std::numeric_limits<float>::quiet_NaN()));
        }
        out.value = v;
        outs_.push_back(out);
    }

    const FusedPlan &plan_;
    const std::vector<Halide::Func> &outputs_;
    RowChainShape shape_;
    std::string row_var_;
    std::map<std::string, std::string> names_;
    std::set<std::string> used_;
    std::vector<Stage> stages_;
    std::vector<Output> outs_;
    std::vector<Expr> requirements_;  // the conditions of the Halide::require calls the values pass
    std::string x_;
    DType x_type_ = DType::F16;
    std::map<std::string, DType> other_inputs_;
    std::map<std::string, bool> one_d_by_col_;
};

}  // namespace

namespace {

// A block per row (or per part of a row) holding `cols` columns in 16-byte vectors: the fewest
// threads, a power of two of at least a warp (the row's reduction pairs threads by shuffles), with at
// most `per_thread` elements each.
void block_per_row(RowChainShape &s, int64_t cols, int per_thread) {
    const int64_t vecs = (cols + s.vector - 1) / s.vector;
    s.rows_per_block = 1;
    s.vectors = per_thread / s.vector;
    const int64_t need = (vecs + s.vectors - 1) / s.vectors;
    s.threads_per_row = 32;
    while (s.threads_per_row < need && s.threads_per_row < 1024) s.threads_per_row *= 2;
    s.vectors = int((vecs + s.threads_per_row - 1) / s.threads_per_row);
}

}  // namespace

RowChainShape default_row_chain_shape(GpuArch arch, DType dtype, int64_t cols) {
    return default_row_chain_shape(arch, dtype, cols, false);
}

RowChainShape default_row_chain_shape(GpuArch arch, DType dtype, int64_t cols, bool streams) {
    RowChainShape s;
    s.vector = 16 / dtype_bytes(dtype);
    const int per_thread = 32;  // f32 registers per thread for the strip: x stays on chip up to this
    if (cols > 0 && cols <= int64_t(32) * per_thread) {
        s.rows_per_block = 4;
        s.threads_per_row = 32;
        s.vectors = int(std::max<int64_t>(1, (cols + 32 * s.vector - 1) / (32 * s.vector)));
        return s;
    }
    // Rows of more than 16384 16-bit elements: 64 each over 512 threads (x stays packed as loaded, 32
    // registers), so that an SM holds two rows rather than one 1024-thread block.
    const bool packed = dtype_bytes(dtype) == 2;
    const int64_t per_block = int64_t(512) * (packed ? 2 * per_thread : per_thread);
    if (cols > 0 && cols <= int64_t(1024) * per_thread) {
        const bool wide = packed && cols > int64_t(512) * per_thread;
        block_per_row(s, cols, wide ? 2 * per_thread : per_thread);
        if (wide) s.min_blocks = 2;
        return s;
    }
    // Longer rows on sm_90a: a cluster of up to 8 such blocks per row, x still read once.
    if (arch == GpuArch::Sm90a && !streams && cols > 0 && cols <= 8 * per_block) {
        s.cluster = int((cols + per_block - 1) / per_block);
        block_per_row(s, (cols + s.cluster - 1) / s.cluster, packed ? 2 * per_thread : per_thread);
        s.min_blocks = packed ? 2 : 0;
        return s;
    }
    s.rows_per_block = 1;
    s.threads_per_row = 512;
    s.vectors = per_thread / s.vector;
    s.chunked = true;
    return s;
}

RowChainShape row_chain_shape(DType dtype, int64_t cols, int threads, int cluster) {
    RowChainShape s;
    s.vector = 16 / dtype_bytes(dtype);
    s.threads_per_row = threads;
    s.cluster = std::max(1, cluster);
    s.rows_per_block = threads == 32 && s.cluster == 1 ? 4 : 1;
    const int most = (dtype_bytes(dtype) == 2 ? 64 : 32) / s.vector;  // vectors per thread
    const int64_t block_cols = (std::max<int64_t>(cols, 1) + s.cluster - 1) / s.cluster;
    const int64_t vecs = (block_cols + s.vector - 1) / s.vector;
    s.vectors = int(std::min<int64_t>(most, (vecs + threads - 1) / threads));
    s.chunked = cols <= 0 || int64_t(s.vectors) * threads < vecs;
    if (s.chunked) s.cluster = 1;  // a cluster holds the whole row or is not used
    return s;
}

bool row_chain_streams(const FusedPlan &plan, const std::vector<Halide::Func> &outputs) {
    return Builder(plan, outputs).streams();
}

std::string row_chain_mismatch(const FusedPlan &plan, const std::vector<Halide::Func> &outputs) {
    try {
        Builder(plan, outputs).recognise();
        return "";
    } catch (const CompileError &e) {
        const std::string prefix = plan.directive + ": the row-chain pattern cannot lower this group: ",
                          what = e.what();
        return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
    }
}

tir::Program build_row_chain(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, GpuArch arch,
                             const RowChainShape &shape) {
    return Builder(plan, outputs).build(arch, shape);
}

}  // namespace neptune::internal
