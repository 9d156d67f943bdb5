#include "lower/BuildRowChain.h"

#include <algorithm>
#include <limits>
#include <optional>
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

// Placeholders of an analysed expression, bound per kernel (Builder::bind): the reduced axis's index,
// row variable i's value, the row's flat index, and the extents of x's dimension j and of the row's
// dimension i (named once the reduced axis is known).
const char *const kCol = kChainCol;
const char *const kFlat = kChainRow;
const char *const kGather = kChainGather;
Expr row_ph(size_t i) { return int_var("rc.row." + std::to_string(i)); }
Expr x_extent_ph(size_t j) { return int_var("rc.xext." + std::to_string(j)); }
Expr row_extent_ph(size_t i) { return int_var("rc.rext." + std::to_string(i)); }

// An input buffer used as a Func is a wrapper Func (x_im(c, r) = x(c, r)): read the buffer.
const HI::Call *input_of(const HI::Call *op) {
    if (op->call_type == HI::Call::Image) return op;
    if (op->call_type != HI::Call::Halide || !op->func.defined()) return nullptr;
    return wrapped_buffer(HI::Function(op->func));
}

// x as a matrix product: a Func x(c, r) = 0; x(c, r) += a(k, r) * b(k, c) over one RDom k, of two 2-D
// inputs of one 16-bit type (a language model's logits h * W^T). Fills `p` and returns true when it is.
bool product_of(const HI::Function &f, MatmulProduct &p) {
    if (f.args().size() != 2 || f.values().size() != 1 || f.updates().size() != 1) return false;
    Expr init = f.values()[0];
    while (const HI::Cast *c = init.as<HI::Cast>()) init = c->value;
    if (!HI::is_const_zero(init)) return false;
    const HI::Definition &u = f.update(0);
    const HI::Add *add = HI::substitute_in_all_lets(u.values()[0]).as<HI::Add>();
    if (!add) return false;
    const HI::Call *self = add->a.as<HI::Call>();
    Expr prod = add->b;
    while (const HI::Cast *c = prod.as<HI::Cast>()) prod = c->value;
    const HI::Mul *mul = prod.as<HI::Mul>();
    if (!self || self->name != f.name() || !mul) return false;
    auto operand = [](Expr e) -> const HI::Call * {
        while (const HI::Cast *c = e.as<HI::Cast>()) e = c->value;
        const HI::Call *c = e.as<HI::Call>();
        return c ? input_of(c) ? c : nullptr : nullptr;
    };
    const HI::Call *ca = operand(mul->a), *cb = operand(mul->b);
    if (!ca || !cb || ca->args.size() != 2 || cb->args.size() != 2) return false;
    const Expr c = HI::Variable::make(Halide::Int(32), f.args()[0]),
               r = HI::Variable::make(Halide::Int(32), f.args()[1]);
    if (HI::equal(ca->args[1], c) && HI::equal(cb->args[1], r)) std::swap(ca, cb);
    if (!HI::equal(ca->args[1], r) || !HI::equal(cb->args[1], c) || !HI::equal(ca->args[0], cb->args[0]) ||
        !ca->args[0].as<HI::Variable>())
        return false;
    const HI::Call *ia = input_of(ca), *ib = input_of(cb);
    p.a = ia->name;
    p.b = ib->name;
    p.dtype = dtype_of(ia->type);
    if (ia->type != ib->type || (p.dtype != DType::F16 && p.dtype != DType::BF16)) p.dtype = DType::I32;
    return true;
}

class Builder {
public:
    Builder(const FusedPlan &plan, const std::vector<Halide::Func> &outputs) : plan_(plan), outputs_(outputs) {}

    // Throws CompileError unless the plan is a row chain; fills the analysed stages and outputs.
    void recognise() {
        if (plan_.stages.empty()) fail("the group has no stages");
        const std::vector<std::string> &args0 = plan_.stages[0].args;
        for (const FusedStage &s : plan_.stages) {
            if (s.args.empty())
                fail(s.name + " reduces to one value: row chains reduce one axis of x and keep at least one other");
            if (s.args != args0) fail(s.name + "'s variables must be named as " + plan_.stages[0].name + "'s");
            for (auto &[p, where] : s.producer_args) {
                bool own = where.size() == s.args.size();
                for (size_t i = 0; own && i < where.size(); i++)
                    own = HI::equal(where[i], HI::Variable::make(Halide::Int(32), s.args[i]));
                if (!own) fail(s.name + " reads " + p + " at another row than its own");
            }
        }
        row_vars_ = args0;
        std::map<std::string, Expr> vars = {{plan_.rvar, int_var(kCol)}};
        for (size_t i = 0; i < row_vars_.size(); i++) vars[row_vars_[i]] = row_ph(i);
        // The outputs' tensor names first: a stage that is itself an output (its row state) takes
        // another name, or its value and its tensor would be declared twice in one kernel.
        for (const Halide::Func &o : outputs_) used_.insert(base_name(o.name()));
        for (const FusedStage &s : plan_.stages) names_[s.name] = unique(base_name(s.name));
        // x: the input every stage reads at (row variables, with the reduced one at its axis).
        for (const FusedStage &s : plan_.stages) {
            Stage st;
            st.st = &s;
            st.name = names_.at(s.name);
            st.term = analyse(s.map, s.name, vars);
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
        if (x_.empty())
            fail("no stage reads an input at its row with " + plan_.rvar + " along one axis: nothing to reduce");
        for (const Halide::Func &o : outputs_) output(o);
        if (outs_.empty()) fail("the group has no outputs");
    }

    // recognise(), for the row strips: x is an input.
    void recognise_rows() {
        recognise();
        if (product_)
            fail(x_ + " is a matrix product of " + product_->a + " and " + product_->b +
                 ": the matmul-fed pattern lowers it");
    }

    // recognise(), for the matmul-fed pattern: x is a product, and every output is per row.
    MatmulChainForm product_form() {
        recognise();
        if (!product_)
            throw CompileError(plan_.directive +
                               ": the matmul-fed pattern cannot lower this group: its stages reduce " + x_ +
                               ", an input, not a matrix product of two inputs");
        MatmulChainForm f;
        f.product = *product_;
        for (const Stage &s : stages_) {
            if (s.st->reducer == Reducer::Min) fail(s.name + ": min reductions over a product are not lowered");
            if (!s.st->producers.empty() && (s.st->repair.kind == RepairKind::None || s.st->repair.maps.size() != 1))
                fail(s.name + " carries companions (" + repair_kind_name(s.st->repair.kind) +
                     "); a product's chain is computed online, with single-state repairs");
            f.stages.push_back({s.st, s.name, s.raw});
        }
        for (const Output &o : outs_) {
            if (o.per_element)
                fail("output " + o.tensor + " has a value per element of the product " + x_ +
                     "; the matmul-fed pattern writes outputs per row (the product is never stored)");
            f.outputs.push_back({o.tensor, o.dtype, o.value});
        }
        f.gathers = gathers_;
        for (const auto &[t, by_col] : by_col_) {
            if (by_col) fail("input " + t + " is read along the product's columns; only values per row are lowered");
            f.row_inputs[t] = other_inputs_.at(t);
        }
        return f;
    }

    bool streams() {
        recognise_rows();
        if (!online()) return false;
        for (const Output &o : outs_)
            if (o.per_element) return false;
        return true;
    }

    bool strided() {
        recognise_rows();
        return axis_ > 0;
    }

    Program build(GpuArch arch, const RowChainShape &shape) {
        recognise_rows();
        shape_ = shape;
        if (shape.strided != (axis_ > 0) || (shape.strided && (shape.vector != 1 || shape.cluster != 1)) ||
            (shape.cluster > 1 && arch != GpuArch::Sm90a))
            throw InternalError("build_row_chain: the shape's layout does not fit a reduction over x's axis " +
                                std::to_string(axis_));
        Kernel k;
        k.name = "row_chain";
        k.warps = std::max(1, shape.rows_per_block * shape.threads_per_row / 32);
        k.strip_threads = shape.threads_per_row;
        k.strip_vector = shape.vector;
        k.strip_lanes_along_rows = shape.strided;
        k.min_blocks_per_sm = shape.min_blocks;
        k.int_params = {"rows", "cols"};
        for (size_t j = 0; j < x_dims_; j++)
            if (dim_name(j) != "rows" && dim_name(j) != "cols") k.int_params.push_back(dim_name(j));
        if (shape.strided) {
            // Blocks of R consecutive rows of one plane: the rows below the reduced axis are contiguous.
            Expr inner = 1, planes = 1;
            for (size_t j = 0; j < x_dims_; j++) {
                if (j < size_t(axis_)) inner = inner * int_var(dim_name(j));
                if (j > size_t(axis_)) planes = planes * int_var(dim_name(j));
            }
            const int r = shape.rows_per_block;
            const Expr tiles = (HI::simplify(inner) + r - 1) / r;
            k.grid_x = HI::simplify(tiles * planes);
            k.scalars = {{"inner", HI::simplify(inner)},
                         {"plane", int_var("block_x") / tiles},
                         {"d0", (int_var("block_x") % tiles) * r},
                         {"row0", int_var("plane") * int_var("inner") + int_var("d0")},
                         {"valid_rows", int_var("inner") - int_var("d0")}};
        } else if (shape.cluster > 1) {
            // Block q of a row's cluster holds the row's q-th strip of columns.
            k.cluster_x = Expr(shape.cluster);
            k.grid_x = all_rows() * shape.cluster;
            k.scalars = {{"row0", int_var("block_x") / shape.cluster},
                         {kRank, int_var("block_x") % shape.cluster},
                         {"valid_rows", all_rows() - int_var("row0")}};
            if (shape.chunked) {
                // Split rows: block q of the cluster takes the q-th run of `part` columns, whole chunks.
                const int c = shape.cols();
                k.scalars.push_back({"part", ((int_var("cols") + c - 1) / c + shape.cluster - 1) / shape.cluster * c});
                k.scalars.push_back({"part0", int_var(kRank) * int_var("part")});
                k.scalars.push_back(
                    {"part_chunks",
                     (Halide::max(0, Halide::min(int_var("part"), int_var("cols") - int_var("part0"))) + c - 1) / c});
            }
        } else {
            k.grid_x = (all_rows() + shape.rows_per_block - 1) / shape.rows_per_block;
            k.scalars = {{"row0", int_var("block_x") * shape.rows_per_block},
                         {"valid_rows", all_rows() - int_var("row0")}};
        }
        std::vector<std::string> x_dims;
        for (size_t j = 0; j < x_dims_; j++) x_dims.push_back(dim_name(j));
        k.tensors.push_back({x_, x_type_, false, "", x_dims});
        for (auto &[name, t] : other_inputs_)
            k.tensors.push_back(
                {name, t, false, "",
                 by_col_.at(name) ? std::vector<std::string>{"cols"} : row_dims(by_row_dims_.at(name))});
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
    //
    // A row over a cluster's blocks, when every stage has a single-state repair, reduces each stage
    // over the block's columns with the block's producers, then carries the blocks' states to the
    // cluster's in one exchange (combine_in_one_exchange), not one exchange per stage.
    void stage_passes(Kernel &k, Block &b) {
        const RowChainShape &shape = shape_;
        const bool local = shape.cluster > 1 && !shape.chunked && online();
        for (size_t i = 0; i < stages_.size(); i++) {
            const Stage &s = stages_[i];
            const float id = s.op == ReduceOp::Max ? -std::numeric_limits<float>::infinity() : 0.0f;
            b.push_back(make_fill(s.name, id));
            if (local && is_producer(s) && has_initial_value(s)) b.push_back(initial_value(s, true));
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
            if (split()) {
                // The block's part over its chunks, then the cluster's parts combined.
                const std::string part = s.name + "_block";
                k.values[part] = row_vec();
                b.push_back(make_fill(part, id));
                step.push_back(with(make_reduce(part, s.op, src), [&](Node &n) { n.valid_cols = valid_cols(true); }));
                append(b, step, true);
                combine_cluster(k, b, s.name, s.op, fvar(part));
            } else {
                reduce_row(k, step, s.name, s.op, src, local);
                append(b, step, shape.chunked);
            }
            if (local) continue;
            // Final before the next stage reads it: min as -max(-x), the initial value folded in.
            if (s.st->reducer == Reducer::Min) b.push_back(make_row_map(s.name, -fvar(s.name), "min as -max(-x)"));
            if (has_initial_value(s)) b.push_back(initial_value(s));
        }
        if (!local) return;
        combine_in_one_exchange(k, b);
        for (const Stage &s : stages_)
            if (!is_producer(s) && has_initial_value(s)) b.push_back(initial_value(s));
    }

    // The blocks' states, each over the block's columns with the block's producers, carried to the
    // cluster's final values by one exchange: in dependence order, a stage's value over the ranks of
    // its state repaired from that rank's producers to the combined ones.
    void combine_in_one_exchange(Kernel &k, Block &b) {
        for (const Stage &s : stages_) {
            const FusedStage &st = *s.st;
            const std::string all = s.name + "_all";
            k.values[all] = row_vec();
            if (st.producers.empty()) {
                b.push_back(make_cluster_reduce(all, s.op, s.name));
                continue;
            }
            std::vector<std::string> peers = {s.name};
            std::map<std::string, Expr> rb;
            for (const std::string &p : st.producers) {
                const Reducer pr = plan_.stage(p).reducer;
                peers.push_back(names_.at(p));
                rb[p] = guarded_producer(pr, fvar(names_.at(p)));
                rb[sym::Context::primed(p)] = guarded_producer(pr, fvar(names_.at(p) + "_all"));
            }
            b.push_back(with_role(
                make_cluster_reduce(all, s.op, peers, bind(repair_state(st, fvar(s.name), rb), false)), Role::Repair));
        }
        for (const Stage &s : stages_) b.push_back(make_row_map(s.name, fvar(s.name + "_all")));
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
            if (is_producer(s) && has_initial_value(s)) b.push_back(initial_value(s, split()));
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
            const Expr carried_value = repair_state(st, fvar(s.name), rb);
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
        b.push_back(make_loop("j", Expr(0), chunks(), carried, step));
        if (split()) combine_in_one_exchange(k, b);
        for (const Stage &s : stages_)
            if (!is_producer(s) && has_initial_value(s)) b.push_back(initial_value(s));
    }

    // dst = op(dst, op over the cluster's blocks of `part`), at the kernel's top level.
    void combine_cluster(Kernel &k, Block &b, const std::string &dst, ReduceOp op, const Expr &part) {
        const std::string all = dst + "_all";
        k.values[all] = row_vec();
        b.push_back(make_cluster_reduce(all, op, part.as<HI::Variable>()->name));
        b.push_back(make_row_map(
            dst, reducer_combine(op == ReduceOp::Max ? Reducer::Max : Reducer::Sum, fvar(dst), fvar(all))));
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
                tiles.push_back(
                    x_slice(make_store(v, o.tensor, Expr(), Expr(), int_var("valid_rows"), valid_cols(shape.chunked)),
                            shape.chunked));
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
            std::vector<std::string> dims = row_dims(row_vars_.size());
            if (o.per_element) {
                dims.clear();
                for (size_t j = 0; j < x_dims_; j++) dims.push_back(dim_name(j));
            }
            k.tensors.push_back({o.tensor, o.dtype, true, "", dims});
        }
        if (tiles.size() > (shape.chunked ? 1u : 0u)) append(b, tiles, shape.chunked);
    }

    static constexpr const char *kX = "x_t";
    static constexpr const char *kRank = "rank";  // the block's rank in its row's cluster
    struct Stage {
        const FusedStage *st;
        std::string name;
        Expr term;  // over kX, stage names (row vectors) and the placeholders
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
    // The stage's initial value folded in; `once` (a sum over a split row's blocks): by the first block.
    Stmt initial_value(const Stage &s, bool once = false) const {
        Expr v = reducer_combine(s.st->reducer, s.st->init, fvar(s.name));
        if (once && s.st->reducer == Reducer::Sum) v = Halide::select(int_var(kRank) == 0, v, fvar(s.name));
        return make_row_map(s.name, v, "initial value");
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
        for (int k = 2; used_.count(r) || r == "x_t" || r == "row0" || r == "valid_rows" || r == kRank ||
                        r == "plane" || r == "d0" || r == "inner" || r == "part" || r == "part0" || r == "part_chunks";
             k++)
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
        if (chunked && split()) return int_var("part0") + int_var("j") * shape_.cols();
        if (chunked) return int_var("j") * shape_.cols();
        return shape_.cluster > 1 ? int_var(kRank) * shape_.cols() : Expr(0);
    }
    // A row split over a cluster's blocks, each looping over its own chunks (few long rows).
    bool split() const { return shape_.cluster > 1 && shape_.chunked; }
    // The chunks the block's loops run over: the row's, or its part's when split.
    Expr chunks() const {
        return split() ? int_var("part_chunks") : (int_var("cols") + shape_.cols() - 1) / shape_.cols();
    }
    Expr valid_cols(bool chunked) const { return HI::simplify(int_var("cols") - chunk0(chunked)); }

    Stmt load_x(bool chunked) const {
        return x_slice(make_load("x_t", x_, Expr(), Expr(), int_var("valid_rows"), valid_cols(chunked)), chunked);
    }
    // A load or store of the block's rows of x's shape: rows contiguous with their columns strided by
    // the rows below the reduced axis (strided layout), or each row's columns contiguous.
    Stmt x_slice(const Stmt &s, bool chunked) const {
        return with(s, [&](Node &n) {
            if (shape_.strided) {
                n.base = HI::simplify(int_var("plane") * int_var("inner") * int_var("cols") + int_var("d0") +
                                      chunk0(chunked) * int_var("inner"));
                n.row_stride = 1;
                n.col_stride = int_var("inner");
            } else {
                n.base = HI::simplify(int_var("row0") * int_var("cols") + chunk0(chunked));
                n.row_stride = int_var("cols");
            }
        });
    }

    // x's dimension j by name: the reduced axis "cols"; the others "rows", "rows2", ... (below the
    // reduced axis, or every one when it is innermost) and "planes", "planes2", ... above it.
    std::string dim_name(size_t j) const {
        if (int(j) == axis_) return "cols";
        const bool above = axis_ > 0 && int(j) > axis_;
        const size_t n = above ? j - size_t(axis_) : axis_ == 0 ? j : j + 1;
        return std::string(above ? "planes" : "rows") + (n > 1 ? std::to_string(n) : "");
    }
    // The names of the first n row dimensions (x's dimensions without the reduced one).
    std::vector<std::string> row_dims(size_t n) const {
        std::vector<std::string> r;
        for (size_t i = 0; i < n; i++) r.push_back(dim_name(i < size_t(axis_) ? i : i + 1));
        return r;
    }
    // The rows of the innermost-axis layout: the product of the row dimensions.
    Expr all_rows() const {
        Expr r;
        for (const std::string &d : row_dims(row_vars_.size())) r = r.defined() ? r * int_var(d) : int_var(d);
        return r;
    }

    // dst = op(dst, op over the row of src): over the strip, then (a row over a cluster) over the
    // cluster's blocks, whose partial results a row vector of its own carries.
    // With `block_only`, over the block's strip only.
    void reduce_row(Kernel &k, Block &step, const std::string &dst, ReduceOp op, const std::string &src,
                    bool block_only = false) const {
        const auto bounded_cols = [&](Node &n) { n.valid_cols = valid_cols(shape_.chunked); };
        if (shape_.cluster == 1 || block_only) {
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
        b.push_back(make_loop("j", Expr(0), chunks(), {}, step));
    }

    // The placeholders bound for the kernel: the column is col (+ the chunk's first); the flat row
    // row0 + row; the row variables from it (innermost axis) or from the row within its plane and the
    // plane (strided layout), the first dimension fastest.
    Expr bind(const Expr &e, bool chunked) const {
        std::map<std::string, Expr> m;
        m[kCol] = int_var("col") + chunk0(chunked);
        m[kFlat] = int_var("row0") + int_var("row");
        const std::vector<std::string> dims = row_dims(row_vars_.size());
        const size_t below = shape_.strided ? size_t(axis_) : dims.size();  // the dimensions of the flat row
        for (size_t part = 0; part < 2; part++) {
            const size_t first = part ? below : 0, last = part ? dims.size() : below;
            Expr index = part ? int_var("plane") : shape_.strided ? int_var("d0") + int_var("row") : m[kFlat];
            for (size_t i = first; i < last; i++) {
                m["rc.row." + std::to_string(i)] = i + 1 < last ? index % int_var(dims[i]) : index;
                index = index / int_var(dims[i]);
            }
        }
        for (size_t j = 0; j < x_dims_; j++) m["rc.xext." + std::to_string(j)] = int_var(dim_name(j));
        for (size_t i = 0; i < dims.size(); i++) m["rc.rext." + std::to_string(i)] = int_var(dims[i]);
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
        if (tensor == x_ && dim >= 0 && size_t(dim) < x_dims_) return int_var(dim_name(size_t(dim)));
        auto it = by_col_.find(tensor);
        if (it == by_col_.end() || (it->second && dim != 0) || (!it->second && dim >= by_row_dims_.at(tensor)))
            fail("cannot tell the extent of input " + tensor + "'s dimension " + std::to_string(dim));
        return int_var(it->second ? "cols" : dim_name(size_t(dim) < size_t(axis_) ? size_t(dim) : size_t(dim) + 1));
    }

    /** `e` (a stage's map or an output's value) over the placeholders: x at (column, row) is the strip,
     * other input reads flat tensor reads, stages row vectors, pure Funcs inlined. */
    Expr analyse(const Expr &e, const std::string &who, const std::map<std::string, Expr> &vars) {
        class Analyse : public HI::IRMutator {
        public:
            Builder *b;
            std::string who;
            const std::map<std::string, Expr> *vars;
            using HI::IRMutator::visit;
            Expr visit(const HI::Variable *op) override {
                auto v = vars->find(op->name);
                if (v != vars->end()) return v->second;
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
                if (const HI::Call *in = input_of(op)) return b->input(in, op->args, who, this);
                if (op->call_type == HI::Call::Halide) {
                    for (const FusedStage &s : b->plan_.stages)
                        if (s.name == op->name) {
                            std::vector<Expr> a;
                            for (const Expr &x : op->args) a.push_back(mutate(x));
                            if (!b->at_row(a)) b->fail(who + " reads " + s.name + " at another row than its own");
                            return fvar(b->names_.at(s.name));
                        }
                    const HI::Function f(op->func);
                    if (MatmulProduct p; product_of(f, p)) {
                        std::vector<Expr> a;
                        for (const Expr &x : op->args) a.push_back(mutate(x));
                        return b->product_read(op->name, p, a, who);
                    }
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
        a.vars = &vars;
        return a.mutate(HI::substitute_in_all_lets(e));
    }

    // A read of the matrix product x(c, r) = sum_k a(k, r) * b(k, c): along the reduced axis x's
    // element, at another column of the row a gather (cross-entropy's logit of the label).
    Expr product_read(const std::string &name, const MatmulProduct &p, const std::vector<Expr> &args,
                      const std::string &who) {
        if (p.dtype == DType::I32)
            fail(who + " reads the matrix product " + name + " of " + p.a + " and " + p.b +
                 ", which must both be f16 or both bf16");
        if (row_vars_.size() != 1 || !HI::equal(args[1], row_ph(0)))
            fail(who + " reads the matrix product " + name +
                 " at another row than its own; products x(c, r) take one row variable");
        if (!x_.empty() && x_ != name) fail(who + " reads " + name + " beside " + x_ + ": a chain reduces one x");
        x_ = name;
        x_type_ = p.dtype;
        x_dims_ = 2;
        product_ = p;
        if (HI::equal(args[0], int_var(kCol))) {
            axis_ = 0;
            return fvar(kX);
        }
        if (HI::expr_uses_var(args[0], kCol))
            fail(who + " reads " + name + " at a column computed from " + plan_.rvar +
                 ": the product is read along the reduced axis as it is");
        for (size_t g = 0; g < gathers_.size(); g++)
            if (HI::equal(gathers_[g], args[0])) return fvar(kGather + std::to_string(g));
        gathers_.push_back(args[0]);
        return fvar(kGather + std::to_string(gathers_.size() - 1));
    }

    // Whether `args` are the row variables' placeholders, in order.
    bool at_row(const std::vector<Expr> &args) const {
        if (args.size() != row_vars_.size()) return false;
        for (size_t i = 0; i < args.size(); i++)
            if (!HI::equal(args[i], row_ph(i))) return false;
        return true;
    }
    // The axis of `args` (x's rank: the row placeholders in order with one more argument) that is not
    // a row variable's, or -1; every other axis must be its row variable's.
    int odd_axis(const std::vector<Expr> &args) const {
        if (args.size() != row_vars_.size() + 1) return -1;
        for (size_t k = 0; k < args.size(); k++) {
            std::vector<Expr> rest = args;
            rest.erase(rest.begin() + std::ptrdiff_t(k));
            if (at_row(rest) && !HI::equal(args[k], row_ph(k < row_vars_.size() ? k : 0))) return int(k);
        }
        return -1;
    }

    // An input read at `args`: x at its row along the reduced axis is the strip; x at its row and
    // one other column a gather; inputs with a value per row or per column flat reads.
    template <typename M>
    Expr input(const HI::Call *in, const std::vector<Expr> &raw_args, const std::string &who, M *m) {
        std::vector<Expr> args;
        for (const Expr &a : raw_args) args.push_back(m->mutate(a));
        const std::string &t = in->name;
        const int k = odd_axis(args);
        if (k >= 0 && (x_.empty() || x_ == t)) {
            if (x_.empty()) {
                x_ = t;
                x_type_ = dtype_of(in->type);
                x_dims_ = args.size();
                if (x_type_ == DType::I32)
                    fail(who + " reduces " + t + ", an integer input: row chains reduce f16, bf16 or f32 inputs");
            }
            if (HI::equal(args[size_t(k)], int_var(kCol))) {
                if (axis_ >= 0 && axis_ != k)
                    fail(who + " reads " + t + " with " + plan_.rvar + " along axis " + std::to_string(k) +
                         " where another read has it along axis " + std::to_string(axis_));
                axis_ = k;
                return fvar(kX);
            }
            if (HI::expr_uses_var(args[size_t(k)], kCol))
                fail(who + " reads " + t + " at a column computed from " + plan_.rvar +
                     ": row chains read x along the reduced axis as it is");
            if (axis_ >= 0 && axis_ != k)
                fail(who + " reads " + t + " at a computed index on axis " + std::to_string(k) +
                     ", which is not the reduced axis (" + std::to_string(axis_) + ")");
            // A gather: one element of the row, e.g. cross-entropy's logit of the label.
            Expr flat = 0, stride = 1;
            for (size_t j = 0; j < args.size(); j++) {
                flat = flat + args[j] * stride;
                stride = stride * x_extent_ph(j);
            }
            return HI::Call::make(in->type, t, {HI::simplify(flat)}, HI::Call::Image, in->func, 0, in->image,
                                  in->param);
        }
        if (args.size() == row_vars_.size() + 1) {
            if (!x_.empty() && x_ != t)
                fail(who + " reads a second " + std::to_string(args.size()) + "-D input " + t + " (beside " + x_ +
                     "): row chains reduce one input (a dot product is another pattern)");
            fail(who + " reads " + t + " at a row other than its own");
        }
        const bool by_col = args.size() == 1 && HI::expr_uses_var(args[0], kCol);
        bool uses_col = false;
        for (const Expr &a : args) uses_col = uses_col || HI::expr_uses_var(a, kCol);
        if (by_col) {
            for (size_t i = 0; i < row_vars_.size(); i++)
                if (HI::expr_uses_var(args[0], "rc.row." + std::to_string(i)))
                    fail(who + " reads " + t + " at an index that is neither the column nor the row alone");
        } else if (uses_col || args.size() != row_vars_.size()) {
            fail(who + " reads " + t + " of " + std::to_string(args.size()) +
                 " dimensions: row chains read x, inputs with a value per row (indexed by the " +
                 std::to_string(row_vars_.size()) + " row variables) and 1-D inputs along " + plan_.rvar);
        }
        auto it = by_col_.find(t);
        if (it != by_col_.end() && it->second != by_col) fail(t + " is read both along the row and along the columns");
        by_col_[t] = by_col;
        by_row_dims_[t] = int(args.size());
        other_inputs_[t] = dtype_of(in->type);
        if (by_col) return HI::Call::make(in->type, t, {args[0]}, HI::Call::Image, in->func, 0, in->image, in->param);
        // A value per row: at the row's flat index, or at indices computed from the row's variables.
        Expr flat = int_var(kFlat);
        if (!at_row(args)) {
            Expr stride = 1;
            flat = 0;
            for (size_t i = 0; i < args.size(); i++) {
                flat = flat + args[i] * stride;
                stride = stride * row_extent_ph(i);
            }
        }
        return HI::Call::make(in->type, t, {HI::simplify(flat)}, HI::Call::Image, in->func, 0, in->image, in->param);
    }

    void output(const Halide::Func &o) {
        const HI::Function fn = o.function();
        if (fn.has_update_definition()) fail("output " + o.name() + " must be a pure Func");
        const size_t n = fn.args().size(), nr = row_vars_.size();
        if (n != nr && n != nr + 1)
            fail("output " + o.name() + " must be indexed by the " + std::to_string(nr) +
                 " row variables (per row) or by " + std::to_string(nr + 1) + " variables as x is (per element), not " +
                 std::to_string(n));
        Output out;
        out.tensor = base_name(o.name());
        out.dtype = dtype_of(fn.output_types()[0]);
        if (out.dtype == DType::I32) fail("output " + o.name() + " is an integer; row chains write f16, bf16 or f32");
        out.per_element = n == nr + 1;
        std::map<std::string, Expr> vars;
        for (size_t j = 0, i = 0; j < n; j++)
            vars[fn.args()[j]] = out.per_element && int(j) == axis_ ? int_var(kCol) : row_ph(i++);
        Expr v = analyse(fn.values()[0], "output " + o.name(), vars);
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
    std::vector<std::string> row_vars_;  // the stages' variables: a row of x is one value of each
    int axis_ = -1;  // x's reduced axis (0: innermost)
    size_t x_dims_ = 0;
    std::map<std::string, std::string> names_;
    std::set<std::string> used_;
    std::vector<Stage> stages_;
    std::vector<Output> outs_;
    std::vector<Expr> requirements_;  // the conditions of the Halide::require calls the values pass
    std::optional<MatmulProduct> product_;  // x is a matrix product (the matmul-fed pattern)
    std::vector<Expr> gathers_;  // the product's columns read by gathers, as kGather + index
    std::string x_;
    DType x_type_ = DType::F16;
    std::map<std::string, DType> other_inputs_;
    std::map<std::string, bool> by_col_;  // the other inputs: along the reduced axis, or a value per row
    std::map<std::string, int> by_row_dims_;  // their dimensions (the first row dimensions)
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
    return default_row_chain_shape(arch, dtype, cols, RowChainForm());
}

bool splits_rows(GpuArch arch, const RowChainForm &form, int64_t rows, int64_t cols) {
    return arch == GpuArch::Sm90a && !form.strided && rows > 0 && rows <= kSplitRows && cols > split_above(form);
}

int64_t split_above(const RowChainForm &form) { return form.streams ? 16384 : 8 * 32768; }

RowChainShape split_row_chain_shape(DType dtype) {
    RowChainShape s;
    s.vector = 16 / dtype_bytes(dtype);
    s.rows_per_block = 1;
    s.threads_per_row = 512;
    s.vectors = 32 / s.vector;
    s.chunked = true;
    s.cluster = 8;
    return s;
}

RowChainShape default_row_chain_shape(GpuArch arch, DType dtype, int64_t cols, const RowChainForm &form, int64_t rows) {
    if (splits_rows(arch, form, rows, cols)) return split_row_chain_shape(dtype);
    if (form.strided) return strided_row_chain_shape(cols);
    const bool streams = form.streams;
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
    s.chunked = cols <= 0 || int64_t(s.vectors) * threads < vecs;  // chunked with a cluster: a split row
    return s;
}

RowChainForm row_chain_form(const FusedPlan &plan, const std::vector<Halide::Func> &outputs) {
    Builder b(plan, outputs);
    RowChainForm f;
    f.streams = b.streams();
    f.strided = b.strided();
    return f;
}

RowChainShape strided_row_chain_shape(int64_t cols) {
    RowChainShape s;
    s.strided = true;
    s.vector = 1;
    s.rows_per_block = 32;
    if (cols > 0 && cols <= 32 * 32) {
        s.threads_per_row = 1;
        while (s.threads_per_row * 32 < cols) s.threads_per_row *= 2;
        s.vectors = int((cols + s.threads_per_row - 1) / s.threads_per_row);
        return s;
    }
    s.threads_per_row = 32;
    s.vectors = 16;
    s.chunked = true;
    return s;
}

std::string row_chain_mismatch(const FusedPlan &plan, const std::vector<Halide::Func> &outputs) {
    try {
        Builder(plan, outputs).recognise_rows();
        return "";
    } catch (const CompileError &e) {
        const std::string prefix = plan.directive + ": the row-chain pattern cannot lower this group: ",
                          what = e.what();
        return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
    }
}

MatmulChainForm matmul_chain_form(const FusedPlan &plan, const std::vector<Halide::Func> &outputs) {
    return Builder(plan, outputs).product_form();
}

tir::Program build_row_chain(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, GpuArch arch,
                             const RowChainShape &shape) {
    return Builder(plan, outputs).build(arch, shape);
}

}  // namespace neptune::internal
