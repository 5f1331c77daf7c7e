/* grpo/trainer.c — the training loop (see trainer.h): configuration checks, the
 * memory plan, then per optimizer step: gather gradient_accumulation_steps
 * micro-batches (generating rounds as they are needed), compute the loss
 * normaliser over all of them, accumulate the gradient micro-batch by micro-batch,
 * clip, and take an AdamW step. Not here: rollouts (rollout.c), the padded batches
 * (microbatch.c), checkpoints (checkpoint.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/timer.h"
#include "grpo/trainer_internal.h"
#include "io/fsutil.h"
#include "train/checkpoint.h"

void train_config_default(TrainConfig *c) {
    memset(c, 0, sizeof *c);
    c->reward_timeout = REWARD_DEFAULT_TIMEOUT_S;
    c->per_device_train_batch_size = 8;
    c->gradient_accumulation_steps = 1;
    c->num_generations = 8;
    c->num_iterations = 1;
    c->max_prompt_length = DATASET_DEFAULT_MAX_PROMPT_LENGTH;
    c->max_completion_length = 256;
    c->shuffle_dataset = 1;
    sampler_opts_default(&c->sampler);
    c->kv_cache_bytes = (size_t)1 << 30;
    grpo_loss_config_default(&c->loss);
    c->scale_rewards = GRPO_SCALE_GROUP;
    c->aggregation = GRPO_AGG_SUM_THEN_NORMALIZE;
    c->ref_model_mixup_alpha = 0.6;
    c->ref_model_sync_steps = 512;
    training_args_default(&c->train, 1e-6);
    c->max_nonfinite_steps = 3;
}

int train_config_check(const TrainConfig *c, GrpoErr *err) {
    int B = c->per_device_train_batch_size, GA = c->gradient_accumulation_steps, G = c->num_generations;
    if (B < 1) return err_set(err, "per_device_train_batch_size must be >= 1 (got %d)", B);
    if (GA < 1) return err_set(err, "gradient_accumulation_steps must be >= 1 (got %d)", GA);
    if (G < 2) return err_set(err, "num_generations must be >= 2: advantages compare completions within a group (got %d)", G);
    if (c->num_iterations < 1) return err_set(err, "num_iterations must be >= 1 (got %d)", c->num_iterations);
    if (c->steps_per_generation > 0 && c->generation_batch_size > 0)
        return err_set(err, "generation_batch_size (%d) and steps_per_generation (%d) cannot both be set: "
                       "generation_batch_size = per_device_train_batch_size x steps_per_generation",
                       c->generation_batch_size, c->steps_per_generation);
    if (c->steps_per_generation < 0 || c->generation_batch_size < 0)
        return err_set(err, "steps_per_generation and generation_batch_size must be positive when set");
    int spg = c->steps_per_generation > 0 ? c->steps_per_generation : GA;
    int gbs = B * spg;
    if (c->generation_batch_size > 0) {
        if (c->generation_batch_size % B)
            return err_set(err, "generation_batch_size (%d) must be a multiple of per_device_train_batch_size (%d)",
                           c->generation_batch_size, B);
        gbs = c->generation_batch_size;
    }
    if (gbs % G)
        return err_set(err, "the generation batch (%d = per_device_train_batch_size %d x steps_per_generation %d) "
                       "must be divisible by num_generations (%d)", gbs, B, gbs / B, G);
    if (c->max_prompt_length < 1 || c->max_completion_length < 1)
        return err_set(err, "max_prompt_length (%d) and max_completion_length (%d) must be >= 1",
                       c->max_prompt_length, c->max_completion_length);
    if (!(c->sampler.temperature > 0))
        return err_set(err, "temperature must be > 0 for training (got %g): log-probs are computed at logits / temperature",
                       c->sampler.temperature);
    const char *bad = sampler_opts_check(&c->sampler);
    if (bad) return err_set(err, "%s", bad);
    if (!(c->loss.beta >= 0)) return err_set(err, "beta must be >= 0 (got %g)", c->loss.beta);
    if (!(c->loss.epsilon_low > 0) || !(c->loss.epsilon_high > 0))
        return err_set(err, "epsilon and epsilon_high must be > 0 (got %g, %g)", c->loss.epsilon_low, c->loss.epsilon_high);
    if (c->loss.delta != 0 && !(c->loss.delta > 1 + c->loss.epsilon_high))
        return err_set(err, "delta (%g) must be > 1 + epsilon_high (%g) when set", c->loss.delta, 1 + c->loss.epsilon_high);
    if (!(c->loss.top_entropy_quantile > 0 && c->loss.top_entropy_quantile <= 1))
        return err_set(err, "top_entropy_quantile must be in (0, 1] (got %g)", c->loss.top_entropy_quantile);
    if (c->n_reward_funcs < 1) return err_set(err, "at least one reward function is needed (reward_funcs)");
    if (c->n_reward_weights && c->n_reward_weights != c->n_reward_funcs)
        return err_set(err, "reward_weights has %d values but reward_funcs has %d functions", c->n_reward_weights,
                       c->n_reward_funcs);
    if (training_args_check(&c->train, err)) return -1;
    if (c->sync_ref_model && c->loss.beta == 0)
        return err_set(err, "sync_ref_model needs a reference model: set beta > 0");
    if (c->sync_ref_model && (c->ref_model_sync_steps < 1 || !(c->ref_model_mixup_alpha >= 0 && c->ref_model_mixup_alpha <= 1)))
        return err_set(err, "ref_model_sync_steps must be >= 1 and ref_model_mixup_alpha in [0, 1]");
    if (!c->model_dir || !c->dataset || !c->output_dir) return err_set(err, "model, dataset and output_dir are required");
    return 0;
}

/* ---- setup ---- */

static void trainer_free(Trainer *t) {
    if (t->metrics_f) fclose(t->metrics_f);
    if (t->completions_f) fclose(t->completions_f);
    metric_acc_free(&t->acc);
    rollout_free(t->cur);
    if (t->gen.m) gen_free(&t->gen);
    if (t->acts.arena) acts_free(&t->acts);
    if (t->gview.layers) params_view_free(&t->gview);
    free(t->grads);
    if (t->opt.m) adamw_free(&t->opt);
    free(t->decay_mask);
    reward_set_free(&t->rewards);
    dataset_sampler_free(&t->sampler);
    dataset_free(&t->data);
    tok_free(t->tok);
    if (t->have_ref) model_free(&t->ref);
    if (t->policy.params) model_free(&t->policy);
}

static int trainer_setup(Trainer *t, const TrainConfig *c, GrpoErr *err) {
    memset(t, 0, sizeof *t);
    t->c = c;
    if (train_config_check(c, err)) return -1;
    int B = c->per_device_train_batch_size;
    t->spg = c->generation_batch_size > 0 ? c->generation_batch_size / B
             : c->steps_per_generation > 0 ? c->steps_per_generation : c->gradient_accumulation_steps;
    t->gen_batch = B * t->spg;
    /* TRL records the generating policy's log-probs when the policy moves while a
     * generation batch is still in use */
    t->need_old = c->num_iterations > 1 || t->spg > c->gradient_accumulation_steps;
    metric_acc_init(&t->acc);
    if (model_load(&t->policy, c->model_dir, err) || tok_load(&t->tok, c->model_dir, err)) return -1;
    if (dataset_load(&t->data, c->dataset, err) ||
        dataset_tokenize(&t->data, t->tok, c->max_prompt_length, -1, err))
        return -1;
    int longest;
    if (dataset_longest_prompt(&t->data, 0, &longest, err)) return -1;
    dataset_sampler_init(&t->sampler, t->data.n, c->shuffle_dataset, c->train.seed);
    RewardOptions ro = {c->reward_timeout};
    if (reward_set_init(&t->rewards, c->reward_funcs, c->n_reward_funcs, c->reward_weights,
                        c->n_reward_weights, &ro, err))
        return -1;
    if (c->loss.beta != 0) {
        if (model_load(&t->ref, c->model_dir, err)) return -1;
        t->have_ref = 1;
    }
    GenOpts go;
    gen_opts_default(&go);
    go.sampler = c->sampler;
    go.max_completion_length = c->max_completion_length;
    go.seed = c->train.seed;
    go.chunk_size = c->generation_chunk_size;
    go.kv_cache_bytes = c->kv_cache_bytes;
    /* eos ids: the model's and the tokenizer's */
    const TokSpecial *sp = tok_special(t->tok);
    if (gen_opts_set_eos(&go, t->policy.cfg.eos_token_ids, t->policy.cfg.n_eos, sp->eos_ids, sp->n_eos, err))
        return -1;
    if (gen_create(&t->gen, &t->policy, &go, longest, err)) return -1;
    acts_create(&t->acts, &t->policy.cfg, B * (longest + c->max_completion_length), c->train.gradient_checkpointing,
                c->train.logprob_chunk_rows);
    size_t P = t->policy.table.total;
    t->grads = xaligned(sizeof(float) * P);
    memset(t->grads, 0, sizeof(float) * P);
    params_view(&t->gview, &t->policy.table, &t->policy.cfg, t->grads);
    adamw_init(&t->opt, P);
    t->decay_mask = xmalloc(P);
    adamw_decay_mask_build(t->decay_mask, &t->policy.table);
    long prompts_per_step = (long)B * c->gradient_accumulation_steps / ((long)c->num_generations * c->num_iterations);
    if (prompts_per_step < 1) prompts_per_step = 1;
    t->total_steps = c->train.max_steps > 0 ? c->train.max_steps
                                      : (long)ceil(c->train.num_train_epochs * t->data.n / (double)prompts_per_step);
    if (t->total_steps < 1) t->total_steps = 1;
    /* the memory plan, printed once */
    if (!c->train.quiet) {
        double mb = 1048576.0, pbytes = sizeof(float) * (double)P;
        fprintf(stderr,
                "grpo train: %s (%.1f M parameters), %d examples, %ld steps\n"
                "grpo train: generation batch %d = %d prompts x %d completions; micro-batch %d, %d accumulation steps, "
                "%d micro-batches per generation%s\n"
                "grpo train: memory plan %.0f MB: weights+grads+AdamW %.0f, reference %.0f, activations %.0f "
                "(micro-batch of %d x %d tokens%s), generation %.0f (%d completions at a time)\n",
                c->model_dir, config_param_count(&t->policy.cfg) / 1e6, t->data.n, t->total_steps, t->gen_batch,
                t->gen_batch / c->num_generations, c->num_generations, B, c->gradient_accumulation_steps, t->spg,
                t->need_old ? ", old log-probs recorded" : "",
                (4 * pbytes + (t->have_ref ? pbytes : 0) + t->acts.bytes + t->gen.bytes) / mb, 4 * pbytes / mb,
                t->have_ref ? pbytes / mb : 0.0, t->acts.bytes / mb, B, longest + c->max_completion_length,
                c->train.gradient_checkpointing ? ", checkpointed" : "", t->gen.bytes / mb, t->gen.chunk);
    }
    return 0;
}

static int open_outputs(Trainer *t, GrpoErr *err) {
    const TrainConfig *c = t->c;
    if (fs_mkdir_p(c->output_dir, err)) return -1;
    char *p = fs_join(c->output_dir, "metrics.jsonl");
    t->metrics_f = fopen(p, c->train.resume_from_checkpoint ? "a" : "w");
    if (!t->metrics_f) err_set(err, "%s: cannot open for writing", p);
    free(p);
    if (!t->metrics_f) return -1;
    if (c->log_completions) {
        p = fs_join(c->output_dir, "completions.jsonl");
        t->completions_f = fopen(p, c->train.resume_from_checkpoint ? "a" : "w");
        if (!t->completions_f) err_set(err, "%s: cannot open for writing", p);
        free(p);
        if (!t->completions_f) return -1;
    }
    return 0;
}

/* ---- one optimizer step ---- */

typedef struct {
    Rollout *r;
    int slice;
} MicroRef;

static int take_micro(Trainer *t, MicroRef *m, Rollout **retired, int *n_retired, GrpoErr *err) {
    int per_round = t->spg * t->c->num_iterations;
    if (!t->cur || t->cur->uses == per_round) {
        if (t->cur) {
            if (t->cur->refs == 0) rollout_free(t->cur);
            else retired[(*n_retired)++] = t->cur;
        }
        t->cur = NULL;
        if (rollout_make(t, &t->cur, err)) return -1;
    }
    m->r = t->cur;
    m->slice = t->cur->uses % t->spg;
    t->cur->uses++;
    t->cur->refs++;
    return 0;
}

static int train_step(Trainer *t, GrpoErr *err) {
    const TrainConfig *c = t->c;
    int B = c->per_device_train_batch_size, GA = c->gradient_accumulation_steps;
    double t0 = time_now_s();
    t->t_gen = t->t_score = t->t_ref = 0;
    MicroRef *mb = xmalloc(sizeof(MicroRef) * GA);
    Rollout **retired = xmalloc(sizeof(Rollout *) * (GA + 1));
    int n_retired = 0, rc = 0;
    for (int k = 0; k < GA && !rc; k++) rc = take_micro(t, &mb[k], retired, &n_retired, err);
    if (rc) {
        free(mb), free(retired);
        return -1;
    }
    double t_roll = time_now_s();
    /* the normaliser over every sequence of the step (bnpo: per micro-batch) */
    int S_all = GA * B;
    int *off = xmalloc(sizeof(int) * (S_all + 1));
    uint8_t *trunc = xmalloc(S_all);
    const Rollout **rounds = xmalloc(sizeof(Rollout *) * S_all);
    int *idx = xmalloc(sizeof(int) * S_all);
    off[0] = 0;
    for (int k = 0; k < GA; k++)
        for (int i = 0; i < B; i++) {
            int s = k * B + i;
            rounds[s] = mb[k].r;
            idx[s] = mb[k].r->order[mb[k].slice * B + i];
            off[s + 1] = off[s] + mb[k].r->comp[idx[s]].n;
            trunc[s] = !mb[k].r->comp[idx[s]].stopped;
        }
    int bnpo = c->loss.loss_type == GRPO_LOSS_BNPO;
    double norm = bnpo ? 0 : grpo_loss_normalizer(&c->loss, off, trunc, S_all, GA);
    memset(t->grads, 0, sizeof(float) * t->policy.table.total);
    GrpoLossStats st;
    memset(&st, 0, sizeof st);
    double loss = 0;
    for (int k = 0; k < GA; k++) {
        if (bnpo) {
            int o2[B + 1];
            for (int i = 0; i <= B; i++) o2[i] = off[k * B + i] - off[k * B];
            norm = grpo_loss_normalizer(&c->loss, o2, trunc + k * B, B, GA);
        }
        loss += micro_train(t, rounds + k * B, idx + k * B, B, norm, &st);
    }
    for (int k = 0; k < GA; k++) mb[k].r->refs--;
    for (int i = 0; i < n_retired; i++) rollout_free(retired[i]);
    free(mb), free(retired), free(off), free(trunc), free(rounds), free(idx);

    /* optimizer */
    size_t P = t->policy.table.total;
    double gnorm = grad_clip_norm(t->grads, P, c->train.max_grad_norm);
    long long warm = sched_warmup_steps(c->train.warmup_steps, c->train.warmup_ratio, t->total_steps);
    double lr = sched_lr(c->train.lr_scheduler_type, c->train.learning_rate, t->step, warm, t->total_steps);
    int finite = isfinite(loss) && isfinite(gnorm);
    if (finite) {
        adamw_step(&t->opt, t->policy.params, t->grads, t->decay_mask, lr, &c->train.adam);
        t->nonfinite_streak = 0;
    } else {
        t->nonfinite_streak++;
        fprintf(t->metrics_f, "{\"step\": %ld, \"event\": \"nonfinite\", \"loss\": %s, \"grad_norm\": %s}\n", t->step + 1,
                isfinite(loss) ? "\"finite\"" : "null", isfinite(gnorm) ? "\"finite\"" : "null");
        fflush(t->metrics_f);
        fprintf(stderr, "%sgrpo train: step %ld: loss or gradient is NaN/Inf; the update was not applied\n",
                isatty(2) && !c->train.quiet ? "\n" : "", t->step + 1);
    }
    t->step++;
    if (t->have_ref && c->sync_ref_model && t->step % c->ref_model_sync_steps == 0) {
        /* TRL SyncRefModelCallback: ref = alpha * policy + (1 - alpha) * ref */
        float a = (float)c->ref_model_mixup_alpha;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < P; i++) t->ref.params[i] = a * t->policy.params[i] + (1 - a) * t->ref.params[i];
    }
    double t1 = time_now_s();
    t->t_train = t1 - t_roll;
    /* metrics */
    metric_add(&t->acc, "loss", loss);
    metric_add(&t->acc, "grad_norm", gnorm);
    metric_add(&t->acc, "learning_rate", lr);
    metric_add(&t->acc, "kl", t->have_ref && st.tokens ? st.kl_sum / st.tokens : NAN);
    metric_add(&t->acc, "entropy", st.tokens ? st.entropy_sum / st.tokens : NAN);
    metric_add(&t->acc, "clip_ratio/low_mean", st.clip_count ? st.clip_low_sum / st.clip_count : NAN);
    metric_add(&t->acc, "clip_ratio/high_mean", st.clip_count ? st.clip_high_sum / st.clip_count : NAN);
    metric_add(&t->acc, "clip_ratio/region_mean", st.clip_count ? st.clip_region_sum / st.clip_count : NAN);
    metric_add(&t->acc, "num_tokens", (double)t->num_tokens);
    metric_add(&t->acc, "epoch", (double)t->rounds * (t->gen_batch / c->num_generations) / t->data.n);
    metric_add(&t->acc, "step_time", t1 - t0);
    metric_add(&t->acc, "step_time/generation", t->t_gen);
    metric_add(&t->acc, "step_time/scoring", t->t_score);
    metric_add(&t->acc, "step_time/reference", t->t_ref);
    metric_add(&t->acc, "step_time/training", t->t_train);
    if (!finite && t->nonfinite_streak >= c->max_nonfinite_steps)
        return err_set(err, "the loss or gradient was NaN/Inf in %d consecutive steps (last: step %ld); stopping. "
                       "Lower learning_rate or check the reward functions", t->nonfinite_streak, t->step);
    return 0;
}

int trainer_run(const TrainConfig *c, GrpoErr *err) {
    Trainer *t = xcalloc(1, sizeof *t);
    int rc = trainer_setup(t, c, err);
    if (!rc && c->train.resume_from_checkpoint) {
        char *dir = ckpt_resolve(c->output_dir, c->train.resume_from_checkpoint, err);
        rc = dir ? checkpoint_load(t, dir, err) : -1;
        if (!rc && !c->train.quiet) fprintf(stderr, "grpo train: resumed from %s at step %ld\n", dir, t->step);
        free(dir);
    }
    if (!rc) rc = open_outputs(t, err);
    int tty = isatty(2) && !c->train.quiet;
    double start = time_now_s();
    long start_step = t->step, tokens0 = t->num_tokens;
    while (!rc && t->step < t->total_steps) {
        rc = train_step(t, err);
        if (rc) break;
        double el = time_now_s() - start;
        double per = el / (t->step - start_step);
        if (!c->train.quiet)
            progress_print(t->step, t->total_steps, metric_mean(&t->acc, "reward"), metric_mean(&t->acc, "loss"),
                           (t->num_tokens - tokens0) / (el > 0 ? el : 1e-9), per * (t->total_steps - t->step), tty);
        if (t->step % c->train.logging_steps == 0 || t->step == t->total_steps) metric_write_line(&t->acc, t->metrics_f, t->step);
        if (c->train.save_steps > 0 && t->step % c->train.save_steps == 0) rc = checkpoint_save(t, err);
    }
    if (!c->train.quiet) progress_done(tty);
    if (!rc) {
        ModelSaveOpts so;
        model_save_opts_default(&so);
        so.copy_from = c->model_dir;
        rc = model_save(&t->policy, c->output_dir, &so, err);
        if (!rc && !c->train.quiet) fprintf(stderr, "grpo train: saved the trained model to %s\n", c->output_dir);
    }
    trainer_free(t);
    free(t);
    return rc;
}
