/* tests/optim/test_optim.c — AdamW + clip_grad_norm_ + linear warmup schedule
 * against torch (fixture: 4 steps in float64 of torch.optim.AdamW with a
 * decay and a no-decay group), schedules at hand-computed steps, the weight
 * decay mask on real HF names, clipping with NaN / Inf, and thread-count
 * independence of the norm.
 * Tolerances: the norm is double over exact fp32 inputs: rtol 1e-12. The lr
 * is the same double formula: rtol 1e-15. Parameters are updated in fp32
 * (torch's reference in float64): atol 1e-6, rtol 1e-6 after 4 steps of
 * size <= 1e-3 (an fp32 ulp of the values is ~1e-7). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "model/params.h"
#include "ops/ops.h"
#include "optim/optim.h"
#include "testutil.h"
#include "grpo/fixture.h"
#include "optim/sched_cases.h"

/* A schedule without kwargs (transformers' defaults). */
static double factor(SchedType t, long long step, long long warmup, long long total) {
    Schedule s;
    GrpoErr err;
    if (sched_init(&s, t, NULL, 1e-3, warmup, total, &err)) return NAN;
    return sched_lr_factor(&s, step);
}

static void test_fixture(void) {
    StFile f;
    GrpoErr err;
    if (st_open(&f, GRPO_FIXTURE, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        t_failures++;
        return;
    }
    long N, ng;
    double *p0 = fx_f64(&f, "adamw.param0", &N), *dec = fx_f64(&f, "adamw.decay", NULL);
    double *grads = fx_f64(&f, "adamw.grads", &ng), *norms = fx_f64(&f, "adamw.norms", NULL);
    double *lrs = fx_f64(&f, "adamw.lrs", NULL), *want = fx_f64(&f, "adamw.params", NULL);
    const int steps = (int)(ng / N);
    float *p = malloc(sizeof(float) * N), *g = malloc(sizeof(float) * N);
    uint8_t *mask = malloc(N);
    for (long i = 0; i < N; i++) p[i] = (float)p0[i], mask[i] = (uint8_t)dec[i];
    AdamW opt;
    AdamWConfig c;
    adamw_config_default(&c);
    c.weight_decay = 0.1;
    adamw_init(&opt, (size_t)N);
    /* the same steps on the weights held as two halves (mixed precision): the same bits */
    AdamW opt_s;
    adamw_init(&opt_s, (size_t)N);
    uint16_t *hi = malloc(sizeof(uint16_t) * N), *lo = malloc(sizeof(uint16_t) * N);
    float *joined = malloc(sizeof(float) * N);
    f32_split_n(hi, lo, p, (size_t)N);
    long long warmup = sched_warmup_steps(0, 0.25, 10);
    T_CHECK(warmup == 3, "warmup %lld", warmup);
    Schedule linear;
    T_CHECK(!sched_init(&linear, SCHED_LINEAR, NULL, 1e-3, warmup, 10, &err), "linear: %s", err.msg);
    for (int s = 0; s < steps; s++) {
        for (long i = 0; i < N; i++) g[i] = (float)grads[s * N + i];
        double norm = grad_clip_norm(g, (size_t)N, 1.0);
        T_CHECK(t_close(norm, norms[s], 0, 1e-12), "step %d norm %.17g want %.17g", s, norm, norms[s]);
        double lr = sched_lr(&linear, 1e-3, s);
        T_CHECK(t_close(lr, lrs[s], 0, 1e-15), "step %d lr %.17g want %.17g", s, lr, lrs[s]);
        adamw_step(&opt, p, g, mask, lr, &c);
        adamw_step_split(&opt_s, hi, lo, g, mask, lr, &c);
        f32_join_n(joined, hi, lo, (size_t)N);
        T_CHECK(!memcmp(joined, p, sizeof(float) * N) && !memcmp(opt_s.m, opt.m, sizeof(float) * N) &&
                    !memcmp(opt_s.v, opt.v, sizeof(float) * N),
                "step %d: adamw_step_split differs from adamw_step", s);
        char what[64];
        snprintf(what, sizeof what, "adamw params after step %d", s);
        T_CLOSE_ARRAY(what, p, want + s * N, N, 1e-6, 1e-6);
    }
    T_CHECK(opt.step == steps, "step count %lld", opt.step);
    T_CHECK(norms[1] < 1.0 && norms[0] > 1.0, "fixture exercises both clip branches");
    adamw_free(&opt);
    adamw_free(&opt_s);
    free(hi), free(lo), free(joined);
    free(p0), free(dec), free(grads), free(norms), free(lrs), free(want), free(p), free(g), free(mask);
    st_close(&f);
}

static void test_schedules(void) {
    /* linear, warmup 3, total 10 */
    T_CHECK(factor(SCHED_LINEAR, 0, 3, 10) == 0.0, "linear 0");
    T_CHECK(fabs(factor(SCHED_LINEAR, 1, 3, 10) - 1.0 / 3) < 1e-16, "linear 1");
    T_CHECK(factor(SCHED_LINEAR, 3, 3, 10) == 1.0, "linear 3");
    T_CHECK(fabs(factor(SCHED_LINEAR, 8, 3, 10) - 2.0 / 7) < 1e-16, "linear 8");
    T_CHECK(factor(SCHED_LINEAR, 10, 3, 10) == 0.0, "linear end");
    T_CHECK(factor(SCHED_LINEAR, 12, 3, 10) == 0.0, "linear past end clamps at 0");
    /* no warmup: step 0 is the full lr */
    T_CHECK(factor(SCHED_LINEAR, 0, 0, 4) == 1.0, "linear no warmup");
    /* cosine, warmup 2, total 12: halfway (step 7) is 0.5, end 0 */
    T_CHECK(fabs(factor(SCHED_COSINE, 1, 2, 12) - 0.5) < 1e-16, "cosine warmup");
    T_CHECK(factor(SCHED_COSINE, 2, 2, 12) == 1.0, "cosine start");
    T_CHECK(fabs(factor(SCHED_COSINE, 7, 2, 12) - 0.5) < 1e-15, "cosine half");
    T_CHECK(fabs(factor(SCHED_COSINE, 12, 2, 12)) < 1e-16, "cosine end");
    T_CHECK(fabs(factor(SCHED_COSINE, 4, 2, 12) - 0.5 * (1 + cos(M_PI * 0.2))) < 1e-15, "cosine 4");
    /* constant ignores warmup; constant_with_warmup does not */
    T_CHECK(factor(SCHED_CONSTANT, 0, 5, 10) == 1.0, "constant");
    T_CHECK(factor(SCHED_CONSTANT_WITH_WARMUP, 2, 4, 10) == 0.5, "cww warmup");
    T_CHECK(factor(SCHED_CONSTANT_WITH_WARMUP, 9, 4, 10) == 1.0, "cww after");
    Schedule cww;
    GrpoErr err;
    T_CHECK(!sched_init(&cww, SCHED_CONSTANT_WITH_WARMUP, NULL, 2e-5, 4, 10, &err), "init");
    T_CHECK(sched_lr(&cww, 2e-5, 1) == 2e-5 * 0.25, "sched_lr");
    /* warmup steps: explicit wins; ratio uses ceil, including 100 * 0.07 = 7.000000000000001 -> 8
     * exactly as Python's math.ceil in transformers */
    T_CHECK(sched_warmup_steps(5, 0.5, 100) == 5, "explicit warmup");
    T_CHECK(sched_warmup_steps(0, 0.1, 25) == 3, "ceil(2.5)");
    T_CHECK(sched_warmup_steps(0, 0.07, 100) == 8, "ceil(100*0.07)");
    T_CHECK(sched_warmup_steps(0, 0.1, 30) == 3, "ceil(30*0.1)");
    T_CHECK(sched_warmup_steps(0, 0.0, 30) == 0, "no warmup");
    SchedType t;
    T_CHECK(!sched_parse("constant_with_warmup", &t) && t == SCHED_CONSTANT_WITH_WARMUP, "parse");
    T_CHECK(!sched_parse("warmup_stable_decay", &t) && t == SCHED_WARMUP_STABLE_DECAY, "parse wsd");
    T_CHECK(sched_parse("reduce_lr_on_plateau", &t) == -1, "unsupported");
    T_CHECK(!strcmp(sched_name(SCHED_COSINE), "cosine"), "name");
}

/* Every schedule against the formulas written out in tools/sched_reference.py
 * (sched_cases.h), step by step and one step past the end. Tolerance: the same
 * double formulas in another order (polynomial's (lr - end) / lr): atol 1e-15. */
static void test_schedule_table(void) {
    for (size_t c = 0; c < sizeof sched_cases / sizeof sched_cases[0]; c++) {
        const SchedCase *k = &sched_cases[c];
        SchedType t;
        Schedule s;
        GrpoErr err;
        json_t *kw = json_loads(k->kwargs, 0, NULL);
        int ok = !sched_parse(k->name, &t) && !sched_init(&s, t, kw, k->lr, k->warmup, k->total, &err);
        json_decref(kw);
        T_CHECK(ok, "%s %s: %s", k->name, k->kwargs, err.msg);
        for (int step = 0; ok && step <= k->total + 1; step++) {
            double f = sched_lr_factor(&s, step);
            T_CHECK(fabs(f - k->f[step]) <= 1e-15, "%s %s warmup %d total %d step %d: %.17g want %.17g", k->name,
                    k->kwargs, k->warmup, k->total, step, f, k->f[step]);
        }
    }
}

/* lr_scheduler_kwargs refused by name, as transformers' functions refuse them. */
static void test_schedule_kwargs(void) {
    static const struct { const char *sched, *kwargs, *want; } bad[] = {
        {"cosine", "{\"min_lr_rate\": 0.1}", "'min_lr_rate' is not an argument of cosine (it takes num_cycles)"},
        {"linear", "{\"num_cycles\": 1}", "'num_cycles' is not an argument of linear (it takes none)"},
        {"constant_with_warmup", "{\"num_warmup_steps\": 1}", "not an argument of constant_with_warmup"},
        {"cosine_with_min_lr", "{}", "needs lr_scheduler_kwargs min_lr_rate"},
        {"cosine_with_min_lr", "{\"min_lr\": 1e-7, \"min_lr_rate\": 0.1}", "min_lr or min_lr_rate, not both"},
        {"cosine_with_min_lr", "{\"min_lr_rate\": \"0.1\"}", "min_lr_rate must be a number >= 0, got a string"},
        {"cosine_with_min_lr", "{\"min_lr_rate\": -1}", "min_lr_rate must be a number >= 0"},
        {"warmup_stable_decay", "{}", "needs lr_scheduler_kwargs num_decay_steps"},
        {"warmup_stable_decay", "{\"num_decay_steps\": 2.5}", "num_decay_steps must be a whole number"},
        {"warmup_stable_decay", "{\"num_decay_steps\": 2, \"decay_type\": \"exp\"}",
         "decay_type must be 'linear', 'cosine' or '1-sqrt'"},
        {"polynomial", "{\"lr_end\": 0.01}", "lr_end (0.01) must be smaller than learning_rate (0.001)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        SchedType t;
        Schedule s;
        GrpoErr err = {{0}};
        json_t *kw = json_loads(bad[i].kwargs, 0, NULL);
        int rc = sched_parse(bad[i].sched, &t) ? 0 : sched_init(&s, t, kw, 1e-3, 2, 10, &err);
        json_decref(kw);
        T_CHECK(rc == -1 && strstr(err.msg, bad[i].want), "%s %s: got '%s', want '%s'", bad[i].sched, bad[i].kwargs,
                err.msg, bad[i].want);
    }
}

static void test_decay_mask(void) {
    static const struct { const char *name; int decays; } cases[] = {
        {"model.embed_tokens.weight", 1},
        {"model.layers.0.input_layernorm.weight", 0},
        {"model.layers.3.post_attention_layernorm.weight", 0},
        {"model.layers.0.self_attn.q_proj.weight", 1},
        {"model.layers.0.self_attn.q_proj.bias", 0},
        {"model.layers.0.self_attn.o_proj.bias", 0},
        {"model.layers.0.self_attn.q_norm.weight", 0},
        {"model.layers.0.self_attn.k_norm.weight", 0},
        {"model.layers.0.mlp.down_proj.weight", 1},
        {"model.norm.weight", 0},
        {"lm_head.weight", 1},
        {"model.normalizer.weight", 1},     /* "norm" not a whole segment */
        {"model.LayerNorm.weight", 0},      /* matched lower-cased */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        T_CHECK(adamw_decays(cases[i].name) == cases[i].decays, "%s", cases[i].name);

    static const char *const dirs[] = {"tests/fixtures/qwen2", "tests/fixtures/qwen3", "tests/fixtures/llama"};
    for (int d = 0; d < 3; d++) {
        ModelConfig cfg;
        GrpoErr err;
        if (config_load(&cfg, dirs[d], &err)) {
            T_CHECK(0, "%s", err.msg);
            continue;
        }
        ParamTable t;
        params_build(&t, &cfg);
        uint8_t *mask = malloc(t.total);
        memset(mask, 7, t.total);
        adamw_decay_mask_build(mask, &t);
        size_t decayed = 0, expect = 0, covered = 0;
        int bad = 0;
        for (size_t i = 0; i < t.total; i++) decayed += mask[i] == 1, bad += mask[i] > 1;
        T_CHECK(!bad, "%s: every element (gaps included) is set to 0 or 1", dirs[d]);
        for (int i = 0; i < t.n; i++) {
            const char *nm = t.entries[i].name;
            int is_norm = strstr(nm, "norm") != NULL, is_bias = strstr(nm, ".bias") != NULL;
            T_CHECK(adamw_decays(nm) == !(is_norm || is_bias), "%s", nm);
            if (adamw_decays(nm)) expect += t.entries[i].numel;
            covered += t.entries[i].numel;
        }
        T_CHECK(decayed == expect && covered <= t.total, "%s: decayed %zu expect %zu", dirs[d], decayed, expect);
        free(mask);
        params_free(&t);
        config_free(&cfg);
    }
}

static void test_clip(void) {
    float g[5] = {3, 4, 0, 0, 0};
    double n = grad_clip_norm(g, 5, 1.0);
    T_CHECK(n == 5.0, "norm %g", n);
    T_CHECK(fabsf(g[0] - (float)(3.0 / (5.0 + 1e-6))) < 1e-7f && fabsf(g[1] - 0.8f) < 1e-6f, "clipped %g %g",
            g[0], g[1]);
    float h[2] = {0.3f, 0.4f};
    n = grad_clip_norm(h, 2, 1.0);
    T_CHECK(h[0] == 0.3f && h[1] == 0.4f && fabs(n - 0.5) < 1e-7, "below max_norm untouched");
    float k[3] = {1, NAN, 2};
    n = grad_clip_norm(k, 3, 1.0);
    T_CHECK(isnan(n) && k[0] == 1 && k[2] == 2, "NaN norm reported, grads left");
    float inf[2] = {INFINITY, 1};
    n = grad_clip_norm(inf, 2, 1.0);
    T_CHECK(isinf(n) && inf[1] == 1, "Inf norm reported");
    float z[1] = {2};
    T_CHECK(grad_clip_norm(z, 1, 0.0) == 2.0 && z[0] == 2, "max_norm 0 disables");
    T_CHECK(grad_norm(z, 0) == 0.0, "empty");
    /* thread-count independence on a buffer spanning many blocks */
    size_t N = 100003;
    float *big = malloc(sizeof(float) * N);
    for (size_t i = 0; i < N; i++) big[i] = (float)sin((double)i * 0.37) * (float)(1 + i % 7);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    double n1 = grad_norm(big, N);
    omp_set_num_threads(3);
    double n3 = grad_norm(big, N);
    omp_set_num_threads(saved);
    T_CHECK(n1 == n3, "norm depends on threads: %.17g vs %.17g", n1, n3);
    free(big);
}

static void test_adamw_basics(void) {
    /* first step with decay off: p -= lr * g / (|g| + eps) (bias-corrected m/sqrt(v) = sign) */
    float p[3] = {1, -2, 0.5f}, g[3] = {0.1f, -3, 0};
    AdamW opt;
    AdamWConfig c;
    adamw_config_default(&c);
    T_CHECK(c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0.0, "defaults");
    adamw_init(&opt, 3);
    adamw_step(&opt, p, g, NULL, 0.01, &c);
    T_CHECK(fabsf(p[0] - 0.99f) < 1e-6f && fabsf(p[1] - (-1.99f)) < 1e-6f && p[2] == 0.5f, "first step %g %g %g",
            p[0], p[1], p[2]);
    /* decoupled decay with zero gradient: p *= 1 - lr wd only where the mask says */
    c.weight_decay = 0.5;
    float q[2] = {2, 2}, z[2] = {0, 0};
    uint8_t mask[2] = {1, 0};
    AdamW o2;
    adamw_init(&o2, 2);
    adamw_step(&o2, q, z, mask, 0.1, &c);
    T_CHECK(fabsf(q[0] - 1.9f) < 1e-7f && q[1] == 2.0f, "decay %g %g", q[0], q[1]);
    adamw_free(&opt);
    adamw_free(&o2);
}

int main(void) {
    test_fixture();
    test_schedules();
    test_schedule_table();
    test_schedule_kwargs();
    test_decay_mask();
    test_clip();
    test_adamw_basics();
    return t_summary("optim/test_optim");
}
