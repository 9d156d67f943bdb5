// A stand-in for libcuda.so.1 with every driver entry point the runtime loads: the device is there
// until fake_cuda_shut_down(), after which the driver answers CUDA_ERROR_DEINITIALIZED, as the real
// one does once it has shut down at exit. It lets runtime/driver_shut_down test that path on any
// machine; it computes nothing.
#include <cuda.h>

#include <cstring>

namespace {
bool shut_down = false;
int context_storage = 0;
CUresult ok() { return shut_down ? CUDA_ERROR_DEINITIALIZED : CUDA_SUCCESS; }
}  // namespace

extern "C" {

void fake_cuda_shut_down() { shut_down = true; }

CUresult CUDAAPI cuInit(unsigned int) { return ok(); }
CUresult CUDAAPI cuGetErrorName(CUresult, const char **name) {
    *name = "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult, const char **text) {
    *text = "an error of the fake driver";
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int *count) {
    *count = 1;
    return ok();
}
CUresult CUDAAPI cuDeviceGet(CUdevice *device, int) {
    *device = 0;
    return ok();
}
CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice) {
    std::strncpy(name, "fake device", size_t(len));
    return ok();
}
CUresult CUDAAPI cuDeviceGetAttribute(int *value, CUdevice_attribute, CUdevice) {
    *value = 1;
    return ok();
}
CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice) {
    *bytes = 0;
    return ok();
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice) {
    *context = reinterpret_cast<CUcontext>(&context_storage);
    return ok();
}
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *context) {
    *context = nullptr;  // no context current: the runtime retains the primary one
    return ok();
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return ok(); }
CUresult CUDAAPI cuCtxGetDevice(CUdevice *device) {
    *device = 0;
    return ok();
}
CUresult CUDAAPI cuCtxSynchronize() { return ok(); }
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *, const void *, unsigned int, CUjit_option *, void **) {
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuModuleUnload(CUmodule) { return ok(); }
CUresult CUDAAPI cuModuleGetFunction(CUfunction *, CUmodule, const char *) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuFuncGetAttribute(int *, CUfunction_attribute, CUfunction) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                                unsigned int, unsigned int, CUstream, void **, void **) {
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **) {
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr *, size_t) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuMemFree(CUdeviceptr) { return ok(); }
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr, const void *, size_t) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuMemcpyDtoH(void *, CUdeviceptr, size_t) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr, CUdeviceptr, size_t) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr, CUdeviceptr, size_t, CUstream) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuMemsetD8(CUdeviceptr, unsigned char, size_t) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuEventCreate(CUevent *, unsigned int) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuEventRecord(CUevent, CUstream) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuEventSynchronize(CUevent) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuEventElapsedTime(float *, CUevent, CUevent) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuEventDestroy(CUevent) { return ok(); }
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                        const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                        CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                        CUtensorMapFloatOOBfill) {
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuPointerGetAttribute(void *, CUpointer_attribute, CUdeviceptr) { return CUDA_ERROR_NOT_SUPPORTED; }

}  // extern "C"
