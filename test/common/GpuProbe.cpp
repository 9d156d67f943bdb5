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

int cuda_compute_capability() {
    if (!cuda_device_present()) return 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    using GetFn = int (*)(int *, int);
    using AttrFn = int (*)(int *, int, int);
    auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
    auto attr = reinterpret_cast<AttrFn>(dlsym(lib, "cuDeviceGetAttribute"));
    constexpr int kMajor = 75, kMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR
    int dev = 0, major = 0, minor = 0;
    if (!get || !attr || get(&dev, 0) != 0 || attr(&major, kMajor, dev) != 0 || attr(&minor, kMinor, dev) != 0)
        return 0;
    return 10 * major + minor;
}

}  // namespace neptune::testing
