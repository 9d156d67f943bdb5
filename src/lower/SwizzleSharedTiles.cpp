#include "lower/SwizzleSharedTiles.h"

#include "lower/SelectMma.h"

namespace neptune::internal {

using namespace tir;

Kernel swizzle_shared_tiles(const Kernel &k) {
    if (uses_wgmma(k)) return k;
    Kernel out = k;
    for (auto &[name, t] : out.values)
        if (t.scope == Scope::Shared && t.layout == Layout::SharedRowMajor && dtype_bytes(t.elem) == 2 &&
            t.cols % 64 == 0 && t.rows % 8 == 0 && t.rows <= 256)
            t.layout = Layout::SharedSwizzled128;
    return out;
}

}  // namespace neptune::internal
