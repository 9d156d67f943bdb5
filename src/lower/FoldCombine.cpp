#include "lower/FoldCombine.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "neptune/Error.h"

namespace neptune::internal {

using namespace tir;

namespace {

/** Whether a loop of `body` (at any depth) carries `name`. */
bool carried_by(const Block &body, const std::string &name) {
    for (const Stmt &s : body) {
        if (s->kind == NodeKind::CarriedLoop &&
            std::find(s->carried.begin(), s->carried.end(), name) != s->carried.end())
            return true;
        if (carried_by(s->body, name)) return true;
    }
    return false;
}

/** `body` with every load of a workspace in `shared_of` as a cluster load of chunk `chunk_var`'s
 * published tile; a load must address the rows `partial_row0` begins. */
Block cluster_loads(const Block &body, const std::map<std::string, std::string> &shared_of, const CombineFold &fold,
                    const std::function<void(const std::string &)> &fail) {
    Block out;
    for (const Stmt &s : body) {
        if ((s->kind == NodeKind::TileLoad || s->kind == NodeKind::RowLoad) && shared_of.count(s->tensor)) {
            const bool row = s->kind == NodeKind::RowLoad;
            const Halide::Expr first = row ? fold.partial_row0 : fold.partial_row0 * s->row_stride;
            if (!Halide::Internal::graph_equal(s->base, first))
                fail("the combine loads '" + s->tensor + "' at rows other than chunk " + fold.chunk_var + "'s own");
            const std::string &tile = shared_of.at(s->tensor);
            // Clamped into the cluster: a padded chunk loop (unroll_chunk_loops) reads nothing past it.
            const Halide::Expr rank = Halide::min(int_var(fold.chunk_var), fold.arrivals - 1);
            out.push_back(row ? make_cluster_row_load(s->dst, tile, rank, 0, s->valid_rows, 0.0f)
                              : make_cluster_load(s->dst, tile, rank, 0, s->valid_rows, s->valid_cols));
            if (row) out.back() = with(out.back(), [&](Node &n) { n.value = s->value; });  // the reducer's identity
            continue;
        }
        if (!s->tensor.empty() && shared_of.count(s->tensor))
            fail("the combine touches workspace '" + s->tensor + "' other than by loading chunk states");
        out.push_back(
            s->body.empty() ? s : with(s, [&](Node &n) { n.body = cluster_loads(n.body, shared_of, fold, fail); }));
    }
    return out;
}

}  // namespace

Program fold_combine(const Program &p, bool enabled, bool cluster) {
    if (!enabled || !p.fold || p.kernels.size() != 2) return p;
    const Kernel &partial = p.kernels[0], &combine = p.kernels[1];
    auto fail = [&](const std::string &why) -> void {
        throw InternalError("fold_combine: " + partial.name + " and " + combine.name + ": " + why);
    };
    // The folded kernel takes the partial's parameters: they must include the combine's (the partial
    // may take more, e.g. its tile order).
    for (const std::string &n : combine.int_params)
        if (std::find(partial.int_params.begin(), partial.int_params.end(), n) == partial.int_params.end())
            fail("the combine takes int parameter '" + n + "', the partial kernel does not");
    if (partial.float_params != combine.float_params) fail("the kernels take different float parameters");
    if (partial.warps != combine.warps || partial.producer_warps || combine.producer_warps)
        fail("the kernels need the same compute warps and no producer warps");
    const std::string counter = "ws_arrivals";
    Kernel k = partial;
    k.name = "neptune_split_k";
    for (const TensorParam &t : combine.tensors) {
        bool found = false;
        for (TensorParam &own : k.tensors)
            if (own.name == t.name) {
                if (own.elem != t.elem) fail("tensor '" + t.name + "' has two element types");
                own.output = own.output || t.output;
                found = true;
            }
        if (!found) k.tensors.push_back(t);
    }
    for (const ScalarDef &d : combine.scalars) {
        for (const ScalarDef &own : partial.scalars)
            if (own.name == d.name) fail("scalar '" + d.name + "' is defined by both kernels");
        const auto rebound = p.fold->combine_scalars.find(d.name);
        k.scalars.push_back({d.name, rebound == p.fold->combine_scalars.end() ? d.value : rebound->second});
    }
    for (const auto &[name, type] : combine.values) {
        const auto own = k.values.find(name);
        if (own == k.values.end())
            k.values[name] = type;
        else if (own->second.str() != type.str())
            fail("value '" + name + "' is " + own->second.str() + " in one kernel and " + type.str() + " in the other");
    }
    // One chunk per group: the partial state is already the group's, so the block writes the output
    // itself (the combine's epilogue, after its loop over chunks) and skips the workspace round trip
    // and the arrival. The partial's trailing workspace stores move under the other branch.
    std::set<std::string> workspaces;
    for (const Workspace &w : p.workspaces) workspaces.insert(w.name);
    Block own = partial.body, stores;
    while (!own.empty() && (own.back()->kind == NodeKind::TileStore || own.back()->kind == NodeKind::RowStore) &&
           workspaces.count(own.back()->tensor)) {
        stores.insert(stores.begin(), own.back());
        own.pop_back();
    }
    if (stores.empty()) fail("the partial kernel does not end by storing its state into the workspaces");
    size_t last_loop = combine.body.size();
    for (size_t i = 0; i < combine.body.size(); i++)
        if (combine.body[i]->kind == NodeKind::CarriedLoop) last_loop = i;
    if (last_loop == combine.body.size()) fail("the combine kernel has no loop over chunks");
    for (const std::string &c : combine.body[last_loop]->carried)
        if (!carried_by(partial.body, c)) fail("the combine's state '" + c + "' is not the partial's");
    const Block epilogue(combine.body.begin() + long(last_loop) + 1, combine.body.end());
    if (cluster) {
        if (k.warps != 1) fail("cluster merges are for one-warp partial kernels");
        // Every warp is done with the K/V ring before the state tiles (which may alias it) are written.
        Block publish = {make_barrier()};
        std::map<std::string, std::string> shared_of;  // workspace -> the block's shared copy of its state
        for (const Stmt &st : stores) {
            const TileType &t = k.values.at(st->src);
            const std::string tile = st->src + "_shared";
            if (k.values.count(tile)) fail("the name '" + tile + "' is taken");
            k.values[tile] = TileType{DType::F32, t.rows, t.cols, Scope::Shared, Layout::SharedRowMajor};
            // Only the group's rows: the merge reads no others (padding rows would cost the tail stores).
            publish.push_back(with(make_convert(tile, st->src), [&](Node &n) { n.valid_rows = st->valid_rows; }));
            shared_of[st->tensor] = tile;
        }
        publish.push_back(make_cluster_merge(cluster_loads(combine.body, shared_of, *p.fold, fail),
                                             "rank 0 merges the cluster's chunks from their shared memory"));
        k.body = own;
        k.body.insert(k.body.end(), publish.begin(), publish.end());
        k.cluster_x = k.grid_x;
        std::vector<TensorParam> tensors;
        for (const TensorParam &t : k.tensors)
            if (!shared_of.count(t.name)) tensors.push_back(t);
        k.tensors = tensors;
        Program out = p;
        out.kernels = {k};
        out.workspaces.clear();
        for (const Workspace &w : p.workspaces)
            if (!shared_of.count(w.name)) out.workspaces.push_back(w);
        out.fold.reset();
        return out;
    }
    k.tensors.push_back({counter, DType::F32, true});
    const Halide::Expr one = p.fold->arrivals == 1;
    stores.push_back(make_last_arrival(counter, p.fold->group, p.fold->arrivals, combine.body,
                                       "the group's last chunk combines the group"));
    k.body = own;
    k.body.push_back(make_if(one, epilogue, "one chunk: its state is the group's"));
    k.body.push_back(make_if(!one, stores, "several chunks: store the state, the last one combines"));
    Program out = p;
    out.kernels = {k};
    out.workspaces.push_back({counter, p.fold->groups, true});
    out.fold.reset();
    return out;
}

}  // namespace neptune::internal
