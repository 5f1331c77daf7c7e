/* gpu/cuda.c — libcuda opened at run time (see cuda.h). */
#include "gpu/cuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int cuda_api_open(CudaApi *api, char *why, size_t n) {
    memset(api, 0, sizeof *api);
    api->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!api->lib) {
        const char *e = dlerror();
        snprintf(why, n, "%s", e ? e : "libcuda.so.1: cannot open");
        return -1;
    }
    const struct {
        void **fn;
        const char *name;
    } table[] = {
        {(void **)&api->Init, "cuInit"},
        {(void **)&api->DeviceGetCount, "cuDeviceGetCount"},
        {(void **)&api->DeviceGet, "cuDeviceGet"},
        {(void **)&api->DeviceGetName, "cuDeviceGetName"},
        {(void **)&api->DeviceGetAttribute, "cuDeviceGetAttribute"},
        {(void **)&api->DeviceTotalMem, "cuDeviceTotalMem_v2"},
        {(void **)&api->DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
        {(void **)&api->DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
        {(void **)&api->CtxSetCurrent, "cuCtxSetCurrent"},
        {(void **)&api->CtxSynchronize, "cuCtxSynchronize"},
        {(void **)&api->MemGetInfo, "cuMemGetInfo_v2"},
        {(void **)&api->MemAlloc, "cuMemAlloc_v2"},
        {(void **)&api->MemFree, "cuMemFree_v2"},
        {(void **)&api->MemcpyHtoD, "cuMemcpyHtoD_v2"},
        {(void **)&api->MemcpyDtoH, "cuMemcpyDtoH_v2"},
        {(void **)&api->MemsetD8, "cuMemsetD8_v2"},
        {(void **)&api->ModuleLoadDataEx, "cuModuleLoadDataEx"},
        {(void **)&api->ModuleUnload, "cuModuleUnload"},
        {(void **)&api->ModuleGetFunction, "cuModuleGetFunction"},
        {(void **)&api->FuncSetAttribute, "cuFuncSetAttribute"},
        {(void **)&api->LaunchKernel, "cuLaunchKernel"},
        {(void **)&api->GetErrorString, "cuGetErrorString"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        *table[i].fn = dlsym(api->lib, table[i].name);
        if (!*table[i].fn) {
            snprintf(why, n, "libcuda.so.1 has no %s (a driver older than this program expects)", table[i].name);
            cuda_api_close(api);
            return -1;
        }
    }
    return 0;
}

void cuda_api_close(CudaApi *api) {
    if (api->lib) dlclose(api->lib);
    memset(api, 0, sizeof *api);
}

const char *cuda_error_text(const CudaApi *api, CUresult r) {
    static __thread char buf[48];
    const char *s = NULL;
    if (api->GetErrorString && api->GetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
    snprintf(buf, sizeof buf, "CUDA error %d", r);
    return buf;
}
