/* tests/data/test_sft_data.c — SFT's conversational examples as TRL's SFTTrainer
 * tokenizes them: messages handed to the chat template whole (an assistant's
 * tool_calls with null content, tool messages), the row's "tools" column (a list,
 * or that list as a JSON string) rendered as tools=, the conversational
 * prompt-completion form with the loss from the end of the prompt rendered with
 * its generation prompt, and the bad rows, each with its file:line message.
 * The expected texts are written here by hand; ids come from the byte-level
 * tokenizer (assets/byte-tokenizer) with a small template set in the test. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/sft_data.h"
#include "testutil.h"

static char dir[] = "/tmp/grpo-sftdata-XXXXXX";

static const char *write_file(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* "role:content|" per message, calls as <call NAME ARGS>, tools named on a first line */
static const char *TEMPLATE =
    "{% if tools %}T:{% for t in tools %}{{ t.function.name }};{% endfor %}{% endif %}"
    "{% for m in messages %}{{ m.role }}:{% if m.content %}{{ m.content }}{% endif %}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}<call {{ c.function.name }} {{ c.function.arguments | tojson }}>"
    "{% endfor %}{% endif %}|{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

#define USER "{\"role\": \"user\", \"content\": \"2+2?\"}"
#define CALL "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\", " \
             "\"function\": {\"name\": \"calc\", \"arguments\": {\"e\": \"2+2\"}}}]}"
#define TOOL "{\"role\": \"tool\", \"name\": \"calc\", \"content\": \"4\"}"
#define ANSWER "{\"role\": \"assistant\", \"content\": \"4\"}"
#define TOOLS "[{\"type\": \"function\", \"function\": {\"name\": \"calc\"}}]"

static int n_ids(Tokenizer *tok, const char *text, TokIds *ids) {
    GrpoErr err = {{0}};
    ids->n = 0;
    return tok_encode(tok, text, strlen(text), 0, ids, &err) ? -1 : (int)ids->n;
}

/* example i of d has exactly the ids of text */
static int same_ids(Tokenizer *tok, const SftExample *e, const char *text) {
    TokIds want = {0};
    int n = n_ids(tok, text, &want);
    int ok = n == e->n && !memcmp(want.ids, e->ids, sizeof(int32_t) * (size_t)n);
    tok_ids_free(&want);
    return ok;
}

static int load(SftData *d, Tokenizer *tok, const char *lines, int completion_only_loss, GrpoErr *err) {
    SftFormat f = {tok, 258, 259, 512, 1024, completion_only_loss};
    return sft_data_load(d, write_file("d.jsonl", lines), &f, err);
}

int main(void) {
    CHECK(mkdtemp(dir));
    Tokenizer *tok = NULL;
    GrpoErr err = {{0}};
    CHECK(tok_load(&tok, "assets/byte-tokenizer", &err) == 0);
    CHECK(tok_set_chat_template(tok, TEMPLATE, &err) == 0);
    const char *full = "T:calc;user:2+2?|assistant:<call calc {\"e\": \"2+2\"}>|tool:4|assistant:4|";
    const char *prompt = "T:calc;user:2+2?|assistant:";
    TokIds tmp = {0};
    int prompt_n = n_ids(tok, prompt, &tmp);

    /* messages with a tool call, its tool message and the tools column: every token
     * a target, no eos appended (the template ends the turns) */
    SftData d;
    int rc = load(&d, tok,
                  "{\"messages\": [" USER ", " CALL ", " TOOL ", " ANSWER "], \"tools\": " TOOLS "}\n"
                  "{\"messages\": [" USER ", " CALL ", " TOOL ", " ANSWER "], \"tools\": \"" 
                  "[{\\\"type\\\": \\\"function\\\", \\\"function\\\": {\\\"name\\\": \\\"calc\\\"}}]\"}\n"
                  "{\"messages\": [" USER ", " ANSWER "]}\n",
                  1, &err);
    T_CHECK(rc == 0, "messages with tool calls load: %s", err.msg);
    if (!rc) {
        T_CHECK(d.n == 3, "3 examples, got %d", d.n);
        T_CHECK(same_ids(tok, &d.ex[0], full), "messages + tools: the template's text with tools= and the call");
        T_CHECK(same_ids(tok, &d.ex[1], full), "tools as a JSON string: the same ids");
        T_CHECK(same_ids(tok, &d.ex[2], "user:2+2?|assistant:4|"), "no tools column: no tools section");
        T_CHECK(d.ex[0].loss_start == 1 && d.ex[2].loss_start == 1, "messages: every token a target");
        sft_data_free(&d);
    }

    /* conversational prompt + completion: the loss starts after the prompt rendered
     * with its generation prompt (completion_only_loss), else at the first token */
    const char *pc = "{\"prompt\": [" USER "], \"completion\": [" CALL ", " TOOL ", " ANSWER "], \"tools\": " TOOLS "}\n";
    for (int col = 0; col < 2; col++) {
        rc = load(&d, tok, pc, col, &err);
        T_CHECK(rc == 0, "conversational prompt-completion loads (completion_only_loss %d): %s", col, err.msg);
        if (rc) continue;
        T_CHECK(same_ids(tok, &d.ex[0], full), "prompt + completion: rendered together");
        T_CHECK(d.ex[0].loss_start == (col ? prompt_n : 1), "loss_start %d, expected %d", d.ex[0].loss_start,
                col ? prompt_n : 1);
        sft_data_free(&d);
    }

    /* bad rows: each a file:line message saying what was expected */
    struct { const char *line, *msg; } bad[] = {
        {"{\"messages\": [" USER "], \"tools\": 5}", "d.jsonl:1: 'tools' must be a list of JSON schemas"},
        {"{\"messages\": [" USER "], \"tools\": \"[not json\"}", "d.jsonl:1: 'tools' must be a list of JSON schemas"},
        {"{\"prompt\": [" USER "], \"completion\": \"4\"}", "d.jsonl:1: expected a 'text' string, 'prompt' and"},
        {"{\"prompt\": [], \"completion\": [" ANSWER "]}", "d.jsonl:1: expected a 'text' string, 'prompt' and"},
        {"{\"messages\": [{\"role\": \"tool\", \"content\": {\"x\": 1}}]}", "d.jsonl:1: messages[0]"},
        {"{\"prompt\": [" USER "], \"completion\": [{\"content\": \"4\"}]}", "d.jsonl:1: messages[1]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char line[1024];
        snprintf(line, sizeof line, "%s\n", bad[i].line);
        memset(&err, 0, sizeof err);
        rc = load(&d, tok, line, 1, &err);
        T_CHECK(rc == -1 && strstr(err.msg, bad[i].msg), "bad row %zu: got rc %d '%s', expected '%s'", i, rc, err.msg,
                bad[i].msg);
        if (!rc) sft_data_free(&d);
    }

    tok_ids_free(&tmp);
    tok_free(tok);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return t_summary("test_sft_data");
}
