/* gpu/cublaslt.c — libcublasLt opened at run time (see cublaslt.h). */
#include "gpu/cublaslt.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* CUDA 13's soname first (the H100 machine's), then 12's, then whatever the
 * unversioned link names (a toolkit's development files). */
static const char *const lib_names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};

int cublaslt_api_open(CublasLtApi *api, char *why, size_t n) {
    memset(api, 0, sizeof *api);
    size_t used = 0;
    const char *name = NULL;
    why[0] = 0;
    for (size_t i = 0; i < sizeof lib_names / sizeof lib_names[0] && !api->lib; i++) {
        name = lib_names[i];
        api->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!api->lib && used < n) { /* every name tried, and why each failed */
            const char *e = dlerror();
            int w = snprintf(why + used, n - used, "%s%s", used ? "; " : "", e ? e : name);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    if (!api->lib) return -1;
    const struct {
        void **fn;
        const char *name;
    } table[] = {
        {(void **)&api->Create, "cublasLtCreate"},
        {(void **)&api->Destroy, "cublasLtDestroy"},
        {(void **)&api->MatmulDescCreate, "cublasLtMatmulDescCreate"},
        {(void **)&api->MatmulDescDestroy, "cublasLtMatmulDescDestroy"},
        {(void **)&api->MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute"},
        {(void **)&api->MatrixLayoutCreate, "cublasLtMatrixLayoutCreate"},
        {(void **)&api->MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy"},
        {(void **)&api->MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate"},
        {(void **)&api->MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy"},
        {(void **)&api->MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute"},
        {(void **)&api->MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic"},
        {(void **)&api->Matmul, "cublasLtMatmul"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        *table[i].fn = dlsym(api->lib, table[i].name);
        if (!*table[i].fn) {
            snprintf(why, n, "%s has no %s (a cuBLASLt older than 11.4?)", name, table[i].name);
            cublaslt_api_close(api);
            return -1;
        }
    }
    api->GetStatusString = (const char *(*)(cublasStatus_t))dlsym(api->lib, "cublasLtGetStatusString");
    why[0] = 0;
    return 0;
}

/* The library stays loaded once opened: it is C++ (with the C++ runtime it brings),
 * and unloading it buys nothing for a process that used the GPU (a later gpu_open
 * finds it loaded). */
void cublaslt_api_close(CublasLtApi *api) { memset(api, 0, sizeof *api); }

const char *cublaslt_status_text(const CublasLtApi *api, cublasStatus_t s) {
    static __thread char buf[48];
    const char *text = api->GetStatusString ? api->GetStatusString(s) : NULL;
    if (text) return text;
    snprintf(buf, sizeof buf, "cuBLAS status %d", s);
    return buf;
}
