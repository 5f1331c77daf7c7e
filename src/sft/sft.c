/* sft/sft.c — the SFT loop (see sft.h): examples tokenized up front, a seeded
 * order per epoch, micro-batches of whole examples, the step's target-token count
 * as the normaliser, AdamW, checkpoints through train/checkpoint.c. */
#include "sft/sft.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/timer.h"
#include "data/dataset.h"
#include "io/fsutil.h"
#include "log/metrics.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"

#define SFT_STATE_VERSION 1

typedef struct {
    int32_t *ids;
    int n;
    int loss_start;     /* tokens at index >= loss_start are predicted */
} SftExample;

void sft_config_default(SftConfig *c) {
    memset(c, 0, sizeof *c);
    c->per_device_train_batch_size = 8;
    c->gradient_accumulation_steps = 1;
    c->max_length = 1024;
    c->completion_only_loss = 1;
    c->shuffle_dataset = 1;
    training_args_default(&c->train, 2e-5);
}

static int encode_append(Tokenizer *tok, const char *text, TokIds *ids, GrpoErr *err) {
    return tok_encode(tok, text, strlen(text), 0, ids, err);
}

/* One JSON line into an example; errors name file:line. */
static int parse_example(Tokenizer *tok, int32_t eos, const char *line, const char *file, long lineno,
                         const SftConfig *c, SftExample *ex, GrpoErr *err) {
    json_error_t je;
    json_t *o = json_loads(line, 0, &je);
    if (!o) return err_set(err, "%s:%ld: not valid JSON: %s", file, lineno, je.text);
    TokIds ids = {0};
    int rc = 0, start = 0;
    json_t *text = json_object_get(o, "text"), *prompt = json_object_get(o, "prompt"),
           *completion = json_object_get(o, "completion"), *messages = json_object_get(o, "messages");
    if (!json_is_object(o)) {
        rc = err_set(err, "%s:%ld: expected a JSON object", file, lineno);
    } else if (json_is_string(text)) {
        rc = encode_append(tok, json_string_value(text), &ids, err);
    } else if (json_is_string(prompt) && json_is_string(completion)) {
        rc = encode_append(tok, json_string_value(prompt), &ids, err);
        start = c->completion_only_loss ? (int)ids.n : 0;
        if (!rc) rc = encode_append(tok, json_string_value(completion), &ids, err);
    } else if (json_is_array(messages) && json_array_size(messages) > 0) {
        size_t n = json_array_size(messages);
        TokMessage *msgs = xcalloc(n, sizeof *msgs);
        for (size_t i = 0; i < n && !rc; i++) {
            json_t *m = json_array_get(messages, i);
            json_t *r = json_object_get(m, "role"), *ct = json_object_get(m, "content");
            if (!json_is_string(r) || !json_is_string(ct))
                rc = err_set(err, "%s:%ld: messages[%zu] needs string 'role' and 'content'", file, lineno, i);
            else msgs[i] = (TokMessage){json_string_value(r), json_string_value(ct)};
        }
        char *rendered = NULL;
        if (!rc && tok_chat_render(tok, msgs, (int)n, 0, -1, &rendered, err))
            rc = err_prefix(err, "%s:%ld", file, lineno);
        if (!rc) rc = encode_append(tok, rendered, &ids, err);
        free(rendered);
        free(msgs);
    } else {
        rc = err_set(err, "%s:%ld: expected a 'text' string, 'prompt' and 'completion' strings, or a 'messages' list",
                     file, lineno);
    }
    if (!rc && !json_is_array(messages) && eos >= 0) {
        if (ids.n == ids.cap) ids.ids = xrealloc(ids.ids, sizeof(int32_t) * (ids.cap = ids.cap * 2 + 1));
        ids.ids[ids.n++] = eos;
    }
    json_decref(o);
    if (rc) {
        tok_ids_free(&ids);
        return -1;
    }
    int n = (int)ids.n < c->max_length ? (int)ids.n : c->max_length;
    ex->ids = ids.ids;
    ex->n = n;
    ex->loss_start = start < 1 ? 1 : start;
    if (ex->loss_start >= n)
        return err_set(err, "%s:%ld: no token left to learn (%d tokens after truncation to max_length %d, "
                       "loss starts at %d)", file, lineno, n, c->max_length, ex->loss_start);
    return 0;
}

static int load_examples(const char *path, Tokenizer *tok, int32_t eos, const SftConfig *c, SftExample **out,
                         int *n_out, GrpoErr *err) {
    FILE *f = fopen(path, "r");
    if (!f) return err_set(err, "%s: cannot open for reading", path);
    int n = 0, cap = 64, rc = 0;
    SftExample *ex = xmalloc(sizeof *ex * cap);
    char *line = NULL;
    size_t lcap = 0;
    long lineno = 0;
    while (getline(&line, &lcap, f) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line)) continue;
        if (n == cap) ex = xrealloc(ex, sizeof *ex * (cap *= 2));
        memset(&ex[n], 0, sizeof ex[n]);
        if ((rc = parse_example(tok, eos, line, path, lineno, c, &ex[n], err))) {
            free(ex[n].ids);
            break;
        }
        n++;
    }
    free(line);
    fclose(f);
    if (!rc && n == 0) rc = err_set(err, "%s: no examples", path);
    if (rc) {
        for (int i = 0; i < n; i++) free(ex[i].ids);
        free(ex);
        return -1;
    }
    *out = ex;
    *n_out = n;
    return 0;
}

/* One micro-batch: forward, log-probs, d(-Σ logp / norm), backward. Returns Σ -logp. */
static double micro_step(Model *m, Activations *a, const ModelView *gv, SftExample **b, int S, double norm) {
    int T = 1;
    for (int i = 0; i < S; i++) T = b[i]->n > T ? b[i]->n : T;
    int N = S * T;
    int32_t *ids = xcalloc(N, sizeof(int32_t)), *tg = xmalloc(sizeof(int32_t) * N);
    uint8_t *mask = xcalloc(N, 1);
    float *lp = xmalloc(sizeof(float) * N), *dlp = xmalloc(sizeof(float) * N);
    for (int n = 0; n < N; n++) tg[n] = -1;
    for (int i = 0; i < S; i++) {
        memcpy(ids + i * T, b[i]->ids, sizeof(int32_t) * b[i]->n);
        memset(mask + i * T, 1, b[i]->n);
        for (int t = b[i]->loss_start - 1; t < b[i]->n - 1; t++) tg[i * T + t] = b[i]->ids[t + 1];
    }
    model_forward(m, a, ids, mask, S, T);
    model_logprobs(m, a, tg, 1.0f, lp, NULL);
    double nll = 0;
    for (int n = 0; n < N; n++) {
        dlp[n] = tg[n] >= 0 ? (float)(-1.0 / norm) : 0.0f;
        if (tg[n] >= 0) nll -= lp[n];
    }
    model_backward(m, a, gv, dlp);
    free(ids), free(tg), free(mask), free(lp), free(dlp);
    return nll;
}

int sft_run(const SftConfig *c, GrpoErr *err) {
    int B = c->per_device_train_batch_size, GA = c->gradient_accumulation_steps;
    if (B < 1 || GA < 1 || c->max_length < 2)
        return err_set(err, "per_device_train_batch_size and gradient_accumulation_steps must be >= 1 and max_length >= 2");
    if (training_args_check(&c->train, err)) return -1;
    Model m;
    Tokenizer *tok = NULL;
    if (model_load(&m, c->model_dir, err)) return -1;
    if (tok_load(&tok, c->model_dir, err)) {
        model_free(&m);
        return -1;
    }
    int32_t eos = tok_special(tok)->eos >= 0 ? tok_special(tok)->eos : (m.cfg.n_eos ? m.cfg.eos_token_ids[0] : -1);
    SftExample *ex = NULL;
    int n_ex = 0, rc = load_examples(c->dataset, tok, eos, c, &ex, &n_ex, err);
    for (int i = 0; !rc && i < n_ex; i++)
        for (int t = 0; t < ex[i].n && !rc; t++)
            if (ex[i].ids[t] >= m.cfg.vocab_size)
                rc = err_set(err, "%s: example %d has token id %d beyond the model's vocab_size %d", c->dataset, i + 1,
                             ex[i].ids[t], m.cfg.vocab_size);
    if (rc) {
        tok_free(tok);
        model_free(&m);
        return -1;
    }
    int longest = 2;
    for (int i = 0; i < n_ex; i++) longest = ex[i].n > longest ? ex[i].n : longest;
    Activations a;
    acts_create(&a, &m.cfg, B * longest, c->train.gradient_checkpointing, c->train.logprob_chunk_rows);
    size_t P = m.table.total;
    float *grads = xaligned(sizeof(float) * P);
    ModelView gv;
    params_view(&gv, &m.table, &m.cfg, grads);
    AdamW opt;
    adamw_init(&opt, P);
    uint8_t *decay = xmalloc(P);
    adamw_decay_mask_build(decay, &m.table);
    DatasetSampler order;
    dataset_sampler_init(&order, n_ex, c->shuffle_dataset, c->train.seed);
    long total = c->train.max_steps > 0 ? c->train.max_steps : (long)ceil(c->train.num_train_epochs * n_ex / (double)(B * GA));
    if (total < 1) total = 1;
    long step = 0, pos = 0, tokens = 0;
    if (c->train.resume_from_checkpoint) {
        char *dir = ckpt_resolve(c->output_dir, c->train.resume_from_checkpoint, err);
        json_t *st = NULL;
        rc = dir ? ckpt_read(dir, &m, &opt, NULL, &st, err) : -1;
        json_int_t s = 0, p = 0, tk = 0, as = 0;
        int v = 0;
        if (!rc && (json_unpack(st, "{s:i, s:I, s:I, s:I, s:I}", "sft_version", &v, "global_step", &s, "data_position",
                                &p, "num_tokens", &tk, "adam_step", &as) || v != SFT_STATE_VERSION))
            rc = err_set(err, "%s/trainer_state.json: not a grpo sft checkpoint", dir);
        step = s, pos = p, tokens = tk, opt.step = as;
        json_decref(st);
        if (!rc) ckpt_truncate_log(c->output_dir, "metrics.jsonl", step);
        free(dir);
    }
    FILE *mf = NULL;
    if (!rc && !fs_mkdir_p(c->output_dir, err)) {
        char *p = fs_join(c->output_dir, "metrics.jsonl");
        mf = fopen(p, c->train.resume_from_checkpoint ? "a" : "w");
        if (!mf) rc = err_set(err, "%s: cannot open for writing", p);
        free(p);
    } else {
        rc = -1;
    }
    if (!rc && !c->train.quiet)
        fprintf(stderr, "grpo sft: %s (%.2f M parameters), %d examples, %ld steps of %d x %d examples; "
                "memory plan %.0f MB (weights+grads+AdamW %.0f, activations %.0f)\n", c->model_dir,
                config_param_count(&m.cfg) / 1e6, n_ex, total, GA, B,
                (16.0 * P + a.bytes) / 1048576.0, 16.0 * P / 1048576.0, a.bytes / 1048576.0);
    MetricAcc acc;
    metric_acc_init(&acc);
    int tty = isatty(2) && !c->train.quiet;
    double start = time_now_s();
    long step0 = step, tokens0 = tokens;
    SftExample **mb = xmalloc(sizeof(SftExample *) * B * GA);
    while (!rc && step < total) {
        double t0 = time_now_s();
        long targets = 0;
        for (int k = 0; k < B * GA; k++) {
            mb[k] = &ex[dataset_sampler_index(&order, pos++)];
            targets += mb[k]->n - mb[k]->loss_start;
            tokens += mb[k]->n;
        }
        memset(grads, 0, sizeof(float) * P);
        double nll = 0;
        for (int k = 0; k < GA; k++) nll += micro_step(&m, &a, &gv, mb + k * B, B, (double)targets);
        double gnorm = grad_clip_norm(grads, P, c->train.max_grad_norm);
        long long warm = sched_warmup_steps(c->train.warmup_steps, c->train.warmup_ratio, total);
        double lr = sched_lr(c->train.lr_scheduler_type, c->train.learning_rate, step, warm, total);
        if (isfinite(gnorm) && isfinite(nll)) adamw_step(&opt, m.params, grads, decay, lr, &c->train.adam);
        else fprintf(stderr, "%sgrpo sft: step %ld: loss or gradient is NaN/Inf; the update was not applied\n",
                     tty ? "\n" : "", step + 1);
        step++;
        metric_add(&acc, "loss", nll / targets);
        metric_add(&acc, "grad_norm", gnorm);
        metric_add(&acc, "learning_rate", lr);
        metric_add(&acc, "num_tokens", (double)tokens);
        metric_add(&acc, "epoch", (double)pos / n_ex);
        metric_add(&acc, "step_time", time_now_s() - t0);
        double el = time_now_s() - start;
        if (!c->train.quiet)
            progress_print(step, total, NAN, metric_mean(&acc, "loss"), (tokens - tokens0) / (el > 0 ? el : 1e-9),
                           el / (step - step0) * (total - step), tty);
        if (step % c->train.logging_steps == 0 || step == total) metric_write_line(&acc, mf, step);
        if (c->train.save_steps > 0 && step % c->train.save_steps == 0) {
            json_t *st = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I}", "sft_version", SFT_STATE_VERSION, "global_step",
                                   (json_int_t)step, "max_steps", (json_int_t)total, "data_position", (json_int_t)pos,
                                   "num_tokens", (json_int_t)tokens, "adam_step", (json_int_t)opt.step);
            CkptWrite w = {c->output_dir, step, &m, c->model_dir, &opt, NULL, st, NULL, NULL, c->train.save_total_limit};
            rc = ckpt_write(&w, err);
            json_decref(st);
        }
    }
    if (!c->train.quiet) progress_done(tty);
    if (!rc) {
        ModelSaveOpts so;
        model_save_opts_default(&so);
        so.copy_from = c->model_dir;
        rc = model_save(&m, c->output_dir, &so, err);
        if (!rc && !c->train.quiet) fprintf(stderr, "grpo sft: saved the trained model to %s\n", c->output_dir);
    }
    if (mf) fclose(mf);
    metric_acc_free(&acc);
    free(mb);
    dataset_sampler_free(&order);
    free(decay);
    adamw_free(&opt);
    params_view_free(&gv);
    free(grads);
    acts_free(&a);
    for (int i = 0; i < n_ex; i++) free(ex[i].ids);
    free(ex);
    tok_free(tok);
    model_free(&m);
    return rc;
}
