#include "lower/PlanSharedMemory.h"

#include "neptune/Error.h"

namespace neptune::internal {

using namespace tir;

namespace {

constexpr int max_shared_bytes = 227 * 1024;

bool loaded_in_loop(const Kernel &k, const std::string &tile) {
    for (const Stmt &s : k.body)
        if (s->kind == NodeKind::CarriedLoop)
            for (const Stmt &b : s->body)
                if (b->kind == NodeKind::TileLoad && b->dst == tile && b->copy == CopyKind::CpAsync) return true;
    return false;
}

}  // namespace

int shared_tile_bytes(const TileType &t) { return t.rows * (t.cols + 8) * dtype_bytes(t.elem); }

SharedLayout shared_layout(const Kernel &k) {
    SharedLayout l;
    std::vector<std::string> once;
    for (const auto &[name, t] : k.values) {
        if (t.scope != Scope::Shared) continue;
        const bool piped = loaded_in_loop(k, name);
        if (!piped) {
            once.push_back(name);
            continue;
        }
        l.buffers[name] = k.pipeline_stages;
        l.offset[name] = l.total;
        l.total += k.pipeline_stages * shared_tile_bytes(t);
    }
    for (const std::string &name : once) {
        const int bytes = shared_tile_bytes(k.values.at(name));
        l.buffers[name] = 1;
        // Alias the last stage of a pipelined tile at least this large.
        bool placed = false;
        for (const auto &[other, off] : l.offset) {
            if (l.buffers[other] < 2 || shared_tile_bytes(k.values.at(other)) < bytes) continue;
            l.offset[name] = off + (l.buffers[other] - 1) * shared_tile_bytes(k.values.at(other));
            placed = true;
            break;
        }
        if (!placed) {
            l.offset[name] = l.total;
            l.total += bytes;
        }
    }
    return l;
}

Kernel plan_shared_memory(const Kernel &k) {
    Kernel out = k;
    out.shared_bytes = shared_layout(k).total;
    if (out.shared_bytes > max_shared_bytes)
        throw CompileError(k.name + " needs " + std::to_string(out.shared_bytes) + " bytes of shared memory, more than the " +
                           std::to_string(max_shared_bytes) + " a block may use; use smaller tiles or fewer stages");
    return out;
}

}  // namespace neptune::internal
