/* tokenizer/encode.c — text -> ids, the pipeline of HF's `encode`:
 *   1. raw text: split out added tokens with normalized=false;
 *   2. each gap: normalize, then split out added tokens with normalized=true;
 *   3. each remaining gap: pre-tokenize, then BPE each pre-token;
 *   4. post-process (TemplateProcessing adds e.g. <|begin_of_text|>) when
 *      special tokens are requested.
 * Added tokens are recognised whatever add_special says, as in HF. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static int is_valid_utf8(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) { i++; continue; }
        uint32_t cp;
        int k = tok_utf8_next(u + i, n - i, &cp);
        if (k <= 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

static int encode_model(Tokenizer *tok, const char *s, size_t len, TokIds *out, GrpoErr *err) {
    if (!len) return 0;
    if (pre_apply(tok, s, len, err)) return -1;
    const TokPieces *p = &tok->pieces[0];
    for (size_t i = 0; i < p->n; i++)
        bpe_word(tok, p->buf.p + p->off[i], p->off[i + 1] - p->off[i], out);
    return 0;
}

/* A gap between unnormalized added tokens: normalize, then phase 2. */
static int encode_gap(Tokenizer *tok, const char *s, size_t len, TokIds *out, GrpoErr *err) {
    if (!len) return 0;
    if (tok->normalizer) {
        if (norm_apply(tok->normalizer, s, len, &tok->norm_buf, err)) return err_prefix(err, "%s", tok->path);
        s = tok->norm_buf.p;
        len = tok->norm_buf.n;
    }
    size_t pos = 0, ms, me;
    int k;
    while ((k = added_find(tok, 1, s, len, pos, &ms, &me)) >= 0) {
        if (encode_model(tok, s + pos, ms - pos, out, err)) return -1;
        tok_ids_push(out, tok->added[k].id);
        pos = me;
    }
    return encode_model(tok, s + pos, len - pos, out, err);
}

static void post_apply(const TokPost *p, int add_special, TokIds *ids, TokIds *tmp) {
    switch (p->kind) {
    case POST_BYTELEVEL: return; /* only trims offsets, which we do not track */
    case POST_SEQUENCE:
        for (int i = 0; i < p->n_children; i++) post_apply(&p->children[i], add_special, ids, tmp);
        return;
    case POST_TEMPLATE:
        if (!add_special) return;
        tmp->n = 0;
        for (int i = 0; i < p->n_items; i++) {
            const struct TokTemplItem *it = &p->items[i];
            if (it->n_ids < 0)
                for (size_t j = 0; j < ids->n; j++) tok_ids_push(tmp, ids->ids[j]);
            else
                for (int j = 0; j < it->n_ids; j++) tok_ids_push(tmp, it->ids[j]);
        }
        ids->n = 0;
        for (size_t j = 0; j < tmp->n; j++) tok_ids_push(ids, tmp->ids[j]);
        return;
    }
}

int tok_encode(Tokenizer *tok, const char *text, size_t len, int add_special, TokIds *out,
               GrpoErr *err) {
    if (!is_valid_utf8(text, len)) {
        tok_utf8_sanitize(text, len, &tok->sanitize_buf);
        text = tok->sanitize_buf.p;
        len = tok->sanitize_buf.n;
    }
    TokIds body = {0};
    size_t pos = 0, ms, me;
    int k, rc = 0;
    while ((k = added_find(tok, 0, text, len, pos, &ms, &me)) >= 0) {
        if ((rc = encode_gap(tok, text + pos, ms - pos, &body, err))) break;
        tok_ids_push(&body, tok->added[k].id);
        pos = me;
    }
    if (!rc) rc = encode_gap(tok, text + pos, len - pos, &body, err);
    if (!rc && tok->post) {
        TokIds tmp = {0};
        post_apply(tok->post, add_special, &body, &tmp);
        tok_ids_free(&tmp);
    }
    if (!rc)
        for (size_t i = 0; i < body.n; i++) tok_ids_push(out, body.ids[i]);
    tok_ids_free(&body);
    return rc;
}
