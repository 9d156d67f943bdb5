#include "codegen/CodeGenStrip.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "Halide.h"
#include "codegen/CudaPrinter.h"
#include "neptune/Error.h"

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

/** Whether an expression of a strip map has one value per row: it reads no column, no strip and no
 * tensor (a tensor read stays under the statement's bounds, so it is never hoisted). */
class RowUniform : public HI::IRVisitor {
public:
    explicit RowUniform(const Kernel &k) : k_(k) {}
    bool operator()(const Expr &e) {
        uniform_ = true;
        e.accept(this);
        return uniform_;
    }

private:
    using HI::IRVisitor::visit;
    void visit(const HI::Variable *v) override {
        if (v->name == "col") uniform_ = false;
        auto it = k_.values.find(v->name);
        if (it != k_.values.end() && it->second.layout == Layout::RowStrip) uniform_ = false;
    }
    void visit(const HI::Call *c) override {
        if (c->call_type == HI::Call::Image) uniform_ = false;
        HI::IRVisitor::visit(c);
    }
    const Kernel &k_;
    bool uniform_ = true;
};

/** A strip map's expression made cheap per element: a division by a per-row value becomes a product
 * with its reciprocal, exp(a - m) with m per row becomes 2^(a log2 e - m log2 e) (one FFMA before
 * the SFU), and every per-row subexpression becomes a value computed once before the element loop
 * (`hoisted`). The reciprocal costs at most an ulp beside the division; the folded exponent is what
 * the attention kernels compute. */
class PerElement : public HI::IRMutator {
public:
    PerElement(const Kernel &k, int &counter) : uniform_(k), counter_(counter) {}
    std::vector<std::pair<std::string, Expr>> hoisted;

    Expr prepare(const Expr &e) { return hoist(mutate(e)); }

private:
    using HI::IRMutator::visit;
    Expr visit(const HI::Div *op) override {
        if (op->type.is_float() && uniform_(op->b) && !uniform_(op->a))
            return mutate(op->a) * (HI::FloatImm::make(op->type, 1.0) / op->b);
        return HI::IRMutator::visit(op);
    }
    Expr visit(const HI::Call *c) override {
        if (c->name == "exp_f32" && c->args.size() == 1) {
            const auto *sub = c->args[0].as<HI::Sub>();
            if (sub && uniform_(sub->b) && !uniform_(sub->a)) {
                const Expr log2e = HI::FloatImm::make(c->type, 1.4426950408889634);
                return HI::Call::make(c->type, "fast_exp2", {mutate(sub->a) * log2e + sub->b * -log2e},
                                      HI::Call::PureExtern);
            }
        }
        return HI::IRMutator::visit(c);
    }

    // Replaces the largest per-row subexpressions that compute something by named values.
    Expr hoist(const Expr &e) {
        if (!e.defined()) return e;
        const bool leaf = e.as<HI::Variable>() || e.as<HI::IntImm>() || e.as<HI::FloatImm>() || e.as<HI::UIntImm>();
        if (!leaf && uniform_(e)) {
            const std::string name = "h" + std::to_string(counter_++) + "_";
            hoisted.emplace_back(name, e);
            return HI::Variable::make(e.type(), name);
        }
        if (leaf) return e;
        return Hoister(*this).mutate(e);
    }
    // Rebuilds one node with hoisted children.
    class Hoister : public HI::IRMutator {
    public:
        explicit Hoister(PerElement &p) : p_(p) {}
        using HI::IRMutator::mutate;
        Expr mutate(const Expr &e) override { return depth_++ == 0 ? HI::IRMutator::mutate(e) : p_.hoist(e); }

    private:
        PerElement &p_;
        int depth_ = 0;
    };

    RowUniform uniform_;
    int &counter_;
};

/** Replaces the outermost tensor reads of a per-row expression that depend on no value of the kernel
 * (only on the row, scalars and other tensor reads: cross-entropy's x[row, label[row]]) by named
 * values, `reads`, loaded at the kernel's start; a read `known` already names (another row map's,
 * under the same bound) is not loaded again. */
class RowReads : public HI::IRMutator {
public:
    RowReads(const Kernel &k, int &counter, const std::vector<std::pair<std::string, Expr>> &known)
        : k_(k), counter_(counter), known_(known) {}
    std::vector<std::pair<std::string, Expr>> reads;

private:
    using HI::IRMutator::visit;
    Expr visit(const HI::Call *c) override {
        if (c->call_type != HI::Call::Image || reads_values(c)) return HI::IRMutator::visit(c);
        using Reads = std::vector<std::pair<std::string, Expr>>;
        for (const Reads *list : {&known_, static_cast<const Reads *>(&reads)})
            for (const auto &[name, read] : *list)
                if (HI::equal(read, Expr(c))) return HI::Variable::make(c->type, name);
        const std::string name = "g" + std::to_string(counter_++) + "_";
        reads.emplace_back(name, c);
        return HI::Variable::make(c->type, name);
    }
    bool reads_values(const HI::Call *c) const {
        class Values : public HI::IRVisitor {
        public:
            explicit Values(const Kernel &k) : k_(k) {}
            bool found = false;

        private:
            using HI::IRVisitor::visit;
            void visit(const HI::Variable *v) override { found = found || k_.values.count(v->name) > 0; }
            const Kernel &k_;
        } values(k_);
        c->accept(&values);
        return values.found;
    }
    const Kernel &k_;
    int &counter_;
    const std::vector<std::pair<std::string, Expr>> &known_;
};

/** The 1-D tensors an expression reads at exactly `col`. */
class ColumnReads : public HI::IRVisitor {
public:
    /** Tensor -> the offset of its reads t[offset + col] (undefined for t[col]): the tensors read at
     * the column, each at one offset that no column changes (a cluster's block reads gamma from its
     * strip's first column on). */
    std::map<std::string, Expr> tensors;

    /** The offset of `index` = offset + col, or nullopt. */
    static std::optional<Expr> column_offset(const Expr &index) {
        const auto is_col = [](const Expr &e) {
            const auto *v = e.as<HI::Variable>();
            return v && v->name == "col";
        };
        if (is_col(index)) return Expr();
        if (const auto *a = index.as<HI::Add>()) {
            if (is_col(a->b) && !HI::expr_uses_var(a->a, "col")) return a->a;
            if (is_col(a->a) && !HI::expr_uses_var(a->b, "col")) return a->b;
        }
        return std::nullopt;
    }

    void finish() {
        for (const std::string &t : mixed_) tensors.erase(t);
    }

private:
    std::set<std::string> mixed_;  // read at another index too: element by element
    using HI::IRVisitor::visit;
    void visit(const HI::Call *c) override {
        if (c->call_type == HI::Call::Image && c->args.size() == 1) {
            const std::optional<Expr> off = column_offset(c->args[0]);
            auto it = tensors.find(c->name);
            if (!off) {
                mixed_.insert(c->name);
            } else if (it == tensors.end()) {
                tensors.emplace(c->name, *off);
            } else if (it->second.defined() != off->defined() || (off->defined() && !HI::equal(it->second, *off))) {
                mixed_.insert(c->name);
            }
        }
        HI::IRVisitor::visit(c);
    }
};

/** Row-strip kernels: each thread holds part of one row. A map whose tile only the next statement
 * reads, a reduction or a store, is computed inside it, so the strip of x is the only one in
 * registers. Every statement over a strip has two forms: the fast one, taken when all of the
 * thread's columns are in bounds and its pointers aligned, with no test per element, whole-vector
 * stores and column-indexed tensors read a vector at a time; and the guarded one for the rest (the
 * row's tail, rows past the end, unaligned views). */
class StripEmitter {
public:
    explicit StripEmitter(const Kernel &k) : k_(k) {}

    std::string emit() {
        out_ << signature(k_);
        line("constexpr int T_ = " + std::to_string(k_.strip_threads) + ", V_ = " + std::to_string(k_.strip_vector) +
             ";  // threads per row, columns per vector");
        if (k_.strip_lanes_along_rows) {
            line("constexpr int R_ = " + std::to_string(k_.warps * 32 / k_.strip_threads) +
                 ";  // rows per block, on consecutive threads");
            line("const int t_ = threadIdx.x / R_, row = threadIdx.x % R_;");
        } else {
            line("const int t_ = threadIdx.x % T_, row = threadIdx.x / T_;");
        }
        line("const int block_x = blockIdx.x, grid_x = gridDim.x;");
        line("(void)row; (void)block_x; (void)grid_x;");
        for (const ScalarDef &d : k_.scalars) line("const int " + ident(d.name) + " = " + scalar(d.value) + ";");
        count_reads(k_.body);
        for (const auto &[name, t] : k_.values) {
            if (t.layout == Layout::RowStrip && packed_.count(name))
                line("nd::packed_strip<" + std::to_string(vectors(t)) + ", " + elem_type(packed_.at(name)) + "> " +
                     ident(name) + ";");
            else if (t.layout == Layout::RowStrip)
                line("nd::strip<" + std::to_string(vectors(t)) + ", V_> " + ident(name) + ";");
            else if (t.layout == Layout::StripRowVector)
                line("nd::strip_row " + ident(name) + ";");
            else
                throw InternalError("emit_cuda: a row-strip kernel holds " + t.str());
        }
        block(k_.body);
        if (cluster_reduces_ > 0) {
            line("// No block leaves while another of its cluster may still read its shared memory.");
            line("nd::cluster_sync();");
        }
        out_ << "}\n";
        return out_.str();
    }

private:
    // A strip map's expression, prepared for the element loop.
    struct ElementExpr {
        Expr value;
        std::vector<std::pair<std::string, Expr>> hoisted;
        std::map<std::string, Expr> column_tensors;  // read a vector at a time on the fast path, by offset
    };

    void line(const std::string &s) { out_ << std::string(size_t(indent_ * 4), ' ') << s << "\n"; }
    std::string scalar(const Expr &e) const { return ExprPrinter(k_, Context::Scalar).print(e); }
    int vectors(const TileType &t) const { return t.cols / (k_.strip_threads * k_.strip_vector); }
    std::string ptr(const Node &n) const {
        return "(" + ident(n.tensor) + " + (long long)(" + scalar(n.base) + ") + (long long)row * (" +
               scalar(n.row_stride) + "))";
    }
    const TensorParam &tensor(const std::string &n) const {
        for (const TensorParam &t : k_.tensors)
            if (t.name == n) return t;
        throw InternalError("emit_cuda: no tensor " + n);
    }

    ElementExpr element_expr(const Expr &e) {
        PerElement p(k_, hoisted_);
        ElementExpr r;
        r.value = p.prepare(e);
        r.hoisted = std::move(p.hoisted);
        ColumnReads reads;
        r.value.accept(&reads);
        reads.finish();
        r.column_tensors = reads.tensors;
        return r;
    }
    // Declares the hoisted per-row values (before both forms of the statement).
    void declare_hoisted(const ElementExpr &x) {
        for (const auto &[name, v] : x.hoisted) {
            const char *type = v.type().is_float() ? "float" : v.type().is_bool() ? "bool" : "int";
            line(std::string("const ") + type + " " + name + " = " + ExprPrinter(k_, Context::Row).print(v) + ";");
        }
    }
    std::string print(const ElementExpr &x, bool fast) const {
        if (!fast) return ExprPrinter(k_, Context::Tile).print(x.value);
        std::map<std::string, std::string> arrays;
        for (const auto &[t, off] : x.column_tensors) arrays[t] = "cv_" + ident(t);
        ExprPrinter p(k_, Context::Tile);
        return p.with_column_vectors(&arrays).print(x.value);
    }
    // Fast path, per vector: the column-indexed tensors' values for the thread's vector i.
    void load_column_vectors(const ElementExpr &x) {
        for (const auto &[t, off] : x.column_tensors) {
            line("float cv_" + ident(t) + "[V_];");
            line("nd::load_cols<V_>(cv_" + ident(t) + ", " + column_pointer(t, off) +
                 " + nd::strip_col<T_, V_>(t_, i, 0));");
        }
    }
    // A column-read tensor from the offset of its reads: what the fast path's vectors start from.
    std::string column_pointer(const std::string &t, const Expr &off) const {
        return off.defined() ? "(" + ident(t) + " + " + scalar(off) + ")" : ident(t);
    }
    std::vector<std::string> column_pointers(const ElementExpr &x) const {
        std::vector<std::string> p;
        for (const auto &[t, off] : x.column_tensors) p.push_back(column_pointer(t, off));
        return p;
    }

    // The condition of the fast path: rows and columns within their bounds, pointers aligned.
    std::string fast_condition(const std::vector<Expr> &row_bounds, const std::vector<Expr> &col_bounds,
                               const std::vector<std::string> &pointers, int n_vectors) const {
        std::vector<std::string> c;
        for (const Expr &r : row_bounds)
            if (r.defined()) c.push_back("row < " + scalar(r));
        for (const Expr &v : col_bounds)
            if (v.defined())
                c.push_back("nd::strip_last_col<T_, " + std::to_string(n_vectors) + ", V_>(t_) < " + scalar(v));
        if (!k_.strip_lanes_along_rows)  // strided columns move an element at a time
            for (const std::string &p : pointers) c.push_back("nd::aligned16(" + p + ")");
        std::string s;
        std::set<std::string> seen;
        for (const std::string &x : c)
            if (seen.insert(x).second) s += (s.empty() ? "" : " && ") + x;
        return s.empty() ? "true" : s;
    }

    // The element loop over a thread's vectors, with `col` bound; `per_vector` runs before each vector's elements.
    template <typename PerVector>
    void elements(int n_vectors, PerVector per_vector, const std::string &body) {
        line("#pragma unroll");
        line("for (int i = 0; i < " + std::to_string(n_vectors) + "; ++i) {");
        indent_++;
        per_vector();
        line("#pragma unroll");
        line("for (int e = 0; e < V_; ++e) {");
        line("    const int col = nd::strip_col<T_, V_>(t_, i, e);");
        line("    (void)col;");
        line("    " + body);
        line("}");
        indent_--;
        line("}");
    }
    void elements(int n_vectors, const std::string &body) {
        elements(
            n_vectors, [] {}, body);
    }

    // The condition under which a bounded map computes an element.
    std::string in_bounds(const Node &map) const {
        std::string c;
        if (map.valid_rows.defined()) c = "row < " + scalar(map.valid_rows);
        if (map.valid_cols.defined()) c += (c.empty() ? "" : " && ") + std::string("col < ") + scalar(map.valid_cols);
        return c.empty() ? "true" : c;
    }

    // Reads of each value; strips only loads of 16-bit tensors write stay packed (packed_).
    void count_reads(const Block &b) {
        std::set<std::string> written;
        count_reads(b, written);
        for (const std::string &n : written) packed_.erase(n);
    }
    void count_reads(const Block &b, std::set<std::string> &written) {
        for (const Stmt &s : b) {
            std::set<std::string> w, r;
            effects(*s, w, r, false);
            for (const std::string &n : r) reads_[n]++;
            if (s->kind == NodeKind::TileLoad && k_.values.at(s->dst).layout == Layout::RowStrip &&
                dtype_bytes(tensor(s->tensor).elem) * k_.strip_vector == 16 && tensor(s->tensor).elem != DType::F32) {
                packed_[s->dst] = tensor(s->tensor).elem;
            } else {
                written.insert(w.begin(), w.end());
            }
            count_reads(s->body, written);
        }
    }

    void block(const Block &b) {
        const bool top = &b == &k_.body;
        bool prefetched = !top;
        for (size_t i = 0; i < b.size(); i++) {
            const Node &n = *b[i];
            if (!prefetched && (n.kind != NodeKind::TileLoad || i > 0)) {
                prefetch_row_reads();  // after the first load, or first of all when none opens the body
                prefetched = true;
            }
            const Node *next = i + 1 < b.size() ? b[i + 1].get() : nullptr;
            // A map read only by the next statement, which reduces or stores it: computed inside it.
            if (n.kind == NodeKind::TileMap && next && reads_[n.dst] == 1 &&
                ((next->kind == NodeKind::TileReduce && next->src == n.dst) ||
                 (next->kind == NodeKind::TileStore && next->src == n.dst))) {
                if (!n.note.empty()) line("// " + n.note + ", computed in the next statement");
                stmt(*next, &n);
                i++;
                continue;
            }
            if (n.kind == NodeKind::ClusterReduce) {
                i = cluster_exchange(b, i) - 1;
                continue;
            }
            stmt(n, nullptr);
        }
        if (!prefetched) prefetch_row_reads();
    }

    // The row vectors a cluster reduction reads at each rank.
    static std::vector<std::string> published(const Node &n) {
        return n.value.defined() ? n.peers : std::vector<std::string>{n.src};
    }

    // The cluster reductions from b[first] on that share one exchange: each block publishes every row
    // vector they read at a rank in shared words of its own (one set per exchange, so none is
    // overwritten while read), the cluster synchronises once, then every block computes each
    // reduction over the ranks in rank order. A reduction reading another's result at a rank starts
    // the next exchange. Returns the index after the last one taken.
    size_t cluster_exchange(const Block &b, size_t first) {
        std::vector<const Node *> run;
        std::vector<std::string> words;
        std::set<std::string> results;
        size_t i = first;
        for (; i < b.size() && b[i]->kind == NodeKind::ClusterReduce; i++) {
            const std::vector<std::string> reads = published(*b[i]);
            bool depends = false;
            for (const std::string &r : reads) depends = depends || results.count(r);
            if (depends) break;
            for (const std::string &r : reads)
                if (std::find(words.begin(), words.end(), r) == words.end()) words.push_back(r);
            results.insert(b[i]->dst);
            run.push_back(b[i].get());
        }
        const std::string slot = "cluster_slot" + std::to_string(cluster_reduces_++) + "_";
        line("{");
        indent_++;
        if (cluster_reduces_ == 1)  // a launch without the kernel's clusters would reduce a part of the row
            line("if (nd::cluster_size() != unsigned(" + scalar(k_.cluster_x) + ")) __trap();");
        line("__shared__ float " + slot + "[" + std::to_string(words.size()) + "];");
        std::string publish;
        for (size_t w = 0; w < words.size(); w++)
            publish += " " + slot + "[" + std::to_string(w) + "] = " + ident(words[w]) + ".v;";
        line("if (threadIdx.x == 0) {" + publish + " }");
        line("nd::cluster_sync();");
        for (const Node *n : run) {
            const bool max = n->op == ReduceOp::Max;
            std::map<std::string, Expr> at_rank;
            std::string reads;
            const std::vector<std::string> used = published(*n);
            for (size_t w = 0; w < words.size(); w++) {
                const std::string name = "peer" + std::to_string(w) + "_";
                at_rank[words[w]] = Halide::Internal::Variable::make(Halide::Float(32), name);
                if (std::find(used.begin(), used.end(), words[w]) != used.end())
                    reads += " const float " + name + " = w_[" + std::to_string(w) + "];";
            }
            const Expr term = n->value.defined() ? HI::substitute(at_rank, n->value) : at_rank.at(n->src);
            line("{");
            indent_++;
            line(std::string("float c_ = ") + (max ? "nd::neg_inf()" : "0.0f") + ";");
            line("for (int q = 0; q < int(nd::cluster_size()); ++q) {");
            indent_++;
            line("const float *w_ = nd::cluster_map(" + slot + ", q);" + reads);
            line(std::string("c_ = nd::reduce_op(") + (max ? "true" : "false") + ", c_, " +
                 ExprPrinter(k_, Context::Row).print(term) + ");");
            indent_--;
            line("}");
            line(ident(n->dst) + ".v = c_;");
            indent_--;
            line("}");
        }
        indent_--;
        line("}");
        return i;
    }

    // Per-row tensor reads of the top-level row maps (a gather such as cross-entropy's label logit),
    // issued right after the row's first load, so that their latency hides behind the row's loads and
    // reductions rather than following them, and a gather's dependent address (x at label[row]) does
    // not hold back the row's load.
    void prefetch_row_reads() {
        std::map<std::string, std::vector<std::pair<std::string, Expr>>> loaded;  // by the bound they load under
        for (const Stmt &s : k_.body) {
            if (s->kind != NodeKind::RowMap) continue;
            const std::string valid = s->valid_rows.defined() ? "row < " + scalar(s->valid_rows) : "true";
            std::vector<std::pair<std::string, Expr>> &known = loaded[valid];
            RowReads r(k_, prefetched_count_, known);
            Expr v = r.mutate(s->value);
            if (r.reads.empty() && HI::equal(v, s->value)) continue;
            if (!r.reads.empty()) line("// the row's tensor reads of " + s->dst + ", ahead");
            for (const auto &[name, read] : r.reads)
                line("const float " + name + " = (" + valid + ") ? " + ExprPrinter(k_, Context::Row).print(read) +
                     " : 0.0f;");
            known.insert(known.end(), r.reads.begin(), r.reads.end());
            row_values_[s.get()] = v;
        }
    }

    void store(const Node &n, const Node *map) {
        const TileType &t = k_.values.at(n.src);
        const int nv = vectors(t);
        const std::string args = ", row < " + scalar(n.valid_rows) + ", " + scalar(n.valid_cols);
        if (n.col_stride.defined()) return strided_store(n, map, nv, args);
        if (!map) {
            line("nd::store_strip<T_, " + std::to_string(nv) + ", V_>(" + ptr(n) + ", " + ident(n.src) + args +
                 ", t_);");
            return;
        }
        // The map's values a vector at a time, each stored before the next is computed.
        const ElementExpr x = element_expr(map->value);
        line("{");
        indent_++;
        declare_hoisted(x);
        line("auto *const dst_ = " + ptr(n) + ";");
        std::vector<std::string> pointers = column_pointers(x);
        pointers.insert(pointers.begin(), "dst_");
        line("if (" + fast_condition({n.valid_rows, map->valid_rows}, {n.valid_cols, map->valid_cols}, pointers, nv) +
             ") {");
        indent_++;
        line("#pragma unroll");
        line("for (int i = 0; i < " + std::to_string(nv) + "; ++i) {");
        indent_++;
        load_column_vectors(x);
        line("float m_[V_];");
        line("#pragma unroll");
        line("for (int e = 0; e < V_; ++e) {");
        line("    const int col = nd::strip_col<T_, V_>(t_, i, e);");
        line("    (void)col;");
        line("    m_[e] = " + print(x, true) + ";");
        line("}");
        line("nd::store_whole_vector<V_>(dst_, m_, nd::strip_col<T_, V_>(t_, i, 0));");
        indent_--;
        line("}");
        indent_--;
        line("} else {");
        indent_++;
        line("#pragma unroll");
        line("for (int i = 0; i < " + std::to_string(nv) + "; ++i) {");
        indent_++;
        line("float m_[V_];");
        line("#pragma unroll");
        line("for (int e = 0; e < V_; ++e) {");
        line("    const int col = nd::strip_col<T_, V_>(t_, i, e);");
        line("    (void)col;");
        line("    m_[e] = (" + in_bounds(*map) + ") ? " + print(x, false) + " : 0.0f;");
        line("}");
        line("nd::store_vector<V_>(dst_, m_" + args + ", nd::strip_col<T_, V_>(t_, i, 0));");
        indent_--;
        line("}");
        indent_--;
        line("}");
        indent_--;
        line("}");
    }

    // A store of strided columns: an element at a time, the map's values computed in place.
    void strided_store(const Node &n, const Node *map, int nv, const std::string &args) {
        const std::string stride = "(long long)(" + scalar(n.col_stride) + ")";
        if (!map) {
            line("nd::store_strip_strided<T_, " + std::to_string(nv) + ">(" + ptr(n) + ", " + ident(n.src) + args +
                 ", t_, " + stride + ");");
            return;
        }
        const ElementExpr x = element_expr(map->value);
        const std::string elem = elem_type(tensor(n.tensor).elem);
        line("{");
        indent_++;
        declare_hoisted(x);
        line("auto *const dst_ = " + ptr(n) + ";");
        line("const long long stride_ = " + stride + ";");
        line("if (" + fast_condition({n.valid_rows, map->valid_rows}, {n.valid_cols, map->valid_cols}, {}, nv) + ") {");
        indent_++;
        elements(
            nv, [&] { load_column_vectors(x); },
            "dst_[col * stride_] = nd::element_from_float<" + elem + ">(" + print(x, true) + ");");
        indent_--;
        line("} else if (row < " + scalar(n.valid_rows) + ") {");
        indent_++;
        elements(nv, "if (col < " + scalar(n.valid_cols) + " && " + in_bounds(*map) +
                         ") dst_[col * stride_] = " + "nd::element_from_float<" + elem + ">(" + print(x, false) + ");");
        indent_--;
        line("}");
        indent_--;
        line("}");
    }

    void reduce(const Node &n, const Node *map) {
        const bool max = n.op == ReduceOp::Max;
        const int nv = vectors(k_.values.at(n.src));
        const std::string op = max ? "true" : "false";
        line("{");
        indent_++;
        line(std::string("float p_ = ") + (max ? "nd::neg_inf()" : "0.0f") + ";");
        if (map) {
            const ElementExpr x = element_expr(map->value);
            declare_hoisted(x);
            const std::vector<std::string> pointers = column_pointers(x);
            line("if (" + fast_condition({map->valid_rows}, {n.valid_cols, map->valid_cols}, pointers, nv) + ") {");
            indent_++;
            elements(
                nv, [&] { load_column_vectors(x); }, "p_ = nd::reduce_op(" + op + ", p_, " + print(x, true) + ");");
            indent_--;
            line("} else {");
            indent_++;
            std::string cond = n.valid_cols.defined() ? "col < " + scalar(n.valid_cols) : "true";
            cond = "(" + cond + ") && (" + in_bounds(*map) + ")";
            elements(nv, "if (" + cond + ") p_ = nd::reduce_op(" + op + ", p_, " + print(x, false) + ");");
            indent_--;
            line("}");
        } else {
            const std::string x = "nd::at(" + ident(n.src) + ", i, e)";
            line("if (" + fast_condition({}, {n.valid_cols}, {}, nv) + ") {");
            indent_++;
            elements(nv, "p_ = nd::reduce_op(" + op + ", p_, " + x + ");");
            indent_--;
            line("} else {");
            indent_++;
            const std::string cond = n.valid_cols.defined() ? "col < " + scalar(n.valid_cols) : "true";
            elements(nv, "if (" + cond + ") p_ = nd::reduce_op(" + op + ", p_, " + x + ");");
            indent_--;
            line("}");
        }
        const std::string across = k_.strip_lanes_along_rows ? "nd::reduce_row_strided<T_, R_>" : "nd::reduce_row<T_>";
        line(ident(n.dst) + ".v = nd::reduce_op(" + op + ", " + ident(n.dst) + ".v, " + across + "(p_, " + op + "));");
        indent_--;
        line("}");
    }

    void map(const Node &n) {
        const int nv = vectors(k_.values.at(n.dst));
        const ElementExpr x = element_expr(n.value);
        line("{");
        indent_++;
        declare_hoisted(x);
        const std::vector<std::string> pointers = column_pointers(x);
        line("if (" + fast_condition({n.valid_rows}, {n.valid_cols}, pointers, nv) + ") {");
        indent_++;
        elements(
            nv, [&] { load_column_vectors(x); }, ident(n.dst) + ".v[i][e] = " + print(x, true) + ";");
        indent_--;
        line("} else {");
        indent_++;
        elements(nv, ident(n.dst) + ".v[i][e] = (" + in_bounds(n) + ") ? " + print(x, false) + " : 0.0f;");
        indent_--;
        line("}");
        indent_--;
        line("}");
    }

    void stmt(const Node &n, const Node *map_inside) {
        if (!n.note.empty()) line("// " + n.note);
        switch (n.kind) {
        case NodeKind::TileLoad: {
            const TileType &t = k_.values.at(n.dst);
            if (n.col_stride.defined())
                line("nd::load_strip_strided<T_, " + std::to_string(vectors(t)) + ">(" + ident(n.dst) + ", " + ptr(n) +
                     ", row < " + scalar(n.valid_rows) + ", " + scalar(n.valid_cols) + ", t_, (long long)(" +
                     scalar(n.col_stride) + "));");
            else
                line("nd::load_strip<T_, " + std::to_string(vectors(t)) + ", V_>(" + ident(n.dst) + ", " + ptr(n) +
                     ", row < " + scalar(n.valid_rows) + ", " + scalar(n.valid_cols) + ", t_);");
            break;
        }
        case NodeKind::TileStore: store(n, map_inside); break;
        case NodeKind::Fill: {
            const TileType &t = k_.values.at(n.dst);
            if (t.layout == Layout::StripRowVector)
                line(ident(n.dst) + ".v = " + scalar(n.value) + ";");
            else
                elements(vectors(t), ident(n.dst) + ".v[i][e] = " + scalar(n.value) + ";");
            break;
        }
        case NodeKind::TileMap: map(n); break;
        case NodeKind::RowMap: {
            auto it = row_values_.find(&n);
            const Expr &v = it == row_values_.end() ? n.value : it->second;
            line(ident(n.dst) + ".v = (" + in_bounds(n) + ") ? " + ExprPrinter(k_, Context::Row).print(v) + " : 0.0f;");
            break;
        }
        case NodeKind::TileReduce: reduce(n, map_inside); break;
        case NodeKind::ClusterReduce: throw InternalError("emit_cuda: a cluster reduction outside its exchange");
        case NodeKind::RowStore: {
            const TensorParam &t = tensor(n.tensor);
            line("if (t_ == 0 && row < " + scalar(n.valid_rows) + ") " + ident(n.tensor) + "[(long long)(" +
                 scalar(n.base) + ") + row] = nd::element_from_float<" + elem_type(t.elem) + ">(" + ident(n.src) +
                 ".v);");
            break;
        }
        case NodeKind::CarriedLoop:
            line("for (int " + ident(n.var) + " = " + scalar(n.begin) + "; " + ident(n.var) + " < " + scalar(n.end) +
                 "; ++" + ident(n.var) + ") {");
            indent_++;
            block(n.body);
            indent_--;
            line("}");
            break;
        default:
            throw InternalError("emit_cuda: a row-strip kernel has no " + to_string(std::make_shared<Node>(n), false));
        }
    }

    const Kernel &k_;
    std::map<std::string, int> reads_;
    std::map<std::string, DType> packed_;  // strips kept as loaded, by their element type
    std::ostringstream out_;
    int indent_ = 1;
    int hoisted_ = 0;  // per-row values named so far (h0_, h1_, ...)
    int cluster_reduces_ = 0;  // cluster exchanges so far, each with its shared words
    int prefetched_count_ = 0;  // per-row tensor reads loaded ahead so far (g0_, g1_, ...)
    std::map<const Node *, Expr> row_values_;  // top-level row maps with their tensor reads loaded ahead
};

}  // namespace

std::string emit_strip_kernel(const Kernel &k) { return StripEmitter(k).emit(); }

}  // namespace neptune::internal
