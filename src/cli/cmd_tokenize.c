/* cli/cmd_tokenize.c — `grpo tokenize --model DIR [--add_special_tokens]
 * [--decode [--skip_special_tokens]]`.
 *
 * Streams JSON lines: {"text": "..."} -> {"ids": [...]}, or with --decode
 * {"ids": [...]} -> {"text": "..."}; one output line per input line, flushed
 * as it is written so the command can sit behind a pipe. Input bytes that are
 * not UTF-8 are read as a UTF-8 decoder with replacement would read them.
 * Exit: 0 ok, 1 bad input (one line "grpo tokenize: <file>: <problem>"), 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/commands.h"
#include "tokenizer/tok_internal.h"

static const char USAGE[] =
    "usage: grpo tokenize --model DIR [--add_special_tokens] [--decode [--skip_special_tokens]]\n"
    "  stdin JSON lines {\"text\": ...} -> stdout {\"ids\": [...]}\n"
    "  --model DIR             model directory with tokenizer.json (+ tokenizer_config.json)\n"
    "  --add_special_tokens    add what the post-processor adds (e.g. Llama 3.1's BOS)\n"
    "  --decode                read {\"ids\": [...]}, write {\"text\": ...}\n"
    "  --skip_special_tokens   with --decode: leave special tokens out\n"
    "  --chat                  read {\"messages\": [{\"role\", \"content\"}...], \"add_generation_prompt\":\n"
    "                          bool (default true), \"enable_thinking\": bool (optional)},\n"
    "                          write {\"text\": ...} rendered by the model's chat_template\n";

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

/* {"messages": [...], ...} -> {"text": ...}; 0, or -1 with msg filled. */
static int render_chat(Tokenizer *tok, const json_t *j, TokBuf *out, char *msg, size_t msg_len) {
    const json_t *m = json_object_get(j, "messages");
    if (!json_is_array(m)) {
        snprintf(msg, msg_len, "expected {\"messages\": [{\"role\": ..., \"content\": ...}, ...]}");
        return -1;
    }
    size_t n = json_array_size(m);
    TokMessage *msgs = xcalloc(n + 1, sizeof *msgs);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(m, i);
        const json_t *r = json_object_get(e, "role"), *c = json_object_get(e, "content");
        if (!json_is_string(r) || !json_is_string(c)) {
            snprintf(msg, msg_len, "messages[%zu]: expected {\"role\": string, \"content\": string}", i);
            free(msgs);
            return -1;
        }
        msgs[i].role = json_string_value(r);
        msgs[i].content = json_string_value(c);
    }
    const json_t *agp = json_object_get(j, "add_generation_prompt");
    const json_t *et = json_object_get(j, "enable_thinking");
    GrpoErr err = {{0}};
    char *text;
    int rc = tok_chat_render(tok, msgs, (int)n, agp ? json_is_true(agp) : 1,
                             json_is_boolean(et) ? json_is_true(et) : -1, &text, &err);
    free(msgs);
    if (rc) { snprintf(msg, msg_len, "%s", err.msg); return -1; }
    tbuf_put(out, "{\"text\": ", 9);
    put_json_string(out, text, strlen(text));
    tbuf_put(out, "}\n", 2);
    free(text);
    return 0;
}

static int fail(const char *where, long line, const char *msg) {
    if (line > 0) fprintf(stderr, "grpo tokenize: %s line %ld: %s\n", where, line, msg);
    else fprintf(stderr, "grpo tokenize: %s\n", msg);
    return 1;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL;
    int add_special = 0, decode = 0, skip_special = 0, chat = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(USAGE, stdout); return 0; }
        else if (!strcmp(a, "--model") && i + 1 < argc) model = argv[++i];
        else if (!strncmp(a, "--model=", 8)) model = a + 8;
        else if (!strcmp(a, "--add_special_tokens")) add_special = 1;
        else if (!strcmp(a, "--decode")) decode = 1;
        else if (!strcmp(a, "--skip_special_tokens")) skip_special = 1;
        else if (!strcmp(a, "--chat")) chat = 1;
        else {
            fprintf(stderr, "grpo tokenize: unknown or incomplete option '%s'\n%s", a, USAGE);
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "grpo tokenize: --model DIR is required\n%s", USAGE);
        return 2;
    }
    GrpoErr err = {{0}};
    Tokenizer *tok;
    if (tok_load(&tok, model, &err)) return fail("", 0, err.msg);

    char *line = NULL;
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
        tok_utf8_sanitize(line, n, &clean);
        json_error_t je;
        json_t *j = json_loadb(clean.p, clean.n, JSON_ALLOW_NUL, &je);
        char msg[1200];
        if (!j || !json_is_object(j)) {
            snprintf(msg, sizeof msg, "expected a JSON object%s%s", j ? "" : ": ", j ? "" : je.text);
            json_decref(j);
            rc = fail("<stdin>", lineno, msg);
            break;
        }
        out.n = 0;
        if (chat) {
            if (render_chat(tok, j, &out, msg, sizeof msg)) {
                json_decref(j);
                rc = fail("<stdin>", lineno, msg);
                break;
            }
        } else if (!decode) {
            const json_t *t = json_object_get(j, "text");
            if (!json_is_string(t)) {
                json_decref(j);
                rc = fail("<stdin>", lineno, "expected {\"text\": string}");
                break;
            }
            ids.n = 0;
            if (tok_encode(tok, json_string_value(t), json_string_length(t), add_special, &ids, &err)) {
                json_decref(j);
                rc = fail("<stdin>", lineno, err.msg);
                break;
            }
            tbuf_put(&out, "{\"ids\": [", 9);
            for (size_t i = 0; i < ids.n; i++) {
                char num[16];
                int k = snprintf(num, sizeof num, i ? ", %d" : "%d", (int)ids.ids[i]);
                tbuf_put(&out, num, (size_t)k);
            }
            tbuf_put(&out, "]}\n", 3);
        } else {
            const json_t *a = json_object_get(j, "ids");
            if (!json_is_array(a)) {
                json_decref(j);
                rc = fail("<stdin>", lineno, "expected {\"ids\": [int, ...]}");
                break;
            }
            ids.n = 0;
            size_t i;
            const json_t *v;
            int bad = 0;
            json_array_foreach(a, i, v) {
                if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                    json_integer_value(v) > INT32_MAX) { bad = 1; break; }
                tok_ids_push(&ids, (int32_t)json_integer_value(v));
            }
            char *text = NULL;
            size_t tl = 0;
            if (bad) snprintf(msg, sizeof msg, "ids[%zu]: expected a non-negative integer", i);
            else if (tok_decode(tok, ids.ids, ids.n, skip_special, &text, &tl, &err)) {
                snprintf(msg, sizeof msg, "%s", err.msg);
                bad = 1;
            }
            if (bad) {
                json_decref(j);
                rc = fail("<stdin>", lineno, msg);
                break;
            }
            tbuf_put(&out, "{\"text\": ", 9);
            put_json_string(&out, text, tl);
            tbuf_put(&out, "}\n", 2);
            free(text);
        }
        json_decref(j);
        if (fwrite(out.p, 1, out.n, stdout) != out.n || fflush(stdout)) {
            rc = fail("<stdout>", 0, "<stdout>: write error");
            break;
        }
    }
    free(line);
    tbuf_free(&clean);
    tbuf_free(&out);
    tok_ids_free(&ids);
    tok_free(tok);
    return rc;
}
