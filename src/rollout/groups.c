/* rollout/groups.c — a round's groups in their memory, moved between rounds
 * (dynamic sampling) and between processes, and their completion metrics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rollout/groups.h"

void rollout_groups_init(RolloutGroups *g, int n, int G, int F, int maxc, int tools, int env) {
    int F1 = F ? F : 1;
    memset(g, 0, sizeof *g);
    g->n = n, g->G = G, g->P = n / G, g->F = F, g->maxc = maxc;
    g->example = xmalloc(sizeof(int) * g->P);
    g->prompt = xmalloc(sizeof(DatasetExample *) * g->P);
    g->comp = xcalloc(n, sizeof(Completion));
    g->text = xcalloc(n, sizeof(char *));
    g->per_func = xmalloc(sizeof(double) * F1 * n);
    g->ids_buf = xmalloc(sizeof(int32_t) * n * (size_t)maxc);
    g->logp_buf = xmalloc(sizeof(float) * n * (size_t)maxc);
    if (tools || env) g->mask_buf = xmalloc((size_t)n * maxc);
    if (tools) g->tool_calls = xcalloc(n, sizeof(int)), g->tool_failures = xcalloc(n, sizeof(int));
    if (env) g->env_reward = xmalloc(sizeof(double) * n);
    g->decode = tok_decode_work_new();
    g->items = xmalloc(sizeof(RewardItem) * n);
    g->scores = xmalloc(sizeof(double) * F1 * n);
    g->score_rows = xmalloc(sizeof(double *) * n);
    g->len = xmalloc(sizeof(int) * n);
    g->parts = xmalloc(sizeof(GenGroup) * g->P);
    g->share = xmalloc(sizeof(void *) * n);
}

void rollout_groups_free_texts(RolloutGroups *g) {
    for (int i = 0; i < g->n; i++) free(g->text[i]), g->text[i] = NULL;
}

void rollout_groups_free(RolloutGroups *g) {
    if (g->text) rollout_groups_free_texts(g);
    free(g->example), free(g->prompt), free(g->comp), free(g->text), free(g->per_func);
    free(g->tool_calls), free(g->tool_failures), free(g->env_reward);
    free(g->ids_buf), free(g->logp_buf), free(g->mask_buf);
    free(g->items), free(g->scores), free(g->score_rows), free(g->len), free(g->share), free(g->parts);
    tok_decode_work_free(g->decode);
    memset(g, 0, sizeof *g);
}

void rollout_groups_clear(RolloutGroups *g) {
    for (int i = 0; i < g->n; i++) {
        size_t row = (size_t)i * g->maxc;
        g->comp[i] = (Completion){.ids = g->ids_buf + row, .logp = g->logp_buf + row,
                                  .mask = g->mask_buf ? g->mask_buf + row : NULL};
    }
    rollout_groups_free_texts(g);
}

void rollout_groups_move(RolloutGroups *dst, int k, RolloutGroups *src, int j) {
    int G = src->G;
    dst->example[k] = src->example[j];
    dst->prompt[k] = src->prompt[j];
    for (int q = 0; q < G; q++) {
        int a = k * G + q, b = j * G + q;
        Completion *ca = &dst->comp[a];
        const Completion *cb = &src->comp[b];
        memcpy(ca->ids, cb->ids, sizeof(int32_t) * cb->n);
        memcpy(ca->logp, cb->logp, sizeof(float) * cb->n);
        if (cb->mask) memcpy(ca->mask, cb->mask, (size_t)cb->n);
        ca->n = cb->n, ca->stopped = cb->stopped, ca->n_turns = cb->n_turns;
        dst->text[a] = src->text[b];
        src->text[b] = NULL;
        for (int f = 0; f < src->F; f++) dst->per_func[(size_t)f * dst->n + a] = src->per_func[(size_t)f * src->n + b];
        if (src->tool_calls)
            dst->tool_calls[a] = src->tool_calls[b], dst->tool_failures[a] = src->tool_failures[b];
    }
}

void rollout_groups_share_rows(const TrainWorld *w, RolloutGroups *g, void *const *rows, int *len, size_t elem,
                               int with_len, int lo, int hi) {
    if (train_world_size(w) == 1) return;
    for (int i = 0; i < g->n; i++) g->share[i] = i >= lo && i < hi ? rows[i] : NULL;
    train_world_share(w, g->share, len, g->n, elem, with_len);
    for (int i = 0; i < g->n; i++)
        if (i < lo || i >= hi) {
            memcpy(rows[i], g->share[i], elem * len[i]);
            free(g->share[i]); /* received: malloc'd by the share */
        }
}

/* With tools or an environment: the masks of every completion, and with tools
 * their call counts. */
static void share_turns(const TrainWorld *w, RolloutGroups *g, int lo, int hi) {
    void **mask = xmalloc(sizeof(void *) * g->n), **cnt = xmalloc(sizeof(void *) * g->n);
    int *len = xmalloc(sizeof(int) * g->n), *two = xmalloc(sizeof(int) * g->n);
    for (int i = 0; i < g->n; i++) {
        mask[i] = g->comp[i].mask, len[i] = g->comp[i].n, two[i] = 2;
        cnt[i] = NULL;
        if (i >= lo && i < hi && g->tool_calls) {
            int *c2 = xmalloc(sizeof(int) * 2);
            c2[0] = g->tool_calls[i], c2[1] = g->tool_failures[i];
            cnt[i] = c2;
        }
    }
    rollout_groups_share_rows(w, g, mask, len, 1, 0, lo, hi);
    if (g->tool_calls) train_world_share(w, cnt, two, g->n, sizeof(int), 0);
    for (int i = 0; i < g->n; i++) {
        const int *c2 = cnt[i];
        if (c2) g->tool_calls[i] = c2[0], g->tool_failures[i] = c2[1];
        free(cnt[i]);
    }
    free(mask), free(cnt), free(len), free(two);
}

void rollout_groups_share(const TrainWorld *w, RolloutGroups *g, int lo, int hi) {
    if (train_world_size(w) == 1) return;
    /* across processes (not a single process's steady state): the shares' own lists */
    int n = g->n;
    void **ids = xmalloc(sizeof(void *) * n), **stop = xmalloc(sizeof(void *) * n);
    int *len = xmalloc(sizeof(int) * n), *one = xmalloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) ids[i] = g->comp[i].ids, len[i] = g->comp[i].n, stop[i] = &g->comp[i].stopped, one[i] = 1;
    rollout_groups_share_rows(w, g, ids, len, sizeof(int32_t), 1, lo, hi);
    train_world_share(w, stop, one, n, sizeof(int), 0);
    void **lp = xmalloc(sizeof(void *) * n); /* the sampling log-probs, as long as the ids */
    for (int i = 0; i < n; i++) lp[i] = g->comp[i].logp;
    rollout_groups_share_rows(w, g, lp, len, sizeof(float), 0, lo, hi);
    for (int i = 0; i < n; i++)
        if (i < lo || i >= hi) {
            g->comp[i].n = len[i], g->comp[i].stopped = *(int *)stop[i];
            free(stop[i]);
        }
    free(ids), free(stop), free(len), free(one), free(lp);
    if (g->mask_buf) share_turns(w, g, lo, hi);
}

void rollout_groups_metrics(const RolloutGroups *g, MetricAcc *m) {
    double sum = 0, mn = INFINITY, mx = 0, clipped = 0;
    for (int i = 0; i < g->n; i++) {
        const Completion *c = &g->comp[i];
        int L = c->n; /* TRL counts the model's tokens only (tool_mask 1) */
        if (c->mask) {
            L = 0;
            for (int k = 0; k < c->n; k++) L += c->mask[k];
        }
        sum += L;
        mn = L < mn ? L : mn;
        mx = L > mx ? L : mx;
        clipped += !c->stopped;
    }
    metric_add(m, "completions/mean_length", sum / g->n);
    metric_add(m, "completions/min_length", mn);
    metric_add(m, "completions/max_length", mx);
    metric_add(m, "completions/clipped_ratio", clipped / g->n);
    if (g->tool_calls) { /* TRL: calls per completion of the generation batch; failed calls per call */
        long calls = 0, failures = 0;
        for (int i = 0; i < g->n; i++) calls += g->tool_calls[i], failures += g->tool_failures[i];
        metric_add(m, "tools/call_frequency", (double)calls / g->n);
        metric_add(m, "tools/failure_frequency", calls > 0 ? (double)failures / calls : 0.0);
    }
}
