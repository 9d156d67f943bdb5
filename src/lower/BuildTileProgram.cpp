#include "lower/BuildTileProgram.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "core/StrideParams.h"
#include "frontend/Symbolic.h"
#include "lower/Patterns.h"
#include "neptune/Error.h"

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

Expr fvar(const std::string &n) { return HI::Variable::make(Halide::Float(32), n); }
Expr neg_inf() { return Expr(-std::numeric_limits<float>::infinity()); }
int round_up(int x, int m) { return (x + m - 1) / m * m; }

Expr strip_casts(Expr e) {
    while (const HI::Cast *c = e.as<HI::Cast>()) e = c->value;
    return e;
}

// guard(guard(x)) = guard(x): a user's safe max under the lowering's own guard reads once.
Expr collapse_guards(const Expr &e) {
    class Collapse : public HI::IRMutator {
    public:
        using HI::IRMutator::visit;
        Expr visit(const HI::Select *op) override {
            const Expr t = mutate(op->true_value), f = mutate(op->false_value), c = mutate(op->condition);
            const HI::EQ *eq = c.as<HI::EQ>();
            const HI::Select *inner = f.as<HI::Select>();
            if (eq && inner && HI::equal(eq->a, f) && HI::equal(t, inner->true_value) &&
                HI::equal(eq->b, inner->condition.as<HI::EQ>() ? inner->condition.as<HI::EQ>()->b : Expr()) &&
                HI::is_const(t))
                return f;
            return Halide::select(c, t, f);
        }
    } col;
    return col.mutate(e);
}

class Builder {
public:
    /** Why the plan does not lower (build_tile_program adds the directive). */
    struct Refusal {
        std::string why;
    };

    Builder(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt)
        : plan_(plan), outputs_(outputs), opt_(opt) {}

    // Throws Refusal unless the plan has attention's shape.
    void check() {
        // P·V steps over the keys in mma's k16 slices (an even number of n8 score tiles).
        if (bn() <= 0 || bn() % 16)
            fail("KV tiles of " + std::to_string(bn()) +
                 " keys: the tile backend needs a positive multiple of 16 (16, "
                 "32, 64 or 128)");
        recognise();
        for (const Halide::Func &o : outputs_) recognise_output(o, stage_names_);
    }

    /** After check(): whether K and V are read through a page table. */
    bool paged() const { return page_table_.defined(); }

    Program build() {
        check();
        Program p;
        p.arch = opt_.arch;
        if (plan_.variant == Variant::Rolling) {
            p.kernels.push_back(keys_from_pages(rolling_kernel()));
        } else {
            p.kernels.push_back(keys_from_pages(partial_kernel()));
            p.kernels.push_back(keys_from_pages(combine_kernel(), false));
            for (const StageInfo &s : stages_) {
                const Expr n = int_var("chunks") * int_var("batch") * int_var("q_heads");
                p.workspaces.push_back({"ws_" + s.name, s.tile ? n * Expr(dvp()) : n});
            }
            // A partial block's rows are its KV head's query heads: rows b * q_heads + h0 + [0, group).
            p.fold =
                CombineFold{int_var("b") * int_var("kv_heads") + int_var("hkv"),
                            int_var("batch") * int_var("kv_heads"),
                            int_var("chunks"),
                            {{"r0", int_var("b") * int_var("q_heads") + int_var("h0")}, {"r_valid", int_var("group")}},
                            "p",
                            combine_chunk_row0()};
        }
        return p;
    }

private:
    struct StageInfo {
        const FusedStage *st;
        std::string name;  // readable, unique
        bool tile = false;  // indexed by the V column: a dot with V
        bool frontier = false;
        Expr term;  // per-key term: the map, or for tile stages its factor besides V
        std::vector<std::string> producers;  // readable names
    };
    struct OutputInfo {
        std::string tensor;
        DType dtype;
        bool tile;
        Expr value;  // over stage names (row vectors, the tile stage) and canonical vars
    };

    [[noreturn]] void fail(const std::string &why) const { throw Refusal{why}; }

    int dp() const { return round_up(opt_.head_dim_qk, 16); }
    int dvp() const { return round_up(opt_.head_dim_v, 16); }
    int bm() const { return 16 * opt_.warps; }
    int bn() const { return opt_.block_n; }  // keys per warp and tile
    // The key of score column `col` in KV tile j.
    Expr key_of_col() const { return int_var("j") * bn() + int_var("col"); }

    const StageInfo &stage_named(const std::string &n) const {
        for (const StageInfo &s : stages_)
            if (s.name == n) return s;
        throw InternalError("no stage " + n);
    }

    // ---- Recognising the attention shape ---------------------------------------------------------

    void recognise() {
        const FusedStage *front = nullptr;
        for (const FusedStage &s : plan_.stages)
            if (s.producers.empty() && s.reducer == Reducer::Max) front = &s;
        if (!front) fail("no max reduction without producers (the row max of the scores) starts the chain");
        if (front->args.size() != 3) fail(front->name + " must be indexed by (query, head, batch)");
        rename_[front->args[0]] = "i";
        rename_[front->args[1]] = "h";
        rename_[front->args[2]] = "b";
        rename_[plan_.rvar] = "kv";
        // The frontier's map is the score Func S(kv, i, h, b).
        const HI::Call *sc = strip_casts(front->map).as<HI::Call>();
        if (!sc || sc->call_type != HI::Call::Halide) fail(front->name + "'s map must be a call to the score Func");
        score_func_ = sc->name;
        const HI::Function sf(sc->func);
        if (sf.has_update_definition()) fail("the score Func " + sc->name + " must be pure");
        std::map<std::string, Expr> sargs;
        for (size_t a = 0; a < sf.args().size(); a++) sargs[sf.args()[a]] = canon(sc->args[a]);
        Expr sdef = HI::substitute(sargs, unwrap_inputs(HI::substitute_in_all_lets(sf.values()[0])));
        recognise_dot(sdef);
        if (const HI::Select *sel = sdef.as<HI::Select>()) {
            const HI::FloatImm *f = strip_casts(sel->false_value).as<HI::FloatImm>();
            if (f && std::isinf(f->value) && f->value < 0) {
                visible_ = sel->condition;
                sdef = sel->true_value;
            }
        }
        modifier_ = sdef;
        std::map<std::string, std::string> &names = stage_names_;
        for (const FusedStage &s : plan_.stages) names[s.name] = unique_name(base_name(s.name));
        for (const FusedStage &s : plan_.stages) {
            StageInfo si;
            si.st = &s;
            si.name = names[s.name];
            si.frontier = &s == front;
            for (const std::string &p : s.producers) si.producers.push_back(names[p]);
            if (s.repair.maps.size() != 1)
                fail(s.name + " carries companions (" + repair_kind_name(s.repair.kind) +
                     "); the tile backend "
                     "lowers single-state repairs for now");
            std::map<std::string, Expr> rn;
            const size_t off = s.args.size() == 4 ? 1 : 0;
            if (s.args.size() != 3 && s.args.size() != 4) fail(s.name + " must be indexed by ([e,] i, h, b)");
            if (off) rn[s.args[0]] = int_var("e");
            for (size_t a = 0; a < 3; a++)
                if (s.args[a + off] != front->args[a])
                    fail(s.name + "'s variables must be named as " + front->name + "'s");
            Expr g = canon(s.map);
            for (const std::string &p : s.producers) g = HI::substitute(p, fvar(names[p]), g);
            g = replace_score(g);
            si.tile = off == 1;
            if (si.tile) {
                Expr p = split_v(g);
                if (!p.defined()) fail(s.name + "'s map must be (a function of the scores) times v(e, kv, hkv, b)");
                si.term = p;
            } else {
                si.term = g;
            }
            if (si.tile && s.reducer != Reducer::Sum) fail(s.name + ": a dot with V must be a sum");
            stages_.push_back(si);
        }
        if (!has_tile_stage()) fail("no stage multiplies by V: nothing to store per output column");
    }

    bool has_tile_stage() const {
        for (const StageInfo &s : stages_)
            if (s.tile) return true;
        return false;
    }

    std::string unique_name(const std::string &n) {
        std::string r = n;
        for (int k = 2; used_names_.count(r); k++) r = n + std::to_string(k);
        used_names_.insert(r);
        return r;
    }

    Expr canon(const Expr &e) const {
        std::map<std::string, Expr> m;
        for (auto &[from, to] : rename_) m[from] = int_var(to);
        return HI::substitute(m, unwrap_inputs(HI::substitute_in_all_lets(e)));
    }

    // An input buffer used as a Func is a wrapper Func (q_im(d, i, h, b) = q(d, i, h, b)): read the buffer.
    // A pure Func that only reads buffers (a gather: a paged cache's k(d, j, hkv, b) reads k_cache
    // through the page table) is inlined, so its reads are the buffers'. Promises of bounds are for
    // Halide's bounds inference and go.
    static Expr unwrap_inputs(const Expr &e) {
        class Unwrap : public HI::IRMutator {
        public:
            using HI::IRMutator::visit;
            Expr visit(const HI::Call *op) override {
                if (op->call_type == HI::Call::Halide && op->func.defined()) {
                    const HI::Function f(op->func);
                    std::vector<Expr> args;
                    for (const Expr &a : op->args) args.push_back(mutate(a));
                    if (const HI::Call *in = wrapped_buffer(f))
                        return HI::Call::make(in->type, in->name, args, HI::Call::Image, in->func, 0, in->image,
                                              in->param);
                    if (const Expr g = gather(f, args); g.defined()) return g;
                }
                return HI::IRMutator::visit(op);
            }

        private:
            Expr gather(const HI::Function &f, const std::vector<Expr> &args) {
                if (f.has_update_definition() || f.has_extern_definition() || f.outputs() != 1) return Expr();
                const Expr body = mutate(HI::substitute_in_all_lets(f.values()[0]));
                class ReadsFuncs : public HI::IRGraphVisitor {
                public:
                    bool found = false;
                    using HI::IRGraphVisitor::visit;
                    void visit(const HI::Call *c) override {
                        found = found || c->call_type == HI::Call::Halide;
                        HI::IRGraphVisitor::visit(c);
                    }
                } reads;
                body.accept(&reads);
                if (reads.found) return Expr();
                std::map<std::string, Expr> m;
                for (size_t a = 0; a < args.size(); a++) m[f.args()[a]] = args[a];
                return HI::substitute(m, body);
            }
        } u;
        return HI::remove_promises(u.mutate(e));
    }

    // The dot product inside the score: qk(kv, i, h, b) = sum_d q(d, i, h, b) * k(d, kv, hk, b).
    void recognise_dot(Expr &sdef) {
        class FindDot : public HI::IRMutator {
        public:
            std::string name;
            HI::Function fn;
            std::vector<Expr> args;
            using HI::IRMutator::visit;
            Expr visit(const HI::Call *op) override {
                if (op->call_type == HI::Call::Halide && HI::Function(op->func).has_update_definition()) {
                    name = op->name;
                    fn = HI::Function(op->func);
                    args = op->args;
                    return HI::Variable::make(Halide::Float(32), "dot");
                }
                return HI::IRMutator::visit(op);
            }
        } find;
        sdef = find.mutate(sdef);
        if (find.name.empty()) fail("the score Func has no dot-product reduction");
        const HI::Function &qk = find.fn;
        std::map<std::string, Expr> a;
        for (size_t i = 0; i < qk.args().size(); i++) a[qk.args()[i]] = find.args[i];
        const Expr upd = HI::substitute(a, unwrap_inputs(HI::substitute_in_all_lets(qk.update(0).values()[0])));
        const HI::Add *add = upd.as<HI::Add>();
        const HI::Mul *mul = add ? strip_casts(add->b).as<HI::Mul>() : nullptr;
        if (!mul) fail("the dot " + find.name + " must be qk = qk + q(d, i, h, b) * k(d, kv, hkv, b)");
        const HI::Call *cq = strip_casts(mul->a).as<HI::Call>(), *ck = strip_casts(mul->b).as<HI::Call>();
        if (!cq || !ck || cq->call_type != HI::Call::Image || ck->call_type != HI::Call::Image)
            fail("the dot " + find.name + " must multiply two input buffers");
        q_ = cq->name;
        k_ = ck->name;
        if (cq->args.size() != 4 || !HI::equal(cq->args[1], int_var("i")) || !HI::equal(cq->args[2], int_var("h")) ||
            !HI::equal(cq->args[3], int_var("b")) || !kv_read(ck))
            fail(
                "the dot must read q(d, i, h, b) and k(d, kv, hkv(h), b), or a paged cache "
                "k(d, kv % P, hkv(h), page_table(kv / P, b)) with P its extent in dimension 1");
        hk_ = ck->args[2];
    }

    // Whether `c` reads K or V at key kv of batch b: densely, c(x, kv, hkv, b), or through a page table,
    // c(x, kv % P, hkv, page_table(kv / P, b)), P the cache's rows per page (its extent in dimension 1,
    // or K's). K and V are both paged or neither, through one table.
    bool kv_read(const HI::Call *c) {
        if (c->args.size() != 4) return false;
        bool paged = true;
        if (HI::equal(c->args[1], int_var("kv")) && HI::equal(c->args[3], int_var("b"))) {
            paged = false;
        } else {
            const HI::Mod *m = c->args[1].as<HI::Mod>();
            const HI::Variable *page = m ? m->b.as<HI::Variable>() : nullptr;
            const Expr entry = unclamped(strip_casts(c->args[3]));
            const HI::Call *table = entry.as<HI::Call>();
            if (!page || !HI::equal(m->a, int_var("kv")) ||
                (page->name != c->name + ".extent.1" && page->name != k_ + ".extent.1"))
                return false;
            if (!table || table->call_type != HI::Call::Image || table->args.size() != 2 ||
                !HI::equal(table->args[0], int_var("kv") / m->b) || !HI::equal(table->args[1], int_var("b")))
                return false;
            if (!table->type.is_int() || table->type.bits() != 32)
                fail("the page table " + table->name + " must be int32");
            if (page_table_.defined() && table_name() != table->name) fail("K and V are read through two page tables");
            page_table_ = entry;
        }
        if (c->name != k_ && paged != page_table_.defined()) fail("K and V must both be paged, or neither");
        return true;
    }

    const std::string &table_name() const { return page_table_.as<HI::Call>()->name; }

    // With a paged cache the keys a sequence may hold are the table's width in pages: seq_kv is a
    // scalar of the kernel, so every int parameter is an extent of a buffer (the launchers read them
    // from the call's tensors).
    // The combine reads no key (`reads_keys` false): it only drops the parameter.
    Kernel keys_from_pages(Kernel k, bool reads_keys = true) const {
        if (!page_table_.defined()) return k;
        std::vector<std::string> &ints = k.int_params;
        ints.erase(std::remove(ints.begin(), ints.end(), "seq_kv"), ints.end());
        if (reads_keys) k.scalars.insert(k.scalars.begin(), {"seq_kv", int_var("max_pages") * int_var("page_size")});
        return k;
    }

    // x without a clamp to constants or extents, clamp(x, lo, hi) = max(min(x, hi), lo): an algorithm
    // clamps page table entries so its CPU form, which reads every key, stays in the cache; the
    // kernels read only the entries of keys a sequence holds.
    static Expr unclamped(const Expr &e) {
        const HI::Max *mx = e.as<HI::Max>();
        const HI::Min *mn = mx ? mx->a.as<HI::Min>() : nullptr;
        return mn && !mn->b.as<HI::Call>() && !mx->b.as<HI::Call>() ? mn->a : e;
    }

    Expr replace_score(const Expr &e) const {
        class Rep : public HI::IRMutator {
        public:
            explicit Rep(const std::string &n) : n(n) {}
            std::string n;
            bool bad = false;
            using HI::IRMutator::visit;
            Expr visit(const HI::Call *op) override {
                if (op->name != n) return HI::IRMutator::visit(op);
                if (!HI::equal(op->args[0], int_var("kv")) || !HI::equal(op->args[1], int_var("i"))) bad = true;
                return HI::Variable::make(Halide::Float(32), "s");
            }
        } rep(score_func_);
        Expr r = rep.mutate(e);
        if (rep.bad) fail("a stage reads the scores at another position than (kv, i)");
        return r;
    }

    // term = P * v(e, kv, hkv, b): returns P, records v.
    Expr split_v(const Expr &g) {
        const HI::Mul *m = strip_casts(g).as<HI::Mul>();
        if (!m) return Expr();
        for (int side = 0; side < 2; side++) {
            const Expr x = side ? m->a : m->b, other = side ? m->b : m->a;
            const HI::Call *c = strip_casts(x).as<HI::Call>();
            if (c && c->call_type == HI::Call::Image && HI::equal(c->args[0], int_var("e")) && kv_read(c) &&
                !HI::expr_uses_var(other, "e")) {
                if (!v_.empty() && v_ != c->name) fail("two different V inputs");
                v_ = c->name;
                if (!HI::equal(c->args[2], hk_)) fail("V's head index must be K's");
                return other;
            }
        }
        return Expr();
    }

    void recognise_output(const Halide::Func &o, const std::map<std::string, std::string> &names) {
        const HI::Function fn = o.function();
        if (fn.has_update_definition()) fail("output " + o.name() + " must be a pure Func");
        std::map<std::string, Expr> rn;
        const size_t n = fn.args().size();
        if (n != 3 && n != 4) fail("output " + o.name() + " must be indexed by ([e,] i, h, b)");
        const std::vector<std::string> canon_args =
            n == 4 ? std::vector<std::string>{"e", "i", "h", "b"} : std::vector<std::string>{"i", "h", "b"};
        for (size_t a = 0; a < n; a++) rn[fn.args()[a]] = int_var(canon_args[a]);
        Expr v = HI::substitute(rn, HI::substitute_in_all_lets(fn.values()[0]));
        class Rep : public HI::IRMutator {
        public:
            const std::map<std::string, std::string> *names;
            std::string bad;
            using HI::IRMutator::visit;
            Expr visit(const HI::Call *op) override {
                auto it = names->find(op->name);
                if (op->call_type != HI::Call::Halide) return HI::IRMutator::visit(op);
                if (it == names->end()) {
                    bad = op->name;
                    return HI::IRMutator::visit(op);
                }
                return HI::Variable::make(Halide::Float(32), it->second);
            }
        } rep;
        rep.names = &names;
        v = rep.mutate(v);
        if (!rep.bad.empty()) fail("output " + o.name() + " reads " + rep.bad + ", which is not a stage of the chain");
        OutputInfo oi;
        oi.tensor = base_name(o.name());
        const Halide::Type t = fn.output_types()[0];
        oi.dtype = t.is_bfloat() ? DType::BF16 : (t.bits() == 16 ? DType::F16 : DType::F32);
        oi.tile = n == 4;
        oi.value = strip_casts(v);
        outs_.push_back(oi);
    }

    // ---- Building kernels ------------------------------------------------------------------------

    Kernel skeleton(const std::string &name) const {
        Kernel k;
        k.name = name;
        k.warps = opt_.warps;
        k.tensors = {{q_, opt_.dtype, false}, {k_, opt_.dtype, false}, {v_, opt_.dtype, false}};
        for (const TensorParam &t : extra_inputs()) k.tensors.push_back(t);
        k.int_params = {"batch", "q_heads", "kv_heads", "seq_q", "seq_kv"};
        // q, k and v through their strides, so loads can also address them by (batch, head, row): TMA's view.
        // A paged cache's view is [pages, kv_heads, page_size, cols]: a tile is addressed by (page, head, row).
        add_view(k, q_, "batch", "q_heads", "seq_q", opt_.head_dim_qk);
        const bool paged = page_table_.defined();
        const std::string kv_batch = paged ? "pages" : "batch", kv_rows = paged ? "page_size" : "seq_kv";
        add_view(k, k_, kv_batch, "kv_heads", kv_rows, opt_.head_dim_qk);
        add_view(k, v_, kv_batch, "kv_heads", kv_rows, opt_.head_dim_v);
        if (paged) {
            for (const char *n : {"page_size", "pages", "max_pages"}) k.int_params.push_back(n);
            k.tensors.push_back({table_name(), DType::I32, false, "", {"max_pages", "batch"}});
        }
        add_output_views(k);
        return k;
    }

    // Element stride of `tensor`'s dimension d (1 rows, 2 heads, 3 batch): its kernel parameter, in units.
    static Expr stride_of(const std::string &tensor, int d) { return int_var(stride_param(tensor, d)) * kStrideUnit; }

    // `tensor` as [batch, heads, rows, cols] through its strides, which become int parameters of `k`.
    static void add_view(Kernel &k, const std::string &tensor, const std::string &batch, const std::string &heads,
                         const std::string &rows, int cols) {
        k.views[tensor] = {int_var(batch),       int_var(heads),       int_var(rows),       Expr(cols),
                           stride_of(tensor, 1), stride_of(tensor, 2), stride_of(tensor, 3)};
        for (int d = 1; d <= 3; d++) k.int_params.push_back(stride_param(tensor, d));
    }

    // The tile outputs ([batch, q_heads, seq_q, head_dim_v]) are written through their strides too.
    void add_output_views(Kernel &k) const {
        for (const OutputInfo &o : outs_)
            if (o.tile) add_view(k, o.tensor, "batch", "q_heads", "seq_q", opt_.head_dim_v);
    }

    // 1-D inputs read inside maps: ALiBi's slopes, a per-head temperature, the keys each batch
    // holds. Each is int32 or f32 and read at the query head h or the batch index b, which makes its
    // extent q_heads or batch: the kernels declare it with its element type (an int32 read as float
    // would neither compare nor index as the Func does) and the extern stage checks its buffer.
    std::vector<TensorParam> extra_inputs() const {
        std::map<std::string, const HI::Call *> reads;
        class Find : public HI::IRGraphVisitor {
        public:
            std::map<std::string, const HI::Call *> *reads;
            std::string twice;
            using HI::IRGraphVisitor::visit;
            void visit(const HI::Call *op) override {
                HI::IRGraphVisitor::visit(op);
                if (op->call_type != HI::Call::Image) return;
                auto [it, fresh] = reads->emplace(op->name, op);
                if (!fresh && (it->second->args.size() != op->args.size() ||
                               (op->args.size() == 1 && !HI::equal(it->second->args[0], op->args[0]))))
                    twice = op->name;
            }
        } f;
        f.reads = &reads;
        modifier_.accept(&f);
        if (visible_.defined()) visible_.accept(&f);
        for (const StageInfo &s : stages_) s.term.accept(&f);
        if (!f.twice.empty()) fail("the scores read " + f.twice + " at two different indices");
        std::vector<TensorParam> out;
        for (const auto &[name, call] : reads) {
            if (name == q_ || name == k_ || name == v_) continue;
            std::ostringstream index;
            for (size_t a = 0; a < call->args.size(); a++) index << (a ? ", " : "") << call->args[a];
            const std::string read = name + "(" + index.str() + ")";
            if (call->args.size() != 1)
                fail("the scores read " + read +
                     "; inputs other than q, k and v must be 1-D, read at the query "
                     "head or the batch index");
            TensorParam t;
            t.name = name;
            if (call->type == Halide::Int(32)) {
                t.elem = DType::I32;
            } else if (call->type == Halide::Float(32)) {
                t.elem = DType::F32;
            } else {
                std::ostringstream type;
                type << call->type;
                fail("the scores read " + read + " of type " + type.str() + "; 1-D inputs must be int32 or float32");
            }
            if (HI::equal(call->args[0], int_var("h"))) {
                t.extent = "q_heads";
            } else if (HI::equal(call->args[0], int_var("b"))) {
                t.extent = "batch";
            } else {
                fail("the scores read " + read +
                     "; 1-D inputs are read at the query head or the batch index of "
                     "the score Func");
            }
            out.push_back(t);
        }
        return out;
    }

    // Extents of the inputs as the kernel's parameters: q.extent.1 is seq_q, and so on.
    std::map<std::string, Expr> extent_bindings() const {
        std::map<std::string, Expr> m;
        auto bind = [&](const std::string &t, std::vector<Expr> ext) {
            for (size_t d = 0; d < ext.size(); d++) {
                m[t + ".extent." + std::to_string(d)] = ext[d];
                m[t + ".min." + std::to_string(d)] = Expr(0);
            }
        };
        bind(q_, {Expr(opt_.head_dim_qk), int_var("seq_q"), int_var("q_heads"), int_var("batch")});
        const Expr kv_rows = int_var(page_table_.defined() ? "page_size" : "seq_kv");
        const Expr kv_batch = int_var(page_table_.defined() ? "pages" : "batch");
        bind(k_, {Expr(opt_.head_dim_qk), kv_rows, int_var("kv_heads"), kv_batch});
        bind(v_, {Expr(opt_.head_dim_v), kv_rows, int_var("kv_heads"), kv_batch});
        if (page_table_.defined()) bind(table_name(), {int_var("max_pages"), int_var("batch")});
        for (const TensorParam &t : extra_inputs()) bind(t.name, {int_var(t.extent)});
        return m;
    }

    // Binds the canonical variables for one kernel: rows, keys, extents.
    Expr bind(const Expr &e, const std::map<std::string, Expr> &rows) const {
        std::map<std::string, Expr> m = extent_bindings();
        for (auto &[k, v] : rows) m[k] = v;
        return HI::substitute(m, e);
    }

    void declare_common(Kernel &k) const {
        const DType t = opt_.dtype;
        k.values["q_s"] = {t, bm(), dp(), Scope::Shared, Layout::SharedRowMajor};
        k.values["q_a"] = {t, bm(), dp(), Scope::Register, Layout::MmaOperandA};
        k.values["k_s"] = {t, bn(), dp(), Scope::Shared, Layout::SharedRowMajor};
        k.values["v_s"] = {t, bn(), dvp(), Scope::Shared, Layout::SharedRowMajor};
        k.values["s"] = {DType::F32, bm(), bn(), Scope::Register, Layout::MmaAccumulator};
    }

    TileType row_vec() const { return {DType::F32, bm(), 1, Scope::Register, Layout::RowVector}; }
    TileType acc_tile(int cols) const { return {DType::F32, bm(), cols, Scope::Register, Layout::MmaAccumulator}; }

    // The loop body for KV tile j: scores, mask, then every stage's update, in chain order.
    Block tile_step(Kernel &k, const std::map<std::string, Expr> &rows) {
        Block b;
        b.push_back(kv_tile_load("k_s", k_, opt_.head_dim_qk, rows));
        b.push_back(make_fill("s", 0.0f));
        b.push_back(with_role(make_dot("s", "q_a", "k_s", true), Role::ScoreDot));
        std::map<std::string, Expr> cols = rows;
        cols["kv"] = key_of_col();
        const Expr mod = HI::substitute("dot", fvar("s"), bind(modifier_, cols));
        if (!HI::equal(modifier_, fvar("dot")))
            b.push_back(with_role(make_map("s", mod, "score modifier"), Role::ScoreModifier));
        Expr vis = key_of_col() < int_var("seq_kv");
        // A paged cache's table holds nothing past a sequence's pages, so a query tile's padding rows
        // (past seq_q, never stored) see what the last real row sees: tile skipping then bounds the
        // loop by that row's position, not past the sequence's end.
        std::map<std::string, Expr> seen = cols;
        if (page_table_.defined()) seen["i"] = Halide::min(bind(int_var("i"), cols), int_var("seq_q") - 1);
        if (visible_.defined()) vis = bind(visible_, seen) && vis;
        b.push_back(with_role(make_map("s", Halide::select(vis, fvar("s"), neg_inf()), "mask"), Role::Mask));
        bool loaded_v = false;
        std::map<std::string, std::string> tiles_by_term;  // common terms computed once (row_sum's and acc's P)
        std::vector<std::string> new_names;
        // The last stage whose term reads the raw scores: after it, a term may overwrite s in place.
        std::set<std::string> term_keys_after;
        size_t last_s_reader = 0;
        for (size_t i = 0; i < stages_.size(); i++)
            if (HI::expr_uses_var(stages_[i].term, "s")) last_s_reader = i;
        size_t stage_index = 0;
        for (const StageInfo &si : stages_) {
            const size_t this_stage = stage_index++;
            const FusedStage &st = *si.st;
            const std::string nw = si.tile ? si.name : si.name + "_new";
            // The term with producers at their new (guarded) values.
            std::map<std::string, Expr> prod_new, prod_old;
            for (size_t p = 0; p < si.producers.size(); p++) {
                const Reducer pr = stage_named(si.producers[p]).st->reducer;
                prod_new[si.producers[p]] = guarded_producer(pr, fvar(si.producers[p] + "_new"));
                prod_old[si.producers[p]] = guarded_producer(pr, fvar(si.producers[p]));
            }
            const Expr term = collapse_guards(bind(HI::substitute(prod_new, si.term), cols));
            // The repair of the carried state: new = shift + coeff * old.
            Expr scale, shift;
            if (!si.producers.empty()) {
                std::map<std::string, Expr> rb;
                for (size_t p = 0; p < st.producers.size(); p++) {
                    rb[st.producers[p]] = prod_old[si.producers[p]];
                    rb[sym::Context::primed(st.producers[p])] = prod_new[si.producers[p]];
                }
                if (st.repair.coeff[0][0].defined() && !HI::is_const_one(st.repair.coeff[0][0]))
                    scale = collapse_guards(bind(HI::substitute(rb, st.repair.coeff[0][0]), rows));
                if (st.repair.shift[0].defined())
                    shift = collapse_guards(bind(HI::substitute(rb, st.repair.shift[0]), rows));
            }
            std::string term_tile = "s";
            if (!HI::equal(term, fvar("s"))) {
                const std::string key = sym::pretty(term);
                auto it = tiles_by_term.find(key);
                if (it != tiles_by_term.end()) {
                    term_tile = it->second;
                } else {
                    // Overwrite the scores when no later stage reads them: one register tile fewer.
                    bool later = false;
                    for (size_t i = this_stage + 1; i < stages_.size(); i++)
                        later = later ||
                                (HI::expr_uses_var(stages_[i].term, "s") &&
                                 sym::pretty(collapse_guards(bind(HI::substitute(prod_new, stages_[i].term), cols))) !=
                                     key);
                    term_tile = later || this_stage > last_s_reader ? "p" + std::to_string(tiles_by_term.size()) : "s";
                    if (term_tile != "s") k.values[term_tile] = acc_tile(bn());
                    b.push_back(with_role(make_map(term_tile, term, "term of " + si.name), Role::Term));
                    tiles_by_term[key] = term_tile;
                }
            }
            if (si.tile) {
                if (scale.defined()) {
                    k.values[si.name + "_scale"] = row_vec();
                    // h(0) = 0 keeps an empty state empty; a factor clamped to the largest float keeps it so
                    // when a guarded producer (0 for an empty max) lies far above the new value: 0 * inf is NaN.
                    b.push_back(with_role(
                        make_row_map(si.name + "_scale", Halide::min(scale, Expr(3.4e38f)), "repair of " + si.name),
                        Role::Repair));
                    b.push_back(with_role(make_map(si.name, fvar(si.name) * fvar(si.name + "_scale")), Role::Repair));
                }
                const std::string pa = term_tile + "_a";
                if (!k.values.count(pa)) {
                    k.values[pa] = {opt_.dtype, bm(), bn(), Scope::Register, Layout::MmaOperandA};
                    b.push_back(make_convert(pa, term_tile));
                }
                if (!loaded_v) {
                    b.push_back(with_role(kv_tile_load("v_s", v_, opt_.head_dim_v, rows), Role::ValueLoad));
                    loaded_v = true;
                }
                b.push_back(with_role(make_dot(si.name, pa, "v_s", false), Role::ValueDot));
            } else {
                k.values[nw] = row_vec();
                Expr carried = fvar(si.name);
                if (scale.defined()) carried = carried * scale;
                if (shift.defined()) carried = carried + shift;
                if (scale.defined() || shift.defined())  // h(identity) = identity, without evaluating h
                    carried = Halide::select(fvar(si.name) == reducer_identity(st.reducer), fvar(si.name), carried);
                b.push_back(with_role(make_row_map(nw, carried, si.producers.empty() ? "" : "repair of " + si.name),
                                      si.producers.empty() ? Role::None : Role::Repair));
                b.push_back(make_reduce(nw, st.reducer == Reducer::Max ? ReduceOp::Max : ReduceOp::Sum, term_tile));
                if (st.reducer == Reducer::Min) fail(si.name + ": min row reductions are not lowered yet");
                new_names.push_back(si.name);
            }
        }
        for (const std::string &n : new_names) b.push_back(make_row_map(n, fvar(n + "_new")));
        return b;
    }

    // KV tile j of K or V (`t`) into `dst`: keys j * bn .. of the (b, hkv) slice. Paged, the tile is rows
    // (j * bn) % page_size .. of page page_table(j * bn / page_size, b): a tile never spans two pages, as
    // the page size is a multiple of the tile's keys (the caller's rule: LowerOperator, the launcher).
    Stmt kv_tile_load(const std::string &dst, const std::string &t, int cols,
                      const std::map<std::string, Expr> &rows) const {
        const Expr key0 = int_var("j") * bn(), b = bind(int_var("b"), rows), hk = bind(hk_, rows);
        Expr batch = b, row = key0;
        if (page_table_.defined()) {
            const HI::Call *pt = page_table_.as<HI::Call>();
            const Expr slot = key0 / int_var("page_size") + b * int_var("max_pages");
            batch = HI::Call::make(pt->type, pt->name, {slot}, HI::Call::Image, pt->func, 0, pt->image, pt->param);
            row = key0 % int_var("page_size");
        }
        const Expr base = batch * stride_of(t, 3) + hk * stride_of(t, 2) + row * stride_of(t, 1);
        return make_view_load(dst, t, batch, hk, row, base, stride_of(t, 1), int_var("seq_kv") - key0, Expr(cols));
    }

    void init_states(Kernel &k, Block &b) const {
        for (const StageInfo &si : stages_) {
            if (si.tile) {
                k.values[si.name] = acc_tile(dvp());
                b.push_back(make_fill(si.name, 0.0f));
            } else {
                k.values[si.name] = row_vec();
                const float id = si.st->reducer == Reducer::Max ? -std::numeric_limits<float>::infinity() : 0.0f;
                b.push_back(make_fill(si.name, id));
            }
        }
    }

    std::vector<std::string> state_names() const {
        std::vector<std::string> n;
        for (const StageInfo &si : stages_) n.push_back(si.name);
        return n;
    }

    // Finals (initial values folded in) and the outputs, with rows bound by `rows`.
    // Tile outputs are written from element `tile_base` on, rows `tile_row_stride` apart (scaled by
    // the output's strides: tile_base(t) and tile_row_stride(t)); row outputs (f32 statistics) are dense,
    // from row out_row0 on.
    void epilogue(Kernel &k, Block &b, const std::map<std::string, Expr> &rows, const Expr &out_row0,
                  const Expr &valid_rows, const std::function<Expr(const std::string &)> &tile_base,
                  const std::function<Expr(const std::string &)> &tile_row_stride) {
        for (const StageInfo &si : stages_) {
            const Expr init = si.st->init;
            if (HI::equal(init, reducer_identity(si.st->reducer)) ||
                (si.st->reducer == Reducer::Sum && HI::is_const_zero(init)))
                continue;
            if (!HI::is_const(init)) fail(si.name + "'s initial value must be a constant");
            b.push_back(
                si.tile ? make_map(si.name, reducer_combine(si.st->reducer, init, fvar(si.name)))
                        : make_row_map(si.name, reducer_combine(si.st->reducer, init, fvar(si.name)), "initial value"));
        }
        for (const OutputInfo &o : outs_) {
            const std::string v = "o_" + o.tensor;
            const Expr value = bind(o.value, rows);
            if (o.tile) {
                k.values[v] = acc_tile(dvp());
                b.push_back(with_role(make_map(v, value, "output " + o.tensor), Role::Epilogue));
                b.push_back(make_store(v, o.tensor, tile_base(o.tensor), tile_row_stride(o.tensor), valid_rows,
                                       Expr(opt_.head_dim_v)));
            } else {
                k.values[v] = row_vec();
                b.push_back(with_role(make_row_map(v, value, "output " + o.tensor), Role::Epilogue));
                b.push_back(make_row_store(v, o.tensor, out_row0, valid_rows));
            }
            k.tensors.push_back({o.tensor, o.dtype, true});
        }
    }

    // Where the mask makes work grow along the queries, which (query tile, head, batch) each block
    // takes. The hardware starts blocks in the order of their linear index, so the grid's own order
    // (x = tile) would run head after head, and the last head's heaviest tile would start near the
    // end of the launch and run alone. Instead the (batch, head) rows are dealt in sections whose
    // heads take turns, heaviest tile first: a section's K and V stay few enough for L2, and it is
    // just large enough (its work per SM about one heaviest block: rows ~ 2 SMs / (tiles + 1) for
    // causal work, whole GQA groups) that its light tiles fill in around its heavy ones at the end.
    // prefill_causal 1,8192 on the H200: 559 -> 579 TFLOP/s (docs/engineering-log.md, 2026-12-03, masked
    // prefill's block order).
    std::vector<ScalarDef> heaviest_first_order() const {
        const Expr tiles = int_var("grid_x"), rows = int_var("batch") * int_var("q_heads");
        const Expr group = int_var("q_heads") / int_var("kv_heads"), per_group = group * (tiles + 1);
        return {
            {"block_rank", int_var("block_x") + tiles * (int_var("block_y") + int_var("q_heads") * int_var("block_z"))},
            {"section_rows", group * Halide::max(1, (2 * int_var("sm_count") + per_group / 2) / per_group)},
            {"section", int_var("block_rank") / (int_var("section_rows") * tiles)},
            {"section_rank", int_var("block_rank") % (int_var("section_rows") * tiles)},
            {"section_size", Halide::min(int_var("section_rows"), rows - int_var("section") * int_var("section_rows"))},
            {"head_row",
             int_var("section") * int_var("section_rows") + int_var("section_rank") % int_var("section_size")},
            {"q0", (tiles - 1 - int_var("section_rank") / int_var("section_size")) * bm()},
            {"h", int_var("head_row") % int_var("q_heads")},
            {"b", int_var("head_row") / int_var("q_heads")}};
    }

    Kernel rolling_kernel() {
        Kernel k = skeleton("neptune_rolling");
        k.min_blocks_per_sm = opt_.min_blocks_per_sm;
        declare_common(k);
        k.grid_x = (int_var("seq_q") + bm() - 1) / bm();
        k.grid_y = int_var("q_heads");
        k.grid_z = int_var("batch");
        if (visible_.defined()) {
            k.scalars = heaviest_first_order();
        } else {
            k.scalars = {{"q0", int_var("block_x") * bm()}, {"h", int_var("block_y")}, {"b", int_var("block_z")}};
        }
        k.scalars.push_back({"n_tiles", (int_var("seq_kv") + bn() - 1) / bn()});
        const std::map<std::string, Expr> rows = {
            {"i", int_var("q0") + int_var("row")}, {"h", int_var("h")}, {"b", int_var("b")}};
        Block body;
        // The slice of (b, h) from row q0 of q, or of a tile output.
        const auto row_base = [](const std::string &t) {
            return int_var("b") * stride_of(t, 3) + int_var("h") * stride_of(t, 2) + int_var("q0") * stride_of(t, 1);
        };
        const auto row_stride = [](const std::string &t) { return stride_of(t, 1); };
        body.push_back(make_view_load("q_s", q_, int_var("b"), int_var("h"), int_var("q0"), row_base(q_),
                                      row_stride(q_), int_var("seq_q") - int_var("q0"), Expr(opt_.head_dim_qk)));
        body.push_back(make_barrier());
        body.push_back(make_convert("q_a", "q_s"));
        init_states(k, body);
        body.push_back(make_loop("j", Expr(0), int_var("n_tiles"), state_names(), tile_step(k, rows)));
        epilogue(k, body, rows, (int_var("b") * int_var("q_heads") + int_var("h")) * int_var("seq_q") + int_var("q0"),
                 int_var("seq_q") - int_var("q0"), row_base, row_stride);
        k.body = body;
        return k;
    }

    // Split-K, kernel 1: one block per (chunk, KV head, batch); its rows are the query heads that
    // share the KV head (decode: one query row each). Writes each stage's state per chunk.
    Kernel partial_kernel() {
        if (!opt_.decode) fail("split-K lowering is for decode (one query row per head)");
        Kernel k = skeleton("neptune_split_k_partial");
        k.min_blocks_per_sm = opt_.min_blocks_per_sm;
        k.int_params.push_back("chunks");
        declare_common(k);
        k.grid_x = int_var("chunks");
        k.grid_y = int_var("kv_heads");
        k.grid_z = int_var("batch");
        k.scalars = {{"chunk", int_var("block_x")},
                     {"hkv", int_var("block_y")},
                     {"b", int_var("block_z")},
                     {"group", int_var("q_heads") / int_var("kv_heads")},
                     {"h0", int_var("hkv") * int_var("group")},
                     {"n_tiles", (int_var("seq_kv") + bn() - 1) / bn()}};
        // Every tile here: skip_masked_tiles bounds the loop to the visible ones and deal_chunk_tiles
        // deals those out to the chunks.
        if (bm() < 16) fail("too few rows");
        // Rows past the group pad the MMA tile: they take the last head's values (in bounds) and are not stored.
        const std::map<std::string, Expr> rows = {
            {"i", Expr(0)},
            {"h", int_var("h0") + Halide::min(int_var("row"), int_var("group") - 1)},
            {"b", int_var("b")}};
        // The K and V slices depend on the KV head only: hk(h) is the same for the whole group.
        hk_ = int_var("hkv");
        Block body;
        // One query row per head: the group's rows are heads h0 .. h0 + group - 1, a head stride apart.
        body.push_back(make_load("q_s", q_, int_var("b") * stride_of(q_, 3) + int_var("h0") * stride_of(q_, 2),
                                 stride_of(q_, 2), int_var("group"), Expr(opt_.head_dim_qk)));
        body.push_back(make_barrier());
        body.push_back(make_convert("q_a", "q_s"));
        init_states(k, body);
        body.push_back(make_loop("j", Expr(0), int_var("n_tiles"), state_names(), tile_step(k, rows)));
        // A chunk's states: the group's rows.
        const Expr row0 = int_var("chunk") * int_var("batch") * int_var("q_heads") + int_var("b") * int_var("q_heads") +
                          int_var("h0");
        const Expr stored = int_var("group");
        for (const StageInfo &si : stages_) {
            k.tensors.push_back({"ws_" + si.name, DType::F32, true});
            if (si.tile) {
                body.push_back(make_store(si.name, "ws_" + si.name, row0 * dvp(), Expr(dvp()), stored, Expr(dvp())));
            } else {
                body.push_back(make_row_store(si.name, "ws_" + si.name, row0, stored));
            }
        }
        k.body = body;
        return k;
    }

    // Split-K, kernel 2: rows are (batch, head) pairs. One pass over the chunks merges each chunk's
    // states into running ones, as the rolling update merges tiles: producers first, then
    // t = h(t, r -> r') + h(t_p, r_p -> r') with r' the merged producer, then the epilogue.
    Kernel combine_kernel() {
        Kernel k;
        k.name = "neptune_split_k_combine";
        k.warps = opt_.warps;
        k.int_params = {"batch", "q_heads", "kv_heads", "seq_q", "seq_kv", "chunks"};
        add_output_views(k);
        for (const TensorParam &t : extra_inputs()) k.tensors.push_back(t);
        for (const StageInfo &si : stages_) k.tensors.push_back({"ws_" + si.name, DType::F32, false});
        k.grid_x = (int_var("batch") * int_var("q_heads") + bm() - 1) / bm();
        k.grid_y = Expr(1);
        k.grid_z = Expr(1);
        // r0 and r_valid are the block's rows: fold_combine rebinds them to one partial block's group.
        k.scalars = {{"r0", int_var("block_x") * bm()},
                     {"n_rows", int_var("batch") * int_var("q_heads")},
                     {"r_valid", int_var("n_rows") - int_var("r0")}};
        const Expr valid = int_var("r_valid");
        const Expr r =
            Halide::min(int_var("r0") + int_var("row"), int_var("n_rows") - 1);  // padding rows stay in bounds
        const std::map<std::string, Expr> rows = {
            {"i", Expr(0)}, {"h", r % int_var("q_heads")}, {"b", r / int_var("q_heads")}};
        Block body;
        init_states(k, body);
        // Partial p: chunk p's rows; folded, r0 is the group's first row.
        const Expr chunk_row0 = combine_chunk_row0();
        Block step;
        for (const StageInfo &si : stages_) load_partial(k, step, si, chunk_row0, valid);  // issued together
        std::vector<std::string> merged;
        for (const StageInfo &si : stages_) {
            // h from the running producers (old) and from the chunk's, both to the merged ones (new).
            Expr scale_run = Expr(1.0f), shift_run, scale_part = Expr(1.0f), shift_part;
            if (!si.producers.empty()) {
                repair_terms(si, producer_binding(si, "", "_new"), rows, scale_run, shift_run);
                repair_terms(si, producer_binding(si, "_p", "_new"), rows, scale_part, shift_part);
            }
            const std::string part = si.name + "_p";
            if (si.tile) {
                k.values[si.name + "_scale"] = row_vec();
                k.values[part + "_scale"] = row_vec();
                // The running factor clamped: an empty state (0) under a guarded producer far above the
                // new value stays 0 rather than 0 * inf; a chunk's empty partial (0) adds nothing.
                step.push_back(
                    make_row_map(si.name + "_scale", Halide::min(scale_run, Expr(3.4e38f)), "repair of " + si.name));
                step.push_back(make_row_map(part + "_scale", scale_part, "repair of chunk p"));
                step.push_back(make_map(
                    si.name, fvar(si.name) * fvar(si.name + "_scale") +
                                 Halide::select(fvar(part) == 0.0f, 0.0f, fvar(part) * fvar(part + "_scale"))));
                continue;
            }
            k.values[si.name + "_new"] = row_vec();
            step.push_back(make_row_map(si.name + "_new",
                                        reducer_combine(si.st->reducer, repaired(si, si.name, scale_run, shift_run),
                                                        repaired(si, part, scale_part, shift_part)),
                                        si.producers.empty() ? "" : "repair of " + si.name + " and of chunk p"));
            merged.push_back(si.name);
        }
        for (const std::string &n : merged) step.push_back(make_row_map(n, fvar(n + "_new")));
        body.push_back(make_loop("p", Expr(0), int_var("chunks"), state_names(), step));
        // Row r is (batch r / q_heads, head r % q_heads) of one query row: a tile output's rows lie a head
        // stride apart where the batch stride is q_heads head strides, which the extern stage checks.
        epilogue(
            k, body, rows, int_var("r0"), valid, [](const std::string &t) { return int_var("r0") * stride_of(t, 2); },
            [](const std::string &t) { return stride_of(t, 2); });
        k.body = body;
        return k;
    }

    /** The combine's first workspace row of partial p (its loop variable over chunks). */
    Expr combine_chunk_row0() const { return int_var("p") * int_var("n_rows") + int_var("r0"); }

    /** The stage's producers as the repair names them: unprimed (from) pn + `from`, primed (to) pn + `to`,
     * each guarded (guarded_producer). */
    std::map<std::string, Expr> producer_binding(const StageInfo &si, const std::string &from, const std::string &to) {
        std::map<std::string, Expr> b;
        for (size_t p = 0; p < si.producers.size(); p++) {
            const std::string &pn = si.producers[p];
            const Reducer pr = stage_named(pn).st->reducer;
            b[si.st->producers[p]] = guarded_producer(pr, fvar(pn + from));
            b[sym::Context::primed(si.st->producers[p])] = guarded_producer(pr, fvar(pn + to));
        }
        return b;
    }

    /** The repair's factor and shift under `binding`, rows bound (scale 1 where the repair has none). */
    void repair_terms(const StageInfo &si, const std::map<std::string, Expr> &binding,
                      const std::map<std::string, Expr> &rows, Expr &scale, Expr &shift) {
        const Expr c = si.st->repair.coeff[0][0], sh = si.st->repair.shift[0];
        scale = c.defined() ? collapse_guards(bind(HI::substitute(binding, c), rows)) : Expr(1.0f);
        if (sh.defined()) shift = bind(HI::substitute(binding, sh), rows);
    }

    /** h applied to row state `x` of a row stage: x * scale + shift, the identity kept (h(id) = id). */
    Expr repaired(const StageInfo &si, const std::string &x, const Expr &scale, const Expr &shift) {
        if (si.producers.empty()) return fvar(x);
        Expr y = fvar(x) * scale;
        if (shift.defined()) y = y + shift;
        return Halide::select(fvar(x) == reducer_identity(si.st->reducer), fvar(x), y);
    }

    /** The chunk's partial of stage `si` into `si.name`_p: a tile or a row vector of workspace rows. */
    void load_partial(Kernel &k, Block &step, const StageInfo &si, const Expr &chunk_row0, const Expr &valid) {
        const std::string part = si.name + "_p";
        if (si.tile) {
            k.values[part] = acc_tile(dvp());
            step.push_back(make_load(part, "ws_" + si.name, chunk_row0 * dvp(), Expr(dvp()), valid, Expr(dvp())));
        } else {
            k.values[part] = row_vec();
            const float id = si.st->reducer == Reducer::Max ? -std::numeric_limits<float>::infinity() : 0.0f;
            step.push_back(make_row_load(part, "ws_" + si.name, chunk_row0, Expr(1), valid, id));
        }
    }

    const FusedPlan &plan_;
    const std::vector<Halide::Func> &outputs_;
    LowerOptions opt_;
    std::map<std::string, std::string> rename_;
    std::set<std::string> used_names_ = {"s", "q_s", "q_a", "k_s", "v_s"};
    std::map<std::string, std::string> stage_names_;  // the plan's stage names -> readable, unique
    std::string score_func_, q_, k_, v_;
    Expr page_table_;  // a paged cache's table read, page_table(kv / P, b); undefined when dense
    Expr hk_, modifier_, visible_;
    std::vector<StageInfo> stages_;
    std::vector<OutputInfo> outs_;
};

}  // namespace

Program build_tile_program(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt) {
    try {
        return Builder(plan, outputs, opt).build();
    } catch (const Builder::Refusal &r) {
        throw CompileError(plan.directive + ": the tile backend cannot lower this group: " + r.why);
    }
}

bool reads_paged_cache(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt) {
    try {
        Builder b(plan, outputs, opt);
        b.check();
        return b.paged();
    } catch (const Builder::Refusal &) { return false; }
}

std::string attention_mismatch(const FusedPlan &plan, const std::vector<Halide::Func> &outputs,
                               const LowerOptions &opt) {
    try {
        Builder(plan, outputs, opt).check();
    } catch (const Builder::Refusal &r) { return r.why; }
    return "";
}

}  // namespace neptune::internal
