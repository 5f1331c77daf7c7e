/* rollout/source.c — the training prompts, the generator, its turns and the
 * rewards, set up over the trainable model; a round drawn and scored over the
 * run's processes; evaluation through the same generator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/timer.h"
#include "eval/evaluate.h"
#include "rollout/source.h"

#define STREAM_GEN 0x67656e65726174ULL /* "generat" */

int rollout_source_load(RolloutSource *s, const RolloutArgs *a, const TrainWorld *w, GrpoErr *err) {
    memset(s, 0, sizeof *s);
    s->a = a, s->world = w;
    if (a->tools->tools_path) { /* the schemas first: every prompt is rendered with them */
        if (tool_schemas_load(a->tools->tools_path, &s->tool_schemas, err)) return -1;
        s->tools_json = json_dumps(s->tool_schemas, JSON_COMPACT);
        a->gen->tools_json = s->tools_json;
    }
    DatasetConversation conv;
    return dataset_load_conversation(&s->sess.data, a->dataset, prompt_options_conversation(a->prompts, &conv), err);
}

/* The tool loop's turn hooks, counting each completion's calls into the group's
 * counters (s->turns) as they go. */
static void count_calls(struct RolloutTurns *rt, int index, long calls, long failures) {
    if (!rt->calls || index < 0) return;
    rt->calls[index] += (int)(rt->loop->calls - calls);
    rt->failures[index] += (int)(rt->loop->failures - failures);
}

static int turn_end(void *ctx, int index, const Completion *c, const int32_t **ids) {
    struct RolloutTurns *rt = ctx;
    long calls = rt->loop->calls, failures = rt->loop->failures;
    int k = tool_loop_turn_end(rt->loop, index, c, ids);
    count_calls(rt, index, calls, failures);
    return k;
}

static int turn_begin(void *ctx, int index, const Completion *c, const int32_t **ids) {
    struct RolloutTurns *rt = ctx;
    long calls = rt->loop->calls, failures = rt->loop->failures;
    int k = tool_loop_turn_begin(rt->loop, index, c, ids);
    count_calls(rt, index, calls, failures);
    return k;
}

static int turn_wait(void *ctx, int block, int *index, const int32_t **ids) {
    struct RolloutTurns *rt = ctx;
    long calls = rt->loop->calls, failures = rt->loop->failures;
    *index = -1;
    int k = tool_loop_turn_wait(rt->loop, block, index, ids);
    count_calls(rt, *index, calls, failures);
    return k;
}

int rollout_source_open(RolloutSource *s, TrainModel *tm, GrpoErr *err) {
    const RolloutArgs *a = s->a;
    s->tm = tm;
    Dataset data = s->sess.data; /* the session takes it over */
    memset(&s->sess.data, 0, sizeof s->sess.data);
    if (gen_session_borrow(&s->sess, train_model_policy(tm), train_model_tokenizer(tm), &data, a->gen,
                           a->max_prompt_length, 0, err))
        return -1;
    if (tool_loop_open(&s->tools, a->tools, s->tool_schemas, s->sess.tok, a->gen->chat_template_kwargs, err) ||
        env_loop_open(&s->env, a->env, s->sess.tok, a->gen->chat_template_kwargs, err))
        return -1;
    dataset_sampler_init(&s->order, s->sess.data.n, a->shuffle_dataset, a->seed);
    return reward_set_from_args(&s->rewards, a->rewards, err) || eval_check_columns(&s->rewards, &s->sess.data, 0, err)
               ? -1 : 0;
}

int rollout_source_start(RolloutSource *s, TrainModel *tm, GrpoErr *err) {
    const RolloutArgs *a = s->a;
    GenOpts go = *a->gen;
    go.device = train_model_gen_device(tm);
    if (gen_session_start(&s->sess, &go, err)) return -1;
    if (s->tools.proc) { /* the generator goes on after each tool turn (TRL's _tool_call_loop) */
        s->turns.loop = &s->tools;
        gen_set_turns(&s->sess.gen, &(GenTurns){turn_end, &s->turns});
        if (s->tools.pool) /* tool_workers: the tool waits overlap the other sequences' decoding */
            gen_set_overlap(&s->sess.gen, &(GenOverlap){turn_begin, turn_wait});
    }
    if (s->env.proc) /* the generator goes on after each environment message */
        gen_set_turns(&s->sess.gen, &(GenTurns){env_loop_turn_end, &s->env});
    if (a->eval_dataset) { /* the eval prompts, through the same generator */
        DatasetConversation conv;
        if (dataset_load_conversation(&s->eval_data, a->eval_dataset, prompt_options_conversation(a->prompts, &conv),
                                      err))
            return -1;
        s->have_eval = 1;
        if (eval_check_columns(&s->rewards, &s->eval_data, 0, err)) return -1;
        if (gen_session_prepare(&s->sess, &s->eval_data, a->gen, a->max_prompt_length, err)) return -1;
    }
    return 0;
}

void rollout_source_close(RolloutSource *s) {
    reward_set_free(&s->rewards);
    dataset_sampler_free(&s->order);
    gen_session_close(&s->sess); /* its dataset too, before the session had it */
    if (s->have_eval) dataset_free(&s->eval_data);
    tool_loop_close(&s->tools);
    env_loop_close(&s->env);
    json_decref(s->tool_schemas);
    free(s->tools_json);
    memset(s, 0, sizeof *s);
}

/* The prompts at data positions pos0 .. pos0 + P - 1 and this process's range of
 * their completions, the groups' parts decoded together; then every process has
 * them all. With tools or an environment, a group at a time: the calls of each
 * completion are counted, the environment sees its group. */
static int generate(RolloutSource *s, RolloutGroups *g, long pos0, GrpoErr *err) {
    int lo, hi, rc = 0, n_parts = 0, turns = g->tool_calls || g->env_reward;
    Generator *gen = &s->sess.gen;
    train_world_range(s->world, g->n, &lo, &hi);
    if (g->tool_calls) {
        memset(g->tool_calls, 0, sizeof(int) * g->n);
        memset(g->tool_failures, 0, sizeof(int) * g->n);
    }
    for (int i = 0; g->env_reward && i < g->n; i++) g->env_reward[i] = NAN;
    for (int p = 0; p < g->P; p++) {
        long pos = pos0 + p;
        g->example[p] = dataset_sampler_index(&s->order, pos);
        const DatasetExample *ex = g->prompt[p] = &s->sess.data.ex[g->example[p]];
        int a = p * g->G > lo ? p * g->G : lo, b = (p + 1) * g->G < hi ? (p + 1) * g->G : hi;
        if (a >= b || rc) continue;
        GenGroup part = {ex->prompt_ids, ex->n_prompt_ids, a - p * g->G, b - a, rng_mix(STREAM_GEN, (uint64_t)pos),
                         g->comp + a};
        if (!turns) {
            g->parts[n_parts++] = part;
            continue;
        }
        if (g->tool_calls) /* turn_end's index is the completion's within its group */
            s->turns.calls = g->tool_calls + p * g->G, s->turns.failures = g->tool_failures + p * g->G;
        if (g->env_reward) /* the environment sees the group's prompt and row */
            env_loop_begin_group(&s->env, ex->prompt, ex->row, g->G);
        if (gen_groups(gen, &part, 1) < 0) { /* the completions left empty */
            rc = err_set(err, "%s", gen->err.msg[0] ? gen->err.msg : g->env_reward ? s->env.err.msg : s->tools.err.msg);
            continue;
        }
        for (int i = a; g->env_reward && i < b; i++) g->env_reward[i] = env_loop_reward(&s->env, i - p * g->G);
    }
    s->turns.calls = s->turns.failures = NULL;
    if (!rc && n_parts && gen_groups(gen, g->parts, n_parts) < 0) rc = err_set(err, "%s", gen->err.msg); /* the device */
    for (int i = lo; i < hi && !rc; i++) s->tokens += g->prompt[i / g->G]->n_prompt_ids + g->comp[i].n;
    if (train_world_check(s->world, rc, err)) return -1;
    rollout_groups_share(s->world, g, lo, hi);
    return 0;
}

/* Decodes every completion; scores this process's range, then every process has
 * every score. */
static int score(RolloutSource *s, RolloutGroups *g, const HfStateInfo *state, GrpoErr *err) {
    int F = s->rewards.n_funcs, lo, hi;
    train_world_range(s->world, g->n, &lo, &hi);
    int cnt = hi - lo, rc = 0;
    for (int i = 0; i < g->n && !rc; i++) {
        const DatasetExample *ex = g->prompt[i / g->G];
        size_t len = 0;
        if (tok_decode_generated_in(s->sess.tok, g->decode, g->comp[i].ids, g->comp[i].n, 1, &g->text[i], &len, err))
            rc = -1;
        if (i >= lo && i < hi)
            g->items[i - lo] = (RewardItem){ex->prompt, ex->prompt_text, g->text[i], g->comp[i].ids, g->comp[i].n,
                                            ex->row, s->sess.data.path, ex->line,
                                            g->env_reward ? &g->env_reward[i] : NULL};
    }
    double *mine = g->scores; /* [F][cnt] */
    json_t *trainer_state = hf_state_fields(state); /* TRL passes the trainer's state */
    RewardBatch batch = {g->items, cnt, trainer_state, s->sess.data.columns, s->sess.data.n_columns};
    if (!rc && cnt) rc = reward_set_compute(&s->rewards, &batch, mine, NULL, err);
    json_decref(trainer_state);
    rc = train_world_check(s->world, rc, err); /* a reward failing on any process stops every one */
    if (!rc && train_world_size(s->world) == 1) {
        for (int f = 0; f < F; f++)
            memcpy(g->per_func + (size_t)f * g->n, mine + (size_t)f * cnt, sizeof(double) * cnt);
    } else if (!rc) { /* per_func[f][i]: each completion's F scores travel together */
        double **row = g->score_rows;
        for (int i = 0; i < g->n; i++) {
            g->len[i] = F;
            row[i] = i >= lo && i < hi ? xmalloc(sizeof(double) * (F ? F : 1)) : NULL;
            if (row[i])
                for (int f = 0; f < F; f++) row[i][f] = mine[(size_t)f * cnt + (i - lo)];
        }
        train_world_share(s->world, (void **)row, g->len, g->n, sizeof(double), 0);
        for (int i = 0; i < g->n; i++) {
            for (int f = 0; f < F; f++) g->per_func[(size_t)f * g->n + i] = row[i][f];
            free(row[i]);
        }
    }
    return rc;
}

/* Before each generation: the generator reads the weights the last update left
 * (on a GPU the trainable model's device copy, made current; after a resume the
 * device's weights are the old ones). */
static void weights_current(RolloutSource *s) {
    const GenDevice *dv = train_model_gen_device(s->tm);
    CHECK(dv == s->sess.gen.opts.device); /* the generator decodes where the model trains */
}

int rollout_source_draw(RolloutSource *s, RolloutGroups *g, const HfStateInfo *state, GrpoErr *err) {
    double t0 = time_now_s();
    weights_current(s);
    if (generate(s, g, s->position, err)) return -1;
    s->position += g->P;
    double t1 = time_now_s();
    s->t_gen += t1 - t0;
    int rc = score(s, g, state, err);
    s->t_score += time_now_s() - t1;
    return rc;
}

int rollout_source_evaluate(RolloutSource *s, int G, uint64_t stream, double pass_threshold, const HfStateInfo *state,
                            MetricAcc *m, GrpoErr *err) {
    int rc = 0;
    json_t *trainer_state = hf_state_fields(state); /* the rewards see the run's state, as TRL's evaluate */
    EvalTotals tot;
    eval_totals_init(&tot, s->rewards.n_funcs);
    weights_current(s); /* a resumed run may evaluate before any pass */
    int batch = gen_groups_per_chunk(&s->sess.gen, G); /* examples whose groups one chunk decodes together */
    for (int p = 0; p < s->eval_data.n && !rc; p += batch)
        rc = eval_examples(&tot, &s->sess.gen, s->sess.tok, &s->eval_data, p,
                           s->eval_data.n - p < batch ? s->eval_data.n - p : batch, G, stream, &s->rewards,
                           trainer_state, pass_threshold, s->env.proc ? &s->env : NULL, err);
    if (rc && s->tools.proc && s->tools.err.msg[0]) err_set(err, "%s", s->tools.err.msg); /* the tool's failure */
    if (rc && s->env.proc && s->env.err.msg[0]) err_set(err, "%s", s->env.err.msg); /* the environment's */
    if (!rc) eval_add_metrics(&tot, &s->rewards, m);
    eval_totals_free(&tot);
    json_decref(trainer_state);
    return rc;
}

void rollout_source_describe(const RolloutSource *s, int G, char *buf, size_t size) {
    /* a round's groups are decoded in chunks of gen.chunk completions (planned from kv_cache_mb alone), several
     * groups a chunk where they fit (each its prompt's cache slot besides its completions'); on a GPU the
     * generator's KV caches, step buffers and sampler are the device's, and it decodes the training's bf16
     * copy of the policy, which holds no second copy of the weights */
    int chunk = s->sess.gen.chunk;
    const char *where = s->sess.gen.opts.device ? " on the GPU" : "",
               *reads = s->sess.gen.opts.device ? "; KV caches, logits and sampler there, decoding the policy's "
                                                  "bf16 copy the training keeps" : "";
    int together = chunk >= G ? gen_groups_per_chunk(&s->sess.gen, G) : 1; /* groups sharing a chunk */
    if (together > 1)
        snprintf(buf, size, ", generation%s %.0f (room for %d completions: groups of %d decoded together, up to %d at "
                 "once%s)", where, s->sess.gen.bytes / 1048576.0, chunk, G, together, reads);
    else if (chunk >= G)
        snprintf(buf, size, ", generation%s %.0f (room for %d completions: a group's %d decoded together%s)", where,
                 s->sess.gen.bytes / 1048576.0, chunk, G, reads);
    else
        snprintf(buf, size, ", generation%s %.0f (a group's %d completions decoded %d at a time%s)", where,
                 s->sess.gen.bytes / 1048576.0, G, chunk, reads);
}
