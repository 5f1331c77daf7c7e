/* gen/pretrained.c — opening a model directory for generation (pretrained.h). */
#include "gen/pretrained.h"

#include <stdio.h>
#include <string.h>

#include "model/lora.h"

int pretrained_open(Pretrained *p, const char *dir, WeightForm form, GenOpts *o, GrpoErr *err) {
    memset(p, 0, sizeof *p);
    if (model_load_ex(&p->model, dir, form, err)) return -1;
    int rc = tok_load(&p->tok, dir, err);
    if (!rc && o) {
        const TokSpecial *sp = tok_special(p->tok);
        rc = gen_opts_set_eos(o, p->model.cfg.eos_token_ids, p->model.cfg.n_eos, sp->eos_ids, sp->n_eos, err);
    }
    if (rc) pretrained_close(p);
    return rc;
}

void pretrained_close(Pretrained *p) {
    tok_free(p->tok);
    if (model_loaded(&p->model)) model_free(&p->model);
    memset(p, 0, sizeof *p);
}

/* The tokenizer's eos: its eos token, else the first of its eos ids, else -1. */
static int32_t tokenizer_eos(const Tokenizer *tok) {
    const TokSpecial *sp = tok_special(tok);
    return sp->eos >= 0 ? sp->eos : sp->n_eos > 0 ? sp->eos_ids[0] : -1;
}

int32_t pretrained_eos(const Pretrained *p) {
    int32_t eos = tokenizer_eos(p->tok);
    return eos >= 0 ? eos : p->model.cfg.n_eos ? p->model.cfg.eos_token_ids[0] : -1;
}

/* A prompt and its completion must fit the model's positions: past them RoPE
 * still runs (transformers only warns) but what comes out is not the model's.
 * Every prompt id must index the embedding: a tokenizer with more ids than
 * config.json's vocab_size would otherwise read past it (transformers fails
 * with an IndexError on that token). */
static int check_prompts(const GenSession *s, const Dataset *data, int n, const GenOpts *o, GrpoErr *err) {
    const ModelConfig *cfg = &s->model->cfg;
    int P = cfg->max_position_embeddings, V = cfg->vocab_size;
    for (int i = 0; i < n; i++) {
        const DatasetExample *e = &data->ex[i];
        if ((long)e->n_prompt_ids + o->max_completion_length > P)
            return err_set(err, "%s:%ld: the prompt's %d tokens and max_completion_length %d are more than the model's "
                           "max_position_embeddings (%d); set max_prompt_length to keep the prompt's last tokens (as "
                           "TRL truncates) or lower max_completion_length", data->path, e->line, e->n_prompt_ids,
                           o->max_completion_length, P);
        for (int k = 0; k < e->n_prompt_ids; k++)
            if (e->prompt_ids[k] < 0 || e->prompt_ids[k] >= V) {
                size_t len = 0;
                const char *t = tok_id_to_token(s->tok, e->prompt_ids[k], &len);
                char shown[48];   /* the token's text, control bytes as '?', for a one-line message */
                size_t j = 0;
                for (; t && j < len && j + 1 < sizeof shown; j++)
                    shown[j] = (unsigned char)t[j] < 0x20 || t[j] == 0x7f ? '?' : t[j];
                shown[j] = 0;
                return err_set(err, "%s:%ld: the prompt's token %d ('%s') is outside the model's vocabulary "
                               "(config.json: vocab_size %d; the tokenizer has %d ids)", data->path, e->line,
                               e->prompt_ids[k], shown, V, tok_vocab_size(s->tok));
            }
    }
    return 0;
}

/* The chat template variables the prompts are rendered with: chat_template_kwargs,
 * and the tools file's schemas as tools= (TRL renders every prompt with
 * tools=self.tools) unless the kwargs name tools themselves. NULL: none. */
static json_t *prompt_kwargs(const GenOpts *o) {
    json_t *kwargs = o->chat_template_kwargs ? json_loads(o->chat_template_kwargs, 0, NULL) : NULL;
    json_t *tools = o->tools_json ? json_loads(o->tools_json, 0, NULL) : NULL;
    if (json_array_size(tools) > 0) {
        if (!kwargs) kwargs = json_object();
        if (!json_object_get(kwargs, "tools")) json_object_set(kwargs, "tools", tools);
    }
    json_decref(tools);
    return kwargs;
}

/* The session's prompts once s->model and s->tok are set: tokenized, checked, the longest found. */
static int session_prompts(GenSession *s, Dataset *data, const GenOpts *o, int max_prompt_length, int n,
                           GrpoErr *err) {
    s->data = *data;
    memset(data, 0, sizeof *data);
    s->n = n > 0 && n < s->data.n ? n : s->data.n;
    s->longest = 1;
    int rc = o->chat_template ? tok_set_chat_template(s->tok, o->chat_template, err) : 0;
    json_t *kwargs = prompt_kwargs(o);
    if (!rc) rc = dataset_tokenize(&s->data, s->tok, max_prompt_length, kwargs, err);
    json_decref(kwargs);
    if (!rc) rc = dataset_longest_prompt(&s->data, s->n, &s->longest, err);
    if (!rc) rc = check_prompts(s, &s->data, s->n, o, err);
    if (rc) gen_session_close(s);
    return rc;
}

/* The rest of a session's setup once s->model and s->tok are set. */
static int session_start(GenSession *s, Dataset *data, const GenOpts *o, int max_prompt_length, int n, GrpoErr *err) {
    if (session_prompts(s, data, o, max_prompt_length, n, err)) return -1;
    return gen_session_start(s, o, err);
}

int gen_session_start(GenSession *s, const GenOpts *o, GrpoErr *err) {
    int rc = gen_create(&s->gen, s->model, o, s->longest, err);
    if (rc) gen_session_close(s);
    return rc;
}

/* s's own model and tokenizer from model_dir (data freed on failure). */
static int session_own(GenSession *s, const char *model_dir, Dataset *data, GenOpts *o, GrpoErr *err) {
    memset(s, 0, sizeof *s);
    if (pretrained_open(&s->own, model_dir, (WeightForm)o->weights, o, err)) {
        dataset_free(data);
        return -1;
    }
    s->model = &s->own.model;
    s->tok = s->own.tok;
    return 0;
}

int pretrained_adapter_apply(Model *m, LoraLayers *l, int *attached, const char *dir, GrpoErr *err) {
    *attached = 0;
    if (!m->half) return lora_apply_dir(m, dir, err);
    if (lora_layers_load(l, dir, m, 0, err)) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return err_set(err, "%s (with bf16 products the adapter runs unmerged beside the bf16 base; --bf16 false "
                       "folds it into fp32 weights, on the CPU)", msg);
    }
    m->lora = l;
    *attached = 1;
    return 0;
}

/* --adapter on s's model before its generator is made (and before its upload, on the
 * GPU). */
static int session_lora(GenSession *s, const char *dir, GrpoErr *err) {
    return pretrained_adapter_apply(s->model, &s->lora, &s->has_lora, dir, err);
}

int gen_session_open(GenSession *s, const char *model_dir, const char *adapter, Dataset *data, GenOpts *o,
                     int max_prompt_length, int n, GrpoErr *err) {
    if (session_own(s, model_dir, data, o, err)) return -1;
    if (adapter && session_lora(s, adapter, err)) {
        dataset_free(data);
        gen_session_close(s);
        return -1;
    }
    return session_start(s, data, o, max_prompt_length, n, err);
}

int gen_session_open_gpu(GenSession *s, GpuDevice *d, const char *model_dir, const char *adapter, Dataset *data,
                         GenOpts *o, int max_prompt_length, int n, GrpoErr *err) {
    if (session_own(s, model_dir, data, o, err)) return -1;
    if ((!adapter || !session_lora(s, adapter, err)) && !gpu_model_upload(d, &s->gpu_model, s->model, err)) {
        s->device = (GenDevice){d, &s->gpu_model};
        GenOpts on = *o;
        on.device = &s->device; /* the session's own: stays put while the session does */
        return session_start(s, data, &on, max_prompt_length, n, err);
    }
    dataset_free(data);
    gen_session_close(s);
    return -1;
}

int gen_session_borrow(GenSession *s, Model *model, Tokenizer *tok, Dataset *data, const GenOpts *o,
                       int max_prompt_length, int n, GrpoErr *err) {
    memset(s, 0, sizeof *s);
    s->model = model;
    s->tok = tok;
    return session_prompts(s, data, o, max_prompt_length, n, err);
}

int gen_session_prepare(GenSession *s, Dataset *data, const GenOpts *o, int max_prompt_length, GrpoErr *err) {
    json_t *kwargs = prompt_kwargs(o);
    int longest = 1, rc = dataset_tokenize(data, s->tok, max_prompt_length, kwargs, err);
    json_decref(kwargs);
    if (!rc) rc = dataset_longest_prompt(data, 0, &longest, err);
    if (!rc) rc = check_prompts(s, data, data->n, o, err);
    if (!rc && longest > s->gen.max_prompt) { /* plan the generator for the longer prompts */
        GenOpts go = s->gen.opts;
        gen_free(&s->gen);
        rc = gen_create(&s->gen, s->model, &go, longest, err);
    }
    return rc;
}

void gen_session_close(GenSession *s) {
    if (s->gen.m) gen_free(&s->gen);
    if (s->device.dev) gpu_model_free(s->device.dev, &s->gpu_model);
    dataset_free(&s->data);
    pretrained_close(&s->own);
    if (s->has_lora) lora_layers_free(&s->lora);
    memset(s, 0, sizeof *s);
}

/* A float option as the decimal it was given as (0.9f is 0.9, not 0.899999976). */
static json_t *json_f32(float x) {
    char b[32];
    snprintf(b, sizeof b, "%.7g", x);
    return json_real(strtod(b, NULL));
}

void gen_save_meta(ModelSaveMeta *meta, const Tokenizer *tok, const GenOpts *o) {
    const TokSpecial *sp = tok_special(tok);
    meta->bos = sp->bos;
    meta->eos = tokenizer_eos(tok);
    meta->pad = sp->pad >= 0 ? sp->pad : meta->eos;
    json_t *g = json_object();
    if (meta->bos >= 0) json_object_set_new(g, "bos_token_id", json_integer(meta->bos));
    const int32_t *eos = o ? o->eos_ids : sp->eos_ids;
    int n_eos = o ? o->n_eos : sp->n_eos;
    if (n_eos == 1) {
        json_object_set_new(g, "eos_token_id", json_integer(eos[0]));
    } else if (n_eos > 1) {
        json_t *l = json_array();
        for (int i = 0; i < n_eos; i++) json_array_append_new(l, json_integer(eos[i]));
        json_object_set_new(g, "eos_token_id", l);
    }
    if (meta->pad >= 0) json_object_set_new(g, "pad_token_id", json_integer(meta->pad));
    if (o) {
        const SamplerOpts *s = &o->sampler;
        json_object_set_new(g, "do_sample", json_boolean(s->temperature > 0));
        if (s->temperature > 0) {
            json_object_set_new(g, "temperature", json_f32(s->temperature));
            json_object_set_new(g, "top_p", json_f32(s->top_p));
            json_object_set_new(g, "top_k", json_integer(s->top_k));
            if (s->min_p > 0) json_object_set_new(g, "min_p", json_f32(s->min_p));
        }
        json_object_set_new(g, "repetition_penalty", json_f32(s->repetition_penalty));
    }
    meta->generation_config = g;
    meta->chat_template = NULL;
}
