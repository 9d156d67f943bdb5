#include "lower/BuildMatmulChain.h"

#include <limits>

#include "frontend/DeriveRepair.h"
#include "frontend/Symbolic.h"
#include "lower/BuildRowChain.h"
#include "neptune/Error.h"

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

Expr fvar(const std::string &n) { return HI::Variable::make(Halide::Float(32), n); }
float identity_of(Reducer r) { return r == Reducer::Max ? -std::numeric_limits<float>::infinity() : 0.0f; }
ReduceOp op_of(Reducer r) { return r == Reducer::Max ? ReduceOp::Max : ReduceOp::Sum; }

// Depth chunks are 64 columns: one 128-byte swizzle block of 16-bit a and b, one TMA box.
constexpr int kDepthChunk = 64;

class Builder {
public:
    Builder(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt)
        : plan_(plan), opt_(opt), f_(matmul_chain_form(plan, outputs)) {
        if (bn() <= 0 || bn() % 16 || bn() > 256)
            fail("column tiles of " + std::to_string(bn()) + ": a multiple of 16 up to 256");
        for (const MatmulChainForm::Stage &s : f_.stages) {
            names_[s.st->name] = s.name;
            states_.push_back({s.name, s.st, s.raw});
        }
        // A gathered column of x (the label's logit) is a sum over the columns of x where the column
        // is the gathered one: a stage without producers, combined across chunks by addition.
        for (size_t g = 0; g < f_.gathers.size(); g++) {
            std::string n = "gathered" + std::to_string(g);
            while (names_taken(n)) n += "_";
            gather_names_.push_back(n);
            const Expr hit = HI::Variable::make(Halide::Int(32), kChainCol) == f_.gathers[g];
            states_.push_back({n, nullptr, Halide::select(hit, fvar(kChainX), 0.0f)});
        }
    }

    Program build() {
        Program p;
        p.arch = opt_.arch;
        p.kernels.push_back(step_kernel());
        if (split()) {
            p.kernels.push_back(combine_kernel());
            for (const State &s : states_) p.workspaces.push_back({ws(s.name), int_var("chunks") * int_var("rows")});
        }
        return p;
    }

private:
    struct State {
        std::string name;
        const FusedStage *st;  // null: a gathered column
        Expr raw;  // the term, producers as the plan's symbols
        Reducer reducer() const { return st ? st->reducer : Reducer::Sum; }
        std::vector<std::string> producers() const { return st ? st->producers : std::vector<std::string>{}; }
    };

    [[noreturn]] void fail(const std::string &why) const {
        throw CompileError(plan_.directive + ": the matmul-fed pattern cannot lower this group: " + why);
    }

    bool names_taken(const std::string &n) const {
        for (const State &s : states_)
            if (s.name == n) return true;
        for (const MatmulChainForm::Output &o : f_.outputs)
            if (o.tensor == n) return true;
        return false;
    }

    bool split() const { return plan_.variant == Variant::SplitK; }
    int bm() const { return 16 * opt_.warps; }
    int bn() const { return opt_.block_n; }
    static std::string ws(const std::string &state) { return "ws_" + state; }
    TileType row_vec() const { return {DType::F32, bm(), 1, Scope::Register, Layout::RowVector}; }
    TileType acc_tile() const { return {DType::F32, bm(), bn(), Scope::Register, Layout::MmaAccumulator}; }

    // The expression over the kernel's names: column `col`, row `row` (clamped into the tensors, so
    // that padding rows read the last row's per-row inputs; their results are never stored), the
    // extents of a, b and the per-row inputs as int parameters, gathers by their states' names.
    Expr bind(const Expr &e, const Expr &col) const {
        std::map<std::string, Expr> m;
        m[kChainCol] = col;
        m[kChainRow] = Halide::min(int_var("r0") + int_var("row"), int_var("rows") - 1);
        const MatmulProduct &p = f_.product;
        for (const std::string &t : {p.a, p.b}) {
            m[t + ".extent.0"] = int_var("depth");
            m[t + ".min.0"] = m[t + ".min.1"] = Expr(0);
        }
        m[p.a + ".extent.1"] = int_var("rows");
        m[p.b + ".extent.1"] = int_var("cols");
        for (const auto &[t, type] : f_.row_inputs) {
            m[t + ".extent.0"] = int_var("rows");
            m[t + ".min.0"] = Expr(0);
        }
        for (size_t g = 0; g < gather_names_.size(); g++) m[kChainGather + std::to_string(g)] = fvar(gather_names_[g]);
        return HI::simplify(HI::substitute(m, e));
    }

    // Producers as the repair reads them: old values `from` (suffix on the state's name) and new `to`.
    std::map<std::string, Expr> producer_values(const State &s, const std::string &from, const std::string &to) const {
        std::map<std::string, Expr> rb;
        for (const std::string &p : s.producers()) {
            const Reducer pr = plan_.stage(p).reducer;
            rb[p] = guarded_producer(pr, fvar(names_.at(p) + from));
            rb[sym::Context::primed(p)] = guarded_producer(pr, fvar(names_.at(p) + to));
        }
        return rb;
    }

    // `value` (the state `s` under the producers' `from` values) re-expressed under their `to` values
    // with the plan's derived repair; the reducer's identity stays (exp(-inf - -inf) is NaN).
    Expr repaired(const State &s, const Expr &value, const std::string &from, const std::string &to) const {
        return s.st ? repair_state(*s.st, value, producer_values(s, from, to)) : value;
    }

    bool has_initial_value(const State &s) const {
        if (!s.st) return false;
        const Expr init = s.st->init;
        return !HI::equal(init, reducer_identity(s.st->reducer)) &&
               !(s.st->reducer == Reducer::Sum && HI::is_const_zero(init));
    }
    Stmt initial_value(const State &s) const {
        if (!HI::is_const(s.st->init)) fail(s.name + "'s initial value must be a constant");
        return make_row_map(s.name, reducer_combine(s.st->reducer, s.st->init, fvar(s.name)), "initial value");
    }
    bool is_producer(const State &s) const {
        for (const FusedStage &t : plan_.stages)
            for (const std::string &p : t.producers)
                if (s.st && p == s.st->name) return true;
        return false;
    }

    void add_tensors(Kernel &k) const {
        const MatmulProduct &p = f_.product;
        k.tensors = {{p.a, p.dtype, false, "", {"depth", "rows"}}, {p.b, p.dtype, false, "", {"depth", "cols"}}};
        for (const auto &[t, type] : f_.row_inputs) k.tensors.push_back({t, type, false, "", {"rows"}});
        // a as [1, depth / 64, rows, 64]: depth chunk kk is head kk of the view, so a TMA box of 64
        // columns addresses it by (0, kk, row); b likewise.
        const Expr chunks = (int_var("depth") + kDepthChunk - 1) / kDepthChunk;
        for (const auto &[t, rows] : {std::pair{p.a, "rows"}, std::pair{p.b, "cols"}})
            k.views[t] = {Expr(1),
                          chunks,
                          int_var(rows),
                          Expr(kDepthChunk),
                          int_var("depth"),
                          Expr(kDepthChunk),
                          int_var(rows) * int_var("depth")};
    }

    void add_outputs(Kernel &k, Block &b) const {
        for (const MatmulChainForm::Output &o : f_.outputs) {
            const std::string v = "o_" + o.tensor;
            k.values[v] = row_vec();
            b.push_back(with_role(make_row_map(v, bind(o.value, Expr()), "output " + o.tensor), Role::Epilogue));
            b.push_back(make_row_store(v, o.tensor, int_var("r0"), int_var("valid_rows")));
            k.tensors.push_back({o.tensor, o.dtype, true, "", {"rows"}});
        }
    }

    // Column tile j of x complete: each state repaired to its producers' new values, then the tile's
    // terms reduced into it, columns past cols contributing the reducer's identity.
    Block tile_update(Kernel &k, const Expr &j) const {
        Block b;
        const Expr col = j * bn() + int_var("col");
        const Expr valid = col < int_var("cols");
        k.values["term"] = acc_tile();
        for (const State &s : states_) {
            const std::string nw = s.name + "_new";
            k.values[nw] = row_vec();
            b.push_back(with_role(make_row_map(nw, bind(repaired(s, fvar(s.name), "", "_new"), col),
                                               s.producers().empty() ? "" : "repair of " + s.name),
                                  s.producers().empty() ? Role::None : Role::Repair));
            std::map<std::string, Expr> prod_new;
            for (const std::string &p : s.producers())
                prod_new[p] = guarded_producer(plan_.stage(p).reducer, fvar(names_.at(p) + "_new"));
            const Expr term = bind(HI::substitute(prod_new, s.raw), col);
            b.push_back(with_role(make_map("term",
                                           Halide::select(valid, HI::substitute(kChainX, fvar("x"), term),
                                                          Expr(identity_of(s.reducer()))),
                                           "term of " + s.name),
                                  Role::Term));
            b.push_back(make_reduce(nw, op_of(s.reducer()), "term"));
        }
        for (const State &s : states_) b.push_back(make_row_map(s.name, fvar(s.name + "_new")));
        return b;
    }

    Kernel step_kernel() const {
        Kernel k;
        k.name = split() ? "neptune_matmul_partial" : "neptune_matmul_chain";
        k.warps = opt_.warps;
        k.min_blocks_per_sm = opt_.min_blocks_per_sm;
        add_tensors(k);
        k.int_params = {"rows", "cols", "depth"};
        if (split()) k.int_params.push_back("chunks");
        k.grid_x = (int_var("rows") + bm() - 1) / bm();
        if (split()) k.grid_y = int_var("chunks");
        const Expr tiles = (int_var("cols") + bn() - 1) / bn();
        const Expr per = split() ? (tiles + int_var("chunks") - 1) / int_var("chunks") : tiles;
        k.scalars = {{"r0", int_var("block_x") * bm()},
                     {"valid_rows", int_var("rows") - int_var("r0")},
                     {"depth_chunks", (int_var("depth") + kDepthChunk - 1) / kDepthChunk},
                     {"tile0", split() ? int_var("block_y") * per : Expr(0)},
                     {"tile_end", Halide::min(tiles, int_var("tile0") + per)},
                     {"steps", Halide::max(int_var("tile_end") - int_var("tile0"), 0) * int_var("depth_chunks")}};
        const DType t = f_.product.dtype;
        k.values["a_s"] = {t, bm(), kDepthChunk, Scope::Shared, Layout::SharedRowMajor};
        k.values["a_a"] = {t, bm(), kDepthChunk, Scope::Register, Layout::MmaOperandA};
        k.values["b_s"] = {t, bn(), kDepthChunk, Scope::Shared, Layout::SharedRowMajor};
        k.values["x"] = acc_tile();
        Block body;
        std::vector<std::string> carried;
        for (const State &s : states_) {
            k.values[s.name] = row_vec();
            body.push_back(make_fill(s.name, identity_of(s.reducer())));
            // A producer starts from its initial value, so that its readers' terms see the value the
            // plain algorithm's final producer has (rolling; split, the combine folds it in).
            if (!split() && is_producer(s) && has_initial_value(s)) body.push_back(initial_value(s));
            carried.push_back(s.name);
        }
        // Step `step`: depth chunk kk of column tile j.
        const Expr kk = int_var("step") % int_var("depth_chunks");
        const Expr j = int_var("tile0") + int_var("step") / int_var("depth_chunks");
        const Expr c0 = kk * kDepthChunk, cols_in_chunk = Halide::min(kDepthChunk, int_var("depth") - c0);
        Block step;
        const MatmulProduct &p = f_.product;
        step.push_back(make_view_load("a_s", p.a, Expr(0), kk, int_var("r0"), int_var("r0") * int_var("depth") + c0,
                                      int_var("depth"), int_var("valid_rows"), cols_in_chunk));
        step.push_back(make_view_load("b_s", p.b, Expr(0), kk, j * bn(), j * bn() * int_var("depth") + c0,
                                      int_var("depth"), int_var("cols") - j * bn(), cols_in_chunk));
        step.push_back(make_convert("a_a", "a_s"));
        step.push_back(make_dot("x", "a_a", "b_s", true, kk == 0));  // a new column tile restarts x
        step.push_back(make_if(kk == int_var("depth_chunks") - 1, tile_update(k, j), "the column tile is complete"));
        body.push_back(make_loop("step", Expr(0), int_var("steps"), carried, step));
        if (split()) {
            for (const State &s : states_) {
                body.push_back(make_row_store(s.name, ws(s.name), int_var("block_y") * int_var("rows") + int_var("r0"),
                                              int_var("valid_rows")));
                k.tensors.push_back({ws(s.name), DType::F32, true});
            }
        } else {
            for (const State &s : states_)
                if (!is_producer(s) && has_initial_value(s)) body.push_back(initial_value(s));
            add_outputs(k, body);
        }
        k.body = body;
        return k;
    }

    // Split-K's combine: per state in dependence order, each chunk's state repaired from the chunk's
    // producers to the final ones and combined; then the initial value; then the outputs.
    Kernel combine_kernel() const {
        Kernel k;
        k.name = "neptune_matmul_combine";
        k.warps = opt_.warps;
        k.int_params = {"rows", "cols", "depth", "chunks"};
        for (const auto &[t, type] : f_.row_inputs) k.tensors.push_back({t, type, false, "", {"rows"}});
        for (const State &s : states_) k.tensors.push_back({ws(s.name), DType::F32, false});
        k.grid_x = (int_var("rows") + bm() - 1) / bm();
        k.scalars = {{"r0", int_var("block_x") * bm()}, {"valid_rows", int_var("rows") - int_var("r0")}};
        Block body;
        const Expr at_chunk = int_var("c") * int_var("rows") + int_var("r0");
        for (const State &s : states_) {
            k.values[s.name] = row_vec();
            k.values[s.name + "_part"] = row_vec();
            body.push_back(make_fill(s.name, identity_of(s.reducer())));
            Block loop;
            loop.push_back(make_row_load(s.name + "_part", ws(s.name), at_chunk, Expr(1), int_var("valid_rows"),
                                         identity_of(s.reducer())));
            for (const std::string &p : s.producers()) {
                const std::string n = names_.at(p);
                if (!k.values.count(n + "_part_in")) k.values[n + "_part_in"] = row_vec();
                loop.push_back(make_row_load(n + "_part_in", ws(n), at_chunk, Expr(1), int_var("valid_rows"),
                                             identity_of(plan_.stage(p).reducer)));
            }
            const Expr part = bind(repaired(s, fvar(s.name + "_part"), "_part_in", ""), Expr());
            loop.push_back(with_role(make_row_map(s.name + "_part", part, "repair of " + s.name), Role::Repair));
            loop.push_back(make_row_map(s.name, reducer_combine(s.reducer(), fvar(s.name), fvar(s.name + "_part"))));
            body.push_back(make_loop("c", Expr(0), int_var("chunks"), {s.name}, loop));
            if (has_initial_value(s)) body.push_back(initial_value(s));
        }
        add_outputs(k, body);
        k.body = body;
        return k;
    }

    const FusedPlan &plan_;
    const LowerOptions &opt_;
    MatmulChainForm f_;
    std::map<std::string, std::string> names_;  // plan stage name -> readable state name
    std::vector<State> states_;  // the stages in dependence order, then the gathered columns
    std::vector<std::string> gather_names_;
};

}  // namespace

std::string matmul_chain_mismatch(const FusedPlan &plan, const std::vector<Halide::Func> &outputs) {
    try {
        matmul_chain_form(plan, outputs);
        return "";
    } catch (const CompileError &e) {
        const std::string what = e.what();
        const size_t colon = what.find(" cannot lower this group: ");
        return colon == std::string::npos ? what : what.substr(colon + 26);
    }
}

tir::Program build_matmul_chain(const FusedPlan &plan, const std::vector<Halide::Func> &outputs,
                                const LowerOptions &opt) {
    return Builder(plan, outputs, opt).build();
}

}  // namespace neptune::internal
