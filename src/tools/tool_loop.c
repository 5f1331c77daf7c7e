/* tools/tool_loop.c — one tool-calling turn of a completion: the model's turn
 * parsed, its calls made, the results rendered into the ids that continue the
 * sequence (TRL's _tool_call_loop, one completion at a time). Not the decoding
 * (gen/generate.c) nor the process (tool_proc.c). */
#include "tools/tool_loop.h"

#include <stdlib.h>
#include <string.h>

#include "tools/tool_turn.h"

int tool_loop_turn_end(void *ctx, int index, const Completion *c, const int32_t **ids) {
    ToolLoop *l = ctx;
    (void)index;
    if (l->max_iterations >= 0 && c->n_turns >= l->max_iterations) return 0;
    /* the model's ids of this turn: after the last appended ones */
    int start = c->n;
    while (start > 0 && (!c->mask || c->mask[start - 1])) start--;
    char *text = NULL;
    size_t len;
    if (tok_decode_generated(l->tok, c->ids + start, (size_t)(c->n - start), 0, &text, &len, &l->err)) return -1;
    ToolAnswer a;
    CHECK(tool_answer_parse(l->format, text, &a) == 0);
    free(text);
    if (a.kind != TOOL_ANSWER_CALLS) {
        l->malformed += a.kind == TOOL_ANSWER_MALFORMED;
        tool_answer_free(&a);
        return 0;
    }
    json_t *messages = json_array();
    int rc = 0;
    for (int k = 0; k < a.n_calls && !rc; k++) {
        char *content;
        int failed;
        rc = tool_proc_call(l->proc, &a.calls[k], &content, &failed, &l->err);
        if (rc) break;
        l->calls++;
        l->failures += failed;
        json_array_append_new(messages, json_pack("{s:s, s:s, s:s}", "role", "tool", "name", a.calls[k].name,
                                                  "content", content));
        free(content);
    }
    l->suffix.n = 0;
    if (!rc) rc = tool_suffix_ids(l->tok, messages, l->kwargs, &l->suffix, &l->err);
    json_decref(messages);
    tool_answer_free(&a);
    if (rc) return -1;
    *ids = l->suffix.ids;
    return (int)l->suffix.n;
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
    l->tok = tok;
    l->format = f;
    l->own_kwargs = chat_template_kwargs ? json_loads(chat_template_kwargs, 0, NULL) : NULL;
    l->kwargs = l->own_kwargs;
    l->max_iterations = a->max_iterations;
    return 0;
}

void tool_loop_close(ToolLoop *l) {
    tool_proc_close(l->proc);
    tool_loop_free(l);
    json_decref(l->own_kwargs);
    memset(l, 0, sizeof *l);
}
