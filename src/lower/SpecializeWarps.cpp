#include "lower/SpecializeWarps.h"

#include <set>

#include "lower/SelectMma.h"
#include "neptune/Error.h"

namespace neptune::internal {

using namespace tir;

namespace {

bool reads(const Node &n, const std::string &tile) {
    return n.a == tile || n.b == tile || (n.kind != NodeKind::TileLoad && n.src == tile);
}

bool reads_anywhere(const Stmt &s, const std::string &tile) {
    if (reads(*s, tile)) return true;
    for (const Stmt &b : s->body)
        if (reads_anywhere(b, tile)) return true;
    return false;
}

}  // namespace

Kernel specialize_warps(const Kernel &k, int stages, int l2_promotion) {
    if (!uses_wgmma(k)) return k;
    std::set<std::string> swizzled;  // select_mma's layout for every shared tile a wgmma reads
    for (const auto &[name, t] : k.values)
        if (t.scope == Scope::Shared && t.layout == Layout::SharedSwizzled128) swizzled.insert(name);
    if (stages < 2)
        throw CompileError(k.name + ": TMA pipelining needs at least 2 stages, not " + std::to_string(stages));
    Kernel out = k;
    auto tma = [&](const Stmt &s, const Node *loop) {
        if (!s->head.defined())
            throw InternalError(k.name + ": the TMA load of " + s->dst + " has no (batch, head, row)");
        add_tensor_map(out, s->tensor, k.values.at(s->dst).rows, l2_promotion);
        return with(s, [&](Node &n) {
            n.copy = CopyKind::Tma;
            n.stage = loop ? 0 : -1;
            // One load per iteration: iteration j's is the ring's (j - begin)-th.
            if (loop) n.ring = int_var(loop->var) - loop->begin;
        });
    };
    Block top;
    for (const Stmt &s : out.body) {
        // A barrier after a load only made the load visible; each TMA load is waited on by itself.
        if (s->kind == NodeKind::Barrier && !top.empty() && top.back()->kind == NodeKind::TileLoad &&
            top.back()->copy == CopyKind::Tma)
            continue;
        top.push_back(s);
        if (s->kind == NodeKind::TileLoad && swizzled.count(s->dst)) top.back() = tma(s, nullptr);
    }
    out.body = top;
    for (Stmt &s : out.body) {
        if (s->kind != NodeKind::CarriedLoop) continue;
        Block body;
        std::vector<std::string> ring;
        for (const Stmt &b : s->body) {
            if (b->kind == NodeKind::TileLoad && swizzled.count(b->dst)) {
                body.push_back(tma(b, s.get()));
                ring.push_back(b->dst);
            } else {
                body.push_back(b);
            }
        }
        // A release after the last reader of each ring tile (every iteration reads it after its load).
        for (const std::string &t : ring) {
            size_t last = 0;
            for (size_t i = 0; i < body.size(); i++)
                if (reads_anywhere(body[i], t)) last = i;
            body.insert(body.begin() + long(last) + 1, make_release(t, int_var(s->var) - s->begin));
        }
        s = with(s, [&](Node &n) { n.body = body; });
    }
    out.pipeline_stages = stages;
    out.producer_warps = 4;
    // One block per SM: the producer keeps 24 registers, the compute warpgroups share the rest
    // (docs/design/gpu-families.md, warp specialization and register reallocation): 128 * 24 + 256 * 240 <= 65536 with
    // two, 128 * 32 + 384 * 160 with three.
    const int consumers = k.warps / 4;
    out.producer_registers = consumers >= 3 ? 32 : 24;
    out.consumer_registers = consumers >= 3 ? 160 : 240;
    out.min_blocks_per_sm = 1;
    return out;
}

}  // namespace neptune::internal
