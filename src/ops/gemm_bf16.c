/* ops/gemm_bf16.c — gemm_bf16 (see gemm.h): products of bf16 operands summed in
 * fp32, on oneDNN's matmul where this CPU has bf16 instructions (the library
 * PyTorch's CPU autocast runs on), else on gemm_f32 over the widened operands.
 * oneDNN runs on our OpenMP pool (Debian's build uses libgomp). Not here: fp32
 * products (gemm.c). */
#include <dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "ops/gemm.h"
#include "ops/ops.h"

/* ---- conversion buffers: kept between calls, grown to the largest operand ---- */

static struct {
    void *p;
    size_t bytes;
} bufs[2];

static void *buf(int i, size_t bytes) {
    if (bufs[i].bytes < bytes) {
        free(bufs[i].p);
        bufs[i].p = xaligned(bytes);
        bufs[i].bytes = bytes;
    }
    return bufs[i].p;
}

/* The operand's rows x cols as contiguous fp32 holding bf16 values. */
static const float *operand_f32(int slot, GemmBf16Operand x, int rows, int cols) {
    float *out = buf(slot, sizeof(float) * (size_t)rows * cols);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        float *o = out + (size_t)r * cols;
        if (x.f) {
            const float *in = x.f + (size_t)r * x.ld;
            for (int c = 0; c < cols; c++) o[c] = bf16_round(in[c]);
        } else {
            const uint16_t *in = x.h + (size_t)r * x.ld;
            for (int c = 0; c < cols; c++) o[c] = bf16_to_f32(in[c]);
        }
    }
    return out;
}

/* The operand in bf16: h itself, or f rounded into a contiguous buffer (*ld set). */
static const uint16_t *operand_bf16(int slot, GemmBf16Operand x, int rows, int cols, int *ld) {
    if (x.h) {
        *ld = x.ld;
        return x.h;
    }
    uint16_t *out = buf(slot, sizeof(uint16_t) * (size_t)rows * cols);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float *in = x.f + (size_t)r * x.ld;
        uint16_t *o = out + (size_t)r * cols;
        for (int c = 0; c < cols; c++) o[c] = f32_to_bf16(in[c]);
    }
    *ld = cols;
    return out;
}

/* ---- oneDNN: one engine and stream, primitives cached per shape ---- */

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static void dnnl_must(dnnl_status_t s, const char *what) {
    if (s != dnnl_success) DIE("oneDNN: %s failed (status %d)", what, (int)s);
}

static void dnnl_start(void) {
    if (engine) return;
    dnnl_must(dnnl_engine_create(&engine, dnnl_cpu, 0), "engine");
    dnnl_must(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "stream");
}

typedef struct {
    dnnl_data_type_t dt;
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
} PrimKey;

typedef struct {
    PrimKey key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a_md, b_md, c_md;
} Prim;

/* A training step uses a few dozen shapes (each linear layer forward and
 * backward, the LM head's chunks); past this many the oldest is replaced. */
#define PRIM_CACHE 96
static Prim cache[PRIM_CACHE];
static int cache_n, cache_next;

/* The matmul descriptor of k: op(A) by strides, C fp32 row-major, alpha as the
 * output scale, beta as a sum post-op. Returns oneDNN's status (unimplemented
 * where this CPU has no such matmul); impl[n] gets the implementation's name. */
static dnnl_status_t prim_create(Prim *p, const PrimKey *k, char *impl, size_t n) {
    dnnl_dims_t ad = {k->M, k->K}, bd = {k->K, k->N}, cd = {k->M, k->N};
    dnnl_dims_t as = {k->ta ? 1 : k->lda, k->ta ? k->lda : 1}, bs = {k->tb ? 1 : k->ldb, k->tb ? k->ldb : 1},
                cs = {k->ldc, 1};
    dnnl_must(dnnl_memory_desc_init_by_strides(&p->a_md, 2, ad, k->dt, as), "src desc");
    dnnl_must(dnnl_memory_desc_init_by_strides(&p->b_md, 2, bd, k->dt, bs), "weights desc");
    dnnl_must(dnnl_memory_desc_init_by_strides(&p->c_md, 2, cd, dnnl_f32, cs), "dst desc");
    dnnl_matmul_desc_t md;
    dnnl_must(dnnl_matmul_desc_init(&md, &p->a_md, &p->b_md, NULL, &p->c_md), "matmul desc");
    dnnl_primitive_attr_t attr;
    dnnl_must(dnnl_primitive_attr_create(&attr), "attr");
    if (k->alpha != 1.0f) dnnl_must(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha), "output scale");
    if (k->beta != 0.0f) {
        dnnl_post_ops_t po;
        dnnl_must(dnnl_post_ops_create(&po), "post-ops");
        dnnl_must(dnnl_post_ops_append_sum(po, k->beta), "sum post-op");
        dnnl_must(dnnl_primitive_attr_set_post_ops(attr, po), "set post-ops");
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) return st;
    const char *name = "";
    dnnl_must(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name), "impl info");
    snprintf(impl, n, "%s", name);
    dnnl_must(dnnl_primitive_create(&p->prim, pd), "primitive");
    dnnl_primitive_desc_destroy(pd);
    p->key = *k;
    return dnnl_success;
}

static const Prim *prim_get(const PrimKey *k) {
    for (int i = 0; i < cache_n; i++)
        if (!memcmp(&cache[i].key, k, sizeof *k)) return &cache[i];
    Prim *p;
    if (cache_n < PRIM_CACHE) {
        p = &cache[cache_n++];
    } else {
        p = &cache[cache_next];
        cache_next = (cache_next + 1) % PRIM_CACHE;
        dnnl_primitive_destroy(p->prim);
    }
    char impl[64];
    dnnl_must(prim_create(p, k, impl, sizeof impl), "matmul primitive");
    return p;
}

static void onednn_gemm(dnnl_data_type_t dt, int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda,
                      const void *B, int ldb, float beta, float *C, int ldc) {
    dnnl_start();
    PrimKey k = {dt, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta}; /* 4-byte fields, no padding: compared bytewise */
    const Prim *p = prim_get(&k);
    dnnl_memory_t ma, mb, mc;
    dnnl_must(dnnl_memory_create(&ma, &p->a_md, engine, (void *)A), "src memory");
    dnnl_must(dnnl_memory_create(&mb, &p->b_md, engine, (void *)B), "weights memory");
    dnnl_must(dnnl_memory_create(&mc, &p->c_md, engine, C), "dst memory");
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    dnnl_must(dnnl_primitive_execute(p->prim, stream, 3, args), "matmul");
    dnnl_must(dnnl_stream_wait(stream), "stream wait");
    dnnl_memory_destroy(ma);
    dnnl_memory_destroy(mb);
    dnnl_memory_destroy(mc);
}

/* ---- backend choice ---- */

static int native = -1;           /* gemm_bf16_native(), once known */
static char native_impl[64];      /* oneDNN's name for its bf16 matmul here */
static GemmBf16Backend chosen = GEMM_BF16_AUTO;

int gemm_bf16_native(void) {
    if (native >= 0) return native;
    dnnl_start();
    Prim p;
    PrimKey k = {dnnl_bf16, 0, 1, 64, 64, 64, 64, 64, 64, 1.0f, 0.0f};
    snprintf(native_impl, sizeof native_impl, "none");
    if (prim_create(&p, &k, native_impl, sizeof native_impl) == dnnl_success) {
        native = strncmp(native_impl, "ref", 3) != 0;
        dnnl_primitive_destroy(p.prim);
    } else {
        native = 0;
    }
    return native;
}

int gemm_bf16_use(GemmBf16Backend b) {
    if (b == GEMM_BF16_ONEDNN && !gemm_bf16_native()) return -1;
    chosen = b;
    return 0;
}

static GemmBf16Backend resolved(void) {
    if (chosen != GEMM_BF16_AUTO) return chosen;
    return gemm_bf16_native() ? GEMM_BF16_ONEDNN : GEMM_BF16_SGEMM;
}

const char *gemm_bf16_backend_name(void) {
    static char name[96];
    switch (resolved()) {
    case GEMM_BF16_ONEDNN: snprintf(name, sizeof name, "oneDNN %s", native_impl); break;
    case GEMM_BF16_ONEDNN_F32: snprintf(name, sizeof name, "oneDNN fp32 on bf16 values"); break;
    default: snprintf(name, sizeof name, "sgemm on bf16 values (no bf16 matmul on this CPU)"); break;
    }
    return name;
}

void gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, GemmBf16Operand A, GemmBf16Operand B,
               float beta, float *C, int ldc) {
    CHECK((!A.f) != (!A.h) && (!B.f) != (!B.h) && (beta == 0.0f || beta == 1.0f) && !omp_in_parallel());
    if (M <= 0 || N <= 0 || K <= 0) { /* nothing to multiply: gemm_f32 scales C by beta */
        gemm_f32(trans_a, trans_b, M, N, K, alpha, NULL, 1, NULL, 1, beta, C, ldc);
        return;
    }
    int a_rows = trans_a ? K : M, a_cols = trans_a ? M : K, b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    GemmBf16Backend b = resolved();
    if (b == GEMM_BF16_ONEDNN) {
        int lda, ldb;
        const uint16_t *a = operand_bf16(0, A, a_rows, a_cols, &lda), *bb = operand_bf16(1, B, b_rows, b_cols, &ldb);
        onednn_gemm(dnnl_bf16, trans_a, trans_b, M, N, K, alpha, a, lda, bb, ldb, beta, C, ldc);
        return;
    }
    const float *a = operand_f32(0, A, a_rows, a_cols), *bb = operand_f32(1, B, b_rows, b_cols);
    if (b == GEMM_BF16_ONEDNN_F32)
        onednn_gemm(dnnl_f32, trans_a, trans_b, M, N, K, alpha, a, a_cols, bb, b_cols, beta, C, ldc);
    else
        gemm_f32(trans_a, trans_b, M, N, K, alpha, a, a_cols, bb, b_cols, beta, C, ldc);
}
