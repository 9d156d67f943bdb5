#include "extern/IsolateGroup.h"

#include <set>

#include "neptune/Error.h"

namespace neptune::internal {

namespace HI = Halide::Internal;

namespace {

std::string buffer_name(const HI::Call *image) {
    return image->param.defined() ? image->param.name() : image->image.name();
}

std::vector<Halide::Expr> buffer_extents(const HI::Call *image) {
    std::vector<Halide::Expr> e;
    for (size_t d = 0; d < image->args.size(); d++) {
        if (image->param.defined()) {
            e.push_back(HI::Variable::make(Halide::Int(32), image->param.name() + ".extent." + std::to_string(d),
                                           image->param));
        } else {
            e.push_back(Halide::Expr(image->image.dim(int(d)).extent()));
        }
    }
    return e;
}

// A Func input defined pointwise from a buffer of its shape, f(x, y) = g(buf(x, y), ...): the
// buffer's extents are the Func's.
const HI::Call *pointwise_source(const HI::Function &f) {
    if (f.has_update_definition() || f.has_extern_definition()) return nullptr;
    class Find : public HI::IRGraphVisitor {
    public:
        explicit Find(const HI::Function &f) : f_(f) {}
        const HI::Call *found = nullptr;

    private:
        using HI::IRGraphVisitor::visit;
        void visit(const HI::Call *c) override {
            HI::IRGraphVisitor::visit(c);
            if (found || c->args.size() != f_.args().size()) return;
            const HI::Call *image = c;
            if (c->call_type == HI::Call::Halide) image = wrapped_buffer(HI::Function(c->func));
            if (!image || image->call_type != HI::Call::Image) return;
            for (size_t i = 0; i < c->args.size(); i++) {
                const HI::Variable *v = c->args[i].as<HI::Variable>();
                if (!v || v->name != f_.args()[i]) return;
            }
            found = image;
        }
        const HI::Function &f_;
    } find(f);
    for (const Halide::Expr &v : f.values()) v.accept(&find);
    return find.found;
}

// A user's LoopLevel may only be inspected locked, and locking it would freeze it: inspect a copy.
bool inlined(const HI::Function &f) {
    Halide::LoopLevel l = Halide::LoopLevel::inlined();
    l.set(f.schedule().compute_level());
    return l.lock().is_inlined();
}

class CollectInputs : public HI::IRGraphVisitor {
public:
    CollectInputs(const std::set<std::string> &stages, const std::string &directive)
        : stages_(stages), directive_(directive) {}

    void walk(const HI::Function &f) {
        if (!seen_.insert(f.name()).second) return;
        f.accept(this);
    }

    std::map<std::string, GroupInput> inputs;
    std::map<std::string, Halide::Parameter> placeholders;  // Func inputs: the buffer that stands for each
    std::map<std::string, Halide::Expr> renamed_extents;  // a pointwise source's extents -> the placeholder's

private:
    using HI::IRGraphVisitor::visit;
    void visit(const HI::Call *c) override {
        HI::IRGraphVisitor::visit(c);
        if (c->call_type == HI::Call::Image) {
            add_buffer(c);
        } else if (c->call_type == HI::Call::Halide) {
            const HI::Function g(c->func);
            const bool own_stage = g.has_extern_definition() || !inlined(g);
            if (stages_.count(g.name()) || !own_stage) {
                if (const HI::Call *b = wrapped_buffer(g)) {
                    add_buffer(b);
                } else {
                    walk(g);
                }
            } else {
                add_func(g);
            }
        }
    }

    void add_buffer(const HI::Call *c) {
        if (inputs.count(c->name)) return;
        GroupInput in;
        in.name = c->name;
        in.arg = c->param.defined() ? Halide::ExternFuncArgument(c->param) : Halide::ExternFuncArgument(c->image);
        in.type = c->type;
        in.dimensions = int(c->args.size());
        in.extents = buffer_extents(c);
        inputs[c->name] = in;
    }

    void add_func(const HI::Function &g) {
        if (inputs.count(g.name())) return;
        if (g.outputs() != 1)
            throw CompileError(directive_ + ": the fused group reads " + g.name() +
                               ", a Tuple-valued Func; an extern stage's inputs are single-valued");
        GroupInput in;
        in.name = g.name();
        in.arg = Halide::ExternFuncArgument(g.get_contents());
        in.type = g.output_types()[0];
        in.dimensions = g.dimensions();
        in.is_func = true;
        const Halide::Parameter p(in.type, true, in.dimensions, g.name());
        if (const HI::Call *src = pointwise_source(g)) {
            in.extents = buffer_extents(src);
            // In the copy, the group reads the source's extents as the placeholder's: the tile
            // lowering knows the extents of the tensors it reads, not of a buffer behind a Func.
            for (int d = 0; d < in.dimensions; d++)
                for (const char *field : {".extent.", ".min."})
                    renamed_extents[buffer_name(src) + field + std::to_string(d)] =
                        HI::Variable::make(Halide::Int(32), g.name() + field + std::to_string(d), p);
        }
        inputs[g.name()] = in;
        placeholders.emplace(g.name(), p);
    }

    const std::set<std::string> &stages_;
    const std::string &directive_;
    std::set<std::string> seen_;
};

// In the copies: calls to a Func input read its placeholder buffer instead.
class ReadPlaceholders : public HI::IRMutator {
public:
    ReadPlaceholders(const std::map<std::string, Halide::Parameter> &p,
                     const std::map<std::string, Halide::Expr> &extents)
        : p_(p), extents_(extents) {}

private:
    using HI::IRMutator::visit;
    Halide::Expr visit(const HI::Variable *v) override {
        auto it = extents_.find(v->name);
        return it == extents_.end() ? Halide::Expr(v) : it->second;
    }
    Halide::Expr visit(const HI::Call *c) override {
        auto it = p_.find(c->name);
        if (c->call_type != HI::Call::Halide || it == p_.end()) return HI::IRMutator::visit(c);
        std::vector<Halide::Expr> args;
        for (const Halide::Expr &a : c->args) args.push_back(mutate(a));
        return HI::Call::make(c->type, c->name, args, HI::Call::Image, HI::FunctionPtr(), 0, Halide::Buffer<>(),
                              it->second);
    }
    const std::map<std::string, Halide::Parameter> &p_;
    const std::map<std::string, Halide::Expr> &extents_;
};

}  // namespace

// The buffer extents (and mins) a set of Functions reads, as Variable names ("q.extent.2").
class FindExtents : public HI::IRGraphVisitor {
public:
    std::set<std::string> names;

private:
    using HI::IRGraphVisitor::visit;
    void visit(const HI::Variable *v) override {
        if (v->name.find(".extent.") != std::string::npos || v->name.find(".min.") != std::string::npos)
            names.insert(v->name);
    }
};

IsolatedGroup isolate_group(const FusedGroup &g, const std::vector<Halide::Func> &outputs,
                            const std::map<std::string, Halide::Expr> &extents) {
    std::set<std::string> stages;
    for (const FusedStage &s : g.plan.stages) stages.insert(s.name);
    CollectInputs collect(stages, g.plan.directive);
    std::map<std::string, HI::Function> env;
    std::vector<HI::Function> output_functions;
    for (const Halide::Func &output : outputs) {
        collect.walk(output.function());
        for (auto &[n, fn] : HI::find_transitive_calls(output.function())) env.emplace(n, fn);
        env.emplace(output.name(), output.function());
        output_functions.push_back(output.function());
    }
    auto [outs, copies] = HI::deep_copy(output_functions, env);
    // A source buffer the group also reads directly keeps its own extents.
    for (auto &[name, in] : collect.inputs)
        if (!in.is_func)
            for (auto it = collect.renamed_extents.begin(); it != collect.renamed_extents.end();)
                it = it->first.rfind(name + ".", 0) == 0 ? collect.renamed_extents.erase(it) : std::next(it);
    // A user's extent that is a buffer's extent names the kernels' parameter in the copy.
    for (auto &[param, e] : extents)
        if (const HI::Variable *v = e.as<HI::Variable>())
            collect.renamed_extents[v->name] = HI::Variable::make(Halide::Int(32), param);
    ReadPlaceholders read(collect.placeholders, collect.renamed_extents);
    FindExtents find;
    for (auto &[name, fn] : copies) {
        if (collect.placeholders.count(name)) continue;
        fn.mutate(&read);
        // Values and arguments only: reduction domains' bounds (the head dim's RDom) do not reach the
        // kernels, which are compiled for their head dims.
        std::vector<HI::Definition> defs = fn.updates();
        if (fn.has_pure_definition()) defs.push_back(fn.definition());
        for (const HI::Definition &d : defs) {
            for (const Halide::Expr &e : d.values()) e.accept(&find);
            for (const Halide::Expr &e : d.args()) e.accept(&find);
        }
    }
    // What is left must be an extent of a tensor the kernels read.
    for (const std::string &n : find.names) {
        const std::string buffer = n.substr(0, n.find('.'));
        if (!collect.inputs.count(buffer))
            throw CompileError(g.plan.directive + ": the group reads " + n + ", an extent of " + buffer +
                               ", a buffer the group does not read; give the extent it stands for (batch, q_heads, "
                               "kv_heads, seq_q, seq_kv) in ExternOptions::extents");
    }

    IsolatedGroup iso;
    for (const HI::Function &o : outs) iso.outputs.push_back(Halide::Func(o));
    iso.inputs = collect.inputs;
    iso.group.request = g.request;
    auto copy_of = [&](const Halide::Func &f) {
        auto it = copies.find(f.name());
        if (it == copies.end()) throw InternalError("isolate_group: no copy of " + f.name());
        return Halide::Func(it->second);
    };
    for (Halide::Func &t : iso.group.request.targets) t = copy_of(t);
    for (Halide::Func &p : iso.group.request.producers) p = copy_of(p);
    iso.group.plan = build_fused_plan(iso.group.request);
    return iso;
}

}  // namespace neptune::internal
