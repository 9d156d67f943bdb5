#include "lower/PlanSharedMemory.h"

#include "neptune/Error.h"
#include "tir/SharedLayout.h"

namespace neptune::internal {

using namespace tir;

namespace {

constexpr int max_shared_bytes = 227 * 1024;

}  // namespace

Kernel plan_shared_memory(const Kernel &k) {
    Kernel out = k;
    const SharedLayout l = shared_layout(k);
    out.shared_bytes = l.total + l.alignment_slack;
    if (out.shared_bytes > max_shared_bytes)
        throw CompileError(k.name + " needs " + std::to_string(out.shared_bytes) +
                           " bytes of shared memory, more than the " + std::to_string(max_shared_bytes) +
                           " a block may use; use smaller tiles or fewer stages");
    return out;
}

}  // namespace neptune::internal
