/* eval/evaluate.c — completions on a dataset, scored (evaluate.h). */
#include "eval/evaluate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/rng.h"

void eval_totals_init(EvalTotals *t, int n_funcs) {
    *t = (EvalTotals){0};
    t->n_funcs = n_funcs;
    t->func_sum = xcalloc(n_funcs ? n_funcs : 1, sizeof(double));
    t->func_n = xcalloc(n_funcs ? n_funcs : 1, sizeof(long));
}

void eval_totals_free(EvalTotals *t) {
    free(t->func_sum);
    free(t->func_n);
    *t = (EvalTotals){0};
}

int eval_check_columns(const RewardSet *rs, const Dataset *data, int n, GrpoErr *err) {
    int end = n > 0 && n < data->n ? n : data->n;
    for (int p = 0; p < end; p++)
        if (reward_set_check_row(rs, data->ex[p].row, data->path, data->ex[p].line, err)) return -1;
    return 0;
}

/* Example p's G completions out[G] decoded and scored into t; its environment's
 * rewards read (env). */
static int score_example(EvalTotals *t, const Tokenizer *tok, const Dataset *data, int p, int G, Completion *out,
                         RewardSet *rs, const json_t *trainer_state, double pass_threshold, EnvLoop *env,
                         GrpoErr *err) {
    const DatasetExample *ex = &data->ex[p];
    int F = rs->n_funcs, rc = 0;
    char **text = xcalloc(G, sizeof(char *));
    RewardItem *items = xcalloc(G, sizeof(RewardItem));
    double *per_func = xmalloc(sizeof(double) * (F ? F : 1) * G), *total = xmalloc(sizeof(double) * G);
    double *env_reward = xmalloc(sizeof(double) * G);
    for (int i = 0; i < G && !rc; i++) {
        size_t len = 0;
        if (tok_decode_generated(tok, out[i].ids, out[i].n, 1, &text[i], &len, err)) rc = -1;
        env_reward[i] = env ? env_loop_reward(env, i) : NAN;
        items[i] = (RewardItem){ex->prompt, ex->prompt_text, text[i], out[i].ids, out[i].n, ex->row, data->path,
                                ex->line, env ? &env_reward[i] : NULL};
    }
    RewardBatch batch = {items, G, trainer_state, data->columns, data->n_columns};
    if (!rc) rc = reward_set_compute(rs, &batch, per_func, total, err);
    for (int i = 0; i < G && !rc; i++) {
        t->completions++;
        t->total_sum += total[i], t->total_sqsum += total[i] * total[i];
        t->passed += total[i] >= pass_threshold;
        for (int k = 0; k < out[i].n; k++) t->tokens += !out[i].mask || out[i].mask[k]; /* the model's, as TRL */
        t->stopped += out[i].stopped;
        for (int f = 0; f < F; f++) {
            double v = per_func[(size_t)f * G + i];
            if (!isnan(v)) t->func_sum[f] += v, t->func_n[f]++;
        }
    }
    if (!rc) t->examples++;
    for (int i = 0; i < G; i++) free(text[i]);
    free(text), free(items), free(per_func), free(total), free(env_reward);
    return rc;
}

int eval_examples(EvalTotals *t, Generator *gen, const Tokenizer *tok, const Dataset *data, int p0, int n, int G,
                  uint64_t stream_base, RewardSet *rs, const json_t *trainer_state, double pass_threshold,
                  EnvLoop *env, GrpoErr *err) {
    CHECK(n >= 1 && (n == 1 || (!env && !gen->turns.turn_end)));
    int maxc = gen->opts.max_completion_length, rc = 0;
    Completion *out = xcalloc((size_t)n * G, sizeof(Completion));
    GenGroup *parts = xmalloc(sizeof(GenGroup) * n);
    for (int j = 0; j < n; j++) {
        const DatasetExample *ex = &data->ex[p0 + j];
        Completion *o = out + (size_t)j * G;
        for (int i = 0; i < G; i++)
            o[i] = (Completion){.ids = xmalloc(sizeof(int32_t) * maxc), .logp = xmalloc(sizeof(float) * maxc),
                                .mask = gen->turns.turn_end ? xmalloc(maxc) : NULL};
        parts[j] = (GenGroup){ex->prompt_ids, ex->n_prompt_ids, 0, G, rng_mix(stream_base, (uint64_t)(p0 + j)), o};
    }
    if (env) env_loop_begin_group(env, data->ex[p0].prompt, data->ex[p0].row, G);
    if (gen_groups(gen, parts, n) < 0)
        rc = gen->err.msg[0] ? err_set(err, "example %d: %s", p0, gen->err.msg)
                             : err_set(err, "example %d: a turn of its generation failed (the generator's turns say why)", p0);
    for (int j = 0; j < n && !rc; j++)
        rc = score_example(t, tok, data, p0 + j, G, out + (size_t)j * G, rs, trainer_state, pass_threshold, env, err);
    for (size_t i = 0; i < (size_t)n * G; i++) completion_free(&out[i]);
    free(out), free(parts);
    return rc;
}

void eval_describe_sampling(char *buf, size_t n, const SamplerOpts *s) {
    if (s->temperature == 0) {
        snprintf(buf, n, "greedy");
        return;
    }
    int k = snprintf(buf, n, "sampled at temperature %g", s->temperature);
    if (s->top_k > 0 && (size_t)k < n) k += snprintf(buf + k, n - k, ", top_k %d", s->top_k);
    if (s->top_p < 1 && (size_t)k < n) k += snprintf(buf + k, n - k, ", top_p %g", s->top_p);
    if (s->min_p > 0 && (size_t)k < n) k += snprintf(buf + k, n - k, ", min_p %g", s->min_p);
    if (s->repetition_penalty != 1 && (size_t)k < n)
        snprintf(buf + k, n - k, ", repetition_penalty %g", s->repetition_penalty);
}

void eval_describe(char *buf, size_t n, long prompts, int G, const SamplerOpts *s) {
    char how[240];
    eval_describe_sampling(how, sizeof how, s);
    snprintf(buf, n, "%ld prompt%s x %d completion%s%s%s", prompts, prompts == 1 ? "" : "s", G, G == 1 ? "" : "s",
             s->temperature == 0 ? ", " : " ", how);
}

static double ratio(double a, long n) {
    return n > 0 ? a / n : NAN;
}

double eval_reward(const EvalTotals *t) { return ratio(t->total_sum, t->completions); }

double eval_reward_std(const EvalTotals *t) {
    double mean = eval_reward(t), var = ratio(t->total_sqsum, t->completions) - mean * mean;
    return t->completions > 1 ? sqrt(fmax(var, 0) * t->completions / (t->completions - 1)) : NAN;
}

double eval_pass_at_1(const EvalTotals *t) { return ratio((double)t->passed, t->completions); }
double eval_mean_length(const EvalTotals *t) { return ratio((double)t->tokens, t->completions); }
double eval_frac_stopped(const EvalTotals *t) { return ratio((double)t->stopped, t->completions); }
double eval_func_mean(const EvalTotals *t, int f) { return ratio(t->func_sum[f], t->func_n[f]); }

void eval_add_metrics(const EvalTotals *t, const RewardSet *rs, MetricAcc *m) {
    metric_add(m, "eval_reward", eval_reward(t));
    metric_add(m, "eval_reward_std", eval_reward_std(t));
    for (int f = 0; f < rs->n_funcs; f++) {
        char name[300];
        snprintf(name, sizeof name, "eval_rewards/%s/mean", rs->funcs[f]->name);
        metric_add(m, name, eval_func_mean(t, f));
    }
    metric_add(m, "eval_pass@1", eval_pass_at_1(t));
    metric_add(m, "eval_completions/mean_length", eval_mean_length(t));
}
