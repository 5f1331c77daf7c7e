/* gen/pretrained.c — opening a model directory for generation (pretrained.h). */
#include "gen/pretrained.h"

#include <string.h>

int pretrained_open(Pretrained *p, const char *dir, GenOpts *o, GrpoErr *err) {
    memset(p, 0, sizeof *p);
    if (model_load(&p->model, dir, err)) return -1;
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
    if (p->model.params) model_free(&p->model);
    memset(p, 0, sizeof *p);
}

/* A prompt and its completion must fit the model's positions: past them RoPE
 * still runs (transformers only warns) but what comes out is not the model's. */
static int check_positions(const GenSession *s, const GenOpts *o, GrpoErr *err) {
    int P = s->pre.model.cfg.max_position_embeddings;
    for (int i = 0; i < s->n; i++) {
        const DatasetExample *e = &s->data.ex[i];
        if ((long)e->n_prompt_ids + o->max_completion_length > P)
            return err_set(err, "%s:%ld: the prompt's %d tokens and max_completion_length %d are more than the model's "
                           "max_position_embeddings (%d); set max_prompt_length to keep the prompt's last tokens (as "
                           "TRL truncates) or lower max_completion_length", s->data.path, e->line, e->n_prompt_ids,
                           o->max_completion_length, P);
    }
    return 0;
}

int gen_session_open(GenSession *s, const char *model_dir, Dataset *data, GenOpts *o, int max_prompt_length, int n,
                     GrpoErr *err) {
    memset(s, 0, sizeof *s);
    s->data = *data;
    memset(data, 0, sizeof *data);
    s->n = n > 0 && n < s->data.n ? n : s->data.n;
    int longest = 1;
    int rc = pretrained_open(&s->pre, model_dir, o, err);
    if (!rc) rc = dataset_tokenize(&s->data, s->pre.tok, max_prompt_length, -1, err);
    if (!rc) rc = dataset_longest_prompt(&s->data, s->n, &longest, err);
    if (!rc) rc = check_positions(s, o, err);
    if (!rc) rc = gen_create(&s->gen, &s->pre.model, o, longest, err);
    if (rc) gen_session_close(s);
    return rc;
}

void gen_session_close(GenSession *s) {
    if (s->gen.m) gen_free(&s->gen);
    dataset_free(&s->data);
    pretrained_close(&s->pre);
    memset(s, 0, sizeof *s);
}
