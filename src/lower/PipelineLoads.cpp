#include "lower/PipelineLoads.h"

#include "neptune/Error.h"

namespace neptune::internal {

using namespace tir;

namespace {

// TMA writes the 128-byte-swizzled layout and addresses the tensor by (batch, head, row) of its view.
bool takes_tma(const Kernel &k, const Node &load) {
    const TileType &t = k.values.at(load.dst);
    return t.layout == Layout::SharedSwizzled128 && load.head.defined() && load.row.defined() &&
           k.views.count(load.tensor) && t.rows % 8 == 0 && t.rows <= 256;
}

}  // namespace

Kernel pipeline_loads(const Kernel &k, int stages, bool tma, int l2_promotion) {
    if (k.producer_warps) return k;  // specialize_warps pipelined the TMA copies
    Kernel out = k;
    bool changed = false;
    for (Stmt &s : out.body) {
        if (s->kind != NodeKind::CarriedLoop) continue;
        Block body = s->body;
        for (Stmt &b : body) {
            if (b->kind != NodeKind::TileLoad || k.values.at(b->dst).scope != Scope::Shared) continue;
            const bool by_tma = tma && takes_tma(k, *b);
            if (by_tma) add_tensor_map(out, b->tensor, k.values.at(b->dst).rows, l2_promotion);
            b = with(b, [&](Node &n) {
                n.copy = by_tma ? CopyKind::Tma : CopyKind::CpAsync;
                n.stage = 0;
            });
            changed = true;
        }
        s = with(s, [&](Node &n) { n.body = body; });
    }
    if (!changed) return k;
    if (stages < 2)
        throw CompileError(k.name + ": pipelined copies need at least 2 stages, not " + std::to_string(stages));
    out.pipeline_stages = stages;
    return out;
}

}  // namespace neptune::internal
