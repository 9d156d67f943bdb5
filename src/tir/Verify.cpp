// The tile IR's invariants, checked in one walk: declarations, scopes and layouts of every operand,
// shapes of dots and conversions, the names maps and scalar expressions read.
#include <algorithm>
#include <functional>
#include <set>

#include "neptune/Error.h"
#include "tir/IR.h"

namespace neptune::tir {

namespace {

namespace HI = Halide::Internal;

bool is_register_tile(const TileType &t) { return t.scope == Scope::Register && !is_row_vector(t); }
bool is_shared_tile(const TileType &t) {
    return t.scope == Scope::Shared && (t.layout == Layout::SharedRowMajor || t.layout == Layout::SharedSwizzled128);
}
bool is_swizzled(const TileType &t) { return t.scope == Scope::Shared && t.layout == Layout::SharedSwizzled128; }
bool is_accumulator(const TileType &t) {
    return t.scope == Scope::Register && t.layout == Layout::MmaAccumulator && t.elem == DType::F32;
}
bool is_operand_a(const TileType &t) {
    return t.scope == Scope::Register && t.layout == Layout::MmaOperandA &&
           (t.elem == DType::F16 || t.elem == DType::BF16);
}
bool is_warp_rows_tile(const TileType &t) {
    return t.scope == Scope::Register && t.layout == Layout::WarpRows && t.elem == DType::F32;
}
bool is_strip_tile(const TileType &t) {
    return t.scope == Scope::Register && t.layout == Layout::RowStrip && t.elem == DType::F32;
}
/** Register families: maps read values of their destination's family only. */
int family(const TileType &t) { return is_warp_rows(t) ? 1 : is_row_strip(t) ? 2 : 0; }
bool same_shape(const TileType &a, const TileType &b) { return a.rows == b.rows && a.cols == b.cols; }
/** A shared f32 tile: a block's state published to its cluster (ClusterMerge). */
bool is_shared_f32(const TileType &t) {
    return t.scope == Scope::Shared && t.layout == Layout::SharedRowMajor && t.elem == DType::F32;
}

std::string shape(const TileType &t) { return "[" + std::to_string(t.rows) + " x " + std::to_string(t.cols) + "]"; }

/** The names of the Variables an Expr reads, each once. */
class Variables : public HI::IRGraphVisitor {
public:
    std::vector<const HI::Variable *> found;
    using HI::IRGraphVisitor::visit;
    void visit(const HI::Variable *op) override { found.push_back(op); }
};

std::vector<const HI::Variable *> variables_of(const Halide::Expr &e) {
    Variables v;
    e.accept(&v);
    return v.found;
}

class Verifier {
public:
    explicit Verifier(const Kernel &k) : k_(k) {}

    void run() {
        std::set<std::string> tensors;  // tensor names never appear in expressions: only unique among themselves
        for (const TensorParam &t : k_.tensors)
            if (t.name.empty() || !tensors.insert(t.name).second)
                fail(nullptr, "tensor '" + t.name + "' twice or unnamed");
        for (const std::string &p : k_.int_params) declare_scalar(p);
        for (const Halide::Expr *g : {&k_.grid_x, &k_.grid_y, &k_.grid_z})  // over the int parameters only
            if (g->defined()) check_scalar_expr(nullptr, *g, "grid");
        if (k_.cluster_x.defined()) check_scalar_expr(nullptr, k_.cluster_x, "cluster");
        for (const std::string &p : k_.float_params) declare_scalar(p);
        for (const char *b : {"block_x", "block_y", "block_z", "grid_x", "grid_y", "grid_z", "sm_count"})
            declare_scalar(b);
        if (k_.warps < 1) fail(nullptr, "warps must be at least 1, not " + std::to_string(k_.warps));
        if (k_.producer_warps < 0 || k_.producer_warps % 4)
            fail(nullptr, "producer warps come in warpgroups of 4, not " + std::to_string(k_.producer_warps));
        for (const TensorMap &m : k_.tensor_maps) check_tensor_map(m);
        for (const ScalarDef &d : k_.scalars) {
            if (!d.value.defined()) fail(nullptr, "scalar '" + d.name + "' has no value");
            check_scalar_expr(nullptr, d.value, "scalar '" + d.name + "'");
            declare_scalar(d.name);
        }
        for (const auto &[name, type] : k_.values) check_declaration(name, type);
        block(k_.body);
        const std::vector<const Node *> left = flow(k_.body, {});
        if (!left.empty())
            fail(nullptr, "the asynchronous dot into '" + left.back()->dst + "' is not retired before the kernel ends");
    }

private:
    const Kernel &k_;
    std::set<std::string> names_;  // every scalar and value name: a map reads both, so they must not clash
    std::set<std::string> scalars_;  // the scalars in scope
    int nested_ = 0;  // loops and conditions around the statement being checked
    const Node *loop_ = nullptr;  // the loop whose body holds the statement directly (none under a condition)
    bool in_merge_ = false;  // inside a ClusterMerge: cluster loads may read the cluster's shared tiles

    [[noreturn]] void fail(const Stmt &s, const std::string &rule) const {
        std::string where = "tir::verify: kernel '" + k_.name + "'";
        if (s) where += ": `" + to_string(s, false) + "`";
        throw InternalError(where + ": " + rule);
    }

    void declare_name(const std::string &name, const char *what) {
        if (name.empty()) fail(nullptr, std::string("a ") + what + " has an empty name");
        if (name == "row" || name == "col")
            fail(nullptr, "the " + std::string(what) + " name '" + name + "' is reserved");
        if (!names_.insert(name).second)
            fail(nullptr, std::string(what) + " name '" + name + "' clashes with another name");
    }

    void declare_scalar(const std::string &name) {
        declare_name(name, "scalar");
        scalars_.insert(name);
    }

    void check_declaration(const std::string &name, const TileType &t) {
        declare_name(name, "value");
        const std::string what = "value '" + name + "' (" + t.str() + ")";
        if (t.rows <= 0 || t.cols <= 0) fail(nullptr, what + " has an empty shape");
        if (t.scope == Scope::Global) fail(nullptr, what + " lives in global memory; values are shared or registers");
        if (t.scope == Scope::Shared && !is_shared_tile(t))
            fail(nullptr, what + " is shared but neither row-major nor swizzled");
        if (is_swizzled(t) && (t.cols % 64 || t.rows % 8 || dtype_bytes(t.elem) != 2))
            fail(nullptr, what + " is swizzled: 16-bit elements, columns a multiple of 64, rows of 8");
        if (t.scope == Scope::Register && (t.layout == Layout::Unassigned || t.layout == Layout::SharedRowMajor))
            fail(nullptr, what + " is a register value without a register layout");
        if (is_row_vector(t) && (t.cols != 1 || t.elem != DType::F32))
            fail(nullptr, what + " is a row vector, which holds one f32 per row (cols 1)");
        if (is_warp_rows(t) && t.scope != Scope::Register)
            fail(nullptr, what + ": warp-rows layouts are register layouts");
        if (is_warp_rows(t) &&
            (t.elem != DType::F32 || t.rows > 16 || k_.warps != 1 || (t.layout == Layout::WarpRows && t.cols % 4)))
            fail(nullptr, what +
                              " is in a warp-rows layout: f32, at most 16 rows, columns a multiple of 4, in a "
                              "one-warp kernel (this one has " +
                              std::to_string(k_.warps) + ")");
    }

    const TileType &value(const Stmt &s, const std::string &name) const {
        auto it = k_.values.find(name);
        if (it == k_.values.end()) fail(s, "'" + name + "' is not declared in the kernel's values");
        return it->second;
    }

    const TensorParam &tensor(const Stmt &s) const {
        for (const TensorParam &t : k_.tensors)
            if (t.name == s->tensor) return t;
        fail(s, "tensor '" + s->tensor + "' is not declared in the kernel's tensors");
    }

    void require(const Stmt &s, const Halide::Expr &e, const char *field) const {
        if (!e.defined()) fail(s, std::string("the ") + field + " expression is undefined");
    }

    /** An integer expression over the scalars in scope. */
    void check_scalar_expr(const Stmt &s, const Halide::Expr &e, const std::string &field) const {
        if (e.type().is_float()) fail(s, "the " + field + " expression must be an integer, not a float");
        for (const HI::Variable *v : variables_of(e))
            if (!scalars_.count(v->name))
                fail(s, "the " + field + " expression reads '" + v->name + "', which is not a scalar in scope");
    }

    bool reads_only_params(const Halide::Expr &e) const {
        for (const HI::Variable *v : variables_of(e))
            if (std::find(k_.int_params.begin(), k_.int_params.end(), v->name) == k_.int_params.end()) return false;
        return true;
    }

    void check_index(const Stmt &s, const Halide::Expr &e, const char *field) const {
        require(s, e, field);
        check_scalar_expr(s, e, field);
    }

    /** The tile-shaped global slice of a load or store. */
    void check_slice(const Stmt &s) const {
        check_index(s, s->base, "base");
        check_index(s, s->row_stride, "row stride");
        if (s->col_stride.defined()) {
            check_index(s, s->col_stride, "column stride");
            if (!k_.strip_lanes_along_rows)
                fail(s, "a strided column needs a kernel whose lanes run along rows (strip_lanes_along_rows)");
        }
        check_index(s, s->valid_rows, "valid rows");
        check_index(s, s->valid_cols, "valid cols");
    }

    void check_constant(const Stmt &s, const Halide::Expr &e) const {
        require(s, e, "value");
        if (!e.as<HI::FloatImm>() && !e.as<HI::IntImm>()) fail(s, "the value must be a constant");
    }

    /** A row-strip map's bounds on the elements it computes. */
    void check_map_bounds(const Stmt &s, const TileType &dst) const {
        if (!s->valid_rows.defined() && !s->valid_cols.defined()) return;
        if (!is_row_strip(dst)) fail(s, "only row-strip maps bound the elements they compute");
        if (s->valid_rows.defined()) check_index(s, s->valid_rows, "valid rows");
        if (s->valid_cols.defined()) {
            if (s->kind != NodeKind::TileMap) fail(s, "a row map has no columns to bound");
            check_index(s, s->valid_cols, "valid cols");
        }
    }

    /** A map's expression: values as tile elements or row-vector entries, "row", "col" and scalars. */
    void check_map(const Stmt &s, const TileType &dst, bool tile_map) const {
        require(s, s->value, "value");
        for (const HI::Variable *v : variables_of(s->value)) {
            const std::string &name = v->name;
            auto it = k_.values.find(name);
            if (it != k_.values.end()) {
                const TileType &t = it->second;
                if (family(t) != family(dst))
                    fail(s, "the map reads '" + name + "' (" + t.str() + ") into " + dst.str() +
                                ": a map reads values of its destination's register family only (warp-rows, row "
                                "strip or mma)");
                if (is_row_vector(t)) {
                    if (t.rows != dst.rows)
                        fail(s, "the map reads row vector '" + name + "' of " + std::to_string(t.rows) +
                                    " rows, but its destination has " + std::to_string(dst.rows));
                } else if (!tile_map) {
                    fail(s, "a row map reads tile '" + name + "'; it may read row vectors only");
                } else if (!is_register_tile(t) || !same_shape(t, dst)) {
                    fail(s, "the map reads '" + name + "' (" + t.str() + "), which is not a register tile of its " +
                                "destination's shape " + shape(dst));
                }
            } else if (name == "row" || (tile_map && name == "col")) {
                if (v->type.is_float()) fail(s, "'" + name + "' must be an integer variable");
            } else if (!scalars_.count(name)) {
                fail(s, "the map reads '" + name + "', which is neither a declared value nor a scalar in scope");
            }
        }
    }

    void check_tensor_map(const TensorMap &m) const {
        const TensorParam *t = nullptr;
        for (const TensorParam &p : k_.tensors)
            if (p.name == m.tensor) t = &p;
        if (!t) fail(nullptr, "tensor map '" + m.name + "' describes '" + m.tensor + "', which is not a tensor");
        if (!k_.views.count(m.tensor))
            fail(nullptr,
                 "tensor map '" + m.name + "': tensor '" + m.tensor + "' has no [batch, heads, rows, cols] view");
        if (!is_l2_promotion(m.l2_promotion))
            fail(nullptr, "tensor map '" + m.name + "': the L2 promotion is 0, 64, 128 or 256 bytes, not " +
                              std::to_string(m.l2_promotion));
        if (m.box_rows < 8 || m.box_rows > 256 || m.box_rows % 8)
            fail(nullptr, "tensor map '" + m.name + "': TMA boxes have 8 to 256 rows in steps of 8, not " +
                              std::to_string(m.box_rows));
    }

    void check_dot(const Stmt &s) const {
        const TileType &acc = value(s, s->dst), &a = value(s, s->a), &b = value(s, s->b);
        if (s->restart.defined()) check_index(s, s->restart, "restart condition");
        if (!is_accumulator(acc))
            fail(s, "the dot's accumulator must be an f32 mma-accumulator tile, not " + acc.str());
        const bool wgmma = s->mma == MmaKind::Wgmma;
        if (!is_operand_a(a) && !(wgmma && is_swizzled(a)))
            fail(s, "the dot's a must be an f16/bf16 mma-operand-a tile (or, for wgmma, a swizzled shared tile), not " +
                        a.str());
        if (!is_shared_tile(b) || b.elem != a.elem)
            fail(s, "the dot's b must be a shared tile of a's element type, not " + b.str());
        if (wgmma && !is_swizzled(b)) fail(s, "a wgmma reads b from a swizzled shared tile, not " + b.str());
        if (wgmma && (k_.warps % 4 || acc.rows != k_.rows()))
            fail(s, "a wgmma dot needs whole warpgroups of compute warps and a tile of all their rows");
        const int bk = s->transpose_b ? b.cols : b.rows, bn = s->transpose_b ? b.rows : b.cols;
        if (acc.rows != a.rows || a.cols != bk || acc.cols != bn)
            fail(s, "the dot's shapes disagree: acc " + shape(acc) + ", a " + shape(a) + ", b" +
                        (s->transpose_b ? "^T " : " ") + shape(b));
    }

    void check_convert(const Stmt &s) const {
        const TileType &dst = value(s, s->dst), &src = value(s, s->src);
        if (is_shared_f32(dst)) {  // a block's state published to its cluster
            if ((!is_accumulator(src) && !(is_row_vector(src) && !is_warp_rows(src))) || !same_shape(src, dst))
                fail(
                    s,
                    "a convert into a shared f32 tile copies an mma-accumulator tile or row vector of its shape, not " +
                        src.str() + " -> " + dst.str());
            if (!k_.cluster_x.defined())
                fail(s, "shared f32 tiles publish state to a cluster; the kernel has no clusters");
            if (s->valid_rows.defined()) check_index(s, s->valid_rows, "valid rows");
            return;
        }
        const bool staged = is_shared_tile(src) && is_operand_a(dst) && src.elem == dst.elem;
        const bool rounded = is_accumulator(src) && is_operand_a(dst);
        if (!staged && !rounded)
            fail(s,
                 "a convert goes only from a shared tile to an mma-operand-a tile of its element type, or from an "
                 "f32 mma-accumulator to an f16/bf16 mma-operand-a tile; not " +
                     src.str() + " -> " + dst.str());
        if (!same_shape(src, dst)) fail(s, "a convert keeps the shape: " + shape(src) + " -> " + shape(dst));
    }

    void row_io(const Stmt &s) {
        const bool load = s->kind == NodeKind::RowLoad;
        const TileType &v = value(s, load ? s->dst : s->src);
        if (!is_row_vector(v)) fail(s, "a row load or store moves a row vector, not " + v.str());
        const DType t = tensor(s).elem;
        const bool rounded = !load && is_row_strip(v) && (t == DType::F16 || t == DType::BF16);
        if (t != DType::F32 && !rounded)
            fail(s, "a row load or store reads or writes an f32 tensor (a strip row vector also f16 or bf16)");
        check_index(s, s->base, "base");
        check_index(s, s->valid_rows, "valid rows");
        if (load) {
            check_index(s, s->row_stride, "row stride");
            check_constant(s, s->value);
        }
    }

    /** A load from a cluster block's published shared tile: inside a ClusterMerge only. */
    void check_cluster_load(const Stmt &s) const {
        const TileType &dst = value(s, s->dst), &src = value(s, s->src);
        if (!in_merge_) fail(s, "a cluster load reads other blocks' shared memory only inside a cluster merge");
        if (!is_shared_f32(src)) fail(s, "a cluster load reads a shared f32 tile, not " + src.str());
        check_index(s, s->rank, "rank");
        check_index(s, s->row, "row");
        check_index(s, s->valid_rows, "valid rows");
        if (s->kind == NodeKind::RowLoad) {
            if (!is_row_vector(dst) || src.cols != 1)
                fail(s, "a cluster row load fills a row vector from a shared f32 column, not " + src.str() + " -> " +
                            dst.str());
            check_constant(s, s->value);
            return;
        }
        if ((!is_accumulator(dst) && !is_warp_rows_tile(dst)) || dst.cols != src.cols)
            fail(s,
                 "a cluster load fills an f32 register tile (mma-accumulator or warp-rows) of the shared tile's "
                 "columns, not " +
                     src.str() + " -> " + dst.str());
        check_index(s, s->valid_cols, "valid cols");
    }

    void check_loop(const Stmt &s) {
        check_index(s, s->begin, "begin");
        check_index(s, s->end, "end");
        if (s->var == "row" || s->var == "col" || names_.count(s->var) || k_.values.count(s->var))
            fail(s, "the loop variable '" + s->var + "' reassigns a name already in use");
        for (const std::string &c : s->carried) value(s, c);
        scalars_.insert(s->var);
        names_.insert(s->var);
        nested_++;
        const Node *outer = loop_;
        loop_ = s.get();
        block(s->body);
        loop_ = outer;
        nested_--;
        scalars_.erase(s->var);
        names_.erase(s->var);
    }

    void stmt(const Stmt &s) {
        switch (s->kind) {
        case NodeKind::TileLoad:
        case NodeKind::RowLoad:
            if (s->rank.defined()) {
                check_cluster_load(s);
                break;
            }
            if (s->kind == NodeKind::RowLoad) {
                row_io(s);
                break;
            }
            {
                const TileType &dst = value(s, s->dst);
                const TensorParam &t = tensor(s);
                const bool staged = is_shared_tile(dst) && dst.elem == t.elem;
                const bool direct = (is_accumulator(dst) || is_warp_rows_tile(dst)) && t.elem == DType::F32;
                const bool strip = is_strip_tile(dst) && t.elem != DType::I32;
                if (!staged && !direct && !strip)
                    fail(s, "a load fills a shared tile of the tensor's element type (" +
                                std::string(dtype_name(t.elem)) +
                                ") or an f32 register tile (mma-accumulator or warp-rows) from an f32 tensor, not " +
                                dst.str());
                check_slice(s);
                if (is_warp_rows_tile(dst) && !rows_aligned(s->base, s->row_stride, 4))
                    fail(s, "a warp-rows load reads 16-byte rows: base and row stride must be multiples of 4");
                // (A swizzled tile is TMA-loaded only from specialize_warps on, which follows select_mma.)
                if (s->copy == CopyKind::Tma && !is_swizzled(dst)) fail(s, "TMA copies fill swizzled shared tiles");
                if (s->multicast > 1) {
                    const auto *cluster =
                        k_.cluster_x.defined() ? k_.cluster_x.as<Halide::Internal::IntImm>() : nullptr;
                    if (s->copy != CopyKind::Tma || !s->ring.defined() || !k_.producer_warps)
                        fail(s, "only the producer's TMA ring loads multicast");
                    if (!cluster || cluster->value != s->multicast)
                        fail(s, "a load multicast to " + std::to_string(s->multicast) +
                                    " blocks needs clusters of that many blocks");
                    if (dst.rows % (8 * s->multicast))
                        fail(s, "each block copies a multiple of 8 of the tile's rows (the swizzle's period)");
                }
                if (s->copy == CopyKind::Tma) {
                    check_index(s, s->batch, "batch");
                    check_index(s, s->head, "head");
                    check_index(s, s->row, "row");
                    if (!k_.views.count(t.name))
                        fail(s, "a TMA load needs the tensor's [batch, heads, rows, cols] view");
                    bool mapped = false;
                    for (const TensorMap &m : k_.tensor_maps)
                        mapped =
                            mapped || (m.tensor == s->tensor && m.box_rows == dst.rows / std::max(1, s->multicast));
                    if (!mapped)
                        fail(s, "no tensor map of '" + s->tensor +
                                    "' has boxes of this tile's rows (per block of a "
                                    "multicast)");
                    // Without producer warps a thread of the block issues the copies stages - 1 iterations
                    // ahead in the loop that consumes them (pipeline_loads): no ring protocol, no releases.
                    if (!k_.producer_warps && (!loop_ || k_.pipeline_stages < 2 || s->ring.defined()))
                        fail(s,
                             "a TMA load without producer warps is a pipelined load (2 or more stages, no ring "
                             "position) directly in the body of the loop that reads it");
                }
                break;
            }
        case NodeKind::TileStore: {
            const TileType &src = value(s, s->src);
            tensor(s);
            if (!is_register_tile(src)) fail(s, "a store writes a register tile, not " + src.str());
            check_slice(s);
            break;
        }
        case NodeKind::RowStore: row_io(s); break;
        case NodeKind::Fill:
            value(s, s->dst);
            check_constant(s, s->value);
            break;
        case NodeKind::TileMap: {
            const TileType &dst = value(s, s->dst);
            if (!is_register_tile(dst)) fail(s, "a map writes a register tile, not " + dst.str());
            check_map(s, dst, true);
            check_map_bounds(s, dst);
            break;
        }
        case NodeKind::RowMap: {
            const TileType &dst = value(s, s->dst);
            if (!is_row_vector(dst)) fail(s, "a row map writes a row vector, not " + dst.str());
            check_map(s, dst, false);
            check_map_bounds(s, dst);
            break;
        }
        case NodeKind::TileReduce: {
            const TileType &dst = value(s, s->dst), &src = value(s, s->src);
            if (!is_row_vector(dst)) fail(s, "a reduction writes a row vector, not " + dst.str());
            if (!is_register_tile(src) || is_warp_rows(src))
                fail(s, "a reduction reads an mma-accumulator or operand tile or a row strip, not " + src.str());
            if (family(src) != family(dst))
                fail(s, "a reduction writes a row vector of its tile's family, not " + src.str() + " -> " + dst.str());
            if (s->valid_cols.defined()) {
                if (!is_row_strip(src)) fail(s, "only a row strip's reduction bounds its columns");
                check_index(s, s->valid_cols, "valid cols");
            }
            if (dst.rows != src.rows)
                fail(s, "a reduction's row vector has " + std::to_string(dst.rows) + " rows, its tile " +
                            std::to_string(src.rows));
            break;
        }
        case NodeKind::TileDot: check_dot(s); break;
        case NodeKind::Convert: check_convert(s); break;
        case NodeKind::CarriedLoop: check_loop(s); break;
        case NodeKind::IfThen: {
            check_index(s, s->cond, "condition");
            // A top-level condition on the launch's parameters alone is the same in every block, so a
            // LastArrival under it still counts every block of a group (or none).
            const bool grid_uniform = nested_ == 0 && reads_only_params(s->cond);
            if (!grid_uniform) nested_++;
            const Node *outer = loop_;
            loop_ = nullptr;
            block(s->body);
            loop_ = outer;
            if (!grid_uniform) nested_--;
            break;
        }
        case NodeKind::Barrier: break;
        case NodeKind::Release:
            if (!is_shared_tile(value(s, s->src))) fail(s, "only shared tiles are released");
            if (s->ring.defined()) check_index(s, s->ring, "ring position");
            break;
        case NodeKind::WarpgroupTurn:
            if (k_.warps % 4 || k_.warps < 8 || !k_.producer_warps)
                fail(s, "warpgroups take turns only in warp-specialized kernels with two or more compute warpgroups");
            break;
        case NodeKind::LastArrival: {
            const TensorParam &t = tensor(s);
            if (t.elem != DType::F32 || !t.output)
                fail(s, "an arrival counter is a written f32 workspace, not '" + t.name + "'");
            if (nested_ > 0)
                fail(s,
                     "blocks arrive once, at the kernel's top level or under a condition on the launch parameters "
                     "alone, not inside a loop or another condition");
            if (k_.producer_warps) fail(s, "warp-specialized kernels do not count arrivals");
            check_index(s, s->base, "counter");
            check_index(s, s->value, "arrivals");
            nested_++;
            block(s->body);
            nested_--;
            break;
        }
        case NodeKind::ClusterMerge:
            if (!k_.cluster_x.defined()) fail(s, "a cluster merge needs a kernel with clusters (cluster_x)");
            if (nested_ > 0) fail(s, "a cluster merge is a top-level statement: every block of the cluster reaches it");
            if (k_.producer_warps) fail(s, "warp-specialized kernels do not merge in clusters");
            nested_++;
            in_merge_ = true;
            block(s->body);
            in_merge_ = false;
            nested_--;
            break;
        case NodeKind::ClusterReduce: {
            if (!k_.cluster_x.defined()) fail(s, "a cluster reduction needs a kernel with clusters (cluster_x)");
            if (nested_ > 0 || loop_)
                fail(s, "a cluster reduction is a top-level statement: every block of the cluster reaches it");
            const TileType &dst = value(s, s->dst), &src = value(s, s->src);
            if (!is_row_vector(dst) || !is_row_vector(src) || dst.layout != src.layout || dst.rows != src.rows)
                fail(s, "a cluster reduction combines a row vector into one of its layout, not " + src.str() + " -> " +
                            dst.str());
            if (s->dst == s->src) fail(s, "a cluster reduction writes another row vector than it reads");
            for (const std::string &p : s->peers) {
                const TileType &t = value(s, p);
                if (!is_row_vector(t) || t.layout != dst.layout || t.rows != dst.rows)
                    fail(s, "a cluster reduction reads row vectors of its layout at the ranks, not " + t.str());
                if (p == s->dst) fail(s, "a cluster reduction writes another row vector than it reads");
            }
            if (s->value.defined()) check_map(s, dst, false);
            break;
        }
        case NodeKind::DotWait:
            if (s->pending < 0 || s->pending > 7) fail(s, "wgmma waits for 0 to 7 pending groups");
            for (const std::string &f : s->fenced) value(s, f);
            break;
        }
    }

    void block(const Block &b) {
        for (const Stmt &s : b) {
            if (!s) fail(nullptr, "a statement is null");
            stmt(s);
        }
    }

    // ---- Asynchronous dots: untouched until retired ----------------------------------------------
    //
    // The dots in flight after `b`, given those in flight before it. A dot issued under a condition (or
    // a merge) is retired there; a loop may leave dots in flight at the end of its body, which are then
    // in flight at the start of the next iteration and after the loop (a mainloop keeps the tensor
    // cores fed that way). While a dot is in flight nothing touches its accumulator, except a later
    // asynchronous wgmma accumulating into it (the hardware chains dots on one accumulator in issue
    // order), and nothing overwrites its operands, except a ring load or release at a ring position
    // (a load fills another buffer of the ring; a release hands back the buffer of its position, which
    // the pass that places it puts after the wait that retires that buffer's reader).
    using InFlight = std::vector<const Node *>;

    static InFlight merged(InFlight a, const InFlight &b) {
        for (const Node *d : b)
            if (std::find(a.begin(), a.end(), d) == a.end()) a.push_back(d);
        return a;
    }

    InFlight flow(const Block &b, InFlight in_flight) const {
        for (const Stmt &s : b) {
            switch (s->kind) {
            case NodeKind::DotWait: {
                const size_t keep = std::min(in_flight.size(), size_t(s->pending));
                in_flight.erase(in_flight.begin(), in_flight.end() - long(keep));
                continue;
            }
            case NodeKind::CarriedLoop: {
                const InFlight once = flow(s->body, in_flight);
                in_flight = merged(in_flight, flow(s->body, merged(in_flight, once)));
                continue;
            }
            case NodeKind::IfThen:
            case NodeKind::LastArrival:
            case NodeKind::ClusterMerge:
                for (const Node *d : flow(s->body, in_flight))
                    if (std::find(in_flight.begin(), in_flight.end(), d) == in_flight.end())
                        fail(s,
                             "the asynchronous dot into '" + d->dst + "' is not retired in the block that issues it");
                continue;
            default: break;
            }
            std::set<std::string> writes, reads;
            tir::effects(*s, writes, reads, true);
            const bool chained = s->kind == NodeKind::TileDot && s->async && s->accumulate;
            const bool ring_op = (s->kind == NodeKind::TileLoad || s->kind == NodeKind::Release) && s->ring.defined();
            for (const Node *d : in_flight) {
                if (!(chained && s->dst == d->dst) && (writes.count(d->dst) || reads.count(d->dst)))
                    fail(s, "touches '" + d->dst + "' while the asynchronous dot writing it is in flight");
                if (!ring_op && (writes.count(d->a) || writes.count(d->b)))
                    fail(s,
                         "overwrites an operand of the asynchronous dot into '" + d->dst + "' while it is in flight");
            }
            if (s->kind == NodeKind::TileDot && s->async) {
                if (s->mma != MmaKind::Wgmma) fail(s, "only wgmma dots are asynchronous");
                in_flight.push_back(s.get());
            }
        }
        return in_flight;
    }
};

}  // namespace

void verify(const Kernel &k) { Verifier(k).run(); }

void verify(const Program &p) {
    if (p.kernels.empty()) throw InternalError("tir::verify: a program without kernels");
    std::set<std::string> workspaces;
    for (const Workspace &w : p.workspaces) {
        if (!workspaces.insert(w.name).second) throw InternalError("tir::verify: workspace '" + w.name + "' twice");
        if (!w.elements.defined()) throw InternalError("tir::verify: workspace '" + w.name + "' has no size");
    }
    std::set<std::string> zeroed;
    for (const Workspace &w : p.workspaces)
        if (w.zeroed) zeroed.insert(w.name);
    for (const Kernel &k : p.kernels) {
        verify(k);
        for (const TensorParam &t : k.tensors)
            if (workspaces.count(t.name) && t.elem != DType::F32)
                throw InternalError("tir::verify: kernel '" + k.name + "': workspace '" + t.name + "' must be f32");
        std::function<void(const Block &)> arrivals = [&](const Block &b) {
            for (const Stmt &s : b) {
                if (s->kind == NodeKind::LastArrival && !zeroed.count(s->tensor))
                    throw InternalError("tir::verify: kernel '" + k.name + "': arrivals are counted in '" + s->tensor +
                                        "', which is not a zeroed workspace of the program");
                if (s->kind == NodeKind::IfThen) arrivals(s->body);  // the conditions verify(k) allowed
            }
        };
        arrivals(k.body);
    }
}

}  // namespace neptune::tir
