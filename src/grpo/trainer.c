/* grpo/trainer.c — GRPO as an algorithm of the training loop (see trainer.h):
 * setup and the memory plan, then per optimizer step: gather
 * gradient_accumulation_steps micro-batches (generating rounds as they are
 * needed), compute the loss normaliser over all of them, and accumulate the
 * gradient micro-batch by micro-batch. The loop (train/loop.c) clips, steps
 * AdamW, logs and checkpoints. Not here: rollouts (rollout.c), the micro-batch
 * passes (microbatch.c), checkpoint contents (checkpoint.c), options (config.c). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/timer.h"
#include "eval/evaluate.h"
#include "grpo/trainer_internal.h"
#include "train/world.h"

/* ---- setup ---- */

static void trainer_free(GrpoTrainer *t) {
    if (t->completions_f) fclose(t->completions_f);
    rollout_free(t->cur);
    rollout_free(t->round);
    while (t->spare) {
        Rollout *next = t->spare->next;
        rollout_free(t->spare);
        t->spare = next;
    }
    rollout_source_close(&t->src);
    train_model_close(t->tm);
    micro_scratch_free(&t->ms);
    GrpoStep *st = &t->st;
    free(st->mb), free(st->slice), free(st->retired), free(st->seqs), free(st->off), free(st->trunc);
    free(st->tmask_buf);
}

/* The options with their derived values resolved. */
static void resolve(TrainConfig *c) {
    if (isnan(c->loss.epsilon_high)) c->loss.epsilon_high = c->loss.epsilon_low;
    c->loss.max_completion_length = c->gen.max_completion_length;
    c->loss.grad_accum_steps = c->train.gradient_accumulation_steps;
    c->gen.seed = c->train.seed;
    c->gen.chat_template = c->prompts.chat_template; /* set on the tokenizer before the prompts are rendered */
}

/* The batch sizes of TRL's GRPOConfig, and the step's buffers. */
static void plan_batches(GrpoTrainer *t) {
    const TrainConfig *c = &t->c;
    int B = c->train.per_device_train_batch_size, GA = c->train.gradient_accumulation_steps;
    int N = train_world_size(t->world);
    t->spg = c->generation_batch_size > 0 ? c->generation_batch_size / (B * N)
             : c->steps_per_generation > 0 ? c->steps_per_generation : GA;
    t->gen_batch = B * N * t->spg; /* global, as TRL's */
    /* TRL records the generating policy's log-probs when the policy moves while a
     * generation batch is still in use */
    /* TRL computes them for the sampler correction too, whatever num_iterations */
    t->need_old = c->num_iterations > 1 || t->spg > GA || c->loss.is_correction;
    GrpoStep *st = &t->st;
    int S_all = GA * B * N;
    st->mb = xmalloc(sizeof(Rollout *) * GA);
    st->slice = xmalloc(sizeof(int) * GA);
    st->retired = xmalloc(sizeof(Rollout *) * (GA + 1));
    st->seqs = xmalloc(sizeof(CompletionRef) * S_all);
    st->off = xmalloc(sizeof(int) * (S_all + 1));
    st->trunc = xmalloc(S_all);
    if (c->tools.tools_path || c->env.command) st->tmask_buf = xmalloc((size_t)S_all * c->gen.max_completion_length);
}

static int trainer_setup(GrpoTrainer *t, const TrainConfig *c, GrpoErr *err) {
    memset(t, 0, sizeof *t);
    if (train_config_check(c, err)) return -1;
    t->c = *c;
    resolve(&t->c);
    c = &t->c;
    t->world = train_world_processes();
    plan_batches(t);
    t->entropy_coef = c->loss.entropy_coef;
    t->last_world_entropy = INFINITY; /* no bonus in the first step of adaptive control, as TRL */
    t->ra = (RolloutArgs){c->train.dataset, c->eval_strategy ? c->eval_dataset : NULL, &c->prompts, &t->c.gen,
                          c->max_prompt_length, &c->tools, &c->env, &c->rewards, c->train.shuffle_dataset,
                          c->train.seed};
    if (rollout_source_load(&t->src, &t->ra, t->world, err)) return -1;
    TrainModelNeeds needs = {c->loss.beta != 0, c->sync_ref_model, /* the bonus's gradient: through the entropies */
                             c->loss.entropy_coef != 0 || c->loss.use_adaptive_entropy};
    if (!(t->tm = train_model_open(&c->train, &needs, &t->c.gen, err)) || rollout_source_open(&t->src, t->tm, err))
        return -1;
    int B = c->train.per_device_train_batch_size, L = c->gen.max_completion_length;
    if (train_model_plan(t->tm, B, t->src.sess.longest + L, "max_completion_length", err)) return -1;
    /* a micro-batch's completions, or as many as a reference forward takes (up to the plan's tokens) */
    micro_scratch_init(&t->ms, train_model_logprobs_cap(t->tm, TRAIN_REFERENCE), B * (t->src.sess.longest + L));
    return rollout_source_start(&t->src, t->tm, err);
}

/* eval_strategy steps: every eval prompt, num_generations_eval completions
 * sampled as in training (from streams of their own, so training's are not
 * disturbed and a resumed run evaluates the same), scored by the training
 * rewards; eval_reward, eval_pass@1, ... (eval/evaluate.h). */
#define STREAM_EVAL 0x6576616c756174ULL /* "evaluat" */
static int grpo_evaluate(void *self, const HfStateInfo *state, MetricAcc *m, GrpoErr *err) {
    GrpoTrainer *t = self;
    const TrainConfig *c = &t->c;
    int G = c->num_generations_eval > 0 ? c->num_generations_eval : c->num_generations;
    return rollout_source_evaluate(&t->src, G, rng_mix(STREAM_EVAL, (uint64_t)state->global_step), c->pass_threshold,
                                   state, m, err);
}

/* ---- one optimizer step ---- */

/* The next micro-batch's rollout, making a new round when the current one is used
 * up; a used-up round still read by this step is retired until the step ends. */
static int take_micro(GrpoTrainer *t, Rollout **r, int *slice, Rollout **retired, int *n_retired, GrpoErr *err) {
    if (!t->cur || t->cur->uses == t->spg * t->c.num_iterations) {
        if (t->cur) {
            if (t->cur->pending == 0) rollout_release(t, t->cur);
            else retired[(*n_retired)++] = t->cur;
        }
        t->cur = NULL;
        if (rollout_make(t, &t->cur, err)) return -1;
    }
    *r = t->cur;
    *slice = t->cur->uses % t->spg;
    t->cur->uses++;
    t->cur->pending++;
    return 0;
}

/* A step whose rollouts failed leaves GRPO as the step found it, so that the loop
 * can save the last completed step: the rounds made for it dropped and the round in
 * use (live: not used up, so take_micro retired it rather than freeing it) put back
 * with the uses it had. */
static void untake_micros(GrpoTrainer *t, Rollout *live, int uses, int pending, long rounds, long drawn) {
    GrpoStep *st = &t->st;
    for (int i = 0; i < st->n_retired; i++)
        if (st->retired[i] != live) rollout_release(t, st->retired[i]);
    if (t->cur && t->cur != live) rollout_release(t, t->cur);
    st->n_retired = 0;
    t->cur = live;
    if (live) live->uses = uses, live->pending = pending;
    t->rounds_made = rounds;
    t->src.position = drawn;
}

/* The normaliser of a micro-batch's part (the step's sequences first ..
 * first+count-1): over every sequence of the step on every process, or for bnpo
 * over the part alone (TRL defines it per micro-batch and process, then averages
 * over both: the step's shares). */
static double normalizer(const GrpoStep *st, int first, int count, int shares) {
    if (st->loss.loss_type != GRPO_LOSS_BNPO) return st->norm;
    int o2[count + 1];
    for (int i = 0; i <= count; i++) o2[i] = st->off[first + i] - st->off[first];
    return grpo_loss_normalizer(&st->loss, o2, st->trunc + first, st->tmask ? st->tmask + st->off[first] : NULL, count,
                                shares);
}

static void add_step_metrics(GrpoTrainer *t, const GrpoLossStats *st) {
    MetricAcc *m = t->st.metrics;
    const TrainConfig *c = &t->c;
    metric_add(m, "kl", c->loss.beta != 0 && st->tokens ? st->kl_sum / st->tokens : NAN);
    metric_add(m, "entropy", st->tokens ? st->entropy_sum / st->tokens : NAN);
    /* what TRL logs per loss type: clip ratios for the clipped surrogates,
     * cispo's own ratio, vespo's mean weight, nothing for sapo */
    GrpoLossType lt = c->loss.loss_type;
    if (lt == GRPO_LOSS_CISPO) {
        metric_add(m, "cispo_clip_ratio", st->clip_count ? st->cispo_clip_sum / st->clip_count : NAN);
    } else if (lt == GRPO_LOSS_VESPO) {
        metric_add(m, "vespo/phi_seq_mean", st->sequences ? st->vespo_phi_sum / st->sequences : NAN);
    } else if (lt != GRPO_LOSS_SAPO) {
        metric_add(m, "clip_ratio/low_mean", st->clip_count ? st->clip_low_sum / st->clip_count : NAN);
        metric_add(m, "clip_ratio/high_mean", st->clip_count ? st->clip_high_sum / st->clip_count : NAN);
        metric_add(m, "clip_ratio/region_mean", st->clip_count ? st->clip_region_sum / st->clip_count : NAN);
    }
    if (c->loss.entropy_coef != 0.0 || c->loss.use_adaptive_entropy) metric_add(m, "entropy_coef", t->entropy_coef);
    metric_add(m, "step_time/generation", t->src.t_gen);
    metric_add(m, "step_time/scoring", t->src.t_score);
    metric_add(m, "step_time/reference", t->st.t_ref);
}

#define N_STATS ((int)(sizeof(GrpoLossStats) / sizeof(double)))
_Static_assert(sizeof(GrpoLossStats) <= TRAIN_MAX_STATS * sizeof(double), "GrpoLossStats fits TrainStepSums.stats");

/* The step's micro-batches (generating rounds as they are needed), its
 * normaliser over all of them, and the entropy bonus's coefficient. */
static int grpo_begin_step(void *self, const TrainStep *s, TrainStepSums *sums, MetricAcc *m, GrpoErr *err) {
    GrpoTrainer *t = self;
    GrpoStep *st = &t->st;
    const TrainConfig *c = &t->c;
    int GA = s->micro_batches, BN = s->micro_size, S_all = GA * BN;
    st->step = s->step, st->state = *s->state, st->metrics = m, st->n_retired = 0, st->t_ref = 0;
    t->src.tokens = 0, t->src.t_gen = t->src.t_score = 0;
    Rollout *live = t->cur && t->cur->uses < t->spg * c->num_iterations ? t->cur : NULL;
    int uses = live ? live->uses : 0, pending = live ? live->pending : 0;
    long rounds = t->rounds_made, drawn = t->src.position;
    for (int k = 0; k < GA; k++)
        if (take_micro(t, &st->mb[k], &st->slice[k], st->retired, &st->n_retired, err)) {
            untake_micros(t, live, uses, pending, rounds, drawn);
            return -1;
        }
    st->t_train = time_now_s();
    st->off[0] = 0;
    for (int q = 0; q < S_all; q++) {
        const Rollout *r = st->mb[q / BN];
        st->seqs[q] = (CompletionRef){r, r->order[st->slice[q / BN] * BN + q % BN]};
        st->off[q + 1] = st->off[q] + r->g.comp[st->seqs[q].i].n;
        st->trunc[q] = !r->g.comp[st->seqs[q].i].stopped;
    }
    st->tmask = NULL; /* the tool mask over the step's tokens, when a completion has tool turns */
    for (int q = 0; q < S_all && st->tmask_buf; q++) {
        const Completion *cq = &st->seqs[q].r->g.comp[st->seqs[q].i];
        if (cq->mask) memcpy(st->tmask_buf + st->off[q], cq->mask, (size_t)cq->n), st->tmask = st->tmask_buf;
        else memset(st->tmask_buf + st->off[q], 1, (size_t)cq->n);
    }
    st->norm = c->loss.loss_type == GRPO_LOSS_BNPO
                   ? 0 : grpo_loss_normalizer(&c->loss, st->off, st->trunc, st->tmask, S_all, GA);
    /* the entropy bonus's coefficient for this whole step: adaptive control
     * applies it only while the last step's entropy was <= entropy_target */
    st->loss = c->loss;
    st->loss.entropy_coef = !c->loss.use_adaptive_entropy ? t->entropy_coef
                            : t->last_world_entropy <= c->loss.entropy_target ? t->entropy_coef : 0.0;
    sums->tokens += t->src.tokens;
    return 0;
}

static void grpo_micro_batch(void *self, TrainModel *tm, const TrainStep *s, int k, int first, int count,
                             TrainStepSums *sums) {
    GrpoTrainer *t = self;
    GrpoStep *st = &t->st;
    GrpoLossStats stats;
    memcpy(&stats, sums->stats, sizeof stats);
    sums->loss += micro_train(tm, &t->ms, &st->loss, st->seqs + first, count, 1.0f / t->c.gen.sampler.temperature,
                              normalizer(st, first, count, s->shares), &stats);
    memcpy(sums->stats, &stats, sizeof stats);
}

static void grpo_end_step(void *self, const TrainStep *s, const TrainStepSums *sums, MetricAcc *m) {
    GrpoTrainer *t = self;
    GrpoStep *st = &t->st;
    GrpoLossStats stats;
    memcpy(&stats, sums->stats, sizeof stats);
    if (t->c.loss.use_adaptive_entropy) { /* TRL's controller, on the step's kept tokens */
        const GrpoLossConfig *l = &t->c.loss;
        double world = stats.kept_entropy_sum / (stats.kept_tokens > 1.0 ? stats.kept_tokens : 1.0);
        t->entropy_coef = world <= l->entropy_target ? fmin(t->entropy_coef + l->entropy_coef_delta, l->entropy_coef_max)
                                                     : fmax(t->entropy_coef - l->entropy_coef_delta, l->entropy_coef_min);
        t->last_world_entropy = world;
    }
    for (int k = 0; k < s->micro_batches; k++) st->mb[k]->pending--;
    for (int i = 0; i < st->n_retired; i++) rollout_release(t, st->retired[i]);
    add_step_metrics(t, &stats);
    metric_add(m, "step_time/training", time_now_s() - st->t_train);
}

/* TRL's SyncRefModelCallback: ref = alpha * policy + (1 - alpha) * ref. */
static void grpo_after_update(void *self, long step) {
    GrpoTrainer *t = self;
    if (t->c.sync_ref_model && step % t->c.ref_model_sync_steps == 0)
        train_model_mix_reference(t->tm, t->c.ref_model_mixup_alpha);
}

int trainer_run(const TrainConfig *c, const TrainHooks *hooks, GrpoErr *err) {
    GrpoTrainer *t = xcalloc(1, sizeof *t);
    /* inputs a process could not open stop every one */
    int rc = train_world_check(train_world_processes(), trainer_setup(t, c, err), err);
    if (!rc) {
        const TrainConfig *tc = &t->c;
        int B = tc->train.per_device_train_batch_size, GA = tc->train.gradient_accumulation_steps;
        long prompts_per_step = (long)B * train_world_size(t->world) * GA / ((long)tc->num_generations * tc->num_iterations);
        char line[600], memory[400], filter[200] = "";
        if (tc->filter_groups && tc->max_num_gen_batches > 0)
            snprintf(filter, sizeof filter, "; dynamic sampling (filter_groups): groups with equal rewards dropped, "
                     "at most %d rounds of %d prompts per generation batch", tc->max_num_gen_batches,
                     t->gen_batch / tc->num_generations);
        else if (tc->filter_groups)
            snprintf(filter, sizeof filter, "; dynamic sampling (filter_groups): groups with equal rewards dropped, "
                     "rounds of %d prompts until the generation batch is full (max_num_gen_batches 0: no bound)",
                     t->gen_batch / tc->num_generations);
        snprintf(line, sizeof line, "generation batch %d = %d prompts x %d completions; micro-batch %d%s, %d "
                 "accumulation steps, %d micro-batches per generation%s%s", t->gen_batch,
                 t->gen_batch / tc->num_generations, tc->num_generations, B,
                 train_world_size(t->world) > 1 ? " per process" : "", GA, t->spg,
                 t->need_old ? ", old log-probs recorded" : "", filter);
        rollout_source_describe(&t->src, tc->num_generations, memory, sizeof memory);
        char eval_text[300] = "";
        if (t->src.have_eval)
            eval_describe(eval_text, sizeof eval_text, t->src.eval_data.n,
                          tc->num_generations_eval > 0 ? tc->num_generations_eval : tc->num_generations,
                          &tc->gen.sampler);
        TrainAlgo algo = {.name = "grpo", .self = t, .n_examples = t->src.sess.data.n,
                          .examples_per_step = prompts_per_step < 1 ? 1 : prompts_per_step, .n_stats = N_STATS,
                          .begin_step = grpo_begin_step, .micro_batch = grpo_micro_batch, .end_step = grpo_end_step,
                          .after_update = grpo_after_update, .save = grpo_checkpoint_save,
                          .load = grpo_checkpoint_load, .evaluate = t->src.have_eval ? grpo_evaluate : NULL,
                          .eval_steps = tc->eval_steps > 0 ? tc->eval_steps : tc->train.logging_steps,
                          .eval_text = eval_text,
                          .log_file = "completions.jsonl", .plan_line = line,
                          .plan_bytes = (double)t->src.sess.gen.bytes, .plan_memory = memory};
        OptGroup g[TRAIN_CONFIG_N_GROUPS];
        train_config_groups(g);
        ModelSaveMeta meta;
        gen_save_meta(&meta, t->src.sess.tok, &t->src.sess.gen.opts);
        meta.chat_template = tc->prompts.chat_template; /* open-r1's: saved as the tokenizer's, as it sets it */
        TrainLoop L = {&tc->train, t->tm, &algo, g, TRAIN_CONFIG_N_GROUPS, c, hooks ? *hooks : (TrainHooks){0}, &meta,
                       t->world};
        rc = train_loop_run(&L, err);
        json_decref((json_t *)meta.generation_config);
    }
    trainer_free(t);
    free(t);
    return rc;
}
