/* fuzz/fuzz_jinja.c — tokenizer/jinja.h: the input is a chat template, parsed by
 * jinja_parse and rendered by jinja_render with the context tok_chat_render
 * builds (messages with system/user/assistant turns, add_generation_prompt,
 * enable_thinking, bos/eos/pad tokens), so every statement, filter, test and
 * method the engine knows is reachable. */
#include "fuzz.h"
#include "tokenizer/jinja.h"

static JVal message(JArena *ar, const char *role, const char *content) {
    JVal m = {.k = JV_DICT};
    m.u.d = jar_alloc(ar, sizeof *m.u.d);
    jdict_set(ar, m.u.d, (JStr){"role", 4}, jv_cstr(role));
    jdict_set(ar, m.u.d, (JStr){"content", 7}, jv_cstr(content));
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *src = fuzz_cstr(data, size);
    JArena *ar = jar_new();
    JTemplate t;
    GrpoErr err;
    if (jinja_parse(ar, src, &t, &err) == 0) {
        JDict *ctx = jar_alloc(ar, sizeof *ctx);
        JList *ml = jar_alloc(ar, sizeof *ml);
        jlist_push(ar, ml, message(ar, "system", "You are a helpful assistant."));
        jlist_push(ar, ml, message(ar, "user", "What is 2 + 2?"));
        jlist_push(ar, ml, message(ar, "assistant", "<think>\nadding\n</think>\n\nThe answer is 4."));
        jlist_push(ar, ml, message(ar, "user", "  and {{ 3 }} <|im_end|> \xe4\xbd\xa0\xe5\xa5\xbd  "));
        JVal mv = {.k = JV_LIST};
        mv.u.l = ml;
        jdict_set(ar, ctx, (JStr){"messages", 8}, mv);
        JVal b = {.k = JV_BOOL};
        b.u.b = 1;
        jdict_set(ar, ctx, (JStr){"add_generation_prompt", 21}, b);
        b.u.b = 0;
        jdict_set(ar, ctx, (JStr){"enable_thinking", 15}, b);
        jdict_set(ar, ctx, (JStr){"bos_token", 9}, jv_cstr("<s>"));
        jdict_set(ar, ctx, (JStr){"eos_token", 9}, jv_cstr("<|im_end|>"));
        jdict_set(ar, ctx, (JStr){"pad_token", 9}, jv_cstr("<|endoftext|>"));
        char *out = NULL;
        size_t len = 0;
        if (jinja_render(ar, &t, ctx, &out, &len, &err) == 0) {
            FUZZ_ASSERT(out != NULL && strlen(out) <= len);
            free(out);
        }
    }
    jar_free(ar);
    free(src);
    return 0;
}
