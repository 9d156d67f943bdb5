#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "frontend/FusedPlan.h"
#include "frontend/Symbolic.h"
#include "neptune/Error.h"

namespace neptune::internal {

namespace HI = Halide::Internal;
using Halide::Expr;

const FusedStage &FusedPlan::stage(const std::string &name) const {
    for (const FusedStage &s : stages)
        if (s.name == name) return s;
    throw InternalError("no stage " + name + " in " + directive);
}

Expr repair_state(const FusedStage &s, const Expr &state, const std::map<std::string, Expr> &values) {
    if (s.producers.empty()) return state;
    const Expr coeff = s.repair.coeff.at(0).at(0), shift = s.repair.shift.at(0);
    Expr v = state;
    if (coeff.defined() && !HI::is_const_one(coeff)) v = v * HI::substitute(values, coeff);
    if (shift.defined()) v = v + HI::substitute(values, shift);
    return Halide::select(state == reducer_identity(s.reducer), state, v);
}

namespace {

std::string rdom_name(const std::string &rvar) {
    const size_t d = rvar.find('$');
    return d == std::string::npos ? rvar : rvar.substr(0, d);
}

std::string names(const std::vector<Halide::Func> &fs) {
    std::string s;
    for (const Halide::Func &f : fs) s += (s.empty() ? "" : ", ") + f.name();
    return s;
}

// The shape of a reduction as Halide stores it, before any judgement.
struct RawReduction {
    HI::Function fn;
    bool has_single_update = false;
    std::string rvar;  // the update's single RVar, or "" when it has several or none
    Expr rmin, rextent;
    int rvar_count = 0;
};

RawReduction inspect(const HI::Function &fn) {
    RawReduction r;
    r.fn = fn;
    if (fn.updates().size() != 1) return r;
    r.has_single_update = true;
    const auto &rvars = fn.update(0).schedule().rvars();
    r.rvar_count = int(rvars.size());
    if (rvars.size() == 1) {
        r.rvar = rvars[0].var;
        r.rmin = rvars[0].min;
        r.rextent = rvars[0].extent;
    }
    return r;
}

class PlanBuilder {
public:
    explicit PlanBuilder(const FusionRequest &req) : req_(req) {
        std::vector<std::string> p;
        for (const Halide::Func &f : req.producers) p.push_back(f.name());
        directive_ = "fuse_reduction(" + names(req.targets) + (req.discover ? "" : ", {" + names(req.producers) + "}") +
                     ", " + rdom_name(req.rvar) + ")";
    }

    FusedPlan build() {
        check_parameters();
        // 1. The named stages, each a reduction over the directive's RVar.
        std::vector<HI::Function> named;
        for (const Halide::Func &f : req_.targets) named.push_back(f.function());
        for (const Halide::Func &f : req_.producers) named.push_back(f.function());
        for (const HI::Function &fn : named) check_stage_shape(fn, true);
        for (const HI::Function &fn : named) members_.emplace(fn.name(), fn);
        // 2. Every reduction over the same RVar that a member reads joins the chain (discovery), or
        //    must already be named.
        std::vector<std::string> work;
        for (auto &[n, fn] : members_) work.push_back(n);
        while (!work.empty()) {
            const std::string n = work.back();
            work.pop_back();
            for (const HI::Function &p : axis_reductions_read_by(members_.at(n))) {
                if (members_.count(p.name())) continue;
                if (!req_.discover)
                    fail(n + " reads " + p.name() + ", a reduction over " + rdom_name(req_.rvar) +
                         " that is not in the chain; name it among the producers, or write fuse_reduction(" + n + ", " +
                         rdom_name(req_.rvar) + ") to find the chain");
                check_stage_shape(p, false);
                members_.emplace(p.name(), p);
                work.push_back(p.name());
            }
        }
        // 3. Each stage's map with producers as symbols, in dependence order; then facts and repairs.
        FusedPlan plan;
        plan.directive = directive_;
        plan.rvar = req_.rvar;
        plan.rmin = rmin_;
        plan.rextent = rextent_;
        plan.variant = req_.variant;
        plan.tile = req_.tile;
        plan.chunks = req_.chunks;
        std::set<std::string> targets;
        for (const Halide::Func &f : req_.targets) targets.insert(f.name());
        std::set<std::string> done;
        std::function<void(const std::string &)> visit = [&](const std::string &n) {
            if (done.count(n)) return;
            done.insert(n);
            FusedStage s = extract(members_.at(n));
            for (const std::string &p : s.producers) visit(p);
            s.is_target = targets.count(n) > 0;
            plan.stages.push_back(std::move(s));
        };
        for (auto &[n, fn] : members_) visit(n);
        // Re-order producers lists by the chain order, then derive the repairs.
        std::map<std::string, sym::Sign> facts;
        for (FusedStage &s : plan.stages) {
            std::sort(s.producers.begin(), s.producers.end(), [&](const std::string &a, const std::string &b) {
                return index_of(plan, a) < index_of(plan, b);
            });
            std::map<std::string, Reducer> reducers;
            for (const std::string &p : s.producers) reducers[p] = plan.stages[index_of(plan, p)].reducer;
            s.repair = derive_repair(s.name, s.reducer, s.map, s.producers, req_.rvar, facts, reducers);
            s.sign = stage_sign(s, facts);
            facts[s.name] = s.sign;
        }
        return plan;
    }

private:
    [[noreturn]] void fail(const std::string &why) const { throw CompileError(directive_ + ": " + why); }

    static size_t index_of(const FusedPlan &plan, const std::string &n) {
        for (size_t i = 0; i < plan.stages.size(); i++)
            if (plan.stages[i].name == n) return i;
        return plan.stages.size();
    }

    void check_parameters() const {
        if (req_.targets.empty()) fail("no target Func given");
        for (const Halide::Func &f : req_.targets)
            if (!f.defined()) fail("the target Func " + f.name() + " has no definition");
        if (req_.tile <= 0)
            fail("tile size " + std::to_string(req_.tile) +
                 " must be positive (a tile larger than the extent is fine)");
        if (req_.variant == Variant::SplitK && req_.chunks <= 0)
            fail("split_k_update needs a positive number of chunks, got " + std::to_string(req_.chunks));
    }

    void check_stage_shape(const HI::Function &fn, bool named) {
        const std::string n = fn.name();
        const RawReduction r = inspect(fn);
        if (!fn.has_pure_definition() || !r.has_single_update)
            fail(n + " is not a reduction with one update definition (it has " + std::to_string(fn.updates().size()) +
                 "); a fused stage is a Func with an initial value and one update over " + rdom_name(req_.rvar));
        if (fn.outputs() != 1) fail(n + " has a Tuple value; fused stages are single-valued");
        if (r.rvar_count != 1)
            fail(n + " reduces over " + std::to_string(r.rvar_count) +
                 " reduction variables; a fused stage reduces "
                 "over exactly one, the shared " +
                 rdom_name(req_.rvar));
        if (r.rvar != req_.rvar) {
            if (named)
                fail(n + " reduces over " + rdom_name(r.rvar) + ", not " + rdom_name(req_.rvar) +
                     "; a fused chain shares one reduction variable. Define " + n + " over " + rdom_name(req_.rvar) +
                     " or leave it out of the chain");
            throw InternalError("axis reduction with another RVar");
        }
        if (!rmin_.defined()) {
            rmin_ = r.rmin;
            rextent_ = r.rextent;
        } else if (!HI::can_prove(rmin_ == r.rmin && rextent_ == r.rextent)) {
            fail(n + " reduces over " + rdom_name(req_.rvar) +
                 " with another domain; the stages of a chain must "
                 "share one RDom");
        }
        if (!fn.output_types()[0].is_float())
            fail(n + " has type " + type_name(fn.output_types()[0]) + "; fused reductions are floating point");
    }

    static std::string type_name(Halide::Type t) {
        std::ostringstream os;
        os << t;
        return os.str();
    }

    bool is_axis_reduction(const HI::Function &fn) const {
        const RawReduction r = inspect(fn);
        return r.has_single_update && r.rvar_count == 1 && r.rvar == req_.rvar;
    }

    // Reductions over the shared RVar that an Expr reads, looking through pure Funcs.
    void collect(const Expr &e, std::vector<HI::Function> &out, std::set<std::string> &seen) const {
        for (auto &[n, fn] : find_calls(e)) {
            if (seen.count(n)) continue;
            seen.insert(n);
            if (fn.has_update_definition()) {
                if (is_axis_reduction(fn)) out.push_back(fn);
                continue;  // reductions over other domains are opaque values
            }
            if (fn.has_extern_definition()) continue;
            for (const Expr &v : fn.values()) collect(v, out, seen);
        }
    }

    static std::map<std::string, HI::Function> find_calls(const Expr &e) {
        class Calls : public HI::IRGraphVisitor {
        public:
            std::map<std::string, HI::Function> found;
            using HI::IRGraphVisitor::visit;
            void visit(const HI::Call *op) override {
                HI::IRGraphVisitor::visit(op);
                if (op->call_type == HI::Call::Halide && op->func.defined())
                    found.emplace(op->name, HI::Function(op->func));
            }
        } calls;
        e.accept(&calls);
        return calls.found;
    }

    std::vector<HI::Function> axis_reductions_read_by(const HI::Function &fn) const {
        std::vector<HI::Function> out;
        std::set<std::string> seen{fn.name()};
        for (const Expr &v : fn.update(0).values()) collect(v, out, seen);
        return out;
    }

    // Inline every pure Func whose definition (transitively) reads a chain member.
    bool reaches_chain(const HI::Function &fn, std::map<std::string, bool> &memo) const {
        auto it = memo.find(fn.name());
        if (it != memo.end()) return it->second;
        memo[fn.name()] = false;
        bool r = false;
        for (const Expr &v : fn.values())
            for (auto &[n, callee] : find_calls(v)) {
                if (members_.count(n))
                    r = true;
                else if (!callee.has_update_definition() && !callee.has_extern_definition() &&
                         reaches_chain(callee, memo))
                    r = true;
            }
        memo[fn.name()] = r;
        return r;
    }

    // Replaces calls to the pure Function fn by its definition (Halide's inline_function needs locked schedules).
    static Expr inline_pure(const Expr &e, const HI::Function &fn) {
        class Inline : public HI::IRMutator {
        public:
            explicit Inline(const HI::Function &f) : f(f) {}
            const HI::Function &f;
            using HI::IRMutator::visit;
            Expr visit(const HI::Call *op) override {
                if (op->call_type != HI::Call::Halide || op->name != f.name()) return HI::IRMutator::visit(op);
                std::map<std::string, Expr> bind;
                for (size_t i = 0; i < op->args.size(); i++) bind[f.args()[i]] = mutate(op->args[i]);
                return HI::substitute(bind, HI::substitute_in_all_lets(f.values()[op->value_index]));
            }
        } in(fn);
        return in.mutate(e);
    }

    Expr inline_into(Expr e) const {
        std::map<std::string, bool> memo;
        for (int round = 0; round < 64; round++) {
            bool changed = false;
            for (auto &[n, fn] : find_calls(e)) {
                if (members_.count(n) || fn.has_update_definition() || fn.has_extern_definition()) continue;
                if (!reaches_chain(fn, memo)) continue;
                e = inline_pure(e, fn);
                changed = true;
            }
            if (!changed) return e;
        }
        throw InternalError("inlining did not converge");
    }

    FusedStage extract(const HI::Function &fn) {
        FusedStage s;
        s.func = Halide::Func(fn);
        s.name = fn.name();
        s.args = fn.args();
        s.init = HI::substitute_in_all_lets(fn.values()[0]);
        const HI::Definition &u = fn.update(0);
        // The update must be t(args) = t(args) + g, max(t(args), g) or min(t(args), g), at the pure args.
        const std::vector<Expr> &uargs = u.args();
        for (size_t i = 0; i < uargs.size(); i++) {
            const HI::Variable *v = uargs[i].as<HI::Variable>();
            if (!v || v->name != s.args[i])
                fail(s.name + "'s update writes " + s.name + " at computed positions; a fused stage updates t(" +
                     join(s.args) + ") at its own pure variables");
        }
        const Expr value = HI::substitute_in_all_lets(u.values()[0]);  // Halide CSEs definitions into lets
        auto is_self = [&](const Expr &e) {
            const HI::Call *c = e.as<HI::Call>();
            if (!c || c->name != s.name || c->args.size() != s.args.size()) return false;
            for (size_t i = 0; i < c->args.size(); i++) {
                const HI::Variable *v = c->args[i].as<HI::Variable>();
                if (!v || v->name != s.args[i]) return false;
            }
            return true;
        };
        Expr g;
        if (const HI::Add *a = value.as<HI::Add>()) {
            s.reducer = Reducer::Sum;
            g = is_self(a->a) ? a->b : (is_self(a->b) ? a->a : Expr());
        } else if (const HI::Max *m = value.as<HI::Max>()) {
            s.reducer = Reducer::Max;
            g = is_self(m->a) ? m->b : (is_self(m->b) ? m->a : Expr());
        } else if (const HI::Min *m = value.as<HI::Min>()) {
            s.reducer = Reducer::Min;
            g = is_self(m->a) ? m->b : (is_self(m->b) ? m->a : Expr());
        }
        if (!g.defined() || reads_function(g, s.name))
            fail(s.name + "'s update " + sym::pretty(value) +
                 " is not t = t + g, max(t, g) or min(t, g): its reducer "
                 "is not one Neptune knows to be associative and commutative with an identity, so the reduction "
                 "cannot be split into tiles");
        if (HI::expr_uses_var(s.init, req_.rvar)) fail(s.name + "'s initial value reads " + rdom_name(req_.rvar));
        // Producers become symbols; their arguments must not vary along the reduction.
        g = inline_into(g);
        std::map<std::string, std::vector<Expr>> &pargs = s.producer_args;
        class Replace : public HI::IRMutator {
        public:
            Replace(const std::map<std::string, HI::Function> &m, std::map<std::string, std::vector<Expr>> &pa,
                    const std::string &self)
                : members(m), args(pa), self(self) {}
            const std::map<std::string, HI::Function> &members;
            std::map<std::string, std::vector<Expr>> &args;
            std::string self, error;
            using HI::IRMutator::visit;
            Expr visit(const HI::Call *op) override {
                if (op->call_type != HI::Call::Halide || !members.count(op->name) || op->name == self)
                    return HI::IRMutator::visit(op);
                auto it = args.find(op->name);
                if (it == args.end()) {
                    args[op->name] = op->args;
                } else {
                    for (size_t i = 0; i < op->args.size(); i++)
                        if (!HI::equal(it->second[i], op->args[i]))
                            error = op->name + " is read at two different positions";
                }
                return HI::Variable::make(Halide::Float(32), op->name);
            }
        } replace(members_, pargs, s.name);
        s.map = replace.mutate(g);
        if (!replace.error.empty()) fail(s.name + ": " + replace.error + "; a fused stage reads each producer once");
        for (auto &[p, a] : pargs) {
            for (const Expr &e : a)
                if (HI::expr_uses_var(e, req_.rvar))
                    fail(s.name + " reads " + p + " at a position that varies along " + rdom_name(req_.rvar) +
                         "; a stage may read only the final value of a producer");
            s.producers.push_back(p);
        }
        if (HI::expr_uses_var(s.map, s.name)) fail(s.name + " reads itself inside its map");
        return s;
    }

    static bool reads_function(const Expr &e, const std::string &name) { return find_calls(e).count(name) > 0; }

    static std::string join(const std::vector<std::string> &v) {
        std::string s;
        for (const std::string &x : v) s += (s.empty() ? "" : ", ") + x;
        return s;
    }

    static sym::Sign stage_sign(const FusedStage &s, const std::map<std::string, sym::Sign> &facts) {
        using sym::Sign;
        const Sign g = sym::sign_of(s.map, facts), i = sym::sign_of(s.init, facts);
        const bool g_nonneg = g == Sign::Positive || g == Sign::NonNegative || g == Sign::Zero;
        const bool i_nonneg = i == Sign::Positive || i == Sign::NonNegative || i == Sign::Zero;
        if (s.reducer == Reducer::Sum && g_nonneg && i_nonneg) return Sign::NonNegative;
        if (s.reducer == Reducer::Max && g_nonneg && i_nonneg) return Sign::NonNegative;
        return Sign::Unknown;
    }

    const FusionRequest &req_;
    std::string directive_;
    std::map<std::string, HI::Function> members_;
    Expr rmin_, rextent_;
};

}  // namespace

FusedPlan build_fused_plan(const FusionRequest &request) { return PlanBuilder(request).build(); }

std::string FusedPlan::describe() const {
    std::ostringstream os;
    os << directive << ": " << (variant == Variant::Rolling ? "rolling update" : "split-K update") << ", tiles of "
       << tile << (variant == Variant::SplitK ? ", " + std::to_string(chunks) + " chunks" : "") << "\n";
    for (const FusedStage &s : stages) {
        os << "  " << s.name << "(";
        for (size_t i = 0; i < s.args.size(); i++) os << (i ? ", " : "") << s.args[i];
        os << ") = " << reducer_name(s.reducer) << " over " << rdom_name(rvar) << " of " << sym::pretty(s.map);
        if (!s.producers.empty()) {
            os << "\n      repair (" << repair_kind_name(s.repair.kind) << "): h = " << sym::pretty(s.repair.h);
            for (size_t c = 1; c < s.repair.names.size(); c++)
                os << "\n      companion " << s.repair.names[c] << " = sum of " << sym::pretty(s.repair.maps[c]);
            os << "\n      proof: " << s.repair.proof;
        }
        os << "\n";
    }
    return os.str();
}

const Halide::Internal::Call *wrapped_buffer(const Halide::Internal::Function &f) {
    namespace HI = Halide::Internal;
    if (f.has_update_definition() || f.has_extern_definition() || f.outputs() != 1) return nullptr;
    const HI::Call *c = f.values()[0].as<HI::Call>();
    if (!c || c->call_type != HI::Call::Image || c->args.size() != f.args().size()) return nullptr;
    for (size_t i = 0; i < c->args.size(); i++) {
        const HI::Variable *v = c->args[i].as<HI::Variable>();
        if (!v || v->name != f.args()[i]) return nullptr;
    }
    return c;
}

}  // namespace neptune::internal
