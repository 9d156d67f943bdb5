#include "lower/MulticastLoads.h"

#include <set>

namespace neptune::internal {

namespace HI = Halide::Internal;
using namespace tir;

namespace {

// Whether `e` reads block_x, directly or through the scalars in `by_block`.
bool by_block_x(const Halide::Expr &e, const std::set<std::string> &by_block) {
    class Reads : public HI::IRGraphVisitor {
    public:
        const std::set<std::string> *names;
        bool found = false;
        using HI::IRGraphVisitor::visit;
        void visit(const HI::Variable *op) override {
            found = found || op->name == "block_x" || names->count(op->name);
        }
    } r;
    r.names = &by_block;
    e.accept(&r);
    return r.found;
}

}  // namespace

Kernel multicast_loads(const Kernel &k, int cluster) {
    if (cluster < 2 || !k.producer_warps || k.cluster_x.defined()) return k;
    std::set<std::string> by_block;
    for (const ScalarDef &s : k.scalars)
        if (by_block_x(s.value, by_block)) by_block.insert(s.name);
    Kernel out = k;
    bool shared = false;
    for (Stmt &s : out.body) {
        if (s->kind != NodeKind::CarriedLoop) continue;
        Block body = s->body;
        for (Stmt &b : body) {
            if (b->kind != NodeKind::TileLoad || b->copy != CopyKind::Tma || !b->ring.defined()) continue;
            if (by_block_x(b->row, by_block) || by_block_x(b->head, by_block) || by_block_x(b->batch, by_block))
                continue;
            const int rows = k.values.at(b->dst).rows;
            if (rows % (8 * cluster)) continue;
            b = with(b, [&](Node &n) { n.multicast = cluster; });
            for (TensorMap &m : out.tensor_maps)
                if (m.tensor == b->tensor) m.box_rows = rows / cluster;
            shared = true;
        }
        s = with(s, [&](Node &n) { n.body = body; });
    }
    if (!shared) return k;
    out.cluster_x = Halide::Expr(cluster);
    out.grid_x = HI::simplify((k.grid_x + cluster - 1) / cluster * cluster);
    return out;
}

}  // namespace neptune::internal
