/* data/sft_data.c — supervised training examples read and tokenized (sft_data.h). */
#include "data/sft_data.h"

#include <stdlib.h>
#include <string.h>

#include "io/jsonl.h"


static int encode_append(Tokenizer *tok, const char *text, TokIds *ids, GrpoErr *err) {
    return tok_encode(tok, text, strlen(text), 0, ids, err);
}

static int encode_messages(Tokenizer *tok, json_t *messages, TokIds *ids, GrpoErr *err) {
    size_t n = json_array_size(messages);
    TokMessage *msgs = xcalloc(n, sizeof *msgs);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *m = json_array_get(messages, i);
        json_t *r = json_object_get(m, "role"), *ct = json_object_get(m, "content");
        if (!json_is_string(r) || !json_is_string(ct))
            rc = err_set(err, "messages[%zu] needs string 'role' and 'content'", i);
        else msgs[i] = (TokMessage){json_string_value(r), json_string_value(ct)};
    }
    char *rendered = NULL;
    if (!rc) rc = tok_chat_render(tok, msgs, (int)n, 0, NULL, &rendered, err);
    if (!rc) rc = encode_append(tok, rendered, ids, err);
    free(rendered);
    free(msgs);
    return rc;
}

typedef struct {
    SftData *d;
    const SftFormat *f;
} Reading;

/* One JSON line into an example (the reader adds file:line to errors). */
static int parse_example(json_t *o, long line, void *ctx, GrpoErr *err) {
    SftData *d = ((Reading *)ctx)->d;
    const SftFormat *f = ((Reading *)ctx)->f;
    TokIds ids = {0};
    int rc = 0, start = 0;
    json_t *text = json_object_get(o, "text"), *prompt = json_object_get(o, "prompt"),
           *completion = json_object_get(o, "completion"), *messages = json_object_get(o, "messages");
    if (json_is_string(text)) {
        rc = encode_append(f->tok, json_string_value(text), &ids, err);
    } else if (json_is_string(prompt) && json_is_string(completion)) {
        rc = encode_append(f->tok, json_string_value(prompt), &ids, err);
        start = f->completion_only_loss ? (int)ids.n : 0;
        if (!rc) rc = encode_append(f->tok, json_string_value(completion), &ids, err);
    } else if (json_is_array(messages) && json_array_size(messages) > 0) {
        rc = encode_messages(f->tok, messages, &ids, err);
    } else {
        rc = err_set(err, "expected a 'text' string, 'prompt' and 'completion' strings, or a 'messages' list");
    }
    if (!rc && !json_is_array(messages) && f->eos >= 0) {
        if (ids.n == ids.cap) ids.ids = xrealloc(ids.ids, sizeof(int32_t) * (ids.cap = ids.cap * 2 + 1));
        ids.ids[ids.n++] = f->eos;
    }
    int n = (int)ids.n < f->max_length ? (int)ids.n : f->max_length;
    for (int i = 0; i < n && !rc; i++)
        if (ids.ids[i] >= f->vocab_size)
            rc = err_set(err, "token id %d is beyond the model's vocab_size %d", ids.ids[i], f->vocab_size);
    if (!rc && n > f->max_positions)
        rc = err_set(err, "%d tokens (after truncation to max_length %d) are more than the model's "
                     "max_position_embeddings (%d); lower max_length", n, f->max_length, f->max_positions);
    if (!rc && (start < 1 ? 1 : start) >= n)
        rc = err_set(err, "no token left to learn (%d tokens after truncation to max_length %d, loss starts at %d)", n,
                     f->max_length, start < 1 ? 1 : start);
    if (rc) {
        tok_ids_free(&ids);
        return -1;
    }
    if (d->n == d->cap) d->ex = xrealloc(d->ex, sizeof(SftExample) * (d->cap = d->cap * 2 + 16));
    d->ex[d->n++] = (SftExample){ids.ids, n, start < 1 ? 1 : start};
    d->longest = n > d->longest ? n : d->longest;
    return 0;
}

int sft_data_load(SftData *d, const char *path, const SftFormat *f, GrpoErr *err) {
    memset(d, 0, sizeof *d);
    d->longest = 2;
    Reading r = {d, f};
    if (jsonl_read(path, parse_example, &r, err) < 0) return -1;
    return d->n ? 0 : err_set(err, "%s: no examples", path);
}

void sft_data_free(SftData *d) {
    for (int i = 0; i < d->n; i++) free(d->ex[i].ids);
    free(d->ex);
    memset(d, 0, sizeof *d);
}
