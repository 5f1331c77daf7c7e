/* cli/cmd_tokenize.c — `grpo tokenize --model DIR [--add_special_tokens]
 * [--decode [--skip_special_tokens] | --chat]`.
 *
 * Streams JSON lines: {"text": "..."} -> {"ids": [...]}, or with --decode
 * {"ids": [...]} -> {"text": "..."}; one output line per input line, flushed
 * as it is written so the command can sit behind a pipe. Input bytes that are
 * not UTF-8 are read as a UTF-8 decoder with replacement would read them.
 * Exit: 0 ok, 1 bad input (one line "grpo tokenize: <file>: <problem>"), 2 usage. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "io/jsonl.h"
#include "tokenizer/tok_internal.h"

/* Appends s as a JSON string literal (UTF-8 kept as is). */
static void put_json_string(TokBuf *o, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    tbuf_putc(o, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { tbuf_putc(o, '\\'); tbuf_putc(o, (char)c); }
        else if (c == '\n') tbuf_put(o, "\\n", 2);
        else if (c == '\r') tbuf_put(o, "\\r", 2);
        else if (c == '\t') tbuf_put(o, "\\t", 2);
        else if (c < 0x20 || c == 0x7F) {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            tbuf_put(o, u, 6);
        } else tbuf_putc(o, (char)c);
    }
    tbuf_putc(o, '"');
}

/* {"messages": [...], ...} -> {"text": ...}; 0, or -1 with msg filled. The messages
 * go to the template whole (an assistant's tool_calls, a tool message), and
 * "tools" (a list of JSON schemas) as apply_chat_template's tools=. */
static int render_chat(Tokenizer *tok, const json_t *j, TokBuf *out, char *msg, size_t msg_len) {
    const json_t *m = json_object_get(j, "messages");
    if (!json_is_array(m)) {
        snprintf(msg, msg_len, "expected {\"messages\": [{\"role\": ..., \"content\": ...}, ...]}");
        return -1;
    }
    const json_t *agp = json_object_get(j, "add_generation_prompt");
    const json_t *et = json_object_get(j, "enable_thinking");
    const json_t *tools = json_object_get(j, "tools");
    if (tools && !json_is_array(tools) && !json_is_null(tools)) {
        snprintf(msg, msg_len, "\"tools\" must be a list of JSON schemas, got %s", json_kind(tools));
        return -1;
    }
    json_t *kw = json_object();
    if (json_is_boolean(et)) json_object_set(kw, "enable_thinking", (json_t *)et);
    if (json_is_array(tools)) json_object_set(kw, "tools", (json_t *)tools);
    GrpoErr err = {{0}};
    char *text;
    int rc = tok_chat_render_json(tok, m, agp ? json_is_true(agp) : 1, kw, &text, &err);
    json_decref(kw);
    if (rc) { snprintf(msg, msg_len, "%s", err.msg); return -1; }
    tbuf_put(out, "{\"text\": ", 9);
    put_json_string(out, text, strlen(text));
    tbuf_put(out, "}\n", 2);
    free(text);
    return 0;
}

/* {"text": ...} -> {"ids": [...]}; 0, or -1 with msg filled. */
static int encode_line(Tokenizer *tok, const json_t *j, int add_special, TokIds *ids, TokBuf *out, char *msg,
                       size_t msg_len) {
    const json_t *t = json_object_get(j, "text");
    if (!json_is_string(t)) {
        snprintf(msg, msg_len, "expected {\"text\": string}");
        return -1;
    }
    GrpoErr err = {{0}};
    ids->n = 0;
    if (tok_encode(tok, json_string_value(t), json_string_length(t), add_special, ids, &err)) {
        snprintf(msg, msg_len, "%s", err.msg);
        return -1;
    }
    tbuf_put(out, "{\"ids\": [", 9);
    for (size_t i = 0; i < ids->n; i++) {
        char num[16];
        int k = snprintf(num, sizeof num, i ? ", %d" : "%d", (int)ids->ids[i]);
        tbuf_put(out, num, (size_t)k);
    }
    tbuf_put(out, "]}\n", 3);
    return 0;
}

/* {"ids": [...]} -> {"text": ...}; 0, or -1 with msg filled. */
static int decode_line(Tokenizer *tok, const json_t *j, int skip_special, TokIds *ids, TokBuf *out, char *msg,
                       size_t msg_len) {
    const json_t *a = json_object_get(j, "ids");
    if (!json_is_array(a)) {
        snprintf(msg, msg_len, "expected {\"ids\": [int, ...]}");
        return -1;
    }
    ids->n = 0;
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            snprintf(msg, msg_len, "ids[%zu]: expected a non-negative integer", i);
            return -1;
        }
        tok_ids_push(ids, (int32_t)json_integer_value(v));
    }
    GrpoErr err = {{0}};
    char *text = NULL;
    size_t text_len = 0;
    if (tok_decode(tok, ids->ids, ids->n, skip_special, &text, &text_len, &err)) {
        snprintf(msg, msg_len, "%s", err.msg);
        return -1;
    }
    tbuf_put(out, "{\"text\": ", 9);
    put_json_string(out, text, text_len);
    tbuf_put(out, "}\n", 2);
    free(text);
    return 0;
}

typedef struct {
    const char *model_dir;
    int add_special_tokens, decode, skip_special_tokens, chat, clean_up;
} TokenizeArgs;

static const char *const CLEAN_UP_NAMES[] = {"config", "true", "false", NULL};

#define A(f) offsetof(TokenizeArgs, f)
static const OptSpec tokenize_options[] = {
    {"model", OPT_STR, A(model_dir), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED | OPT_MODEL_PATH,
     "model directory with tokenizer.json (+ tokenizer_config.json)"},
    {"add_special_tokens", OPT_BOOL, A(add_special_tokens), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "add what the post-processor adds (e.g. Llama 3.1's BOS)"},
    {"decode", OPT_BOOL, A(decode), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0, "read {\"ids\": [...]}, write {\"text\": ...}"},
    {"skip_special_tokens", OPT_BOOL, A(skip_special_tokens), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "with --decode: leave special tokens out"},
    {"clean_up_tokenization_spaces", OPT_ENUM, A(clean_up), 0, NULL, OPT_NO_RANGE, CLEAN_UP_NAMES, NULL, 0,
     "with --decode: transformers' clean-up of spaces before punctuation (config: tokenizer_config.json's)"},
    {"chat", OPT_BOOL, A(chat), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "read {\"messages\": [{\"role\", \"content\"}...], \"add_generation_prompt\": bool (default true), "
     "\"enable_thinking\": bool (optional), \"tools\": [JSON schemas] (optional)}, write {\"text\": ...} rendered by the model's chat_template"},
};
#undef A

#define SYNOPSIS                                                                         \
    "--model DIR [--add_special_tokens] [--decode [--skip_special_tokens] | --chat]\n" \
    "  stdin JSON lines {\"text\": ...} -> stdout {\"ids\": [...]}"

/* One input line (without its newline) into out, as the options ask; 0, or -1
 * with msg filled. Bytes that are not UTF-8 are replaced first (into clean). */
static int convert_line(Tokenizer *tok, const TokenizeArgs *ta, const char *line, size_t n, TokBuf *clean,
                        TokIds *ids, TokBuf *out, char *msg, size_t msg_len) {
    tok_utf8_sanitize(line, n, clean);
    json_error_t je;
    json_t *j = json_loadb(clean->p, clean->n, JSON_ALLOW_NUL, &je);
    if (!j || !json_is_object(j)) {
        snprintf(msg, msg_len, "expected a JSON object%s%s", j ? "" : ": ", j ? "" : je.text);
        json_decref(j);
        return -1;
    }
    out->n = 0;
    int rc = ta->chat     ? render_chat(tok, j, out, msg, msg_len)
             : ta->decode ? decode_line(tok, j, ta->skip_special_tokens, ids, out, msg, msg_len)
                          : encode_line(tok, j, ta->add_special_tokens, ids, out, msg, msg_len);
    json_decref(j);
    return rc;
}

/* stdin to stdout, a line for a line, flushed as written; stops at the first
 * bad line. 0, or 1 after printing "grpo tokenize: <stdin> line N: problem". */
static int tokenize_stream(Tokenizer *tok, const TokenizeArgs *ta) {
    char *line = NULL, msg[1200];
    size_t line_cap = 0;
    ssize_t got;
    long lineno = 0;
    int rc = 0;
    TokBuf clean = {0}, out = {0};
    TokIds ids = {0};
    while ((got = getline(&line, &line_cap, stdin)) >= 0) {
        lineno++;
        size_t n = (size_t)got;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        if (convert_line(tok, ta, line, n, &clean, &ids, &out, msg, sizeof msg)) {
            fprintf(stderr, "grpo tokenize: <stdin> line %ld: %s\n", lineno, msg);
            rc = 1;
            break;
        }
        if (fwrite(out.p, 1, out.n, stdout) != out.n || fflush(stdout)) {
            rc = cli_fail("tokenize", "<stdout>: write error");
            break;
        }
    }
    free(line);
    tbuf_free(&clean);
    tbuf_free(&out);
    tok_ids_free(&ids);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    TokenizeArgs ta;
    OptGroup g = OPT_GROUP(tokenize_options, 0);
    opts_defaults(&g, 1, &ta);
    int rc = args_parse("tokenize", SYNOPSIS, argc, argv, &g, 1, &ta);
    if (rc) {
        args_free();
        return rc == 1 ? 0 : rc;
    }
    GrpoErr err = {{0}};
    Tokenizer *tok;
    if (tok_load(&tok, ta.model_dir, &err)) rc = cli_fail("tokenize", err.msg);
    else {
        if (ta.clean_up) tok_set_clean_up_spaces(tok, ta.clean_up == 1);
        rc = tokenize_stream(tok, &ta);
        tok_free(tok);
    }
    args_free();
    return rc;
}
