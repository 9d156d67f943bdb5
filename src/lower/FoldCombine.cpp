#include "lower/FoldCombine.h"

#include "neptune/Error.h"

namespace neptune::internal {

using namespace tir;

Program fold_combine(const Program &p, bool enabled) {
    if (!enabled || !p.fold || p.kernels.size() != 2) return p;
    const Kernel &partial = p.kernels[0], &combine = p.kernels[1];
    auto fail = [&](const std::string &why) -> void {
        throw InternalError("fold_combine: " + partial.name + " and " + combine.name + ": " + why);
    };
    if (partial.int_params != combine.int_params || partial.float_params != combine.float_params)
        fail("the kernels take different scalar parameters");
    if (partial.warps != combine.warps || partial.producer_warps || combine.producer_warps)
        fail("the kernels need the same compute warps and no producer warps");
    const std::string counter = "ws_arrivals";
    Kernel k = partial;
    k.name = "neptune_split_k";
    for (const TensorParam &t : combine.tensors) {
        bool found = false;
        for (TensorParam &own : k.tensors)
            if (own.name == t.name) {
                if (own.elem != t.elem) fail("tensor '" + t.name + "' has two element types");
                own.output = own.output || t.output;
                found = true;
            }
        if (!found) k.tensors.push_back(t);
    }
    k.tensors.push_back({counter, DType::F32, true});
    for (const ScalarDef &d : combine.scalars) {
        for (const ScalarDef &own : partial.scalars)
            if (own.name == d.name) fail("scalar '" + d.name + "' is defined by both kernels");
        const auto rebound = p.fold->combine_scalars.find(d.name);
        k.scalars.push_back({d.name, rebound == p.fold->combine_scalars.end() ? d.value : rebound->second});
    }
    for (const auto &[name, type] : combine.values) {
        const auto own = k.values.find(name);
        if (own == k.values.end()) k.values[name] = type;
        else if (own->second.str() != type.str())
            fail("value '" + name + "' is " + own->second.str() + " in one kernel and " + type.str() + " in the other");
    }
    k.body.push_back(make_last_arrival(counter, p.fold->group, p.fold->arrivals, combine.body,
                                       "the group's last chunk combines the group"));
    Program out = p;
    out.kernels = {k};
    out.workspaces.push_back({counter, p.fold->groups, true});
    out.fold.reset();
    return out;
}

}  // namespace neptune::internal
