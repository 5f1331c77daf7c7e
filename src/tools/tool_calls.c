/* tools/tool_calls.c — tool calls parsed from a model's answer (Qwen's
 * <tool_call> blocks, Llama 3.1's bare JSON) and the error content fed back for
 * a call that cannot be made, with TRL's semantics (see tool_calls.h). Not the
 * execution of a call (tools/tool_proc.c) nor the rollout loop. */
#include "tools/tool_calls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"

ToolFormat tool_format_of_template(const char *t) {
    if (!t) return TOOL_FORMAT_NONE;
    if (strstr(t, "<tool_call>")) return TOOL_FORMAT_HERMES;
    /* Llama 3.1/3.2: the call is rendered as {"name": ..., "parameters": ...} */
    if (strstr(t, "\"parameters\": ") && strstr(t, "<|eot_id|>")) return TOOL_FORMAT_LLAMA3_JSON;
    return TOOL_FORMAT_NONE;
}

const char *tool_format_name(ToolFormat f) {
    switch (f) {
    case TOOL_FORMAT_HERMES: return "hermes";
    case TOOL_FORMAT_LLAMA3_JSON: return "llama3_json";
    default: return "none";
    }
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

static const char *skip_space(const char *p, const char *end) {
    while (p < end && is_space(*p)) p++;
    return p;
}

/* end of text without trailing white space, an end-of-turn marker, white space */
static const char *trim_end(const char *s, const char *end, const char *marker) {
    while (end > s && is_space(end[-1])) end--;
    size_t m = strlen(marker);
    if ((size_t)(end - s) >= m && memcmp(end - m, marker, m) == 0) end -= m;
    while (end > s && is_space(end[-1])) end--;
    return end;
}

static int malformed(ToolAnswer *a, const char *what, const char *quoted, size_t quoted_len) {
    char q[64] = "";
    if (quoted) {
        char tmp[48];
        size_t k = quoted_len < sizeof tmp - 1 ? quoted_len : sizeof tmp - 1;
        memcpy(tmp, quoted, k);
        tmp[k] = 0;
        text_escaped(q, sizeof q, tmp, 40);
    }
    if (quoted) snprintf(a->reason, sizeof a->reason, "%s: '%s'", what, q);
    else snprintf(a->reason, sizeof a->reason, "%s", what);
    a->kind = TOOL_ANSWER_MALFORMED;
    for (int i = 0; i < a->n_calls; i++) {
        free(a->calls[i].name);
        json_decref(a->calls[i].arguments);
    }
    free(a->calls);
    a->calls = NULL, a->n_calls = 0;
    return 0;
}

/* Adds the call in JSON text [p, end) to a; args_key is where its arguments are
 * ("arguments", Llama's "parameters"). 1 added, 0 malformed (a says why), -1 OOM. */
static int add_call(ToolAnswer *a, const char *p, const char *end, const char *args_key) {
    json_error_t je;
    json_t *j = json_loadb(p, (size_t)(end - p), JSON_DECODE_ANY, &je);
    if (!j) return malformed(a, "tool call is not JSON", p, (size_t)(end - p)), 0;
    const json_t *name = json_is_object(j) ? json_object_get(j, "name") : NULL;
    if (!json_is_string(name)) {
        json_decref(j);
        return malformed(a, "tool call without a string \"name\"", p, (size_t)(end - p)), 0;
    }
    json_t *args = json_object_get(j, args_key);
    if (!args || json_is_null(args)) args = json_object(); /* TRL's _validate_tool_calls: {} */
    else json_incref(args);
    ToolCall *c = realloc(a->calls, (size_t)(a->n_calls + 1) * sizeof *c);
    char *nm = strdup(json_string_value(name));
    json_decref(j);
    if (!c || !nm || !args) {
        if (c) a->calls = c;
        free(nm);
        json_decref(args);
        return -1;
    }
    a->calls = c;
    c[a->n_calls++] = (ToolCall){nm, args};
    return 1;
}

/* Qwen's response schema (TRL's qwen3_schema): [<think>...</think>] text, then
 * one or more <tool_call> X </tool_call> separated by white space, then only
 * white space and <|im_end|>. */
static int parse_hermes(const char *s, ToolAnswer *a) {
    static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";
    const char *end = trim_end(s, s + strlen(s), "<|im_end|>");
    const char *p = s;
    if (strncmp(p, "<think>", 7) == 0) {
        const char *t = strstr(p, "</think>");
        if (t && t < end) p = t + 8;
    }
    const char *at = strstr(p, OPEN);
    if (!at || at >= end) return 0; /* TOOL_ANSWER_TEXT */
    p = at;
    while (p < end) {
        if ((size_t)(end - p) < sizeof OPEN - 1 || memcmp(p, OPEN, sizeof OPEN - 1) != 0)
            return malformed(a, "text after </tool_call>", p, (size_t)(end - p));
        const char *body = p + sizeof OPEN - 1;
        const char *close = strstr(body, CLOSE);
        if (!close || close > end) return malformed(a, "<tool_call> without </tool_call>", body, (size_t)(end - body));
        const char *b0 = skip_space(body, close), *b1 = close;
        while (b1 > b0 && is_space(b1[-1])) b1--;
        if (b0 == b1) return malformed(a, "empty <tool_call>", NULL, 0);
        int r = add_call(a, b0, b1, "arguments");
        if (r <= 0) return r;
        p = skip_space(close + sizeof CLOSE - 1, end);
    }
    a->kind = TOOL_ANSWER_CALLS;
    return 0;
}

/* Llama 3.1's (TRL's llama3_schema): the answer is {"name": "...", "parameters": ...}
 * from its first byte to its last '}', then <|eot_id|>; anything else is text. */
static int parse_llama3(const char *s, ToolAnswer *a) {
    const char *end = trim_end(s, s + strlen(s), "<|eot_id|>");
    if (strncmp(s, "{\"name\":", 8) != 0) return 0;
    const char *q = skip_space(s + 8, end);
    if (q >= end || *q != '"') return 0;
    const char *last = end;
    while (last > s && last[-1] != '}') last--;
    if (last == s) return malformed(a, "tool call is not JSON", s, (size_t)(end - s));
    json_t *j = json_loadb(s, (size_t)(last - s), JSON_DECODE_ANY, NULL);
    int has_params = j && json_object_get(j, "parameters") != NULL;
    json_decref(j);
    if (j && !has_params) return malformed(a, "tool call without \"parameters\"", s, (size_t)(end - s));
    int r = add_call(a, s, last, "parameters");
    if (r <= 0) return r;
    a->kind = TOOL_ANSWER_CALLS;
    return 0;
}

int tool_answer_parse(ToolFormat f, const char *text, ToolAnswer *out) {
    memset(out, 0, sizeof *out);
    out->kind = TOOL_ANSWER_TEXT;
    if (!text) return 0;
    if (f == TOOL_FORMAT_HERMES) return parse_hermes(text, out);
    if (f == TOOL_FORMAT_LLAMA3_JSON) return parse_llama3(text, out);
    return 0;
}

void tool_answer_free(ToolAnswer *a) {
    for (int i = 0; i < a->n_calls; i++) {
        free(a->calls[i].name);
        json_decref(a->calls[i].arguments);
    }
    free(a->calls);
    memset(a, 0, sizeof *a);
}

static const char *tool_name_of(const json_t *t) {
    const json_t *fn = json_object_get(t, "function");
    const json_t *nm = json_object_get(json_is_object(fn) ? fn : t, "name");
    return json_string_value(nm);
}

/* Python's type name of a JSON value, for the TypeError TRL's loop feeds back */
static const char *py_type(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_STRING: return "str";
    case JSON_INTEGER: return "int";
    case JSON_REAL: return "float";
    case JSON_ARRAY: return "list";
    case JSON_TRUE: case JSON_FALSE: return "bool";
    case JSON_NULL: return "NoneType";
    default: return "dict";
    }
}

int tool_check_call(const ToolCall *c, const json_t *tools, char *msg, size_t n) {
    size_t i;
    const json_t *t;
    int found = 0;
    json_array_foreach(tools, i, t) {
        const char *nm = tool_name_of(t);
        if (nm && strcmp(nm, c->name) == 0) found = 1;
    }
    if (!found) { /* TRL: ValueError(f"Tool {name} not found.") */
        snprintf(msg, n, "Tool %s not found.", c->name);
        return -1;
    }
    if (!json_is_object(c->arguments)) { /* TRL calls tool(**arguments): Python's TypeError */
        snprintf(msg, n, "%s() argument after ** must be a mapping, not %s", c->name, py_type(c->arguments));
        return -1;
    }
    return 0;
}

/* Python's repr() of a str: single quotes unless it holds ' and no " */
static size_t py_repr(char *out, const char *s) {
    char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    size_t k = 0;
#define PUT(ch) (out ? (void)(out[k] = (ch)) : (void)0, k++)
    PUT(q);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char ch = *p;
        if (ch == '\\' || ch == (unsigned char)q) PUT('\\'), PUT((char)ch);
        else if (ch == '\n') PUT('\\'), PUT('n');
        else if (ch == '\r') PUT('\\'), PUT('r');
        else if (ch == '\t') PUT('\\'), PUT('t');
        else if (ch < 0x20 || ch == 0x7f) {
            static const char hex[] = "0123456789abcdef";
            PUT('\\'), PUT('x'), PUT(hex[ch >> 4]), PUT(hex[ch & 15]);
        } else PUT((char)ch);
    }
    PUT(q);
#undef PUT
    return k;
}

char *tool_error_content(const char *msg) {
    static const char head[] = "{'error': ";
    size_t n = py_repr(NULL, msg);
    char *out = malloc(sizeof head - 1 + n + 2);
    if (!out) return NULL;
    memcpy(out, head, sizeof head - 1);
    py_repr(out + sizeof head - 1, msg);
    memcpy(out + sizeof head - 1 + n, "}", 2);
    return out;
}
