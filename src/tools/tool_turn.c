/* tools/tool_turn.c — the ids a tool turn appends to a sequence, from the chat
 * template (TRL's _get_tool_suffix_ids). Not the execution of the calls
 * (tool_proc.c) nor the decoding loop that appends them. */
#include "tools/tool_turn.h"

#include <stdlib.h>
#include <string.h>

#include "core/memory.h"

/* renders messages and tokenizes the text as apply_chat_template(tokenize=True):
 * no special tokens beyond the template's */
static int render_ids(Tokenizer *tok, const json_t *messages, int agp, const json_t *kwargs, TokIds *ids,
                      GrpoErr *err) {
    char *text;
    if (tok_chat_render_json(tok, messages, agp, kwargs, &text, err)) return -1;
    ids->n = 0;
    int rc = tok_encode(tok, text, strlen(text), 0, ids, err);
    free(text);
    return rc;
}

int tool_turn_suffix_ids(Tokenizer *tok, const json_t *before, const json_t *added, const json_t *kwargs,
                         const char *what, TokIds *out, GrpoErr *err) {
    if (!json_is_array(before) || !json_is_array(added) || json_array_size(added) == 0)
        return err_set(err, "%s: expected a conversation and a non-empty list of messages to add", what);
    json_t *full = json_copy((json_t *)before);
    json_array_extend(full, (json_t *)added);
    TokIds pre = {0}, all = {0};
    int rc = render_ids(tok, before, 0, kwargs, &pre, err);
    if (!rc) rc = render_ids(tok, full, 1, kwargs, &all, err);
    json_decref(full);
    if (!rc) {
        /* the assistant turn ends at its end-of-turn token: what a template writes
         * after it ("\n" in Qwen's) belongs to the suffix */
        int32_t eos = tok_special(tok)->eos;
        size_t keep = pre.n;
        for (size_t i = pre.n; eos >= 0 && i > 0; i--)
            if (pre.ids[i - 1] == eos) { keep = i; break; }
        if (all.n < keep || memcmp(all.ids, pre.ids, keep * sizeof *pre.ids) != 0)
            rc = err_set(err, "%s: the chat template does not render the conversation with the new turn as the "
                              "one before it plus more (it is not prefix-preserving; Qwen3's drops the empty <think> "
                              "block of an assistant turn that is no longer the last, and TRL swaps in its own "
                              "training template there): give a prefix-preserving one with chat_template",
                         what);
        for (size_t i = keep; !rc && i < all.n; i++) {
            if (out->n == out->cap) {
                out->cap = out->cap ? 2 * out->cap : 64;
                out->ids = xrealloc(out->ids, out->cap * sizeof *out->ids);
            }
            out->ids[out->n++] = all.ids[i];
        }
    }
    tok_ids_free(&pre);
    tok_ids_free(&all);
    return rc;
}

int tool_suffix_ids(Tokenizer *tok, const json_t *tool_messages, const json_t *kwargs, TokIds *out, GrpoErr *err) {
    const char *name = json_string_value(json_object_get(json_array_get(tool_messages, 0), "name"));
    if (!json_is_array(tool_messages) || json_array_size(tool_messages) == 0 || !name)
        return err_set(err, "tool turn: expected a non-empty list of tool messages with a \"name\"");
    /* the real tool name: some templates (GPT-OSS) take the tool header from the call */
    json_t *dummy = json_pack("[{s:s, s:s}, {s:s, s:s, s:[{s:s, s:{s:s, s:{}}}]}]", "role", "user", "content",
                              "dummy", "role", "assistant", "content", "", "tool_calls", "type", "function",
                              "function", "name", name, "arguments");
    CHECK(dummy);
    int rc = tool_turn_suffix_ids(tok, dummy, tool_messages, kwargs, "tool turn", out, err);
    json_decref(dummy);
    return rc;
}
