/* bench/bench_gemm.c — the machine's GEMM limits, the ceilings the model's figures
 * are read against: OpenBLAS sgemm (what gemm_f32 calls today) and oneDNN's matmul
 * primitive (Debian's libdnnl-dev, the library PyTorch's CPU bf16 autocast runs
 * its matmuls on) in fp32 and in bf16 (bf16 inputs, fp32 accumulation and output),
 * on the training-shaped product of bench_model (768 x 4864 x 896, x · W^T with W
 * row-major as the model keeps it) and a decode-shaped one (8 rows). oneDNN reads W
 * in place (its "ba" layout: no reorder, as weights that change every step
 * would need); its implementation name is printed with each figure.
 *   build/bench/bench_gemm [--seconds S]
 * prints one line per case:
 *   gemm impl=openblas|dnnl dtype=f32|bf16 M= N= K= gflops=X isa=NAME */
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/timer.h"

static double seconds = 2.0;

static void dnnl_ok(dnnl_status_t s, const char *what) {
    if (s != dnnl_success) {
        fprintf(stderr, "bench_gemm: %s: oneDNN status %d\n", what, (int)s);
        exit(1);
    }
}

static uint16_t to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* C[M,N] = A[M,K] · W[N,K]^T through a oneDNN matmul primitive; GFLOP/s. */
static double dnnl_rate(int M, int N, int K, dnnl_data_type_t dt, const char **isa) {
    static dnnl_engine_t eng;
    static dnnl_stream_t stream;
    if (!eng) {
        dnnl_ok(dnnl_engine_create(&eng, dnnl_cpu, 0), "engine");
        dnnl_ok(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags), "stream");
    }
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_dims_t ad = {M, K}, bd = {K, N}, cd = {M, N};
    dnnl_ok(dnnl_memory_desc_init_by_tag(&a_md, 2, ad, dt, dnnl_ab), "src md");
    dnnl_ok(dnnl_memory_desc_init_by_tag(&b_md, 2, bd, dt, dnnl_ba), "weights md"); /* W[N,K] row-major */
    dnnl_ok(dnnl_memory_desc_init_by_tag(&c_md, 2, cd, dnnl_f32, dnnl_ab), "dst md");
    dnnl_matmul_desc_t md;
    dnnl_ok(dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md), "matmul desc");
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL);
    if (st == dnnl_unimplemented) { /* e.g. bf16 on a CPU without AVX512_BF16 (or AVX512_CORE) */
        *isa = "none";
        return 0;
    }
    dnnl_ok(st, "primitive desc");
    dnnl_ok(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, isa), "impl info");
    dnnl_primitive_t prim;
    dnnl_ok(dnnl_primitive_create(&prim, pd), "primitive");
    size_t es = dt == dnnl_bf16 ? 2 : 4;
    char *A = xaligned(es * M * K), *W = xaligned(es * N * K);
    float *C = xaligned(sizeof(float) * M * N);
    for (long i = 0; i < (long)M * K; i++) {
        float v = (float)(i % 7) * 0.1f;
        if (es == 2) ((uint16_t *)A)[i] = to_bf16(v);
        else ((float *)A)[i] = v;
    }
    for (long i = 0; i < (long)N * K; i++) {
        float v = (float)(i % 5) * 0.1f;
        if (es == 2) ((uint16_t *)W)[i] = to_bf16(v);
        else ((float *)W)[i] = v;
    }
    dnnl_memory_t ma, mw, mc;
    dnnl_ok(dnnl_memory_create(&ma, &a_md, eng, A), "src mem");
    dnnl_ok(dnnl_memory_create(&mw, &b_md, eng, W), "weights mem");
    dnnl_ok(dnnl_memory_create(&mc, &c_md, eng, C), "dst mem");
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, mc}};
    dnnl_ok(dnnl_primitive_execute(prim, stream, 3, args), "execute");
    dnnl_stream_wait(stream);
    int reps = 0;
    double t0 = time_now_s();
    while (time_now_s() - t0 < seconds) {
        dnnl_primitive_execute(prim, stream, 3, args);
        dnnl_stream_wait(stream);
        reps++;
    }
    double dt_s = time_now_s() - t0;
    dnnl_memory_destroy(ma), dnnl_memory_destroy(mw), dnnl_memory_destroy(mc);
    dnnl_primitive_destroy(prim);
    /* isa points into pd: keep pd (a handful per run) */
    free(A), free(W), free(C);
    return 2.0 * M * N * K * reps / dt_s / 1e9;
}

static double openblas_rate(int M, int N, int K) {
    float *A = xaligned(sizeof(float) * M * K), *W = xaligned(sizeof(float) * N * K),
          *C = xaligned(sizeof(float) * M * N);
    for (long i = 0; i < (long)M * K; i++) A[i] = (float)(i % 7) * 0.1f;
    for (long i = 0; i < (long)N * K; i++) W[i] = (float)(i % 5) * 0.1f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, A, K, W, K, 0, C, N);
    int reps = 0;
    double t0 = time_now_s();
    while (time_now_s() - t0 < seconds) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, A, K, W, K, 0, C, N);
        reps++;
    }
    double dt = time_now_s() - t0;
    free(A), free(W), free(C);
    return 2.0 * M * N * K * reps / dt / 1e9;
}

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    const int shapes[2][3] = {{768, 4864, 896}, {8, 4864, 896}};
    for (int s = 0; s < 2; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        const char *isa = "-";
        printf("gemm impl=openblas dtype=f32 M=%d N=%d K=%d gflops=%.1f isa=sgemm threads=%d\n", M, N, K,
               openblas_rate(M, N, K), omp_get_max_threads());
        double f32 = dnnl_rate(M, N, K, dnnl_f32, &isa);
        printf("gemm impl=dnnl dtype=f32 M=%d N=%d K=%d gflops=%.1f isa=%s\n", M, N, K, f32, isa);
        double bf16 = dnnl_rate(M, N, K, dnnl_bf16, &isa);
        if (bf16 > 0) printf("gemm impl=dnnl dtype=bf16 M=%d N=%d K=%d gflops=%.1f isa=%s\n", M, N, K, bf16, isa);
        else printf("gemm impl=dnnl dtype=bf16 M=%d N=%d K=%d unsupported (oneDNN has no bf16 matmul for this CPU)\n",
                    M, N, K);
        fflush(stdout);
    }
    return 0;
}
