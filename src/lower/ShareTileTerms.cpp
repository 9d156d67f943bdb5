#include "lower/ShareTileTerms.h"

#include <map>
#include <set>
#include <vector>

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using namespace tir;

namespace {

std::set<std::string> names_in(const Expr &e) {
    class Names : public HI::IRGraphVisitor {
    public:
        std::set<std::string> out;
        using HI::IRGraphVisitor::visit;
        void visit(const HI::Variable *v) override { out.insert(v->name); }
    } names;
    e.accept(&names);
    return names.out;
}

/** What an earlier map still holds: its value with the current row vectors substituted. */
struct Def {
    Expr expanded;
    std::set<std::string> reads;
};

/** The row vectors' current values by name, for HI::substitute. */
std::map<std::string, Expr> row_values(const std::map<std::string, Def> &rows) {
    std::map<std::string, Expr> m;
    for (const auto &[n, d] : rows) m[n] = d.expanded;
    return m;
}

class Sharer {
public:
    explicit Sharer(const Kernel &k) : k_(k) {}

    Block block(const Block &in) {
        std::map<std::string, Def> tiles, rows;  // current maps by destination
        Block out;
        for (const Stmt &s : in) {
            Stmt t = s;
            if (!s->body.empty()) t = with(s, [&](Node &n) { n.body = block(n.body); });
            if (s->kind == NodeKind::TileMap && !s->valid_rows.defined() && !s->valid_cols.defined())
                t = share(s, tiles, rows);
            std::set<std::string> writes, reads;
            effects(*t, writes, reads, true);
            for (auto *defs : {&tiles, &rows})
                for (auto it = defs->begin(); it != defs->end();)
                    it = stale(it->first, it->second, writes) ? defs->erase(it) : std::next(it);
            if ((t->kind == NodeKind::TileMap || t->kind == NodeKind::RowMap) && !reads.count(t->dst) &&
                !t->valid_rows.defined() && !t->valid_cols.defined()) {
                Def d;
                d.expanded = HI::substitute(row_values(rows), t->value);
                d.reads = names_in(d.expanded);
                (t->kind == NodeKind::TileMap ? tiles : rows)[t->dst] = d;
            }
            out.push_back(t);
        }
        return out;
    }

private:
    static bool stale(const std::string &name, const Def &d, const std::set<std::string> &writes) {
        if (writes.count(name)) return true;
        for (const std::string &w : writes)
            if (d.reads.count(w)) return true;
        return false;
    }

    Stmt share(const Stmt &s, const std::map<std::string, Def> &tiles, const std::map<std::string, Def> &rows) {
        const TileType &type = k_.values.at(s->dst);
        std::vector<std::pair<std::string, Expr>> candidates;
        for (const auto &[n, d] : tiles)
            if (n != s->dst && k_.values.at(n).str() == type.str() && !d.expanded.as<HI::Variable>())
                candidates.emplace_back(n, d.expanded);
        if (candidates.empty()) return s;
        // Largest sub-expressions first: a node that matches is replaced whole.
        class Replace : public HI::IRMutator {
        public:
            const std::vector<std::pair<std::string, Expr>> *candidates;
            std::map<std::string, Expr> rows;
            using HI::IRMutator::mutate;
            Expr mutate(const Expr &e) override {
                if (!e.as<HI::Variable>() && !e.as<HI::FloatImm>() && !e.as<HI::IntImm>()) {
                    const Expr x = HI::substitute(rows, e);
                    for (const auto &[name, value] : *candidates)
                        if (HI::equal(x, value)) return HI::Variable::make(e.type(), name);
                }
                return HI::IRMutator::mutate(e);
            }
        } replace;
        replace.candidates = &candidates;
        replace.rows = row_values(rows);
        const Expr v = replace.mutate(s->value);
        if (v.same_as(s->value)) return s;
        return with(s, [&](Node &n) { n.value = v; });
    }

    const Kernel &k_;
};

}  // namespace

Kernel share_tile_terms(const Kernel &k) {
    Kernel out = k;
    out.body = Sharer(k).block(k.body);
    return out;
}

}  // namespace neptune::internal
