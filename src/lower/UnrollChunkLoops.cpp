#include "lower/UnrollChunkLoops.h"

#include <algorithm>

namespace neptune::internal {

using namespace tir;

Kernel unroll_chunk_loops(const Kernel &k, int factor) {
    if (factor <= 1) return k;
    Kernel out = k;
    bool changed = false;
    for (Stmt &s : out.body) {
        if (s->kind != NodeKind::CarriedLoop) continue;
        bool loads = false, tile_loads = false, plain = true;
        for (const Stmt &b : s->body) switch (b->kind) {
            case NodeKind::TileLoad:
                if (k.values.at(b->dst).scope == Scope::Shared) plain = false;
                loads = tile_loads = true;
                break;
            case NodeKind::RowLoad: loads = true; break;
            case NodeKind::CarriedLoop:
            case NodeKind::IfThen:
            case NodeKind::Barrier:
            case NodeKind::Release:
            case NodeKind::DotWait:
            case NodeKind::WarpgroupTurn:
            case NodeKind::TileDot: plain = false; break;
            default: break;
            }
        if (!plain || !loads) continue;
        const int f = tile_loads ? std::min(factor, 2) : factor;
        s = with(s, [f](Node &n) { n.unroll = f; });
        changed = true;
    }
    return changed ? out : k;
}

}  // namespace neptune::internal
