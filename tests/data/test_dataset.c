/* tests/data/test_dataset.c — prompt datasets: standard and conversational
 * prompts rendered and tokenized (a one-character-per-token tokenizer written
 * here, so the ids are known by hand), columns kept, exact left truncation,
 * every bad line with its file:line message, and the seeded epoch order
 * (deterministic, a permutation per epoch, resumable from a position).
 * With $GRPO_QWEN3_TOKENIZER set (tests/data/test_dataset_qwen3.sh) the same
 * file is also rendered with the real Qwen3 tokenizer and chat template. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "testutil.h"

static char dir[] = "/tmp/grpo-data-XXXXXX";

static const char *write_file(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Byte-level BPE without merges: a..z are ids 0..25, ' ' (Ġ) 26, '\n' (Ċ) 27,
 * ':' 28, '?' 29; anything else is dropped. The chat template writes
 * "role: content\n" per message and "assistant:" as the generation prompt. */
static Tokenizer *char_tokenizer(void) {
    char vocab[1024] = "";
    for (int c = 0; c < 26; c++) {
        char e[32];
        snprintf(e, sizeof e, "\"%c\": %d, ", 'a' + c, c);
        strcat(vocab, e);
    }
    strcat(vocab, "\"\\u0120\": 26, \"\\u010a\": 27, \":\": 28, \"?\": 29");
    char json[4096];
    snprintf(json, sizeof json,
             "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null,"
             " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false},"
             " \"post_processor\": null, \"decoder\": {\"type\": \"ByteLevel\"},"
             " \"model\": {\"type\": \"BPE\", \"vocab\": {%s}, \"merges\": []}}",
             vocab);
    write_file("tokenizer.json", json);
    write_file("tokenizer_config.json",
               "{\"chat_template\": \"{% for m in messages %}{{ m.role }}: {{ m.content }}\\n{% endfor %}"
               "{% if add_generation_prompt %}assistant:{% endif %}\"}");
    Tokenizer *tok = NULL;
    GrpoErr err = {{0}};
    if (tok_load(&tok, dir, &err)) {
        fprintf(stderr, "tokenizer: %s\n", err.msg);
        return NULL;
    }
    return tok;
}

/* ids of a string under char_tokenizer */
static int char_ids(const char *s, int32_t *ids) {
    int n = 0;
    for (; *s; s++)
        ids[n++] = *s >= 'a' && *s <= 'z' ? *s - 'a' : *s == ' ' ? 26 : *s == '\n' ? 27 : *s == ':' ? 28 : 29;
    return n;
}

static const char *GOOD =
    "{\"prompt\": \"what is six\", \"answer\": 6, \"meta\": {\"k\": [1, 2]}}\n"
    "\n"
    "   \r\n"
    "{\"prompt\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"hi?\"}], \"answer\": \"x\"}\r\n"
    "{\"prompt\": \"abcdefghij\"}";

/* d's columns joined by commas, for a check. */
static const char *columns_of(const Dataset *d) {
    static char out[256];
    out[0] = 0;
    for (int i = 0; i < d->n_columns; i++) {
        if (i) strcat(out, ",");
        strcat(out, d->columns[i]);
    }
    return out;
}

static void test_load_and_tokenize(Tokenizer *tok) {
    const char *path = write_file("good.jsonl", GOOD);
    Dataset d;
    GrpoErr err = {{0}};
    T_CHECK(dataset_load(&d, path, &err) == 0, "load: %s", err.msg);
    if (!d.n) return;
    T_CHECK(d.n == 3, "3 examples (blank lines skipped), got %d", d.n);
    T_CHECK(d.ex[0].line == 1 && d.ex[1].line == 4 && d.ex[2].line == 5, "line numbers %ld %ld %ld",
            d.ex[0].line, d.ex[1].line, d.ex[2].line);
    T_CHECK(!d.ex[0].conversational && d.ex[1].conversational && !d.ex[2].conversational, "formats");
    T_CHECK(json_integer_value(json_object_get(d.ex[0].row, "answer")) == 6 &&
                json_is_object(json_object_get(d.ex[0].row, "meta")) &&
                !strcmp(json_string_value(json_object_get(d.ex[1].row, "answer")), "x"),
            "columns kept");
    T_CHECK(!strcmp(columns_of(&d), "prompt,answer,meta"), "the dataset's columns, the union in first-seen order: %s",
            columns_of(&d));
    T_CHECK(json_is_array(d.ex[1].prompt) && d.ex[1].prompt == json_object_get(d.ex[1].row, "prompt"),
            "original prompt value kept");
    if (!tok) { dataset_free(&d); return; }

    T_CHECK(dataset_tokenize(&d, tok, 0, NULL, &err) == 0, "tokenize: %s", err.msg);
    T_CHECK(!strcmp(d.ex[0].prompt_text, "what is six"), "standard prompt as is: '%s'", d.ex[0].prompt_text);
    const char *chat = "system: be brief\nuser: hi?\nassistant:";
    T_CHECK(!strcmp(d.ex[1].prompt_text, chat), "chat rendered with generation prompt: '%s'", d.ex[1].prompt_text);
    int32_t want[128];
    int n = char_ids(chat, want);
    T_CHECK(d.ex[1].n_prompt_ids == n && !memcmp(d.ex[1].prompt_ids, want, (size_t)n * 4) && !d.ex[1].truncated,
            "chat ids (%d, want %d)", d.ex[1].n_prompt_ids, n);

    /* left truncation keeps exactly the last 4 ids: "ghij" */
    T_CHECK(dataset_tokenize(&d, tok, 4, NULL, &err) == 0, "tokenize 4: %s", err.msg);
    const int32_t last4[4] = {6, 7, 8, 9};
    T_CHECK(d.ex[2].n_prompt_ids == 4 && !memcmp(d.ex[2].prompt_ids, last4, sizeof last4) &&
                d.ex[2].truncated && d.ex[2].n_prompt_ids_full == 10,
            "left truncation: n %d full %d truncated %d", d.ex[2].n_prompt_ids, d.ex[2].n_prompt_ids_full,
            d.ex[2].truncated);
    T_CHECK(!strcmp(d.ex[2].prompt_text, "abcdefghij"), "prompt text stays whole");
    n = char_ids(chat, want);
    T_CHECK(d.ex[1].n_prompt_ids == 4 && !memcmp(d.ex[1].prompt_ids, want + n - 4, 16), "chat truncated to its end");
    /* exactly at the limit: not truncated */
    T_CHECK(dataset_tokenize(&d, tok, 10, NULL, &err) == 0 && !d.ex[2].truncated && d.ex[2].n_prompt_ids == 10,
            "10 of 10 is not truncated");
    dataset_free(&d);
    T_CHECK(d.n == 0 && d.ex == NULL && d.n_columns == 0 && d.columns == NULL, "free zeroes");
    dataset_free(&d);
}

static void expect_load_error(const char *text, const char *want) {
    const char *path = write_file("bad.jsonl", text);
    Dataset d;
    GrpoErr err = {{0}};
    int rc = dataset_load(&d, path, &err);
    T_CHECK(rc == -1 && strstr(err.msg, want) && strstr(err.msg, "bad.jsonl") && d.n == 0 && d.ex == NULL,
            "'%.40s': rc %d, '%s' (want '%s')", text, rc, err.msg, want);
    if (rc == 0) dataset_free(&d);
}

static void test_bad_input(void) {
    expect_load_error("{\"prompt\": \"a\"}\n{\"prompt\": \"b\"\n", "bad.jsonl:2: not valid JSON");
    expect_load_error("[1, 2]\n", "bad.jsonl:1: expected a JSON object, got a number (array record 1)");
    expect_load_error("{\"prompt\": \"a\"}\n[1, 2]\n", "bad.jsonl:2: expected a JSON object, got an array");
    expect_load_error("\n\n\"text\"\n", "bad.jsonl:3: expected a JSON object, got a string");
    expect_load_error("{\"question\": \"a\"}\n", "bad.jsonl:1: no 'prompt' field");
    expect_load_error("{\"prompt\": \"a\"}\n{\"prompt\": 3}\n",
                      "bad.jsonl:2: 'prompt' must be a string or a list of {role, content} messages, got a number");
    expect_load_error("{\"prompt\": null}\n", "'prompt' must be a string or a list of {role, content} messages, got null");
    expect_load_error("{\"prompt\": []}\n", "bad.jsonl:1: 'prompt' is an empty message list");
    expect_load_error("{\"prompt\": [\"hi\"]}\n", "bad.jsonl:1: 'prompt'[0] must be a {role, content} message, got a string");
    expect_load_error("{\"prompt\": [{\"role\": \"user\", \"content\": \"a\"}, {\"content\": \"b\"}]}\n",
                      "bad.jsonl:1: 'prompt'[1].role must be a string, got nothing");
    expect_load_error("{\"prompt\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}\n",
                      "bad.jsonl:1: 'prompt'[0].content must be a string, got an array");
    expect_load_error("{\"prompt\": \"a\", \"tools\": {\"name\": \"f\"}}\n",
                      "bad.jsonl:1: 'tools' must be a list of JSON schemas");
    expect_load_error("{\"prompt\": \"a\", \"tools\": null}\n{\"prompt\": \"a\", \"tools\": [{\"name\": \"f\"}, \"g\"]}\n",
                      "bad.jsonl:2: 'tools'[1] must be a JSON schema object, got a string");
    expect_load_error("", "bad.jsonl: no examples");
    expect_load_error("\n  \n", "bad.jsonl: no examples");
    Dataset d;
    GrpoErr err = {{0}};
    T_CHECK(dataset_load(&d, "/nonexistent/data.jsonl", &err) == -1 &&
                strstr(err.msg, "/nonexistent/data.jsonl: cannot open"),
            "missing file: %s", err.msg);
}

/* open-r1's make_conversation: [system?, user from the column], a row's prompt replaced,
 * its messages dropped, every other column kept; a missing or non-text column refused. */
static void test_conversation(void) {
    const char *path = write_file("conv.jsonl",
                                  "{\"problem\": \"1+1?\", \"solution\": \"2\", \"prompt\": \"old\", \"messages\": []}\n"
                                  "{\"problem\": \"2+2?\", \"solution\": \"4\"}\n");
    DatasetConversation c = {"Think first.", "problem"};
    Dataset d;
    GrpoErr err = {{0}};
    T_CHECK(dataset_load_conversation(&d, path, &c, &err) == 0 && d.n == 2, "load: %s", err.msg);
    if (d.n == 2) {
        char *got = json_dumps(d.ex[0].row, JSON_SORT_KEYS | JSON_COMPACT);
        T_CHECK(!strcmp(got, "{\"problem\":\"1+1?\",\"prompt\":[{\"content\":\"Think first.\",\"role\":\"system\"},"
                             "{\"content\":\"1+1?\",\"role\":\"user\"}],\"solution\":\"2\"}"), "row 1: %s", got);
        free(got);
        T_CHECK(d.ex[1].conversational && json_array_size(d.ex[1].prompt) == 2, "row 2 conversational");
        T_CHECK(!strcmp(columns_of(&d), "problem,solution,prompt"), "columns as the rows were made (no messages): %s",
                columns_of(&d));
        dataset_free(&d);
    }
    DatasetConversation user_only = {NULL, "problem"};
    T_CHECK(dataset_load_conversation(&d, path, &user_only, &err) == 0 && json_array_size(d.ex[0].prompt) == 1 &&
                !strcmp(json_string_value(json_object_get(json_array_get(d.ex[0].prompt, 0), "role")), "user"),
            "no system prompt: the user message alone (%s)", err.msg);
    if (d.n) dataset_free(&d);
    DatasetConversation missing = {"S", "question"};
    T_CHECK(dataset_load_conversation(&d, path, &missing, &err) == -1 &&
                strstr(err.msg, "conv.jsonl:1: no 'question' column for the user message (dataset_prompt_column; the row "
                                "has problem, solution, prompt, messages)"), "missing column: %s", err.msg);
    path = write_file("conv2.jsonl", "{\"prompt\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
    DatasetConversation nested = {"S", "prompt"};
    T_CHECK(dataset_load_conversation(&d, path, &nested, &err) == -1 &&
                strstr(err.msg, "conv2.jsonl:1: 'prompt' must be a string to be the user message"), "a message list: %s",
            err.msg);
}

static void test_from_rows(void) {
    json_t *rows[3] = {json_pack("{s:s}", "prompt", "abc"),
                       json_pack("{s:[{s:s,s:s}], s:i}", "prompt", "role", "user", "content", "hi", "answer", 4),
                       json_pack("{s:i}", "prompt", 3)};
    Dataset d;
    GrpoErr err = {{0}};
    T_CHECK(dataset_from_rows(&d, "--prompt", rows, 2, &err) == 0 && d.n == 2 && !strcmp(d.path, "--prompt"),
            "two rows: %s", err.msg);
    if (d.n == 2) {
        T_CHECK(!d.ex[0].conversational && d.ex[1].conversational && d.ex[0].line == 1 && d.ex[1].line == 2 &&
                    json_integer_value(json_object_get(d.ex[1].row, "answer")) == 4,
                "rows as examples");
        T_CHECK(!strcmp(columns_of(&d), "prompt,answer"), "columns of rows: %s", columns_of(&d));
        T_CHECK(rows[0]->refcount == 2, "the dataset holds its own reference (refcount %zu)", rows[0]->refcount);
        dataset_free(&d);
    }
    T_CHECK(rows[0]->refcount == 1, "freed: references returned");
    T_CHECK(dataset_from_rows(&d, "--rows", rows, 3, &err) == -1 && d.n == 0 && d.ex == NULL &&
                !strcmp(err.msg, "--rows:3: 'prompt' must be a string or a list of {role, content} messages, got a number"),
            "bad row: %s", err.msg);
    json_t *arr = json_array();
    T_CHECK(dataset_from_rows(&d, "--rows", &arr, 1, &err) == -1 && strstr(err.msg, "--rows:1: expected a JSON object"),
            "non-object row: %s", err.msg);
    T_CHECK(dataset_from_rows(&d, "--rows", rows, 0, &err) == -1 && strstr(err.msg, "--rows: no examples"),
            "no rows: %s", err.msg);
    T_CHECK(rows[0]->refcount == 1 && rows[1]->refcount == 1, "errors leave no reference behind");
    json_decref(arr);
    for (int i = 0; i < 3; i++) json_decref(rows[i]);
}

static void test_template_error(void) {
    /* a template that fails at render time is reported with file:line */
    write_file("tokenizer_config.json", "{\"chat_template\": \"{{ raise_exception('no system') }}\"}");
    Tokenizer *tok = NULL;
    GrpoErr err = {{0}};
    if (tok_load(&tok, dir, &err)) { T_CHECK(0, "load: %s", err.msg); return; }
    const char *path = write_file("chat.jsonl", "{\"prompt\": \"plain is fine\"}\n"
                                                "{\"prompt\": [{\"role\": \"user\", \"content\": \"a\"}]}\n");
    Dataset d;
    if (dataset_load(&d, path, &err) == 0) {
        T_CHECK(dataset_tokenize(&d, tok, 0, NULL, &err) == -1 && strstr(err.msg, "chat.jsonl:2: chat template"),
                "template error: %s", err.msg);
        dataset_free(&d);
    }
    tok_free(tok);
}

static void test_sampler(void) {
    enum { N = 10 };
    DatasetSampler s, t;
    dataset_sampler_init(&s, N, 0, 1);
    int ok = 1;
    for (long p = 0; p < 3 * N; p++) ok &= dataset_sampler_index(&s, p) == (int)(p % N);
    T_CHECK(ok, "without shuffle: file order every epoch");
    dataset_sampler_free(&s);

    dataset_sampler_init(&s, N, 1, 1234);
    dataset_sampler_init(&t, N, 1, 1234);
    int epochs[3][N], differs = 0, identity = 1;
    for (int e = 0; e < 3; e++) {
        int seen[N] = {0};
        for (int i = 0; i < N; i++) {
            epochs[e][i] = dataset_sampler_index(&s, (long)e * N + i);
            seen[epochs[e][i]]++;
            identity &= epochs[e][i] == i;
        }
        int perm = 1;
        for (int i = 0; i < N; i++) perm &= seen[i] == 1;
        T_CHECK(perm, "epoch %d is a permutation", e);
        if (e && memcmp(epochs[e], epochs[0], sizeof epochs[0])) differs = 1;
    }
    T_CHECK(differs && !identity, "epochs are shuffled, and differently");
    /* the order grpo has always produced for seed 1234: checkpoints record only a
     * position, so a resumed run depends on it never changing */
    const int golden[2][N] = {{5, 8, 6, 3, 0, 9, 2, 7, 4, 1}, {7, 9, 0, 5, 4, 2, 1, 6, 8, 3}};
    T_CHECK(!memcmp(epochs[0], golden[0], sizeof golden[0]) && !memcmp(epochs[1], golden[1], sizeof golden[1]),
            "seed 1234 order changed: epoch 0 starts %d %d %d", epochs[0][0], epochs[0][1], epochs[0][2]);
    /* same seed: same order, whatever the access pattern (resume mid-epoch,
     * jump back to an earlier epoch) */
    ok = 1;
    for (long p = 2 * N + 3; p >= 0; p -= 7) ok &= dataset_sampler_index(&t, p) == epochs[p / N][p % N];
    T_CHECK(ok, "resume from any position gives the same example");
    dataset_sampler_free(&t);
    dataset_sampler_init(&t, N, 1, 1235);
    int same = 1;
    for (int i = 0; i < N; i++) same &= dataset_sampler_index(&t, i) == epochs[0][i];
    T_CHECK(!same, "another seed, another order");
    dataset_sampler_free(&t);
    dataset_sampler_free(&s);

    /* uniformity, roughly: over 2000 epochs of 4, each index lands at slot 0 about 500 times */
    dataset_sampler_init(&s, 4, 1, 7);
    int count[4] = {0};
    for (long e = 0; e < 2000; e++) count[dataset_sampler_index(&s, e * 4)]++;
    for (int i = 0; i < 4; i++) T_CHECK(count[i] > 400 && count[i] < 600, "slot 0 got %d %d times", i, count[i]);
    dataset_sampler_free(&s);
    dataset_sampler_init(&s, 1, 1, 7);
    T_CHECK(dataset_sampler_index(&s, 5) == 0, "n = 1");
    dataset_sampler_free(&s);
}

/* The real Qwen3 tokenizer and chat template (path from the wrapper script). */
static void test_qwen3(const char *model_dir) {
    Tokenizer *tok = NULL;
    GrpoErr err = {{0}};
    if (tok_load(&tok, model_dir, &err)) { T_CHECK(0, "qwen3: %s", err.msg); return; }
    const char *path = write_file("qwen.jsonl",
                                  "{\"prompt\": [{\"role\": \"user\", \"content\": \"What is 2+2?\"}], \"answer\": \"4\"}\n"
                                  "{\"prompt\": \"Hello world\"}\n");
    Dataset d;
    if (dataset_load(&d, path, &err)) { T_CHECK(0, "load: %s", err.msg); tok_free(tok); return; }
    T_CHECK(dataset_tokenize(&d, tok, 0, NULL, &err) == 0, "qwen3 tokenize: %s", err.msg);
    const char *want = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n";
    T_CHECK(d.ex[0].prompt_text && !strcmp(d.ex[0].prompt_text, want), "qwen3 render: '%s'",
            d.ex[0].prompt_text ? d.ex[0].prompt_text : "");
    /* no special tokens added: the text begins with <|im_start|> and nothing precedes it */
    int32_t im_start = tok_token_to_id(tok, "<|im_start|>", 12);
    T_CHECK(d.ex[0].n_prompt_ids > 0 && d.ex[0].prompt_ids[0] == im_start && im_start == 151644,
            "first id is <|im_start|> (%d)", d.ex[0].n_prompt_ids ? d.ex[0].prompt_ids[0] : -1);
    /* "Hello world" -> [9707, 1879] in Qwen's vocabulary, no BOS */
    T_CHECK(d.ex[1].n_prompt_ids == 2 && d.ex[1].prompt_ids[0] == 9707 && d.ex[1].prompt_ids[1] == 1879,
            "standard prompt ids");
    int full = d.ex[0].n_prompt_ids;
    int32_t *all = xmalloc((size_t)full * sizeof *all);
    memcpy(all, d.ex[0].prompt_ids, (size_t)full * sizeof *all);
    T_CHECK(dataset_tokenize(&d, tok, 5, NULL, &err) == 0 && d.ex[0].n_prompt_ids == 5 && d.ex[0].truncated &&
                !memcmp(d.ex[0].prompt_ids, all + full - 5, 5 * sizeof *all),
            "qwen3 left truncation keeps the last 5 of %d", full);
    free(all);
    /* chat_template_kwargs reach the template: Qwen3's enable_thinking false
     * adds the empty think block to the generation prompt (transformers renders
     * the same: tests/tokenizer/chat_cases.mjs); other variables are visible too */
    json_t *kw = json_pack("{s:b, s:s}", "enable_thinking", 0, "unused_var", "x");
    T_CHECK(dataset_tokenize(&d, tok, 0, kw, &err) == 0, "qwen3 tokenize with kwargs: %s", err.msg);
    const char *want_nothink = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    T_CHECK(d.ex[0].prompt_text && !strcmp(d.ex[0].prompt_text, want_nothink), "enable_thinking false: '%s'",
            d.ex[0].prompt_text ? d.ex[0].prompt_text : "");
    T_CHECK(!strcmp(d.ex[1].prompt_text, "Hello world"), "a plain prompt is not templated");
    json_decref(kw);
    kw = json_pack("{s:b}", "enable_thinking", 1);
    T_CHECK(dataset_tokenize(&d, tok, 0, kw, &err) == 0 && !strcmp(d.ex[0].prompt_text, want),
            "enable_thinking true renders as unset: '%s'", d.ex[0].prompt_text ? d.ex[0].prompt_text : "");
    json_decref(kw);
    dataset_free(&d);

    /* a row's `tools` column reaches the template as tools= (Qwen3's <tools>
     * section in the system turn), beside chat_template_kwargs; an empty list is
     * no tools (TRL: `tools or None`); a row without the column has none */
    path = write_file("tools.jsonl",
                      "{\"prompt\": [{\"role\": \"user\", \"content\": \"What is 2+2?\"}], \"tools\": [{\"type\": "
                      "\"function\", \"function\": {\"name\": \"calculator\", \"parameters\": {}}}]}\n"
                      "{\"prompt\": [{\"role\": \"user\", \"content\": \"What is 2+2?\"}], \"tools\": []}\n"
                      "{\"prompt\": [{\"role\": \"user\", \"content\": \"What is 2+2?\"}]}\n");
    if (dataset_load(&d, path, &err)) { T_CHECK(0, "load tools: %s", err.msg); tok_free(tok); return; }
    kw = json_pack("{s:b}", "enable_thinking", 0);
    T_CHECK(dataset_tokenize(&d, tok, 0, kw, &err) == 0, "qwen3 tokenize with tools: %s", err.msg);
    const char *t0 = d.ex[0].prompt_text ? d.ex[0].prompt_text : "";
    const char *head = "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user "
                       "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
                       "{\"type\": \"function\", \"function\": {\"name\": \"calculator\", \"parameters\": {}}}\n</tools>";
    T_CHECK(!strncmp(t0, head, strlen(head)), "tools rendered: '%s'", t0);
    size_t l0 = strlen(t0);
    T_CHECK(l0 > strlen(want_nothink) && !strcmp(t0 + l0 - strlen(want_nothink), want_nothink),
            "the conversation and enable_thinking after the tools: '%s'", t0);
    T_CHECK(d.ex[1].prompt_text && !strcmp(d.ex[1].prompt_text, want_nothink), "tools [] is none: '%s'",
            d.ex[1].prompt_text ? d.ex[1].prompt_text : "");
    T_CHECK(d.ex[2].prompt_text && !strcmp(d.ex[2].prompt_text, want_nothink), "no column, no tools");
    T_CHECK(json_object_size(kw) == 1, "the caller's kwargs untouched");
    json_decref(kw);
    dataset_free(&d);
    tok_free(tok);
}

int main(void) {
    CHECK(mkdtemp(dir));
    Tokenizer *tok = char_tokenizer();
    T_CHECK(tok != NULL, "test tokenizer loads");
    test_load_and_tokenize(tok);
    tok_free(tok);
    test_bad_input();
    test_conversation();
    test_from_rows();
    test_template_error();
    test_sampler();
    const char *qwen = getenv("GRPO_QWEN3_TOKENIZER");
    if (qwen) test_qwen3(qwen);
    else printf("(Qwen3 checks run from tests/data/test_dataset_qwen3.sh)\n");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return t_summary("test_dataset");
}
