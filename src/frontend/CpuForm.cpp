#include "frontend/CpuForm.h"

#include <algorithm>
#include <limits>
#include <map>

#include "neptune/Error.h"

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Tuple;
using Halide::Var;

namespace {

std::vector<Expr> element(const Func &f, std::vector<Expr> args, size_t n) {
    std::vector<Expr> out;
    if (n == 1) {
        out.push_back(f(args));
    } else {
        for (size_t c = 0; c < n; c++) out.push_back(f(args)[int(c)]);
    }
    return out;
}

void define(Func &f, const std::vector<Expr> &args, const std::vector<Expr> &values) {
    if (values.size() == 1) {
        f(args) = values[0];
    } else {
        f(args) = Tuple(values);
    }
}

class Rewriter {
public:
    explicit Rewriter(const FusedPlan &plan) : plan_(plan), k_("nep_k"), p_("nep_p") {
        const Expr T = plan.tile;
        ntiles_ = Halide::max((plan.rextent + T - 1) / T, 1);
        if (plan.variant == Variant::SplitK) per_chunk_ = (ntiles_ + plan.chunks - 1) / plan.chunks;
    }

    void run() {
        for (const FusedStage &s : plan_.stages) build_stage(s);
    }

    const std::map<std::string, Func> &finals() const { return finals_; }

private:
    bool read_by_companions(const std::string &producer) const {
        // Only where the producer enters polynomially: under an exponential, a far-off extrapolated value
        // (early tiles of a sum) could overflow the rescale factor.
        bool read = false;
        for (const FusedStage &t : plan_.stages) {
            if (std::find(t.producers.begin(), t.producers.end(), producer) == t.producers.end()) continue;
            if (t.repair.kind != RepairKind::Taylor) return false;
            const Halide::Expr q = t.repair.coeff[0][0];
            if (q.defined() && HI::expr_uses_var(q, producer)) return false;
            read = true;
        }
        return read;
    }

    std::vector<Expr> pure_args(const FusedStage &s) const {
        std::vector<Expr> a;
        for (const std::string &n : s.args) a.push_back(Var(n));
        return a;
    }

    // The position index list of a stage's per-tile Funcs: args, k (and p for split-K).
    std::vector<Expr> at(std::vector<Expr> args, const Expr &k, const Expr &p = Expr()) const {
        args.push_back(k);
        if (plan_.variant == Variant::SplitK) args.push_back(p.defined() ? p : Expr(p_));
        return args;
    }

    // Guarded value of producer `name`, read by stage s at tile k (chunk p).
    Expr producer_at(const FusedStage &s, const std::string &name, const Expr &k, const Expr &p = Expr()) const {
        return partial_.at(name)(at(s.producer_args.at(name), k, p));
    }

    Expr producer_final(const FusedStage &s, const std::string &name) const {
        return combined_guard_.at(name)(s.producer_args.at(name));
    }

    // The repair of companion c: shift_c + sum_m coeff[c][m] * old_m, with producers bound.
    Expr repaired(const FusedStage &s, size_t c, const std::vector<Expr> &old, const std::map<std::string, Expr> &r_old,
                  const std::map<std::string, Expr> &r_new) const {
        std::map<std::string, Expr> bind;
        for (const std::string &p : s.producers) {
            bind[p] = r_old.at(p);
            bind[sym::Context::primed(p)] = r_new.at(p);
        }
        const Repair &rp = s.repair;
        Expr acc = rp.shift[c].defined() ? HI::substitute(bind, rp.shift[c]) : Expr();
        Expr empty = HI::const_true();  // every companion still the identity: nothing accumulated yet
        for (size_t m = 0; m < old.size(); m++) {
            empty = empty && old[m] == reducer_identity(s.reducer);
            if (!rp.coeff[c][m].defined()) continue;
            const Expr term = HI::is_const_one(rp.coeff[c][m]) ? old[m] : old[m] * HI::substitute(bind, rp.coeff[c][m]);
            acc = acc.defined() ? acc + term : term;
        }
        if (!acc.defined()) return Expr(0.0f);
        // h(identity) = identity for every derived repair; evaluating it instead could form 0 * inf when a
        // guarded producer (0 for an empty max) exceeds the new value by more than exp can represent.
        return s.repair.kind == RepairKind::None ? acc : Halide::select(empty, reducer_identity(s.reducer), acc);
    }

    void build_stage(const FusedStage &s) {
        const size_t n = s.repair.maps.size();
        const std::vector<Expr> args = pure_args(s);
        const Expr T = plan_.tile;
        const bool split = plan_.variant == Variant::SplitK;

        // 1. Tile partials: the reducer over one tile of positions, producers at that tile.
        Func tile(s.name + "_tile");
        RDom rj(0, plan_.tile, s.name + "_j");
        const Expr global_tile = split ? Expr(p_) * per_chunk_ + Expr(k_) : Expr(k_);
        const Expr pos = global_tile * T + rj.x;
        rj.where(pos < plan_.rextent);
        std::vector<Expr> ids(n, reducer_identity(s.reducer));
        define(tile, at(args, k_), ids);
        std::map<std::string, Expr> bind;
        // Clamped so bounds inference sees in-range reads; the predicate masks the clamped positions.
        bind[plan_.rvar] = plan_.rmin + Halide::clamp(pos, 0, Halide::max(plan_.rextent - 1, 0));
        for (const std::string &p : s.producers) bind[p] = producer_at(s, p, k_);
        std::vector<Expr> upd;
        const std::vector<Expr> cur = element(tile, at(args, k_), n);
        for (size_t c = 0; c < n; c++)
            upd.push_back(reducer_combine(s.reducer, cur[c], HI::substitute(bind, s.repair.maps[c])));
        define(tile, at(args, k_), upd);

        // 2. The carried state: first tile peeled, then repair-and-accumulate.
        Func state(s.name + "_state");
        define(state, at(args, k_), element(tile, at(args, k_), n));
        const Expr last = split ? per_chunk_ - 1 : ntiles_ - 1;
        RDom rk(1, last, s.name + "_k");
        std::map<std::string, Expr> r_old, r_new;
        for (const std::string &p : s.producers) {
            r_old[p] = producer_at(s, p, rk.x - 1);
            r_new[p] = producer_at(s, p, rk.x);
        }
        const std::vector<Expr> prev = element(state, at(args, rk.x - 1), n);
        const std::vector<Expr> here = element(tile, at(args, rk.x), n);
        std::vector<Expr> next;
        for (size_t c = 0; c < n; c++)
            next.push_back(reducer_combine(s.reducer, repaired(s, c, prev, r_old, r_new), here[c]));
        define(state, at(args, rk.x), next);

        // The value later stages read after tile k: the initial value folded in, guarded. A sum read by
        // a companion repair is extrapolated to the whole domain (sum * N / positions seen), e.g. a running
        // mean rather than a partial sum over N: the repair is exact for any value, and its companions
        // then expand around a value close to the final one, as Chan's update does (docs/design/fusion.md, multi-moment
        // states).
        Expr value_k = reducer_combine(s.reducer, s.init, element(state, at(args, k_), n)[0]);
        if (s.reducer == Reducer::Sum && read_by_companions(s.name)) {
            const Expr first = split ? Expr(p_) * per_chunk_ * T : Expr(0);
            const Expr seen = Halide::clamp(plan_.rextent - first, 0, (Expr(k_) + 1) * T);
            value_k = Halide::select(
                seen > 0, value_k * Halide::cast<float>(plan_.rextent) / Halide::cast<float>(Halide::max(seen, 1)),
                value_k);
        }
        Func partial(s.name + "_partial");
        partial(at(args, k_)) = guarded_producer(s.reducer, value_k);
        partial_[s.name] = partial;

        // 3. The stage's value over the whole domain: the last tile's state, or the combine of chunks.
        Expr value;
        if (!split) {
            value = element(state, at(args, last), n)[0];
        } else {
            Func comb(s.name + "_combined");
            define(comb, args, ids);
            RDom rp(0, plan_.chunks, s.name + "_chunk");
            std::map<std::string, Expr> c_old, c_new;
            for (const std::string &p : s.producers) {
                c_old[p] = producer_at(s, p, last, rp.x);
                c_new[p] = producer_final(s, p);
            }
            const std::vector<Expr> chunk = element(state, at(args, last, rp.x), n);
            const std::vector<Expr> acc = element(comb, args, n);
            std::vector<Expr> merged;
            for (size_t c = 0; c < n; c++)
                merged.push_back(reducer_combine(s.reducer, acc[c], repaired(s, c, chunk, c_old, c_new)));
            define(comb, args, merged);
            value = element(comb, args, n)[0];
            Func cg(s.name + "_combined_guarded");
            cg(args) = guarded_producer(s.reducer, reducer_combine(s.reducer, s.init, value));
            combined_guard_[s.name] = cg;
        }
        Func fused(s.name + "_fused");
        fused(args) = reducer_combine(s.reducer, s.init, value);
        finals_[s.name] = fused;
    }

    const FusedPlan &plan_;
    Var k_, p_;
    Expr ntiles_, per_chunk_;
    std::map<std::string, Func> partial_, combined_guard_, finals_;
};

}  // namespace

std::vector<Func> apply_cpu_form(const FusedPlan &plan, const std::vector<Func> &outputs) {
    Rewriter rw(plan);
    rw.run();
    const std::map<std::string, Func> &finals = rw.finals();
    // Every Function outside the chain that the outputs reach reads the fused values instead.
    std::map<std::string, HI::Function> reach;
    for (const Func &o : outputs) {
        reach.emplace(o.name(), o.function());
        for (auto &[n, fn] : HI::find_transitive_calls(o.function())) reach.emplace(n, fn);
    }
    for (auto &[n, fn] : reach) {
        if (finals.count(n)) continue;
        HI::Function f = fn;
        for (auto &[stage, fused] : finals) f.substitute_calls(plan.stage(stage).func.function(), fused.function());
    }
    std::vector<Func> result;
    for (const Func &o : outputs) {
        auto it = finals.find(o.name());
        result.push_back(it == finals.end() ? o : it->second);
    }
    return result;
}

}  // namespace neptune::internal
