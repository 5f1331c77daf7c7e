/* data/sft_data.c — supervised training examples read and tokenized (sft_data.h). */
#include "data/sft_data.h"

#include <stdlib.h>
#include <string.h>

#include "io/jsonl.h"


static int encode_append(Tokenizer *tok, const char *text, TokIds *ids, GrpoErr *err) {
    return tok_encode(tok, text, strlen(text), 0, ids, err);
}

/* The row's `tools` column as the template's kwargs {"tools": [...]}, as TRL's
 * tokenize_fn hands it to apply_chat_template: a list of JSON schemas, or that
 * list written as a JSON string. *kwargs stays NULL without the column. */
static int tools_kwargs(json_t *row, json_t **kwargs, GrpoErr *err) {
    json_t *tools = json_object_get(row, "tools"), *parsed = NULL;
    *kwargs = NULL;
    if (!tools || json_is_null(tools)) return 0;
    if (json_is_string(tools)) tools = parsed = json_loads(json_string_value(tools), JSON_DECODE_ANY, NULL);
    if (!json_is_array(tools)) {
        json_decref(parsed);
        return err_set(err, "'tools' must be a list of JSON schemas (or that list as a JSON string)");
    }
    *kwargs = json_pack("{s:O}", "tools", tools);
    CHECK(*kwargs);
    json_decref(parsed);
    return 0;
}

/* messages (a JSON list handed to the template whole: an assistant's tool_calls,
 * tool messages) rendered by the chat template and appended as ids */
static int encode_conversation(Tokenizer *tok, const json_t *messages, int add_generation_prompt,
                               const json_t *kwargs, TokIds *ids, GrpoErr *err) {
    char *rendered = NULL;
    int rc = tok_chat_render_json(tok, messages, add_generation_prompt, kwargs, &rendered, err);
    if (!rc) rc = encode_append(tok, rendered, ids, err);
    free(rendered);
    return rc;
}

/* A conversational prompt + completion (TRL's prompt-completion case): the prompt
 * rendered with the generation prompt gives where the loss starts (when
 * completion_only_loss), the two lists rendered together the ids. As TRL, the
 * prompt's ids are taken as the first ones of the whole even when the template
 * renders them otherwise there. */
static int encode_conversational_pair(Tokenizer *tok, json_t *prompt, json_t *completion, const json_t *kwargs,
                                      int completion_only_loss, TokIds *ids, int *start, GrpoErr *err) {
    TokIds prompt_ids = {0};
    json_t *all = json_copy(prompt);
    CHECK(all);
    json_array_extend(all, completion);
    int rc = encode_conversation(tok, prompt, 1, kwargs, &prompt_ids, err);
    if (!rc) rc = encode_conversation(tok, all, 0, kwargs, ids, err);
    if (!rc) *start = completion_only_loss ? (int)prompt_ids.n : 0;
    tok_ids_free(&prompt_ids);
    json_decref(all);
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
    int rc = 0, start = 0, conversational = 0;
    json_t *text = json_object_get(o, "text"), *prompt = json_object_get(o, "prompt"),
           *completion = json_object_get(o, "completion"), *messages = json_object_get(o, "messages"), *kwargs;
    if (tools_kwargs(o, &kwargs, err)) return -1;
    if (json_is_string(text)) {
        rc = encode_append(f->tok, json_string_value(text), &ids, err);
    } else if (json_is_string(prompt) && json_is_string(completion)) {
        rc = encode_append(f->tok, json_string_value(prompt), &ids, err);
        start = f->completion_only_loss ? (int)ids.n : 0;
        if (!rc) rc = encode_append(f->tok, json_string_value(completion), &ids, err);
    } else if (json_is_array(prompt) && json_array_size(prompt) > 0 && json_is_array(completion) &&
               json_array_size(completion) > 0) {
        conversational = 1;
        rc = encode_conversational_pair(f->tok, prompt, completion, kwargs, f->completion_only_loss, &ids, &start,
                                        err);
    } else if (json_is_array(messages) && json_array_size(messages) > 0) {
        conversational = 1;
        rc = encode_conversation(f->tok, messages, 0, kwargs, &ids, err);
    } else {
        rc = err_set(err, "expected a 'text' string, 'prompt' and 'completion' strings or message lists, "
                          "or a 'messages' list");
    }
    json_decref(kwargs);
    if (!rc && !conversational && f->eos >= 0) {
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
