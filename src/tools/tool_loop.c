/* tools/tool_loop.c — one tool-calling turn of a completion: the model's turn
 * parsed, its calls made, the results rendered into the ids that continue the
 * sequence (TRL's _tool_call_loop, one completion at a time), the calls made
 * at once (tool_loop_turn_end) or handed to the worker pool and collected when
 * done (tool_loop_turn_begin / _wait). Not the decoding
 * (gen/generate.c) nor the process (tool_proc.c). */
#include "tools/tool_loop.h"

#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "tools/tool_turn.h"

/* The model's turn in c parsed: 1 with its calls in *a, 0 when the completion
 * ends there (no call, a malformed one, the iteration limit), -1 with l->err. */
static int turn_calls(ToolLoop *l, const Completion *c, ToolAnswer *a) {
    memset(a, 0, sizeof *a);
    if (l->max_iterations >= 0 && c->n_turns >= l->max_iterations) return 0;
    /* the model's ids of this turn: after the last appended ones */
    int start = c->n;
    while (start > 0 && (!c->mask || c->mask[start - 1])) start--;
    char *text = NULL;
    size_t len;
    if (tok_decode_generated(l->tok, c->ids + start, (size_t)(c->n - start), 0, &text, &len, &l->err)) return -1;
    CHECK(tool_answer_parse(l->format, text, a) == 0);
    free(text);
    if (a->kind == TOOL_ANSWER_CALLS) return 1;
    l->malformed += a->kind == TOOL_ANSWER_MALFORMED;
    tool_answer_free(a);
    return 0;
}

/* The ids that follow a's calls, from the answers made[0..made) (rc: the calls'
 * outcome, err already in l->err when -1): counted, rendered, into *ids. */
static int turn_suffix(ToolLoop *l, const ToolAnswer *a, char **contents, const int *failed, int made, int rc,
                       const int32_t **ids) {
    json_t *messages = json_array();
    for (int k = 0; k < made; k++) {
        l->calls++;
        l->failures += failed[k];
        json_array_append_new(messages, json_pack("{s:s, s:s, s:s}", "role", "tool", "name", a->calls[k].name,
                                                  "content", contents[k]));
    }
    l->suffix.n = 0;
    if (!rc) rc = tool_suffix_ids(l->tok, messages, l->kwargs, &l->suffix, &l->err);
    json_decref(messages);
    if (rc) return -1;
    *ids = l->suffix.ids;
    return (int)l->suffix.n;
}

int tool_loop_turn_end(void *ctx, int index, const Completion *c, const int32_t **ids) {
    ToolLoop *l = ctx;
    (void)index;
    ToolAnswer a;
    int rc = turn_calls(l, c, &a);
    if (rc <= 0) return rc;
    rc = 0;
    char **contents = xcalloc(a.n_calls, sizeof(char *));
    int *failed = xcalloc(a.n_calls, sizeof(int)), made = 0;
    for (; made < a.n_calls; made++)
        if ((rc = tool_proc_call(l->proc, &a.calls[made], &contents[made], &failed[made], &l->err))) break;
    int k = turn_suffix(l, &a, contents, failed, made, rc, ids);
    for (int q = 0; q < a.n_calls; q++) free(contents[q]);
    free(contents), free(failed);
    tool_answer_free(&a);
    return k;
}

int tool_loop_turn_begin(void *ctx, int index, const Completion *c, const int32_t **ids) {
    ToolLoop *l = ctx;
    if (!l->pool) return tool_loop_turn_end(ctx, index, c, ids);
    ToolAnswer a;
    int rc = turn_calls(l, c, &a);
    if (rc <= 0) return rc;
    tool_pool_submit(l->pool, index, &a);
    return GEN_TURN_PENDING;
}

int tool_loop_turn_wait(void *ctx, int block, int *index, const int32_t **ids) {
    ToolLoop *l = ctx;
    ToolJob *j = l->pool ? tool_pool_wait(l->pool, block) : NULL;
    if (!j) return GEN_TURN_PENDING;
    *index = j->index;
    if (j->rc && !l->pool_failed) l->err = j->err, l->pool_failed = 1; /* the first failure says why */
    int k = turn_suffix(l, &j->answer, j->contents, j->failed, j->made, j->rc, ids);
    tool_job_free(j);
    return k;
}

void tool_loop_free(ToolLoop *l) { tok_ids_free(&l->suffix); }

int tool_loop_open(ToolLoop *l, const ToolArgs *a, const json_t *schemas, Tokenizer *tok,
                   const char *chat_template_kwargs, GrpoErr *err) {
    memset(l, 0, sizeof *l);
    if (!a->tools_path) return 0;
    if (tool_args_check(a, err)) return -1;
    ToolFormat f = tool_format_of_template(tok_chat_template(tok));
    if (f == TOOL_FORMAT_NONE)
        return err_set(err, "tools: the chat template writes no tool calls this trainer reads (Qwen2.5/Qwen3's "
                       "<tool_call> blocks or Llama 3.1's JSON); set chat_template to one that does");
    if (tool_proc_start(&l->proc, a->command, schemas, a->timeout_s, err)) return -1;
    if (a->workers > 0 && tool_pool_start(&l->pool, a->workers, l->proc, a->command, schemas, a->timeout_s, err)) {
        tool_proc_close(l->proc);
        l->proc = NULL;
        return -1;
    }
    l->tok = tok;
    l->format = f;
    l->own_kwargs = chat_template_kwargs ? json_loads(chat_template_kwargs, 0, NULL) : NULL;
    l->kwargs = l->own_kwargs;
    l->max_iterations = a->max_iterations;
    return 0;
}

void tool_loop_close(ToolLoop *l) {
    tool_pool_close(l->pool); /* before the process its first worker borrows */
    tool_proc_close(l->proc);
    tool_loop_free(l);
    json_decref(l->own_kwargs);
    memset(l, 0, sizeof *l);
}
