/* tests/tools/test_tool_turn.c — the ids a tool turn appends (TRL's
 * _get_tool_suffix_ids) with the real Qwen3 and Qwen2.5 templates and
 * tokenizers (paths from tests/tools/test_tool_turn.sh): one and two tool
 * results, chat_template_kwargs reaching the generation prompt, the ids those of
 * the expected text (TRL's docs: chat_template_utils.py). Qwen3's own template
 * is not prefix-preserving (TRL swaps in its training template): a clear error;
 * with Qwen2.5's template its tokenizer gives the same suffix. Bad tool messages
 * are errors. */
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "testutil.h"
#include "tools/tool_turn.h"

static void expect_suffix(Tokenizer *tok, const char *model, const char *messages, const char *kwargs,
                          const char *want) {
    json_t *m = json_loads(messages, 0, NULL), *kw = kwargs ? json_loads(kwargs, 0, NULL) : NULL;
    TokIds ids = {0}, want_ids = {0};
    GrpoErr err = {{0}};
    int rc = tool_suffix_ids(tok, m, kw, &ids, &err);
    T_CHECK(rc == 0, "%s: %s", model, err.msg);
    char *text = NULL;
    size_t len;
    if (!rc) tok_decode(tok, ids.ids, ids.n, 0, &text, &len, &err);
    T_CHECK(text && !strcmp(text, want), "%s: suffix '%s'\n  want '%s'", model, text ? text : "", want);
    tok_encode(tok, want, strlen(want), 0, &want_ids, &err);
    T_CHECK(ids.n == want_ids.n && !memcmp(ids.ids, want_ids.ids, ids.n * sizeof *ids.ids),
            "%s: ids are the expected text's (%zu vs %zu)", model, ids.n, want_ids.n);
    free(text);
    tok_ids_free(&ids);
    tok_ids_free(&want_ids);
    json_decref(m);
    json_decref(kw);
}

static const char *ONE = "[{\"role\": \"tool\", \"name\": \"multiply\", \"content\": \"6\"}]";
static const char *TWO = "[{\"role\": \"tool\", \"name\": \"multiply\", \"content\": \"6\"},"
                         " {\"role\": \"tool\", \"name\": \"add\", \"content\": \"{'error': 'Tool add not found.'}\"}]";

static void test_model(const char *dir, const char *model) {
    Tokenizer *tok = NULL;
    GrpoErr err = {{0}};
    if (tok_load(&tok, dir, &err)) { T_CHECK(0, "%s: %s", model, err.msg); return; }
    if (!strcmp(model, "qwen3")) { /* not prefix-preserving: TRL swaps in its training template */
        json_t *m = json_loads(ONE, 0, NULL);
        TokIds ids = {0};
        T_CHECK(tool_suffix_ids(tok, m, NULL, &ids, &err) == -1 && strstr(err.msg, "not prefix-preserving") &&
                    strstr(err.msg, "chat_template") && ids.n == 0,
                "qwen3's own template: %s", err.msg);
        json_decref(m);
        tok_ids_free(&ids);
        /* Qwen2.5's template (no thinking blocks) on Qwen3's tokenizer is */
        char *q25 = NULL;
        FILE *f = fopen(getenv("GRPO_QWEN25_TEMPLATE"), "r");
        if (f) {
            q25 = xmalloc(1 << 20);
            size_t n = fread(q25, 1, (1 << 20) - 1, f);
            q25[n] = 0;
            fclose(f);
        }
        T_CHECK(q25 && tok_set_chat_template(tok, q25, &err) == 0, "Qwen2.5's template: %s", err.msg);
        free(q25);
    }
    expect_suffix(tok, model, ONE, NULL,
                  "\n<|im_start|>user\n<tool_response>\n6\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
    expect_suffix(tok, model, TWO, NULL,
                  "\n<|im_start|>user\n<tool_response>\n6\n</tool_response>\n<tool_response>\n{'error': 'Tool add "
                  "not found.'}\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
    /* chat_template_kwargs reach the template: a variable its generation prompt prints */
    T_CHECK(tok_set_chat_template(tok, "{% for m in messages %}[{{ m.role }}|{{ m.content }}]<|im_end|>{% endfor %}"
                                       "{% if add_generation_prompt %}{{ greeting }}{% endif %}", &err) == 0,
            "set template: %s", err.msg);
    expect_suffix(tok, model, ONE, "{\"greeting\": \"go on\"}", "[tool|6]<|im_end|>go on");
    TokIds ids = {0};
    json_t *bad = json_loads("[{\"role\": \"tool\", \"content\": \"6\"}]", 0, NULL);
    T_CHECK(tool_suffix_ids(tok, bad, NULL, &ids, &err) == -1 && strstr(err.msg, "with a \"name\""), "%s: %s",
            model, err.msg);
    json_decref(bad);
    bad = json_array();
    T_CHECK(tool_suffix_ids(tok, bad, NULL, &ids, &err) == -1, "empty list");
    json_decref(bad);
    /* a template whose longer conversation does not extend the shorter one */
    T_CHECK(tok_set_chat_template(tok, "{{ messages | length }}", &err) == 0, "set template: %s", err.msg);
    json_t *m = json_loads(ONE, 0, NULL);
    T_CHECK(tool_suffix_ids(tok, m, NULL, &ids, &err) == -1 && strstr(err.msg, "not prefix-preserving"), "%s: %s",
            model, err.msg);
    T_CHECK(ids.n == 0, "nothing appended on error");
    json_decref(m);
    tok_ids_free(&ids);
    tok_free(tok);
}

int main(void) {
    const char *q3 = getenv("GRPO_QWEN3_TOKENIZER"), *q25 = getenv("GRPO_QWEN25_TOKENIZER");
    if (!q3 || !q25) {
        printf("(the checks run from tests/tools/test_tool_turn.sh, which sets the tokenizer paths)\n");
        return t_summary("test_tool_turn");
    }
    test_model(q3, "qwen3");
    test_model(q25, "qwen2.5");
    return t_summary("test_tool_turn");
}
