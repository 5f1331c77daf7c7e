/* data/dataset.c — JSON-lines prompt datasets: load and validate, render and
 * tokenize prompts (TRL GRPOTrainer semantics), and the seeded epoch order.
 *
 * It is not a general datasets library: no splits, no streaming, no column
 * mapping; the whole file is parsed into memory (one jansson object per line). */
#include "data/dataset.h"

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/text.h"
#include "io/jsonl.h"

/* Checks one row's prompt; returns 0 or -1 with the problem in err (the caller
 * adds "path:line: "). */
static int check_row(json_t *row, int *conversational, GrpoErr *err) {
    json_t *prompt = json_object_get(row, "prompt");
    if (!prompt)
        return err_set(err, "no 'prompt' field (each line needs a 'prompt': a string or a list of {role, content} "
                            "messages)");
    if (json_is_string(prompt)) {
        *conversational = 0;
        return 0;
    }
    if (!json_is_array(prompt))
        return err_set(err, "'prompt' must be a string or a list of {role, content} messages, got %s",
                       json_kind(prompt));
    if (json_array_size(prompt) == 0) return err_set(err, "'prompt' is an empty message list");
    size_t i;
    json_t *m;
    json_array_foreach(prompt, i, m) {
        if (!json_is_object(m))
            return err_set(err, "'prompt'[%zu] must be a {role, content} message, got %s", i, json_kind(m));
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!json_is_string(role))
            return err_set(err, "'prompt'[%zu].role must be a string, got %s", i, role ? json_kind(role) : "nothing");
        if (!json_is_string(content))
            return err_set(err, "'prompt'[%zu].content must be a string, got %s", i,
                           content ? json_kind(content) : "nothing");
    }
    *conversational = 1;
    return 0;
}

/* A row's `tools` column (TRL's conversational datasets: the JSON schemas of the
 * functions the model may call, rendered by the chat template as tools=): absent,
 * null, or a list of objects. */
static int check_tools(json_t *row, GrpoErr *err) {
    json_t *tools = json_object_get(row, "tools");
    if (!tools || json_is_null(tools)) return 0;
    if (!json_is_array(tools))
        return err_set(err, "'tools' must be a list of JSON schemas ({\"type\": \"function\", \"function\": "
                            "{\"name\", \"description\", \"parameters\"}}), got %s", json_kind(tools));
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) if (!json_is_object(t))
        return err_set(err, "'tools'[%zu] must be a JSON schema object, got %s", i, json_kind(t));
    return 0;
}

typedef struct {
    Dataset d;
    int cap, columns_cap;
    json_t *seen;                    /* the column names so far, as a set (values unused) */
    const DatasetConversation *conv; /* open-r1's prompt made from a column, or NULL */
} Loading;

/* Adds row's column names that are new to l->d.columns: the union over the
 * file, gathered once so a reward call costs no scan of the data. */
static void add_columns(Loading *l, json_t *row) {
    const char *key;
    json_t *v;
    if (!l->seen) l->seen = json_object();
    json_object_foreach(row, key, v) {
        if (json_object_get(l->seen, key)) continue;
        json_object_set_new(l->seen, key, json_true());
        if (l->d.n_columns == l->columns_cap) {
            l->columns_cap = l->columns_cap ? 2 * l->columns_cap : 8;
            l->d.columns = xrealloc(l->d.columns, (size_t)l->columns_cap * sizeof *l->d.columns);
        }
        l->d.columns[l->d.n_columns++] = xstrdup(key);
    }
}

/* The row's columns, "a, b, c", for a message. */
static void column_names(const json_t *row, char *out, size_t cap) {
    const char *key;
    json_t *v;
    size_t n = 0;
    out[0] = 0;
    json_object_foreach((json_t *)row, key, v) {
        char shown[200];
        text_escaped(shown, sizeof shown, key, 40); /* a column name is the file's text */
        if (n + strlen(shown) + 8 >= cap) {
            snprintf(out + n, cap - n, ", ...");
            return;
        }
        n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? ", " : "", shown);
    }
}

/* open-r1's make_conversation on one row, in place (DatasetConversation). */
static int make_conversation(json_t *row, const DatasetConversation *c, GrpoErr *err) {
    json_t *content = json_object_get(row, c->prompt_column);
    if (!json_is_string(content)) {
        char cols[300];
        column_names(row, cols, sizeof cols);
        if (content)
            return err_set(err, "'%s' must be a string to be the user message (dataset_prompt_column), got %s",
                           c->prompt_column, json_kind(content));
        return err_set(err, "no '%s' column for the user message (dataset_prompt_column; the row has %s)",
                       c->prompt_column, *cols ? cols : "no columns");
    }
    json_t *prompt = json_array();
    if (c->system_prompt)
        json_array_append_new(prompt, json_pack("{s:s, s:s}", "role", "system", "content", c->system_prompt));
    json_array_append_new(prompt, json_pack("{s:s, s:O}", "role", "user", "content", content));
    json_object_set_new(row, "prompt", prompt);
    json_object_del(row, "messages");
    return 0;
}

/* Validates row and appends it (a new reference) to the dataset being built. */
static int add_row(json_t *row, long line, void *ctx, GrpoErr *err) {
    Loading *l = ctx;
    int conv = 0;
    if (!json_is_object(row)) return err_set(err, "expected a JSON object");
    if (l->conv && make_conversation(row, l->conv, err)) return -1;
    if (check_row(row, &conv, err) || check_tools(row, err)) return -1;
    if (l->d.n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->d.ex = xrealloc(l->d.ex, (size_t)l->cap * sizeof *l->d.ex);
    }
    add_columns(l, row);
    DatasetExample *e = &l->d.ex[l->d.n++];
    memset(e, 0, sizeof *e);
    e->row = json_incref(row);
    e->prompt = json_object_get(row, "prompt");
    e->conversational = conv;
    e->line = line;
    return 0;
}

/* Hands the examples gathered in l to *d under the name `name`, or frees them. */
static int finish(Dataset *d, Loading *l, const char *name, int rc, const char *why_empty, GrpoErr *err) {
    json_decref(l->seen);
    if (!rc && l->d.n == 0) rc = err_set(err, "%s: no examples%s", name, why_empty);
    if (rc) {
        dataset_free(&l->d);
        return -1;
    }
    l->d.path = xstrdup(name);
    *d = l->d;
    return 0;
}

int dataset_load(Dataset *d, const char *path, GrpoErr *err) {
    return dataset_load_conversation(d, path, NULL, err);
}

int dataset_load_conversation(Dataset *d, const char *path, const DatasetConversation *conv, GrpoErr *err) {
    memset(d, 0, sizeof *d);
    Loading l = {.conv = conv};
    const char *name = strcmp(path, "-") ? path : "<stdin>"; /* as jsonl_read names it */
    return finish(d, &l, name, jsonl_read(path, add_row, &l, err) < 0 ? -1 : 0,
                  " (the file is empty or has only blank lines)", err);
}

int dataset_from_rows(Dataset *d, const char *name, json_t *const *rows, int n, GrpoErr *err) {
    memset(d, 0, sizeof *d);
    Loading l = {0};
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        if (add_row(rows[i], i + 1, &l, err)) rc = err_prefix(err, "%s:%d", name, i + 1);
    return finish(d, &l, name, rc, "", err);
}

/* Renders one example's prompt into a malloc'd string. */
static int render_prompt(const Dataset *d, const DatasetExample *e, Tokenizer *tok,
                         const json_t *chat_kwargs, char **text, GrpoErr *err) {
    if (!e->conversational) {
        *text = xstrdup(json_string_value(e->prompt));
        return 0;
    }
    /* the row's tools as apply_chat_template's tools=; an empty list is none, as TRL
     * passes `tools or None` (Llama 3.1's template writes its tool preamble for []) */
    const json_t *tools = json_object_get(e->row, "tools");
    json_t *kw = NULL;
    if (json_array_size(tools) > 0) {
        kw = json_is_object(chat_kwargs) ? json_copy((json_t *)chat_kwargs) : json_object();
        json_object_set(kw, "tools", (json_t *)tools);
    }
    int rc = tok_chat_render_json(tok, e->prompt, 1, kw ? kw : chat_kwargs, text, err);
    json_decref(kw);
    if (rc) return err_prefix(err, "%s:%ld: chat template", d->path, e->line);
    return 0;
}

int dataset_tokenize(Dataset *d, Tokenizer *tok, int max_prompt_length, const json_t *chat_kwargs,
                     GrpoErr *err) {
    TokIds ids = {0};
    for (int i = 0; i < d->n; i++) {
        DatasetExample *e = &d->ex[i];
        free(e->prompt_text);
        free(e->prompt_ids);
        e->prompt_text = NULL;
        e->prompt_ids = NULL;
        e->n_prompt_ids = e->n_prompt_ids_full = e->truncated = 0;
        char *text = NULL;
        if (render_prompt(d, e, tok, chat_kwargs, &text, err)) {
            tok_ids_free(&ids);
            return -1;
        }
        ids.n = 0;
        /* TRL tokenizes prompts with add_special_tokens=False: the chat
         * template (or the user's text) already holds what the model needs. */
        if (tok_encode(tok, text, strlen(text), 0, &ids, err)) {
            free(text);
            tok_ids_free(&ids);
            return err_prefix(err, "%s:%ld: prompt", d->path, e->line);
        }
        size_t keep = ids.n;
        /* Left truncation, as TRL does (prompt_ids[:, -max_prompt_length:]):
         * the end of the prompt, next to the completion, is what matters. */
        if (max_prompt_length > 0 && keep > (size_t)max_prompt_length) keep = (size_t)max_prompt_length;
        e->prompt_text = text;
        e->n_prompt_ids_full = (int)ids.n;
        e->n_prompt_ids = (int)keep;
        e->truncated = keep < ids.n;
        e->prompt_ids = xmalloc((keep ? keep : 1) * sizeof *e->prompt_ids);
        if (keep) memcpy(e->prompt_ids, ids.ids + (ids.n - keep), keep * sizeof *e->prompt_ids);
    }
    tok_ids_free(&ids);
    return 0;
}

void dataset_free(Dataset *d) {
    for (int i = 0; i < d->n; i++) {
        json_decref(d->ex[i].row);
        free(d->ex[i].prompt_text);
        free(d->ex[i].prompt_ids);
    }
    free(d->ex);
    free(d->path);
    for (int i = 0; i < d->n_columns; i++) free(d->columns[i]);
    free(d->columns);
    memset(d, 0, sizeof *d);
}

/* ---- order ---- */

/* Stream tag so the dataset order never shares draws with other users of the
 * same seed (sampling, init): the stream of epoch e is rng_mix(TAG, e). */
#define DATASET_RNG_TAG 0x64617461u /* "data" */

void dataset_sampler_init(DatasetSampler *s, int n, int shuffle, uint64_t seed) {
    CHECK(n > 0);
    memset(s, 0, sizeof *s);
    s->n = n;
    s->shuffle = shuffle;
    s->seed = seed;
    s->epoch = -1;
    if (shuffle) s->perm = xmalloc((size_t)n * sizeof *s->perm);
}

int dataset_sampler_index(DatasetSampler *s, long position) {
    CHECK(position >= 0);
    long epoch = position / s->n;
    int within = (int)(position % s->n);
    if (!s->shuffle) return within;
    if (epoch != s->epoch) {
        Rng r;
        rng_init(&r, s->seed, rng_mix(DATASET_RNG_TAG, (uint64_t)epoch));
        for (int i = 0; i < s->n; i++) s->perm[i] = i;
        rng_shuffle(&r, s->perm, s->n);
        s->epoch = epoch;
    }
    return s->perm[within];
}

void dataset_sampler_free(DatasetSampler *s) {
    free(s->perm);
    memset(s, 0, sizeof *s);
}

int dataset_longest_prompt(const Dataset *d, int n, int *longest, GrpoErr *err) {
    if (n <= 0 || n > d->n) n = d->n;
    *longest = 1;
    for (int i = 0; i < n; i++) {
        if (d->ex[i].n_prompt_ids < 1)
            return err_set(err, "%s:%ld: the prompt has no tokens", d->path, d->ex[i].line);
        if (d->ex[i].n_prompt_ids > *longest) *longest = d->ex[i].n_prompt_ids;
    }
    return 0;
}
