/* ops/onednn.c — oneDNN's matmul (Debian's libdnnl-dev, the library PyTorch's CPU
 * bf16 autocast runs on) behind gemm_f32 and gemm_bf16: one engine and stream,
 * primitives cached per shape family where oneDNN's matmul takes runtime sizes
 * bit for bit (below) and per shape elsewhere, run on our OpenMP pool (Debian's
 * build uses libgomp). Each primitive's memory objects are made once and pointed at the
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

/* The memory descriptors of k's operands: op(A) by strides, C fp32 row-major. With
 * runtime set, M, N, K and every stride but the unit inner one are left to each
 * call (DNNL_RUNTIME_DIM_VAL): the descriptors of a shape family's one primitive. */
static void key_descs(const PrimKey *k, int runtime, dnnl_memory_desc_t *a_md, dnnl_memory_desc_t *b_md,
                      dnnl_memory_desc_t *c_md) {
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
    if (runtime) {
        ad[o] = ad[o + 1] = bd[o] = bd[o + 1] = cd[o] = cd[o + 1] = DNNL_RUNTIME_DIM_VAL;
        for (int t = 0; t < 3; t++)
            for (int i = 0; i < nd; i++)
                if (i < o || strides[t][i] != 1) strides[t][i] = DNNL_RUNTIME_DIM_VAL;
    }
    dnnl_must(dnnl_memory_desc_init_by_strides(a_md, nd, ad, k->dt, as), "src desc");
    dnnl_must(dnnl_memory_desc_init_by_strides(b_md, nd, bd, k->dt, bs), "weights desc");
    dnnl_must(dnnl_memory_desc_init_by_strides(c_md, nd, cd, dnnl_f32, cs), "dst desc");
}

/* The matmul of k (with runtime: of its shape family, key_descs): alpha as the
 * output scale, beta as a sum post-op. Returns oneDNN's status (unimplemented
 * where this CPU has no such matmul); impl[n] gets the implementation's name.
 * A family's primitive has no memory objects of its own: each call's come from
 * mem_get. */
static dnnl_status_t prim_create(Prim *p, const PrimKey *k, int runtime, char *impl, size_t n) {
    key_descs(k, runtime, &p->a_md, &p->b_md, &p->c_md);
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
    if (runtime) return st; /* a family needing a scratchpad is refused (family_get) */
    if (p->scratch_bytes)
        dnnl_must(dnnl_memory_create(&p->ms, &p->s_md, engine, DNNL_MEMORY_NONE), "scratchpad memory");
    dnnl_must(dnnl_memory_create(&p->ma, &p->a_md, engine, DNNL_MEMORY_NONE), "src memory");
    dnnl_must(dnnl_memory_create(&p->mb, &p->b_md, engine, DNNL_MEMORY_NONE), "weights memory");
    dnnl_must(dnnl_memory_create(&p->mc, &p->c_md, engine, DNNL_MEMORY_NONE), "dst memory");
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
    dnnl_status_t st = prim_create(p, k, 0, impl, sizeof impl);
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

/* ---- shape families: one primitive for every size and stride ----
 * Where oneDNN's only fp32 matmul on this CPU is its gemm-based one (gemm:jit; no
 * avx512_core, so no brgemm matmul), a primitive with runtime M, N, K and strides
 * computes each call as the primitive of that one shape would: oneDNN 2.6's
 * gemm_f32_matmul reads a call's dims and strides from its memory objects and
 * makes the same extended_sgemm call(s) with them. So a family (the key without
 * its sizes and strides) needs one primitive, made at its first call, and a step
 * whose micro-batches and attention blocks have new lengths makes none. Elsewhere
 * (brgemm, which takes no runtime dims, and bf16) a runtime-shape primitive would
 * be other code with other sums: those keep a primitive per shape. */

#define FAMILY_CACHE 64
static Prim families[FAMILY_CACHE];
static int families_n;
static int families_on = -1; /* -1: not yet asked of oneDNN */
static int families_off;     /* the tests' seam: a primitive per shape everywhere */

int onednn_families(void) {
    if (families_on < 0) {
        dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
        families_on = (isa & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core;
    }
    return families_on && !families_off;
}

void onednn_families_off(int off) { families_off = off; }

static PrimKey family_key(const PrimKey *k) {
    PrimKey f = *k;
    f.M = f.N = f.K = f.lda = f.ldb = f.ldc = 0;
    for (int i = 0; i < 3; i++) f.sa[i] = k->sa[i] != 0, f.sb[i] = k->sb[i] != 0, f.sc[i] = 0;
    return f;
}

/* k's family's primitive, or NULL where k keeps a primitive of its own shape. */
static const Prim *family_get(const PrimKey *k) {
    /* a 1 x 1 product (a dot product) gives other bits on the runtime-shape primitive
     * (tests/ops/test_gemm.c found it; its cause not pinned down): its own shape's */
    if (!onednn_families() || k->dt != dnnl_f32 || (k->M == 1 && k->N == 1)) return NULL;
    PrimKey fk = family_key(k);
    for (int i = 0; i < families_n; i++)
        if (!memcmp(&families[i].key, &fk, sizeof fk)) return families[i].reference ? NULL : &families[i];
    if (families_n == FAMILY_CACHE) return NULL; /* more families than a run has: per shape */
    Prim *p = &families[families_n++];
    memset(p, 0, sizeof *p);
    char impl[64] = "";
    double t0 = omp_get_wtime();
    dnnl_status_t st = prim_create(p, &fk, 1, impl, sizeof impl);
    gemm_stats_primitive(omp_get_wtime() - t0);
    p->key = fk;
    /* a family whose gemm would sum in a scratchpad (not into C) is left per shape:
     * its size is not known before the call */
    p->reference = st != dnnl_success || strncmp(impl, "gemm:", 5) != 0 || p->scratch_bytes != 0;
    return p->reference ? NULL : p;
}

/* A family's calls need memory objects of their own dims and strides: made once per
 * operand (A, B or C: two operands of one descriptor are two objects, each with its
 * own data handle) and descriptor and kept (a few small allocations where a
 * primitive made hundreds); past MEM_CACHE of them they are replaced in turn, but
 * never one the running product has already taken: a product takes three, one after
 * another, and replacing the first while fetching the third destroyed an object that
 * was then handed to oneDNN (or its address reused for the new one: two operands on
 * one object, 'matmul failed (status 2)' or stray writes; the demo's sft died so). */
typedef struct {
    dnnl_data_type_t dt;
    int operand, nd;
    dnnl_dim_t dims[5], strides[5];
} MemKey; /* memset before filling: compared bytewise */

#define MEM_CACHE 512
static struct {
    MemKey key;
    dnnl_memory_t mem;
    long call; /* the last product (mems_call) that took it */
} mems[MEM_CACHE];
static int mems_n, mems_next;
static long mems_call; /* family products so far: run counts them */

static dnnl_memory_t mem_get(int operand, const dnnl_memory_desc_t *md) {
    MemKey k;
    memset(&k, 0, sizeof k);
    k.dt = md->data_type, k.operand = operand, k.nd = md->ndims;
    for (int i = 0; i < md->ndims; i++) k.dims[i] = md->dims[i], k.strides[i] = md->format_desc.blocking.strides[i];
    for (int i = 0; i < mems_n; i++)
        if (!memcmp(&mems[i].key, &k, sizeof k)) {
            mems[i].call = mems_call;
            return mems[i].mem;
        }
    int slot = mems_n < MEM_CACHE ? mems_n++ : -1;
    if (slot < 0) { /* full: the next in turn that this product does not hold (it holds at most 2) */
        while (mems[mems_next].call == mems_call) mems_next = (mems_next + 1) % MEM_CACHE;
        slot = mems_next;
        mems_next = (mems_next + 1) % MEM_CACHE;
        dnnl_memory_destroy(mems[slot].mem);
    }
    mems[slot].key = k, mems[slot].call = mems_call;
    dnnl_must(dnnl_memory_create(&mems[slot].mem, md, engine, DNNL_MEMORY_NONE), "memory");
    return mems[slot].mem;
}

/* ---- running a product ---- */

/* p's primitive on A, B into C through the memory objects ma, mb, mc. */
static void exec(const Prim *p, dnnl_memory_t ma, dnnl_memory_t mb, dnnl_memory_t mc, const void *A, const void *B,
                 void *C) {
    if (p->scratch_bytes > scratch_cap) {
        free(scratch);
        scratch = xaligned(p->scratch_bytes);
        scratch_cap = p->scratch_bytes;
    }
    dnnl_must(dnnl_memory_set_data_handle(ma, (void *)A), "src handle");
    dnnl_must(dnnl_memory_set_data_handle(mb, (void *)B), "weights handle");
    dnnl_must(dnnl_memory_set_data_handle(mc, C), "dst handle");
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    int n_args = 3;
    if (p->scratch_bytes) {
        dnnl_must(dnnl_memory_set_data_handle(p->ms, scratch), "scratchpad handle");
        args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->ms};
    }
    dnnl_must(dnnl_primitive_execute(p->prim, stream, n_args, args), "matmul");
    dnnl_must(dnnl_stream_wait(stream), "stream wait");
}

/* k's product on A, B into C: on its family's primitive, else on its shape's. */
static int run(const PrimKey *k, const void *A, const void *B, void *C) {
    CHECK(!omp_in_parallel());
    dnnl_start();
    const Prim *f = family_get(k);
    if (f) {
        dnnl_memory_desc_t a_md, b_md, c_md;
        key_descs(k, 0, &a_md, &b_md, &c_md);
        mems_call++; /* a new product: the objects it takes below stay until it has run */
        dnnl_memory_t ma = mem_get(0, &a_md), mb = mem_get(1, &b_md), mc = mem_get(2, &c_md);
        exec(f, ma, mb, mc, A, B, C);
        return 0;
    }
    const Prim *p = prim_get(k);
    if (p->reference) return -1;
    exec(p, p->ma, p->mb, p->mc, A, B, C);
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
    if (prim_create(&p, &k, 0, impl, n) != dnnl_success) return 0;
    prim_destroy(&p);
    return 1;
}

