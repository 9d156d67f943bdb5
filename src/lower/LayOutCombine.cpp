#include "lower/LayOutCombine.h"

#include <functional>
#include <map>
#include <set>

namespace neptune::internal {

namespace HI = Halide::Internal;
using namespace tir;

namespace {

/** The register values statement `n` itself reads and writes (tir::effects without the scalars). */
void value_effects(const Kernel &k, const Node &n, std::set<std::string> &reads, std::set<std::string> &writes) {
    std::set<std::string> w, r;
    effects(n, w, r);
    for (const std::string &v : w)
        if (k.values.count(v)) writes.insert(v);
    for (const std::string &v : r)
        if (k.values.count(v)) reads.insert(v);
}

class Region {
public:
    Region(const Kernel &k, const std::set<std::string> &workspaces) : k_(k), workspaces_(workspaces) {}

    /** Whether `body` is a combine this pass can lay out; collects the values it touches. Strips
     * reorder the region's statements across rows, so no tensor may be both stored and loaded. */
    bool qualifies(const Block &body) {
        std::set<std::string> defined;
        if (!block(body, defined)) return false;
        for (const std::string &t : stored_)
            if (loaded_.count(t)) return false;
        return true;
    }
    const std::set<std::string> &touched() const { return touched_; }

private:
    bool block(const Block &body, std::set<std::string> &defined) {
        for (const Stmt &s : body)
            if (!stmt(*s, defined)) return false;
        return true;
    }

    bool stmt(const Node &n, std::set<std::string> &defined) {
        switch (n.kind) {
        case NodeKind::TileLoad: {
            const TileType &t = k_.values.at(n.dst);
            if (n.rank.defined()) {  // a cluster block's shared state: rows of whole float4s
                if (t.scope != Scope::Register || t.cols % 4) return false;
                loaded_.insert(n.src);
                break;
            }
            // Whole 16-byte rows from Neptune's own (256-byte aligned) workspaces only.
            if (t.scope != Scope::Register || !workspaces_.count(n.tensor) || !rows_aligned(n.base, n.row_stride, 4))
                return false;
            loaded_.insert(n.tensor);
            break;
        }
        case NodeKind::TileStore:
        case NodeKind::RowStore: stored_.insert(n.tensor); break;
        case NodeKind::RowLoad:
        case NodeKind::Fill:
        case NodeKind::TileMap:
        case NodeKind::RowMap: break;
        case NodeKind::CarriedLoop:
        case NodeKind::IfThen: return block(n.body, defined);
        default: return false;  // dots, conversions, reductions, synchronization: not a combine
        }
        if (n.kind == NodeKind::RowLoad) loaded_.insert(n.rank.defined() ? n.src : n.tensor);
        std::set<std::string> reads, writes;
        value_effects(k_, n, reads, writes);
        if (n.rank.defined()) reads.erase(n.src);  // a cluster block's shared state, not a register value
        for (const std::string &r : reads)
            if (!defined.count(r)) return false;  // live into the region: its layout is the partial's
        for (const std::set<std::string> *names : {&reads, &writes})
            for (const std::string &v : *names) {
                const TileType &t = k_.values.at(v);
                if (t.scope != Scope::Register ||
                    (t.layout != Layout::MmaAccumulator && t.layout != Layout::RowVector) || t.elem != DType::F32 ||
                    t.rows != k_.rows() || (t.layout == Layout::MmaAccumulator && t.cols % 4))
                    return false;
                touched_.insert(v);
            }
        for (const std::string &w : writes) defined.insert(w);
        return true;
    }

    const Kernel &k_;
    const std::set<std::string> &workspaces_;
    std::set<std::string> touched_, stored_, loaded_;
};

/** The register values `body` touches (outside a region being laid out). */
void touched_outside(const Kernel &k, const Block &body, const Node *region, std::set<std::string> &out) {
    for (const Stmt &s : body) {
        if (s.get() == region) continue;
        std::set<std::string> reads, writes;
        value_effects(k, *s, reads, writes);
        for (const std::string &c : s->carried) out.insert(c);
        out.insert(reads.begin(), reads.end());
        out.insert(writes.begin(), writes.end());
        touched_outside(k, s->body, region, out);
    }
}

Stmt renamed(const Stmt &s, const std::map<std::string, std::string> &names) {
    auto name = [&](const std::string &n) {
        auto it = names.find(n);
        return it == names.end() ? n : it->second;
    };
    std::map<std::string, Halide::Expr> vars;  // the renamed values, f32 all (Region checks it)
    for (const auto &[from, to] : names) vars[from] = HI::Variable::make(Halide::Float(32), to);
    auto expr = [&](const Halide::Expr &e) { return e.defined() ? HI::substitute(vars, e) : e; };
    return with(s, [&](Node &n) {
        n.dst = name(n.dst);
        n.src = name(n.src);
        n.value = expr(n.value);
        for (std::string &c : n.carried) c = name(c);
        for (Stmt &b : n.body) b = renamed(b, names);
    });
}

/** Rows of the combine's strips: a KV group of 4 query heads is one strip, and a strip's tiles stay
 * small enough in registers for two chunks' loads in flight. */
constexpr int kStripRows = 4;

TileType warp_rows_type(TileType t) {
    t.layout = t.layout == Layout::RowVector ? Layout::WarpRowVector : Layout::WarpRows;
    t.rows = kStripRows;
    return t;
}

/** Every name a kernel declares or binds, for fresh names. */
std::set<std::string> names_in_use(const Kernel &k) {
    std::set<std::string> names(k.int_params.begin(), k.int_params.end());
    names.insert(k.float_params.begin(), k.float_params.end());
    for (const ScalarDef &d : k.scalars) names.insert(d.name);
    for (const auto &[n, t] : k.values) names.insert(n);
    std::function<void(const Block &)> vars = [&](const Block &b) {
        for (const Stmt &s : b) {
            if (s->kind == NodeKind::CarriedLoop) names.insert(s->var);
            vars(s->body);
        }
    };
    vars(k.body);
    return names;
}

std::string fresh_name(std::set<std::string> &in_use, const std::string &base) {
    std::string n = base;
    for (int i = 2; in_use.count(n); ++i) n = base + std::to_string(i);
    in_use.insert(n);
    return n;
}

/** Statement `s` on the rows [first, first + kStripRows) of its tiles: slices start `first` rows
 * later and have `first` rows fewer, and a map's "row" is `first` more. */
Stmt strip_of(const Stmt &s, const Halide::Expr &first) {
    return with(s, [&](Node &n) {
        switch (n.kind) {
        case NodeKind::TileLoad:
        case NodeKind::TileStore:
        case NodeKind::RowLoad:
            if (n.rank.defined()) {  // a cluster load names its first row
                n.row = HI::simplify(n.row + first);
                n.valid_rows = HI::simplify(n.valid_rows - first);
                break;
            }
            n.base = HI::simplify(n.base + first * n.row_stride);
            n.valid_rows = HI::simplify(n.valid_rows - first);
            break;
        case NodeKind::RowStore:  // one f32 per row, contiguous
            n.base = HI::simplify(n.base + first);
            n.valid_rows = HI::simplify(n.valid_rows - first);
            break;
        case NodeKind::TileMap:
        case NodeKind::RowMap: n.value = HI::substitute("row", int_var("row") + first, n.value); break;
        default: break;
        }
        for (Stmt &b : n.body) b = strip_of(b, first);
    });
}

/** The most rows any slice of `body` has (their valid_rows, at most `rows`). */
Halide::Expr most_rows(const Block &body, int rows) {
    Halide::Expr most;
    std::function<void(const Block &)> walk = [&](const Block &b) {
        for (const Stmt &s : b) {
            const bool slice = s->kind == NodeKind::TileLoad || s->kind == NodeKind::TileStore ||
                               s->kind == NodeKind::RowLoad || s->kind == NodeKind::RowStore;
            if (slice)
                most = most.defined() && !HI::graph_equal(most, s->valid_rows) ? Halide::max(most, s->valid_rows)
                                                                               : s->valid_rows;
            walk(s->body);
        }
    };
    walk(body);
    return most.defined() ? Halide::min(most, rows) : Halide::Expr(rows);
}

/** The region as a loop over strips of kStripRows rows, skipping strips past every slice's rows. */
Block in_strips(const Kernel &k, const Block &region, std::set<std::string> &in_use) {
    const std::string strip = fresh_name(in_use, "strip");
    const Halide::Expr first = int_var(strip) * kStripRows;
    Block body;
    for (const Stmt &s : region) body.push_back(strip_of(s, first));
    const Halide::Expr strips = (most_rows(region, k.rows()) + (kStripRows - 1)) / kStripRows;
    return {make_loop(strip, 0, HI::simplify(strips), {}, body)};
}

Kernel lay_out(const Kernel &k, const std::set<std::string> &workspaces) {
    if (k.warps != 1) return k;  // warp-rows tiles are one warp's
    bool dots = false, arrivals = false;
    std::function<void(const Block &)> scan = [&](const Block &b) {
        for (const Stmt &s : b) {
            dots = dots || s->kind == NodeKind::TileDot;
            arrivals = arrivals || s->kind == NodeKind::LastArrival || s->kind == NodeKind::ClusterMerge;
            scan(s->body);
        }
    };
    scan(k.body);
    Kernel out = k;
    std::set<std::string> in_use = names_in_use(k);
    if (!dots && !arrivals) {  // the separate combine kernel: all of it
        Region r(k, workspaces);
        if (!r.qualifies(k.body)) return k;
        for (const std::string &v : r.touched()) out.values[v] = warp_rows_type(k.values.at(v));
        out.body = in_strips(k, k.body, in_use);
        return out;
    }
    // The folded combine: LastArrival or ClusterMerge bodies at the top level or under top-level conditions.
    std::function<bool(Block &)> visit = [&](Block &body) {
        bool changed = false;
        for (Stmt &s : body) {
            if (s->kind == NodeKind::IfThen) {
                Block b = s->body;
                if (visit(b)) {
                    s = with(s, [&](Node &n) { n.body = b; });
                    changed = true;
                }
                continue;
            }
            if (s->kind != NodeKind::LastArrival && s->kind != NodeKind::ClusterMerge) continue;
            Region r(k, workspaces);
            if (!r.qualifies(s->body)) continue;
            std::set<std::string> outside;
            touched_outside(k, k.body, s.get(), outside);
            std::map<std::string, std::string> names;
            for (const std::string &v : r.touched()) {
                const std::string name = outside.count(v) ? fresh_name(in_use, v + "_c") : v;
                if (name != v) names[v] = name;
                out.values[name] = warp_rows_type(k.values.at(v));
            }
            const Stmt renamed_arrival = renamed(s, names);
            const Block strips = in_strips(k, renamed_arrival->body, in_use);
            s = with(renamed_arrival, [&](Node &n) { n.body = strips; });
            changed = true;
        }
        return changed;
    };
    return visit(out.body) ? out : k;
}

}  // namespace

Program lay_out_combine(const Program &p) {
    std::set<std::string> workspaces;
    for (const Workspace &w : p.workspaces) workspaces.insert(w.name);
    Program out = p;
    for (Kernel &k : out.kernels) k = lay_out(k, workspaces);
    return out;
}

}  // namespace neptune::internal
