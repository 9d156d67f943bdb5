#include "lower/SelectMma.h"

#include <set>

#include "neptune/Error.h"

namespace neptune::internal {

using namespace tir;

namespace {

template <typename F>
void each_stmt(const Block &b, F f) {
    for (const Stmt &s : b) {
        f(s);
        each_stmt(s->body, f);
    }
}

// Shared tiles that are only staging for a register A operand: a -> the shared tile it came from.
std::map<std::string, std::string> staged_operands(const Kernel &k) {
    std::map<std::string, std::string> from;
    each_stmt(k.body, [&](const Stmt &s) {
        if (s->kind == NodeKind::Convert && k.values.at(s->src).scope == Scope::Shared) from[s->dst] = s->src;
    });
    return from;
}

Block rewrite(const Block &in, const std::map<std::string, std::string> &staged) {
    Block out;
    for (size_t i = 0; i < in.size(); i++) {
        const Stmt &s = in[i];
        if (s->kind == NodeKind::Convert && staged.count(s->dst)) continue;
        const bool fused_fill = s->kind == NodeKind::Fill && i + 1 < in.size() &&
                                in[i + 1]->kind == NodeKind::TileDot && in[i + 1]->dst == s->dst &&
                                Halide::Internal::is_const_zero(s->value);
        if (fused_fill) continue;
        if (s->kind == NodeKind::TileDot) {
            const bool zero = i > 0 && in[i - 1]->kind == NodeKind::Fill && in[i - 1]->dst == s->dst &&
                              Halide::Internal::is_const_zero(in[i - 1]->value);
            out.push_back(with(s, [&](Node &n) {
                n.mma = MmaKind::Wgmma;
                if (zero) n.accumulate = false;
                auto it = staged.find(n.a);
                if (it != staged.end()) n.a = it->second;
            }));
            continue;
        }
        if (!s->body.empty()) {
            Block body = rewrite(s->body, staged);
            out.push_back(with(s, [&](Node &n) { n.body = body; }));
            continue;
        }
        out.push_back(s);
    }
    return out;
}

}  // namespace

bool wgmma_fits(const Kernel &k, std::string *why) {
    std::string reason;
    auto check = [&](bool ok, const std::string &r) {
        if (!ok && reason.empty()) reason = r;
    };
    check(k.warps % 4 == 0, std::to_string(k.warps) + " compute warps are not whole warpgroups");
    each_stmt(k.body, [&](const Stmt &s) {
        if (s->kind != NodeKind::TileDot) return;
        const TileType &acc = k.values.at(s->dst), &b = k.values.at(s->b);
        check(acc.cols % 16 == 0 && acc.cols <= 256,
              "a dot's N of " + std::to_string(acc.cols) + " is not a multiple of 16 up to 256");
        check(b.cols % 64 == 0, "shared tile " + s->b + " has " + std::to_string(b.cols) +
                                    " columns, not a multiple of the swizzle's 64");
        check(dtype_bytes(b.elem) == 2, "wgmma here takes 16-bit operands");
    });
    for (const auto &[from_a, shared] : staged_operands(k))
        check(k.values.at(shared).cols % 64 == 0, "shared tile " + shared + " has " +
                                                      std::to_string(k.values.at(shared).cols) +
                                                      " columns, not a multiple of 64");
    if (why) *why = reason;
    return reason.empty();
}

bool uses_wgmma(const Kernel &k) {
    bool wgmma = false;
    each_stmt(k.body,
              [&](const Stmt &s) { wgmma = wgmma || (s->kind == NodeKind::TileDot && s->mma == MmaKind::Wgmma); });
    return wgmma;
}

Kernel select_mma(const Kernel &k, bool wgmma) {
    bool dots = false;
    each_stmt(k.body, [&](const Stmt &s) { dots = dots || s->kind == NodeKind::TileDot; });
    if (!wgmma || !dots) return k;
    std::string why;
    if (!wgmma_fits(k, &why)) throw CompileError(k.name + ": wgmma cannot run this kernel: " + why);
    const std::map<std::string, std::string> staged = staged_operands(k);
    Kernel out = k;
    out.body = rewrite(k.body, staged);
    for (const auto &[a, shared] : staged) out.values.erase(a);
    each_stmt(out.body, [&](const Stmt &s) {
        if (s->kind != NodeKind::TileDot) return;
        for (const std::string &operand : {s->a, s->b}) {
            TileType &t = out.values.at(operand);
            if (t.scope == Scope::Shared) t.layout = Layout::SharedSwizzled128;
        }
    });
    return out;
}

}  // namespace neptune::internal
