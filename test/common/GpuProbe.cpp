#include "GpuProbe.h"

#include <dlfcn.h>

namespace neptune::testing {

bool cuda_device_present() {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int *);
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
    auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
    int n = 0;
    return init && count && init(0) == 0 && count(&n) == 0 && n > 0;
}

}  // namespace neptune::testing
