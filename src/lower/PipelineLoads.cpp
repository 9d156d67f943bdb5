#include "lower/PipelineLoads.h"

namespace neptune::internal {

using namespace tir;

Kernel pipeline_loads(const Kernel &k, int stages) {
    if (k.producer_warps) return k;  // specialize_warps pipelined the TMA copies
    Kernel out = k;
    bool changed = false;
    for (Stmt &s : out.body) {
        if (s->kind != NodeKind::CarriedLoop) continue;
        Block body = s->body;
        for (Stmt &b : body) {
            if (b->kind != NodeKind::TileLoad || k.values.at(b->dst).scope != Scope::Shared) continue;
            b = with(b, [](Node &n) {
                n.copy = CopyKind::CpAsync;
                n.stage = 0;
            });
            changed = true;
        }
        s = with(s, [&](Node &n) { n.body = body; });
    }
    if (!changed) return k;
    out.pipeline_stages = stages;
    return out;
}

}  // namespace neptune::internal
