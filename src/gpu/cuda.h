/* gpu/cuda.h — the part of NVIDIA's CUDA driver API grpo.c uses, declared here from
 * NVIDIA's published API (types, the constants used, the functions by their exported
 * names) and opened at run time with dlopen("libcuda.so.1"): the build needs no CUDA
 * toolkit, and a machine without the driver runs the CPU path, as if the GPU code
 * were not there. */
#ifndef GRPO_GPU_CUDA_H
#define GRPO_GPU_CUDA_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

enum { CUDA_SUCCESS = 0, CUDA_ERROR_NO_DEVICE = 100 };
enum {
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};
enum { CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 }; /* CUjit_option */
enum { CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 };                    /* CUfunction_attribute */

/* The driver's functions, by the names libcuda exports (the _v2 forms where the
 * API has them). */
typedef struct {
    void *lib;
    CUresult (*Init)(unsigned flags);
    CUresult (*DeviceGetCount)(int *count);
    CUresult (*DeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*DeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*DeviceGetAttribute)(int *value, int attribute, CUdevice dev);
    CUresult (*DeviceTotalMem)(size_t *bytes, CUdevice dev);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice dev);
    CUresult (*CtxSetCurrent)(CUcontext ctx);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemGetInfo)(size_t *free_bytes, size_t *total_bytes);
    CUresult (*MemAlloc)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*MemFree)(CUdeviceptr ptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (*MemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
    CUresult (*MemsetD8)(CUdeviceptr dst, unsigned char value, size_t bytes);
    CUresult (*ModuleLoadDataEx)(CUmodule *mod, const void *image, unsigned n_options, int *options, void **values);
    CUresult (*ModuleUnload)(CUmodule mod);
    CUresult (*ModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
    CUresult (*FuncSetAttribute)(CUfunction fn, int attribute, int value);
    CUresult (*LaunchKernel)(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                             unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream stream, void **params,
                             void **extra);
    CUresult (*GetErrorString)(CUresult error, const char **text);
} CudaApi;

/* Opens libcuda and finds every function above: 0, or -1 with why[n] saying what
 * is missing ("libcuda.so.1: cannot open shared object file", "no cuMemAlloc_v2"). */
int cuda_api_open(CudaApi *api, char *why, size_t n);
void cuda_api_close(CudaApi *api);
/* The driver's text for r ("out of memory"), or "CUDA error N". */
const char *cuda_error_text(const CudaApi *api, CUresult r);

#endif
