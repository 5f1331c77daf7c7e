/* ops/onednn.c — oneDNN's matmul (Debian's libdnnl-dev, the library PyTorch's CPU
 * bf16 autocast runs on) behind gemm_f32 and gemm_bf16: one engine and stream,
 * primitives cached per shape, run on our OpenMP pool (Debian's build uses
 * libgomp). Each primitive's memory objects are made once and pointed at the
 * operands of each call, and oneDNN's scratchpad is ours (user mode), one buffer
 * grown to the largest primitive's need and kept: oneDNN's own (library mode)
 * is allocated and freed around every execution, and above glibc's mmap threshold
 * each of those maps and faults fresh pages. Not thread-safe: called outside
 * parallel regions only. */
#include "ops/onednn.h"

#include <dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "ops/gemm.h"

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
    int nb[3], batched;         /* batch sizes (gemm.h's GemmBatch); batched = 0: a plain 2-D product */
    long sa[3], sb[3], sc[3];   /* batch strides; 0 broadcasts that operand */
} PrimKey; /* memset before filling: compared bytewise */

typedef struct {
    PrimKey key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a_md, b_md, c_md, s_md;
    dnnl_memory_t ma, mb, mc, ms; /* made once, no buffer of their own: pointed at each call's */
    size_t scratch_bytes;         /* the primitive's scratchpad, 0 if none */
    int reference;         /* oneDNN's reference code: correct, far slower than the fallbacks */
} Prim;

/* A training step uses a few dozen shapes (each linear layer forward and
 * backward, the LM head's chunks and their transpositions, attention's row blocks at
 * each padded length); past this many the oldest is replaced. */
#define PRIM_CACHE 256
static Prim cache[PRIM_CACHE];
static int cache_n, cache_next;

/* The scratchpad every primitive runs with: grown to the largest need, never shrunk. */
static void *scratch;
static size_t scratch_cap;

size_t onednn_scratch_bytes(void) {
    return scratch_cap;
}

static void prim_destroy(Prim *p) {
    dnnl_memory_t *m[] = {&p->ma, &p->mb, &p->mc, &p->ms};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (*m[i]) dnnl_memory_destroy(*m[i]), *m[i] = NULL;
    if (p->prim) dnnl_primitive_destroy(p->prim), p->prim = NULL;
}

/* p's primitive from its descriptor pd (destroyed), and its implementation's name in impl[n]. */
static void prim_from_desc(Prim *p, const PrimKey *k, dnnl_primitive_desc_t pd, char *impl, size_t n) {
    const char *name = "";
    dnnl_must(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name), "impl info");
    snprintf(impl, n, "%s", name);
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (p->scratch_bytes) p->s_md = *smd;
    dnnl_must(dnnl_primitive_create(&p->prim, pd), "primitive");
    dnnl_primitive_desc_destroy(pd);
    p->key = *k;
}

/* The matmul descriptor of k: op(A) by strides, C fp32 row-major, alpha as the
 * output scale, beta as a sum post-op. Returns
 * oneDNN's status (unimplemented where this CPU has no such matmul); impl[n] gets
 * the implementation's name. */
static dnnl_status_t prim_create(Prim *p, const PrimKey *k, char *impl, size_t n) {
    /* batched: three leading batch dims, an operand's of size 1 where it broadcasts */
    int nd = k->batched ? 5 : 2, o = nd - 2;
    dnnl_dims_t ad, bd, cd, as, bs, cs;
    for (int i = 0; i < o; i++) {
        ad[i] = k->sa[i] ? k->nb[i] : 1, bd[i] = k->sb[i] ? k->nb[i] : 1, cd[i] = k->nb[i];
        as[i] = k->sa[i], bs[i] = k->sb[i], cs[i] = k->sc[i];
    }
    ad[o] = k->M, ad[o + 1] = k->K, bd[o] = k->K, bd[o + 1] = k->N, cd[o] = k->M, cd[o + 1] = k->N;
    as[o] = k->ta ? 1 : k->lda, as[o + 1] = k->ta ? k->lda : 1;
    bs[o] = k->tb ? 1 : k->ldb, bs[o + 1] = k->tb ? k->ldb : 1;
    cs[o] = k->ldc, cs[o + 1] = 1;
    /* a dim of size 1 takes the stride of a plain layout (oneDNN's optimised
     * matmuls look for one; the stride is never stepped) */
    dnnl_dim_t *dims[3] = {ad, bd, cd}, *strides[3] = {as, bs, cs};
    for (int t = 0; t < 3; t++)
        for (int i = o - 1; i >= 0; i--)
            if (dims[t][i] == 1) {
                dnnl_dim_t outer = 0;
                for (int j = i + 1; j < nd; j++)
                    if (strides[t][j] * dims[t][j] > outer) outer = strides[t][j] * dims[t][j];
                strides[t][i] = outer;
            }
    dnnl_must(dnnl_memory_desc_init_by_strides(&p->a_md, nd, ad, k->dt, as), "src desc");
    dnnl_must(dnnl_memory_desc_init_by_strides(&p->b_md, nd, bd, k->dt, bs), "weights desc");
    dnnl_must(dnnl_memory_desc_init_by_strides(&p->c_md, nd, cd, dnnl_f32, cs), "dst desc");
    dnnl_matmul_desc_t md;
    dnnl_must(dnnl_matmul_desc_init(&md, &p->a_md, &p->b_md, NULL, &p->c_md), "matmul desc");
    dnnl_primitive_attr_t attr;
    dnnl_must(dnnl_primitive_attr_create(&attr), "attr");
    dnnl_must(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad mode");
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
    prim_from_desc(p, k, pd, impl, n);
    dnnl_must(dnnl_memory_create(&p->ma, &p->a_md, engine, DNNL_MEMORY_NONE), "src memory");
    dnnl_must(dnnl_memory_create(&p->mb, &p->b_md, engine, DNNL_MEMORY_NONE), "weights memory");
    dnnl_must(dnnl_memory_create(&p->mc, &p->c_md, engine, DNNL_MEMORY_NONE), "dst memory");
    if (p->scratch_bytes)
        dnnl_must(dnnl_memory_create(&p->ms, &p->s_md, engine, DNNL_MEMORY_NONE), "scratchpad memory");
    return st;
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
        prim_destroy(p);
    }
    char impl[64];
    memset(p, 0, sizeof *p);
    double t0 = omp_get_wtime();
    dnnl_status_t st = prim_create(p, k, impl, sizeof impl);
    gemm_stats_primitive(omp_get_wtime() - t0);
    if (st != dnnl_success) { /* no such matmul here: the caller's fallback */
        p->key = *k;
        p->prim = NULL;
        p->reference = 1;
        return p;
    }
    p->reference = !strncmp(impl, "ref", 3);
    return p;
}

/* k's primitive on A, B into C. */
static int run(const PrimKey *k, const void *A, const void *B, void *C) {
    CHECK(!omp_in_parallel());
    dnnl_start();
    const Prim *p = prim_get(k);
    if (p->reference) return -1;
    if (p->scratch_bytes > scratch_cap) {
        free(scratch);
        scratch = xaligned(p->scratch_bytes);
        scratch_cap = p->scratch_bytes;
    }
    dnnl_must(dnnl_memory_set_data_handle(p->ma, (void *)A), "src handle");
    dnnl_must(dnnl_memory_set_data_handle(p->mb, (void *)B), "weights handle");
    dnnl_must(dnnl_memory_set_data_handle(p->mc, C), "dst handle");
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->ma}, {DNNL_ARG_WEIGHTS, p->mb}, {DNNL_ARG_DST, p->mc}};
    int n_args = 3;
    if (p->scratch_bytes) {
        dnnl_must(dnnl_memory_set_data_handle(p->ms, scratch), "scratchpad handle");
        args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->ms};
    }
    dnnl_must(dnnl_primitive_execute(p->prim, stream, n_args, args), "matmul");
    dnnl_must(dnnl_stream_wait(stream), "stream wait");
    return 0;
}

static PrimKey key(int bf16, int ta, int tb, int M, int N, int K, float alpha, int lda, int ldb, float beta, int ldc) {
    PrimKey k;
    memset(&k, 0, sizeof k);
    k.dt = bf16 ? dnnl_bf16 : dnnl_f32;
    k.ta = ta, k.tb = tb, k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc;
    k.alpha = alpha, k.beta = beta;
    return k;
}

int onednn_gemm(int bf16, int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, const void *B,
                int ldb, float beta, float *C, int ldc) {
    PrimKey k = key(bf16, ta, tb, M, N, K, alpha, lda, ldb, beta, ldc);
    return run(&k, A, B, C);
}

int onednn_gemm_batch(const int nb[3], const long sa[3], const long sb[3], const long sc[3], int ta, int tb, int M,
                      int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                      float *C, int ldc) {
    PrimKey k = key(0, ta, tb, M, N, K, alpha, lda, ldb, beta, ldc);
    k.batched = 1;
    for (int i = 0; i < 3; i++) k.nb[i] = nb[i], k.sa[i] = sa[i], k.sb[i] = sb[i], k.sc[i] = sc[i];
    return run(&k, A, B, C);
}

int onednn_impl(int bf16, char *impl, size_t n) {
    dnnl_start();
    Prim p;
    PrimKey k = key(bf16, 0, 1, 256, 256, 256, 1.0f, 256, 256, 0.0f, 256);
    snprintf(impl, n, "none");
    memset(&p, 0, sizeof p);
    if (prim_create(&p, &k, impl, n) != dnnl_success) return 0;
    prim_destroy(&p);
    return 1;
}

