/* ops/onednn.c — oneDNN's matmul (Debian's libdnnl-dev, the library PyTorch's CPU
 * bf16 autocast runs on) behind gemm_f32 and gemm_bf16: one engine and stream,
 * primitives cached per shape, run on our OpenMP pool (Debian's build uses
 * libgomp). Not thread-safe: called outside parallel regions only. */
#include "ops/onednn.h"

#include <dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "core/check.h"

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
    int reference;         /* oneDNN's reference code: correct, far slower than the fallbacks */
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
    p->reference = !strncmp(impl, "ref", 3);
    return p;
}

int onednn_gemm(int bf16, int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, const void *B,
                int ldb, float beta, float *C, int ldc) {
    CHECK(!omp_in_parallel());
    dnnl_start();
    PrimKey k = {bf16 ? dnnl_bf16 : dnnl_f32, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta}; /* 4-byte fields, no padding: compared bytewise */
    const Prim *p = prim_get(&k);
    if (p->reference) return -1;
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
    return 0;
}

int onednn_impl(int bf16, char *impl, size_t n) {
    dnnl_start();
    Prim p;
    PrimKey k = {bf16 ? dnnl_bf16 : dnnl_f32, 0, 1, 256, 256, 256, 256, 256, 256, 1.0f, 0.0f};
    snprintf(impl, n, "none");
    if (prim_create(&p, &k, impl, n) != dnnl_success) return 0;
    dnnl_primitive_destroy(p.prim);
    return 1;
}
