#include "neptune/Directives.h"

#include <mutex>
#include <set>

#include "api/FusedGroups.h"
#include "frontend/CpuForm.h"
#include "frontend/FusedPlan.h"
#include "neptune/Error.h"

namespace neptune {

struct FusedReduction::State {
    internal::FusionRequest request;
    internal::FusedPlan plan;
    bool lowered = false;
};

namespace {

// Directives are recorded here, as Halide records schedules on Functions, until lower_to_cpu.
std::mutex registry_mutex;
std::vector<std::shared_ptr<FusedReduction::State>> &registry() {
    static std::vector<std::shared_ptr<FusedReduction::State>> r;
    return r;
}

}  // namespace

FusedReduction::FusedReduction(std::shared_ptr<State> s) : state_(std::move(s)) {}

FusedReduction &FusedReduction::rolling_update(int tile) {
    state_->request.variant = internal::Variant::Rolling;
    state_->request.tile = tile;
    state_->plan = internal::build_fused_plan(state_->request);
    return *this;
}

FusedReduction &FusedReduction::split_k_update(int chunks, int tile) {
    state_->request.variant = internal::Variant::SplitK;
    state_->request.chunks = chunks;
    state_->request.tile = tile;
    state_->plan = internal::build_fused_plan(state_->request);
    return *this;
}

std::string FusedReduction::describe() const { return state_->plan.describe(); }

const internal::FusedPlan &FusedReduction::plan() const { return state_->plan; }

namespace {

// Validates at once (errors surface at the directive, as Halide's do) and records the group.
FusedReduction record(internal::FusionRequest req) {
    auto s = std::make_shared<FusedReduction::State>();
    s->plan = internal::build_fused_plan(req);
    s->request = std::move(req);
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry().push_back(s);
    return FusedReduction(s);
}

}  // namespace

FusedReduction fuse_reduction(const std::vector<Halide::Func> &targets, const std::vector<Halide::Func> &producers,
                              const Halide::RVar &rvar) {
    internal::FusionRequest req;
    req.targets = targets;
    req.producers = producers;
    req.rvar = rvar.name();
    return record(std::move(req));
}

FusedReduction fuse_reduction(const std::vector<Halide::Func> &targets, const Halide::RVar &rvar) {
    internal::FusionRequest req;
    req.targets = targets;
    req.discover = true;
    req.rvar = rvar.name();
    return record(std::move(req));
}

namespace internal {

std::vector<FusedGroup> claim_fused_groups(const std::vector<Halide::Func> &outputs) {
    std::set<std::string> reach;
    for (const Halide::Func &o : outputs) {
        reach.insert(o.name());
        for (auto &[n, fn] : Halide::Internal::find_transitive_calls(o.function())) reach.insert(n);
    }
    std::vector<FusedGroup> groups;
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (auto &s : registry()) {
        if (s->lowered || s->plan.stages.empty()) continue;
        bool used = false;
        for (const internal::FusedStage &st : s->plan.stages) used = used || reach.count(st.name) > 0;
        if (!used) continue;
        groups.push_back({s->request, s->plan});
        s->lowered = true;
    }
    return groups;
}

}  // namespace internal

std::vector<Halide::Func> lower_to_cpu(const std::vector<Halide::Func> &outputs) {
    std::vector<Halide::Func> result = outputs;
    for (const internal::FusedGroup &g : internal::claim_fused_groups(outputs))
        result = internal::apply_cpu_form(g.plan, result);
    return result;
}

}  // namespace neptune
