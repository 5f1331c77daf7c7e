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

#include "core/memory.h"
#include "core/rng.h"
#include "core/timer.h"
#include "dist/dist.h"
#include "eval/evaluate.h"
#include "grpo/trainer_internal.h"
#include "train/adapters.h"

/* ---- setup ---- */

static void trainer_free(GrpoTrainer *t) {
    if (t->completions_f) fclose(t->completions_f);
    rollout_free(t->cur);
    if (t->acts.arena) acts_free(&t->acts);
    reward_set_free(&t->rewards);
    dataset_sampler_free(&t->data_order);
    gen_session_close(&t->sess);
    if (t->have_eval) dataset_free(&t->eval_data);
    if (t->have_ref) model_free(&t->ref);
    if (t->have_lora) lora_layers_free(&t->lora);
}

/* The options with their derived values resolved. */
static void resolve(TrainConfig *c) {
    if (isnan(c->loss.epsilon_high)) c->loss.epsilon_high = c->loss.epsilon_low;
    c->loss.max_completion_length = c->gen.max_completion_length;
    c->loss.grad_accum_steps = c->train.gradient_accumulation_steps;
    c->gen.seed = c->train.seed;
}

static int load_inputs(GrpoTrainer *t, GrpoErr *err) {
    TrainConfig *c = &t->c;
    Dataset data;
    /* with bf16, weights nothing trains are held in bf16: the policy's under LoRA, the reference's */
    c->gen.frozen_bf16 = training_args_frozen_bf16(&c->train);
    if (dataset_load(&data, c->train.dataset, err) ||
        gen_session_open(&t->sess, c->train.model_dir, &data, &c->gen, c->max_prompt_length, 0, err))
        return -1;
    dataset_sampler_init(&t->data_order, t->sess.data.n, c->train.shuffle_dataset, c->train.seed);
    if (reward_set_from_args(&t->rewards, &c->rewards, err)) return -1;
    int lora = train_adapters_attach(&t->lora, &t->sess.pre.model, &c->train, err);
    if (lora < 0) return -1;
    t->have_lora = lora;
    if (training_args_bf16_compute(&c->train)) model_use_bf16_compute(&t->sess.pre.model);
    if (c->loss.beta != 0 && lora) {
        t->ref_is_base = 1;
    } else if (c->loss.beta != 0) {
        int ref_bf16 = training_args_bf16(&c->train) && !c->sync_ref_model; /* a frozen reference */
        if (model_load_ex(&t->ref, c->train.model_dir, ref_bf16, err)) return -1;
        t->have_ref = 1;
    }
    return 0;
}

/* Floats of what the optimizer updates: the adapters, or every weight. */
static double trainable_floats(const GrpoTrainer *t) {
    return t->have_lora ? (double)t->lora.table.total : (double)t->sess.pre.model.table.total;
}

/* What is still to be allocated (activations; gradients and AdamW's m and v,
 * by the loop) against what the machine has, before allocating it. */
static int check_memory(const GrpoTrainer *t, int longest, GrpoErr *err) {
    const TrainConfig *c = &t->c;
    long tokens = (long)c->train.per_device_train_batch_size * (longest + c->gen.max_completion_length);
    double mb = 1048576.0, acts = tokens > INT32_MAX ? INFINITY
                                 : (double)acts_plan_bytes(&t->sess.pre.model.cfg, (int)tokens,
                                                           c->train.gradient_checkpointing, c->train.logprob_chunk_rows,
                                                           t->sess.pre.model.mixed != NULL);
    if (t->have_lora && isfinite(acts))
        acts += (double)acts_lora_plan_bytes(&t->sess.pre.model.cfg, &t->lora, (int)tokens, c->train.gradient_checkpointing);
    double opt = 3.0 * sizeof(float) * trainable_floats(t), avail = (double)mem_available_bytes();
    if (acts + opt <= avail) return 0;
    return err_set(err, "the memory plan does not fit: activations %.0f MB (micro-batch of %d x %d tokens%s) + "
                   "gradients and AdamW state %.0f MB, with %.0f MB available; lower per_device_train_batch_size or "
                   "max_completion_length%s", acts / mb, c->train.per_device_train_batch_size,
                   longest + c->gen.max_completion_length, c->train.gradient_checkpointing ? ", checkpointed" : "",
                   opt / mb, avail / mb, c->train.gradient_checkpointing ? "" : ", or set gradient_checkpointing true");
}

static int trainer_setup(GrpoTrainer *t, const TrainConfig *c, GrpoErr *err) {
    memset(t, 0, sizeof *t);
    if (train_config_check(c, err)) return -1;
    t->c = *c;
    resolve(&t->c);
    c = &t->c;
    int B = c->train.per_device_train_batch_size, GA = c->train.gradient_accumulation_steps;
    t->world = dist_size(), t->rank = dist_rank();
    t->spg = c->generation_batch_size > 0 ? c->generation_batch_size / (B * t->world)
             : c->steps_per_generation > 0 ? c->steps_per_generation : GA;
    t->gen_batch = B * t->world * t->spg; /* global, as TRL's */
    /* TRL records the generating policy's log-probs when the policy moves while a
     * generation batch is still in use */
    t->need_old = c->num_iterations > 1 || t->spg > GA;
    t->entropy_coef = c->loss.entropy_coef;
    t->last_world_entropy = INFINITY; /* no bonus in the first step of adaptive control, as TRL */
    if (load_inputs(t, err)) return -1;
    int longest = t->longest_train = t->sess.gen.max_prompt;
    if (check_memory(t, longest, err)) return -1;
    acts_create(&t->acts, &t->sess.pre.model.cfg, B * (longest + c->gen.max_completion_length), c->train.gradient_checkpointing,
                c->train.logprob_chunk_rows, t->sess.pre.model.mixed != NULL); /* mixed precision: inputs saved in bf16 */
    if (t->have_lora) acts_reserve_lora(&t->acts, &t->sess.pre.model.cfg, &t->lora);
    if (c->eval_strategy) { /* the eval prompts, through the same generator */
        if (dataset_load(&t->eval_data, c->eval_dataset, err)) return -1;
        t->have_eval = 1;
        if (gen_session_prepare(&t->sess, &t->eval_data, &c->gen, c->max_prompt_length, err)) return -1;
    }
    return 0;
}

/* eval_strategy steps: every eval prompt, num_generations_eval completions
 * sampled as in training (from streams of their own, so training's are not
 * disturbed and a resumed run evaluates the same), scored by the training
 * rewards; eval_reward, eval_pass@1, ... (eval/evaluate.h). */
#define STREAM_EVAL 0x6576616c756174ULL /* "evaluat" */
static int grpo_evaluate(void *self, long step, MetricAcc *m, GrpoErr *err) {
    GrpoTrainer *t = self;
    const TrainConfig *c = &t->c;
    int G = c->num_generations_eval > 0 ? c->num_generations_eval : c->num_generations, rc = 0;
    EvalTotals tot;
    eval_totals_init(&tot, t->rewards.n_funcs);
    for (int p = 0; p < t->eval_data.n && !rc; p++)
        rc = eval_example(&tot, &t->sess.gen, t->sess.pre.tok, &t->eval_data, p, G, rng_mix(STREAM_EVAL, (uint64_t)step),
                          &t->rewards, c->pass_threshold, err);
    if (!rc) eval_add_metrics(&tot, &t->rewards, m);
    eval_totals_free(&tot);
    return rc;
}

/* The start-up plan: sizes, steps and memory. */
static char *plan_text(const GrpoTrainer *t, long total_steps) {
    const TrainConfig *c = &t->c;
    double mb = 1048576.0, pbytes = (double)model_weight_bytes(&t->sess.pre.model),
           rbytes = t->have_ref ? (double)model_weight_bytes(&t->ref) : 0;
    double tbytes = sizeof(float) * trainable_floats(t), weights = pbytes + (t->have_lora ? 4 : 3) * tbytes;
    int B = c->train.per_device_train_batch_size, longest = t->longest_train;
    char lora[400] = "", wtext[480], bf16[160];
    const char *bf16_note = training_args_bf16_note(&c->train);
    if (t->have_lora) {
        train_adapters_describe(&t->lora, lora, sizeof lora - 2);
        strcat(lora, "\n");
        snprintf(wtext, sizeof wtext, "frozen weights %.0f%s, adapters+grads+AdamW %.0f%s", pbytes / mb,
                 t->sess.pre.model.half ? " (in bf16)" : "", 4 * tbytes / mb, bf16_note);
    } else {
        model_bf16_describe(&t->sess.pre.model, bf16, sizeof bf16);
        snprintf(wtext, sizeof wtext, "weights+grads+AdamW %.0f%s%s", weights / mb, bf16, bf16_note);
    }
    char *s = xmalloc(2560);
    snprintf(s, 2560,
             "%s (%.1f M parameters), %d examples, %ld steps\n%s"
             "generation batch %d = %d prompts x %d completions; micro-batch %d, %d accumulation steps, "
             "%d micro-batches per generation%s\n"
             "memory plan %.0f MB: %s, reference %.0f%s%s, activations %.0f "
             "(micro-batch of %d x %d tokens%s), generation %.0f (%d completions at a time)",
             c->train.model_dir, config_param_count(&t->sess.pre.model.cfg) / 1e6, t->sess.data.n, total_steps, lora,
             t->gen_batch, t->gen_batch / c->num_generations, c->num_generations, B, c->train.gradient_accumulation_steps,
             t->spg, t->need_old ? ", old log-probs recorded" : "",
             (weights + rbytes + t->acts.bytes + t->sess.gen.bytes) / mb, wtext, rbytes / mb,
             t->ref_is_base ? " (the base, adapters off)" : "", t->have_ref && t->ref.half ? " (in bf16)" : "",
             t->acts.bytes / mb, B,
             longest + c->gen.max_completion_length, c->train.gradient_checkpointing ? ", checkpointed" : "",
             t->sess.gen.bytes / mb, t->sess.gen.chunk);
    return s;
}

/* ---- one optimizer step ---- */

/* The next micro-batch's rollout, making a new round when the current one is used
 * up; a used-up round still read by this step is retired until the step ends. */
static int take_micro(GrpoTrainer *t, Rollout **r, int *slice, Rollout **retired, int *n_retired, GrpoErr *err) {
    if (!t->cur || t->cur->uses == t->spg * t->c.num_iterations) {
        if (t->cur) {
            if (t->cur->pending == 0) rollout_free(t->cur);
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

/* The normaliser of this process's micro-batch (the step's sequences first ..
 * first+B-1): over every sequence of the step on every process, or for bnpo over
 * the micro-batch alone (TRL defines it per micro-batch and process, then
 * averages over both). */
static double normalizer(const GrpoLossConfig *loss, const int *off, const uint8_t *trunc, int first, int B, int GA,
                         int world, double step_norm) {
    if (loss->loss_type != GRPO_LOSS_BNPO) return step_norm;
    int o2[B + 1];
    for (int i = 0; i <= B; i++) o2[i] = off[first + i] - off[first];
    return grpo_loss_normalizer(loss, o2, trunc + first, B, GA * world);
}

static void add_step_metrics(GrpoTrainer *t, const GrpoLossStats *st) {
    MetricAcc *m = t->metrics;
    const TrainConfig *c = &t->c;
    metric_add(m, "kl", (t->have_ref || t->ref_is_base) && st->tokens ? st->kl_sum / st->tokens : NAN);
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
    metric_add(m, "epoch", (double)t->rounds_made * (t->gen_batch / c->num_generations) / t->sess.data.n);
    metric_add(m, "step_time/generation", t->t_gen);
    metric_add(m, "step_time/scoring", t->t_score);
    metric_add(m, "step_time/reference", t->t_ref);
}

/* The step's loss statistics summed over the processes. */
static void sum_stats(GrpoLossStats *st, int world) {
    if (world == 1) return;
    double v[] = {st->kl_sum, st->entropy_sum, st->clip_low_sum, st->clip_high_sum, st->clip_region_sum,
                  st->cispo_clip_sum, st->vespo_phi_sum, st->entropy_bonus, st->kept_entropy_sum, st->kept_tokens,
                  (double)st->tokens, (double)st->clip_count, (double)st->sequences, (double)st->entropy_kept};
    dist_sum_f64(v, (int)(sizeof v / sizeof v[0]));
    *st = (GrpoLossStats){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], (long long)v[10],
                          (long long)v[11], (long long)v[12], (long long)v[13]};
}

_Static_assert(sizeof(GrpoLossStats) == 14 * sizeof(double), "sum_stats sums every field of GrpoLossStats");

static int grpo_step(void *self, const ModelGrads *grads, long step, TrainStepOut *out, MetricAcc *m, GrpoErr *err) {
    GrpoTrainer *t = self;
    const TrainConfig *c = &t->c;
    int B = c->train.per_device_train_batch_size, GA = c->train.gradient_accumulation_steps, N = t->world;
    int BN = B * N, S_all = GA * BN; /* the step's sequences on every process */
    t->step = step, t->metrics = m, t->tokens = 0;
    t->t_gen = t->t_score = t->t_ref = 0;
    Rollout **mb = xmalloc(sizeof(Rollout *) * GA), **retired = xmalloc(sizeof(Rollout *) * (GA + 1));
    int *slice = xmalloc(sizeof(int) * GA), n_retired = 0;
    for (int k = 0; k < GA; k++)
        if (take_micro(t, &mb[k], &slice[k], retired, &n_retired, err)) {
            free(mb), free(retired), free(slice);
            return -1;
        }
    double t_roll = time_now_s();
    CompletionRef *seqs = xmalloc(sizeof(CompletionRef) * S_all);
    int *off = xmalloc(sizeof(int) * (S_all + 1));
    uint8_t *trunc = xmalloc(S_all);
    off[0] = 0;
    for (int s = 0; s < S_all; s++) {
        const Rollout *r = mb[s / BN];
        seqs[s] = (CompletionRef){r, r->order[slice[s / BN] * BN + s % BN]};
        off[s + 1] = off[s] + r->comp[seqs[s].i].n;
        trunc[s] = !r->comp[seqs[s].i].stopped;
    }
    double step_norm = c->loss.loss_type == GRPO_LOSS_BNPO ? 0 : grpo_loss_normalizer(&c->loss, off, trunc, S_all, GA);
    MicroPass pass = {&t->sess.pre.model, &t->acts, 1.0f / c->gen.sampler.temperature, step, 0};
    GrpoLossStats st;
    memset(&st, 0, sizeof st);
    /* the entropy bonus's coefficient for this whole step: adaptive control
     * applies it only while the last step's entropy was <= entropy_target */
    GrpoLossConfig lc = c->loss;
    lc.entropy_coef = !c->loss.use_adaptive_entropy ? t->entropy_coef
                      : t->last_world_entropy <= c->loss.entropy_target ? t->entropy_coef : 0.0;
    out->loss = 0;
    for (int k = 0; k < GA; k++) { /* this process's B of global micro-batch k */
        int first = k * BN + t->rank * B;
        out->loss += micro_train(&pass, grads, &lc, seqs + first, B,
                                 normalizer(&lc, off, trunc, first, B, GA, N, step_norm), &st);
    }
    sum_stats(&st, N);
    if (c->loss.use_adaptive_entropy) { /* TRL's controller, on the step's kept tokens */
        const GrpoLossConfig *l = &c->loss;
        double world = st.kept_entropy_sum / (st.kept_tokens > 1.0 ? st.kept_tokens : 1.0);
        t->entropy_coef = world <= l->entropy_target ? fmin(t->entropy_coef + l->entropy_coef_delta, l->entropy_coef_max)
                                                     : fmax(t->entropy_coef - l->entropy_coef_delta, l->entropy_coef_min);
        t->last_world_entropy = world;
    }
    for (int k = 0; k < GA; k++) mb[k]->pending--;
    for (int i = 0; i < n_retired; i++) rollout_free(retired[i]);
    free(mb), free(retired), free(slice), free(seqs), free(off), free(trunc);
    out->tokens = t->tokens;
    add_step_metrics(t, &st);
    metric_add(m, "step_time/training", time_now_s() - t_roll);
    return 0;
}

/* TRL's SyncRefModelCallback: ref = alpha * policy + (1 - alpha) * ref. */
static void grpo_after_update(void *self, long step) {
    GrpoTrainer *t = self;
    if (!t->have_ref || !t->c.sync_ref_model || step % t->c.ref_model_sync_steps) return;
    float a = (float)t->c.ref_model_mixup_alpha;
    const Model *pol = &t->sess.pre.model;
    size_t P = pol->table.total;
#pragma omp parallel for schedule(static)
    for (size_t i0 = 0; i0 < P; i0 += 4096) { /* 4096 at a time: the policy's weights may be two halves */
        float p[4096];
        size_t n = P - i0 < 4096 ? P - i0 : 4096;
        model_get_params(pol, i0, n, p);
        for (size_t i = 0; i < n; i++) t->ref.params[i0 + i] = a * p[i] + (1 - a) * t->ref.params[i0 + i];
    }
}

int trainer_run(const TrainConfig *c, const TrainHooks *hooks, GrpoErr *err) {
    GrpoTrainer *t = xcalloc(1, sizeof *t);
    int rc = dist_check(trainer_setup(t, c, err), err); /* inputs a process could not open stop every one */
    if (!rc) {
        const TrainConfig *tc = &t->c;
        long prompts_per_step = (long)tc->train.per_device_train_batch_size * t->world *
                                tc->train.gradient_accumulation_steps / ((long)tc->num_generations * tc->num_iterations);
        TrainAlgo algo = {"grpo", t, t->sess.data.n, prompts_per_step < 1 ? 1 : prompts_per_step, grpo_step,
                          grpo_after_update, grpo_checkpoint_save, grpo_checkpoint_load,
                          t->have_eval ? grpo_evaluate : NULL,
                          tc->eval_steps > 0 ? tc->eval_steps : tc->train.logging_steps};
        OptGroup g[TRAIN_CONFIG_N_GROUPS];
        train_config_groups(g);
        json_t *options = opts_to_json(g, TRAIN_CONFIG_N_GROUPS, c);
        json_object_set_new(options, "bf16", json_boolean(training_args_bf16(&tc->train))); /* what auto chose */
        char *plan = plan_text(t, train_loop_total_steps(&tc->train, algo.n_examples, algo.examples_per_step));
        ModelSaveMeta meta;
        gen_save_meta(&meta, t->sess.pre.tok, &t->sess.gen.opts);
        TrainLoop L = {&tc->train, &t->sess.pre.model, &algo, options, plan, hooks ? *hooks : (TrainHooks){0}, &meta};
        rc = train_loop_run(&L, err);
        json_decref((json_t *)meta.generation_config);
        free(plan);
        json_decref(options);
    }
    trainer_free(t);
    free(t);
    return rc;
}
