#include "tir/SharedLayout.h"

#include <algorithm>
#include <set>

namespace neptune::tir {

namespace {

// How a loop fills `tile` (Sync: no loop load of it, so one buffer).
CopyKind loop_copy(const Kernel &k, const std::string &tile) {
    for (const Stmt &s : k.body)
        if (s->kind == NodeKind::CarriedLoop)
            for (const Stmt &b : s->body)
                if (b->kind == NodeKind::TileLoad && b->dst == tile && b->copy != CopyKind::Sync) return b->copy;
    return CopyKind::Sync;
}

bool swizzled(const TileType &t) { return t.layout == Layout::SharedSwizzled128; }

/** The values top-level statements up to the kernel's last top-level loop touch: shared tiles
 * outside this set live only after the pipelined loops (the state a cluster merge publishes). */
std::set<std::string> touched_until_last_loop(const Kernel &k) {
    size_t last = 0;
    for (size_t i = 0; i < k.body.size(); i++)
        if (k.body[i]->kind == NodeKind::CarriedLoop) last = i + 1;
    std::set<std::string> touched;
    for (size_t i = 0; i < last; i++) effects(*k.body[i], touched, touched, true);
    return touched;
}

int align_up(int x, int a) { return (x + a - 1) / a * a; }

}  // namespace

int shared_tile_bytes(const TileType &t) {
    // Row-major 16-bit tiles pad rows by 16 bytes (ldmatrix without bank conflicts); f32 state tiles do not.
    return t.rows * (swizzled(t) || t.elem == DType::F32 ? t.cols : t.cols + 8) * dtype_bytes(t.elem);
}

SharedLayout shared_layout(const Kernel &k) {
    SharedLayout l;
    std::vector<std::string> once;
    for (const auto &[name, t] : k.values) {
        if (t.scope != Scope::Shared) continue;
        const bool piped = loop_copy(k, name) != CopyKind::Sync;
        if (!piped) {
            once.push_back(name);
            continue;
        }
        if (swizzled(t)) l.total = align_up(l.total, 1024);
        l.buffers[name] = k.pipeline_stages;
        l.offset[name] = l.total;
        l.total += k.pipeline_stages * shared_tile_bytes(t);
    }
    // Tiles used only after the loops take the ring's bytes, which are free by then (the writer's
    // barrier orders it): from the first buffer on, while they fit.
    const std::set<std::string> early = touched_until_last_loop(k);
    const int ring_end = l.total;
    int after = 0;
    for (auto it = once.begin(); it != once.end();) {
        const int bytes = shared_tile_bytes(k.values.at(*it));
        if (k.producer_warps || early.count(*it) || align_up(after, 16) + bytes > ring_end) {
            ++it;
            continue;
        }
        after = align_up(after, 16);
        l.buffers[*it] = 1;
        l.offset[*it] = after;
        after += bytes;
        it = once.erase(it);
    }
    for (const std::string &name : once) {
        const TileType &t = k.values.at(name);
        const int bytes = shared_tile_bytes(t);
        l.buffers[name] = 1;
        if (k.producer_warps) {  // TMA: every tile keeps its own buffer
            l.total = align_up(l.total, swizzled(t) ? 1024 : 16);
            l.offset[name] = l.total;
            l.total += bytes;
            continue;
        }
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
    if (k.producer_warps) {
        l.total = align_up(l.total, 8);
        for (const auto &[name, t] : k.values) {
            if (!swizzled(t)) continue;
            l.full_barrier[name] = l.total;
            l.total += 8 * l.buffers[name];
            if (l.buffers[name] > 1) {
                l.empty_barrier[name] = l.total;
                l.total += 8 * l.buffers[name];
            }
        }
        l.alignment_slack = 1024;
    } else {
        // cp.async and ldmatrix need only 128-byte aligned swizzled tiles for conflict-free access;
        // TMA's swizzle pattern follows address bits 7-9, so its tiles start at 1024 bytes.
        for (const auto &[name, t] : k.values)
            if (t.scope == Scope::Shared && swizzled(t)) l.alignment_slack = std::max(l.alignment_slack, 128);
        for (const auto &[name, t] : k.values) {
            // TMA in the compute warps' own loop (pipeline_loads): the buffers complete on mbarriers.
            if (t.scope != Scope::Shared || loop_copy(k, name) != CopyKind::Tma) continue;
            l.total = align_up(l.total, 8);
            l.full_barrier[name] = l.total;  // one per buffer: the copy's bytes complete it
            l.total += 8 * l.buffers[name];
            l.alignment_slack = 1024;
        }
    }
    return l;
}

}  // namespace neptune::tir
