/* tokenizer/chat.c — tok_chat_render: a conversation through the model's own
 * chat_template (tokenizer_config.json), as transformers'
 * apply_chat_template(messages, add_generation_prompt=..., tokenize=False)
 * renders it: the template sees `messages`, `add_generation_prompt`, the
 * special tokens that tokenizer_config.json sets (bos_token, eos_token, ...)
 * and the caller's extra variables (TRL's chat_template_kwargs, e.g. Qwen3's
 * `enable_thinking`), which override the special tokens as in transformers. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja.h"
#include "tokenizer/tok_internal.h"

static const char SUPPORTED[] =
    "supported: chat templates of the ChatML family (Qwen2/2.5/3) and Llama 3/3.1, or any "
    "template within the same Jinja subset (if/elif/else, for, set, namespace(), string "
    "methods, filters length/trim/tojson/join/default/..., tests defined/none/string/...)";

static const char *model_name(const Tokenizer *tok) {
    return tok->model_dir ? tok->model_dir : tok->config_path ? tok->config_path : tok->path;
}

/* A JSON value as a template value (strings borrowed from j). */
static JVal from_json(JArena *ar, const json_t *j) {
    JVal v = {.k = JV_NONE};
    switch (json_typeof(j)) {
    case JSON_TRUE: case JSON_FALSE: v.k = JV_BOOL, v.u.b = json_is_true(j); break;
    case JSON_INTEGER: v.k = JV_INT, v.u.i = json_integer_value(j); break;
    case JSON_REAL: v.k = JV_FLOAT, v.u.f = json_real_value(j); break;
    case JSON_STRING: v = jv_str((JStr){json_string_value(j), json_string_length(j)}); break;
    case JSON_ARRAY: {
        v.k = JV_LIST;
        v.u.l = jar_alloc(ar, sizeof *v.u.l);
        size_t i;
        const json_t *e;
        json_array_foreach(j, i, e) jlist_push(ar, v.u.l, from_json(ar, e));
        break;
    }
    case JSON_OBJECT: {
        v.k = JV_DICT;
        v.u.d = jar_alloc(ar, sizeof *v.u.d);
        const char *k;
        const json_t *e;
        json_object_foreach((json_t *)j, k, e) jdict_set(ar, v.u.d, (JStr){k, strlen(k)}, from_json(ar, e));
        break;
    }
    case JSON_NULL: break;
    }
    return v;
}

const char *tok_chat_template(const Tokenizer *tok) { return tok->chat_template; }

int tok_set_chat_template(Tokenizer *tok, const char *template_text, GrpoErr *err) {
    JArena *ar = jar_new();
    JTemplate t;
    int rc = jinja_parse(ar, template_text, &t, err);
    jar_free(ar);
    if (rc) {
        err_prefix(err, "chat_template (the option)");
        size_t l = strlen(err->msg);
        snprintf(err->msg + l, sizeof err->msg - l, " (%s)", SUPPORTED);
        return -1;
    }
    free(tok->chat_template);
    tok->chat_template = xstrdup(template_text);
    return 0;
}

/* Parses the model's template into t (in ar); -1 naming the model when it has none
 * or it is outside the subset. */
static int parse_template(const Tokenizer *tok, JArena *ar, JTemplate *t, GrpoErr *err) {
    if (!tok->chat_template)
        return err_set(err, "%s: tokenizer_config.json has no chat_template (%s)", model_name(tok),
                       SUPPORTED);
    if (jinja_parse(ar, tok->chat_template, t, err)) {
        err_prefix(err, "%s: chat_template", model_name(tok));
        size_t l = strlen(err->msg);
        snprintf(err->msg + l, sizeof err->msg - l, " (%s)", SUPPORTED);
        return -1;
    }
    return 0;
}

/* Renders t with messages (a JV_LIST), the special tokens, kwargs and
 * add_generation_prompt, as transformers' apply_chat_template. */
static int render(const Tokenizer *tok, JArena *ar, const JTemplate *t, JVal messages, int add_generation_prompt,
                  const json_t *kwargs, char **out, GrpoErr *err) {
    JDict *ctx = jar_alloc(ar, sizeof *ctx);
    if (tok->bos_token) jdict_set(ar, ctx, (JStr){"bos_token", 9}, jv_cstr(tok->bos_token));
    if (tok->eos_token) jdict_set(ar, ctx, (JStr){"eos_token", 9}, jv_cstr(tok->eos_token));
    if (tok->pad_token) jdict_set(ar, ctx, (JStr){"pad_token", 9}, jv_cstr(tok->pad_token));
    const char *key;
    const json_t *kv;
    if (json_is_object(kwargs))
        json_object_foreach((json_t *)kwargs, key, kv) jdict_set(ar, ctx, (JStr){key, strlen(key)}, from_json(ar, kv));
    jdict_set(ar, ctx, (JStr){"messages", 8}, messages);
    JVal agp = {.k = JV_BOOL};
    agp.u.b = !!add_generation_prompt;
    jdict_set(ar, ctx, (JStr){"add_generation_prompt", 21}, agp);
    size_t len;
    char *text;
    int rc = jinja_render(ar, t, ctx, &text, &len, err);
    if (rc) err_prefix(err, "%s: chat_template", model_name(tok));
    else *out = text;
    return rc;
}

int tok_chat_render(const Tokenizer *tok, const TokMessage *msgs, int n_msgs,
                    int add_generation_prompt, const json_t *kwargs, char **out, GrpoErr *err) {
    *out = NULL;
    JArena *ar = jar_new();
    JTemplate t;
    if (parse_template(tok, ar, &t, err)) {
        jar_free(ar);
        return -1;
    }
    JList *ml = jar_alloc(ar, sizeof *ml);
    for (int i = 0; i < n_msgs; i++) {
        JVal m = {.k = JV_DICT};
        m.u.d = jar_alloc(ar, sizeof *m.u.d);
        jdict_set(ar, m.u.d, (JStr){"role", 4}, jv_cstr(msgs[i].role ? msgs[i].role : ""));
        jdict_set(ar, m.u.d, (JStr){"content", 7}, jv_cstr(msgs[i].content ? msgs[i].content : ""));
        jlist_push(ar, ml, m);
    }
    JVal mv = {.k = JV_LIST};
    mv.u.l = ml;
    int rc = render(tok, ar, &t, mv, add_generation_prompt, kwargs, out, err);
    jar_free(ar);
    return rc;
}

int tok_chat_render_json(const Tokenizer *tok, const json_t *messages, int add_generation_prompt,
                         const json_t *kwargs, char **out, GrpoErr *err) {
    *out = NULL;
    size_t i;
    const json_t *m;
    if (!json_is_array(messages)) return err_set(err, "messages: expected a list of {role, content} objects");
    json_array_foreach(messages, i, m) {
        const json_t *c = json_object_get(m, "content");
        if (!json_is_string(json_object_get(m, "role")))
            return err_set(err, "messages[%zu]: expected an object with a string \"role\"", i);
        if (c && !json_is_string(c) && !json_is_null(c))
            return err_set(err, "messages[%zu]: \"content\" must be a string or null, got %s", i,
                           json_is_array(c) ? "a list" : json_is_object(c) ? "an object" : "a number or boolean");
    }
    JArena *ar = jar_new();
    JTemplate t;
    if (parse_template(tok, ar, &t, err)) {
        jar_free(ar);
        return -1;
    }
    int rc = render(tok, ar, &t, from_json(ar, messages), add_generation_prompt, kwargs, out, err);
    jar_free(ar);
    return rc;
}
