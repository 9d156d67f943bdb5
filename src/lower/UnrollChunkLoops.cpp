#include "lower/UnrollChunkLoops.h"

#include <algorithm>
#include <set>

namespace neptune::internal {

using namespace tir;
namespace HI = Halide::Internal;

namespace {

constexpr int kRegisterBudget = 128;  // registers per lane the in-flight loads of U iterations may take
constexpr int kRowLoadsFactor = 4;  // loops of row-vector loads only (a register each): U times this
constexpr int kMostInFlight = 16;  // ... up to this many chunks

/** Registers per lane of a register tile: warp-rows tiles are per warp, mma fragments 16 rows per warp. */
int lane_registers(const Kernel &k, const TileType &t) {
    const int lanes = 32 * (is_warp_rows(t) ? 1 : std::max(k.warps, 1));
    return std::max(1, t.rows * t.cols / lanes);
}

bool is_load(const Stmt &s) { return s->kind == NodeKind::TileLoad || s->kind == NodeKind::RowLoad; }

/** The unroll factor of a plain loop over global loads (0: not such a loop). */
int factor_of(const Kernel &k, const Node &loop, int factor) {
    int registers = 0;
    bool loads = false;
    for (const Stmt &b : loop.body) switch (b->kind) {
        case NodeKind::TileLoad: {
            const TileType &t = k.values.at(b->dst);
            if (t.scope == Scope::Shared) return 0;
            registers += lane_registers(k, t);
            loads = true;
            break;
        }
        case NodeKind::RowLoad: loads = true; break;
        case NodeKind::CarriedLoop:
        case NodeKind::IfThen:
        case NodeKind::Barrier:
        case NodeKind::Release:
        case NodeKind::DotWait:
        case NodeKind::WarpgroupTurn:
        case NodeKind::LastArrival:
        case NodeKind::ClusterMerge:
        case NodeKind::TileDot: return 0;
        default: break;
        }
    if (!loads) return 0;
    if (!registers) return std::min(factor * kRowLoadsFactor, std::max(factor, kMostInFlight));
    return std::max(1, std::min(factor, kRegisterBudget / registers));
}

/** The loop padded to a multiple of u iterations, as the header says; with a plain unroll instead
 * unless its body is loads, then maps. */
Stmt padded(const Stmt &loop, int u) {
    const auto plain = [&] { return with(loop, [u](Node &n) { n.unroll = u; }); };
    size_t lead = 0;
    while (lead < loop->body.size() && is_load(loop->body[lead])) lead++;
    for (size_t i = lead; i < loop->body.size(); i++)
        if (loop->body[i]->kind != NodeKind::TileMap && loop->body[i]->kind != NodeKind::RowMap) return plain();
    const Halide::Expr var = int_var(loop->var);
    const Halide::Expr in_range = var < loop->end;
    const std::set<std::string> carried(loop->carried.begin(), loop->carried.end());
    Block body;
    for (size_t i = 0; i < loop->body.size(); i++) {
        const Stmt &s = loop->body[i];
        if (i < lead) {
            body.push_back(with(s, [&](Node &n) { n.valid_rows = Halide::select(in_range, n.valid_rows, 0); }));
        } else if (carried.count(s->dst)) {
            // A select, not a condition around the merge: the body stays one straight line, so the
            // compiler issues every unrolled iteration's loads before the first merge waits.
            const Halide::Expr old = HI::Variable::make(Halide::Float(32), s->dst);
            body.push_back(with(s, [&](Node &n) { n.value = Halide::select(in_range, n.value, old); }));
        } else {
            body.push_back(s);
        }
    }
    const Halide::Expr trips = (loop->end - loop->begin + (u - 1)) / u;
    return with(loop, [&](Node &n) {
        n.end = HI::simplify(n.begin + trips * u);
        n.body = body;
        n.unroll = u;
    });
}

Block unrolled(const Kernel &k, const Block &b, int factor) {
    Block out;
    for (const Stmt &s : b) {
        const int u = s->kind == NodeKind::CarriedLoop ? factor_of(k, *s, factor) : 0;
        if (u > 1)
            out.push_back(padded(s, u));
        else if (u == 1 || s->body.empty())  // a loop over loads holds no loop to look into
            out.push_back(s);
        else
            out.push_back(with(s, [&](Node &n) { n.body = unrolled(k, n.body, factor); }));
    }
    return out;
}

}  // namespace

Program unroll_chunk_loops(const Program &p, int factor) {
    if (factor <= 1) return p;
    Program out = p;
    for (Kernel &k : out.kernels) k.body = unrolled(k, k.body, factor);
    return out;
}

}  // namespace neptune::internal
