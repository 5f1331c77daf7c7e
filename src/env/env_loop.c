/* env/env_loop.c — one environment turn of a completion: the conversation so far
 * built, the environment asked, its message rendered into the ids that continue
 * the sequence. Not the decoding (gen/generate.c) nor the process (env_proc.c). */
#include "env/env_loop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "tools/tool_turn.h"

void env_loop_begin_group(EnvLoop *l, const json_t *messages, const json_t *row, int n) {
    CHECK((json_is_array(messages) || json_is_string(messages)) && n >= 0);
    json_decref(l->own_prompt);
    l->own_prompt = NULL;
    if (json_is_string(messages))
        messages = l->own_prompt = json_pack("[{s:s, s:O}]", "role", "user", "content", messages);
    if (n > l->cap) {
        l->turns = xrealloc(l->turns, sizeof *l->turns * (size_t)n);
        l->reward = xrealloc(l->reward, sizeof *l->reward * (size_t)n);
        for (int i = l->cap; i < n; i++) l->turns[i] = NULL;
        l->cap = n;
    }
    for (int i = 0; i < n; i++) {
        json_decref(l->turns[i]);
        l->turns[i] = json_array();
        l->reward[i] = NAN;
    }
    l->prompt = messages;
    l->row = row;
    l->n = n;
}

/* the ids a user message appends after an assistant turn, up to the next
 * assistant header: rendered after a minimal conversation, as tool turns are */
static int user_suffix(EnvLoop *l, const char *content) {
    json_t *before = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "user", "content", "dummy", "role", "assistant",
                               "content", "");
    json_t *added = json_pack("[{s:s, s:s}]", "role", "user", "content", content);
    CHECK(before && added);
    l->suffix.n = 0;
    int rc = tool_turn_suffix_ids(l->tok, before, added, l->kwargs, "environment turn", &l->suffix, &l->err);
    json_decref(before);
    json_decref(added);
    return rc;
}

int env_loop_turn_end(void *ctx, int index, const Completion *c, const int32_t **ids) {
    EnvLoop *l = ctx;
    CHECK(index >= 0 && index < l->n);
    json_t *turns = l->turns[index];
    if (c->n_turns == 0) { /* the completion starts (again, should a generation be repeated) */
        json_array_clear(turns);
        l->reward[index] = NAN;
    }
    CHECK(json_array_size(turns) == 2 * (size_t)c->n_turns);
    /* the model's ids of this turn: after the last appended ones */
    int start = c->n;
    while (start > 0 && (!c->mask || c->mask[start - 1])) start--;
    char *text = NULL;
    size_t len;
    if (tok_decode_generated(l->tok, c->ids + start, (size_t)(c->n - start), 1, &text, &len, &l->err)) return -1;
    json_array_append_new(turns, json_pack("{s:s, s:s%}", "role", "assistant", "content", text, len));
    free(text);
    json_t *messages = json_copy((json_t *)l->prompt);
    json_array_extend(messages, turns);
    int last = l->max_turns >= 0 && c->n_turns >= l->max_turns;
    EnvReply r;
    int rc = env_proc_step(l->proc, messages, l->row, c->n_turns + 1, last, &r, &l->err);
    json_decref(messages);
    if (rc) return -1;
    l->steps++;
    if (r.has_reward) l->reward[index] = r.reward;
    if (r.done || last) {
        l->done += r.done;
        l->limited += !r.done;
        env_reply_free(&r);
        return 0;
    }
    rc = user_suffix(l, r.content);
    if (!rc) json_array_append_new(turns, json_pack("{s:s, s:s}", "role", "user", "content", r.content));
    env_reply_free(&r);
    if (rc) return -1;
    *ids = l->suffix.ids;
    return (int)l->suffix.n;
}

double env_loop_reward(const EnvLoop *l, int index) {
    CHECK(index >= 0 && index < l->n);
    return l->reward[index];
}

const json_t *env_loop_turns(const EnvLoop *l, int index) {
    CHECK(index >= 0 && index < l->n);
    return l->turns[index];
}

void env_loop_free(EnvLoop *l) {
    for (int i = 0; i < l->cap; i++) json_decref(l->turns[i]);
    free(l->turns);
    free(l->reward);
    json_decref(l->own_prompt);
    l->turns = NULL, l->reward = NULL, l->own_prompt = NULL, l->cap = l->n = 0;
    tok_ids_free(&l->suffix);
}

int env_loop_open(EnvLoop *l, const EnvArgs *a, Tokenizer *tok, const char *chat_template_kwargs, GrpoErr *err) {
    memset(l, 0, sizeof *l);
    if (!a->command) return 0;
    if (env_proc_start(&l->proc, a->command, a->timeout_s, err)) return -1;
    l->tok = tok;
    l->own_kwargs = chat_template_kwargs ? json_loads(chat_template_kwargs, 0, NULL) : NULL;
    l->kwargs = l->own_kwargs;
    l->max_turns = a->max_turns;
    return 0;
}

void env_loop_close(EnvLoop *l) {
    env_proc_close(l->proc);
    env_loop_free(l);
    json_decref(l->own_kwargs);
    memset(l, 0, sizeof *l);
}
