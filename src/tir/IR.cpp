#include "tir/IR.h"

#include <algorithm>
#include <optional>

#include "core/StrideParams.h"
#include "neptune/Error.h"

namespace neptune {

const char *arch_name(GpuArch a) { return a == GpuArch::Sm90a ? "sm_90a" : "sm_80"; }

}  // namespace neptune

namespace neptune::tir {

const char *scope_name(Scope s) {
    switch (s) {
    case Scope::Global: return "global";
    case Scope::Shared: return "shared";
    case Scope::Register: return "register";
    }
    return "?";
}

const char *layout_name(Layout l) {
    switch (l) {
    case Layout::Unassigned: return "unassigned";
    case Layout::SharedRowMajor: return "row-major";
    case Layout::SharedSwizzled128: return "swizzled-128B";
    case Layout::MmaAccumulator: return "mma-accumulator";
    case Layout::MmaOperandA: return "mma-operand-a";
    case Layout::RowVector: return "row-vector";
    case Layout::WarpRows: return "warp-rows";
    case Layout::WarpRowVector: return "warp-row-vector";
    case Layout::RowStrip: return "row-strip";
    case Layout::StripRowVector: return "strip-row-vector";
    }
    return "?";
}

const char *role_name(Role r) {
    switch (r) {
    case Role::None: return "";
    case Role::ScoreModifier: return "score modifier";
    case Role::Mask: return "mask";
    case Role::ScoreDot: return "score dot";
    case Role::ValueLoad: return "value load";
    case Role::ValueDot: return "value dot";
    case Role::Repair: return "repair";
    case Role::Term: return "term";
    case Role::Epilogue: return "epilogue";
    }
    return "?";
}

Stmt with_role(const Stmt &s, Role r) {
    return with(s, [r](Node &n) { n.role = r; });
}

size_t find_role(const Block &b, Role r) {
    for (size_t i = 0; i < b.size(); i++)
        if (b[i]->role == r) return i;
    return b.size();
}

std::string TileType::str() const {
    if (is_row_vector(*this))
        return std::string(dtype_name(elem)) + "[" + std::to_string(rows) + "] " + layout_name(layout);
    return std::string(dtype_name(elem)) + "[" + std::to_string(rows) + " x " + std::to_string(cols) + "] " +
           scope_name(scope) + " " + layout_name(layout);
}

namespace {

std::shared_ptr<Node> node(NodeKind k) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    return n;
}

}  // namespace

Stmt make_load(const std::string &dst, const std::string &tensor, Halide::Expr base, Halide::Expr row_stride,
               Halide::Expr valid_rows, Halide::Expr valid_cols) {
    auto n = node(NodeKind::TileLoad);
    n->dst = dst;
    n->tensor = tensor;
    n->base = std::move(base);
    n->row_stride = std::move(row_stride);
    n->valid_rows = std::move(valid_rows);
    n->valid_cols = std::move(valid_cols);
    return n;
}

Stmt make_view_load(const std::string &dst, const std::string &tensor, Halide::Expr batch, Halide::Expr head,
                    Halide::Expr row, Halide::Expr base, Halide::Expr row_stride, Halide::Expr valid_rows,
                    Halide::Expr valid_cols) {
    return with(
        make_load(dst, tensor, std::move(base), std::move(row_stride), std::move(valid_rows), std::move(valid_cols)),
        [&](Node &n) {
            n.batch = std::move(batch);
            n.head = std::move(head);
            n.row = std::move(row);
        });
}

Stmt make_store(const std::string &src, const std::string &tensor, Halide::Expr base, Halide::Expr row_stride,
                Halide::Expr valid_rows, Halide::Expr valid_cols) {
    auto n = node(NodeKind::TileStore);
    n->src = src;
    n->tensor = tensor;
    n->base = std::move(base);
    n->row_stride = std::move(row_stride);
    n->valid_rows = std::move(valid_rows);
    n->valid_cols = std::move(valid_cols);
    return n;
}

Stmt make_row_load(const std::string &dst, const std::string &tensor, Halide::Expr base, Halide::Expr row_stride,
                   Halide::Expr valid_rows, float fill) {
    auto n = node(NodeKind::RowLoad);
    n->dst = dst;
    n->tensor = tensor;
    n->base = std::move(base);
    n->row_stride = std::move(row_stride);
    n->valid_rows = std::move(valid_rows);
    n->value = Halide::Expr(fill);
    return n;
}

Stmt make_row_store(const std::string &src, const std::string &tensor, Halide::Expr base, Halide::Expr valid_rows) {
    auto n = node(NodeKind::RowStore);
    n->src = src;
    n->tensor = tensor;
    n->base = std::move(base);
    n->valid_rows = std::move(valid_rows);
    return n;
}

Stmt make_fill(const std::string &dst, float value) {
    auto n = node(NodeKind::Fill);
    n->dst = dst;
    n->value = Halide::Expr(value);
    return n;
}

Stmt make_map(const std::string &dst, Halide::Expr value, const std::string &note) {
    auto n = node(NodeKind::TileMap);
    n->dst = dst;
    n->value = std::move(value);
    n->note = note;
    return n;
}

Stmt make_row_map(const std::string &dst, Halide::Expr value, const std::string &note) {
    auto n = node(NodeKind::RowMap);
    n->dst = dst;
    n->value = std::move(value);
    n->note = note;
    return n;
}

Stmt make_reduce(const std::string &dst, ReduceOp op, const std::string &src) {
    auto n = node(NodeKind::TileReduce);
    n->dst = dst;
    n->op = op;
    n->src = src;
    return n;
}

Stmt make_dot(const std::string &acc, const std::string &a, const std::string &b, bool transpose_b,
              Halide::Expr restart) {
    auto n = node(NodeKind::TileDot);
    n->dst = acc;
    n->a = a;
    n->b = b;
    n->transpose_b = transpose_b;
    n->restart = std::move(restart);
    return n;
}

Stmt make_convert(const std::string &dst, const std::string &src) {
    auto n = node(NodeKind::Convert);
    n->dst = dst;
    n->src = src;
    return n;
}

Stmt make_loop(const std::string &var, Halide::Expr begin, Halide::Expr end, std::vector<std::string> carried,
               Block body) {
    auto n = node(NodeKind::CarriedLoop);
    n->var = var;
    n->begin = std::move(begin);
    n->end = std::move(end);
    n->carried = std::move(carried);
    n->body = std::move(body);
    return n;
}

Stmt make_if(Halide::Expr cond, Block body, const std::string &note) {
    auto n = node(NodeKind::IfThen);
    n->cond = std::move(cond);
    n->body = std::move(body);
    n->note = note;
    return n;
}

Stmt make_barrier() { return node(NodeKind::Barrier); }

Stmt make_release(const std::string &tile, Halide::Expr ring) {
    auto n = node(NodeKind::Release);
    n->src = tile;
    n->ring = std::move(ring);
    return n;
}

Stmt make_turn(TurnMode mode) {
    auto n = node(NodeKind::WarpgroupTurn);
    n->turn = mode;
    return n;
}

Stmt make_last_arrival(const std::string &counter, Halide::Expr index, Halide::Expr arrivals, Block body,
                       const std::string &note) {
    auto n = node(NodeKind::LastArrival);
    n->tensor = counter;
    n->base = std::move(index);
    n->value = std::move(arrivals);
    n->body = std::move(body);
    n->note = note;
    return n;
}

Stmt make_cluster_merge(Block body, const std::string &note) {
    auto n = node(NodeKind::ClusterMerge);
    n->body = std::move(body);
    n->note = note;
    return n;
}

Stmt make_cluster_reduce(const std::string &dst, ReduceOp op, const std::string &src) {
    auto n = node(NodeKind::ClusterReduce);
    n->dst = dst;
    n->op = op;
    n->src = src;
    return n;
}

Stmt make_cluster_reduce(const std::string &dst, ReduceOp op, std::vector<std::string> peers, Halide::Expr value) {
    auto n = node(NodeKind::ClusterReduce);
    n->dst = dst;
    n->op = op;
    n->src = peers.empty() ? "" : peers.front();
    n->peers = std::move(peers);
    n->value = std::move(value);
    return n;
}

Stmt make_cluster_load(const std::string &dst, const std::string &src, Halide::Expr rank, Halide::Expr row,
                       Halide::Expr valid_rows, Halide::Expr valid_cols) {
    auto n = node(NodeKind::TileLoad);
    n->dst = dst;
    n->src = src;
    n->rank = std::move(rank);
    n->row = std::move(row);
    n->valid_rows = std::move(valid_rows);
    n->valid_cols = std::move(valid_cols);
    return n;
}

Stmt make_cluster_row_load(const std::string &dst, const std::string &src, Halide::Expr rank, Halide::Expr row,
                           Halide::Expr valid_rows, float fill) {
    auto n = node(NodeKind::RowLoad);
    n->dst = dst;
    n->src = src;
    n->rank = std::move(rank);
    n->row = std::move(row);
    n->valid_rows = std::move(valid_rows);
    n->value = Halide::Expr(fill);
    return n;
}

Stmt make_dot_wait(int pending, std::vector<std::string> fenced) {
    auto n = node(NodeKind::DotWait);
    n->pending = pending;
    n->fenced = std::move(fenced);
    return n;
}

void effects(const Node &n, std::set<std::string> &writes, std::set<std::string> &reads, bool with_body) {
    switch (n.kind) {
    case NodeKind::TileLoad:
    case NodeKind::RowLoad:
        writes.insert(n.dst);
        if (n.rank.defined()) reads.insert(n.src);  // a cluster block's shared tile
        break;
    case NodeKind::Fill: writes.insert(n.dst); break;
    case NodeKind::TileMap:
    case NodeKind::RowMap:
    case NodeKind::ClusterReduce: {
        writes.insert(n.dst);
        if (!n.src.empty()) reads.insert(n.src);  // a cluster reduction's
        reads.insert(n.peers.begin(), n.peers.end());
        if (!n.value.defined()) break;
        class Names : public Halide::Internal::IRGraphVisitor {
        public:
            explicit Names(std::set<std::string> &out) : out_(out) {}
            using Halide::Internal::IRGraphVisitor::visit;
            void visit(const Halide::Internal::Variable *v) override { out_.insert(v->name); }

        private:
            std::set<std::string> &out_;
        } names(reads);
        n.value.accept(&names);
        break;
    }
    case NodeKind::TileReduce:
        writes.insert(n.dst);
        reads.insert(n.dst);
        reads.insert(n.src);
        break;
    case NodeKind::TileDot:
        writes.insert(n.dst);
        reads.insert(n.dst);
        reads.insert(n.a);
        reads.insert(n.b);
        break;
    case NodeKind::Convert:
        writes.insert(n.dst);
        reads.insert(n.src);
        break;
    case NodeKind::TileStore:
    case NodeKind::RowStore: reads.insert(n.src); break;
    case NodeKind::Release: writes.insert(n.src); break;
    default: break;
    }
    if (with_body)
        for (const Stmt &b : n.body) effects(*b, writes, reads, true);
}

bool rows_aligned(const Halide::Expr &base, const Halide::Expr &row_stride, int v) {
    return Halide::Internal::can_prove(base % v == 0) && Halide::Internal::can_prove(row_stride % v == 0);
}

void add_tensor_map(Kernel &k, const std::string &tensor, int box_rows, int l2_promotion) {
    for (const TensorMap &m : k.tensor_maps) {
        if (m.tensor != tensor) continue;
        if (m.box_rows != box_rows)
            throw neptune::InternalError(k.name + ": " + tensor + " is loaded in tiles of two heights");
        return;
    }
    k.tensor_maps.push_back({tensor + "_map", tensor, box_rows, l2_promotion});
}

Kernel rewrite_top_loops(const Kernel &k, const std::function<Block(const Stmt &)> &f) {
    Kernel out = k;
    out.body.clear();
    for (const Stmt &s : k.body) {
        const Block r = s->kind == NodeKind::CarriedLoop ? f(s) : Block{};
        if (r.empty())
            out.body.push_back(s);
        else
            out.body.insert(out.body.end(), r.begin(), r.end());
    }
    return out;
}

Stmt with(const Stmt &s, const std::function<void(Node &)> &f) {
    auto n = std::make_shared<Node>(*s);
    f(*n);
    return n;
}

Stmt with_exprs(const Stmt &s, const std::function<Halide::Expr(const Halide::Expr &)> &f, bool with_body) {
    return with(s, [&](Node &n) {
        for (Halide::Expr *e : {&n.base, &n.row_stride, &n.col_stride, &n.valid_rows, &n.valid_cols, &n.value, &n.batch,
                                &n.head, &n.row, &n.ring, &n.begin, &n.end, &n.cond, &n.rank, &n.restart})
            if (e->defined()) *e = f(*e);
        if (with_body)
            for (Stmt &b : n.body) b = with_exprs(b, f, true);
    });
}

Halide::Expr int_var(const std::string &name) { return Halide::Internal::Variable::make(Halide::Int(32), name); }

void bind_dense_strides(const Program &p, std::map<std::string, int64_t> &ints) {
    std::map<std::string, Halide::Expr> known;
    for (const auto &[n, v] : ints) known[n] = Halide::Expr(int32_t(v));
    auto eval = [&](const Kernel &k, const std::string &t, const Halide::Expr &e) {
        const Halide::Expr c = Halide::Internal::simplify(Halide::Internal::substitute(known, e));
        const std::optional<int64_t> v = Halide::Internal::as_const_int(c);
        if (!v) throw neptune::InternalError(k.name + ": an extent of " + t + " is not known from the int parameters");
        return *v;
    };
    for (const Kernel &k : p.kernels)
        for (const auto &[t, v] : k.views) {
            const int64_t cols = eval(k, t, v.cols), rows = eval(k, t, v.rows), heads = eval(k, t, v.heads);
            if (cols % internal::kStrideUnit)
                throw neptune::InternalError(k.name + ": " + t + "'s rows are not a multiple of the stride unit");
            const int64_t dense[3] = {cols, rows * cols, heads * rows * cols};
            for (int d = 1; d <= 3; d++) {
                const std::string name = internal::stride_param(t, d);
                if (ints.count(name) || std::find(k.int_params.begin(), k.int_params.end(), name) == k.int_params.end())
                    continue;
                ints[name] = dense[d - 1] / internal::kStrideUnit;
                known[name] = Halide::Expr(int32_t(ints[name]));
            }
        }
}

}  // namespace neptune::tir
