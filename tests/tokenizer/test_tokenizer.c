/* tests/tokenizer/test_tokenizer.c — the tokenizer's semantics on small
 * tokenizer.json files written here, one feature at a time: BPE merge order,
 * Split behaviours, added tokens (lstrip/rstrip/single_word/normalized),
 * NFKC, Digits, TemplateProcessing, invalid UTF-8, special ids from the
 * config files, the Jinja subset, and the error messages of bad files.
 * The real Qwen3 / Llama 3 files are checked against HF's reference
 * implementation by the shell tests next to this file. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "tokenizer/tokenizer.h"

static char dir[] = "/tmp/grpo-tok-XXXXXX";

static void write_file(const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs(text, f);
    fclose(f);
}

/* Vocabulary: the byte-level alphabet for a..z, '-', ' ' (as "Ġ"), '<', '>', 'x',
 * '0'-'9', plus merged tokens. */
static const char *VOCAB =
    "\"a\": 0, \"b\": 1, \"c\": 2, \"h\": 3, \"e\": 4, \"l\": 5, \"o\": 6, \"-\": 7, \"Ġ\": 8,"
    "\"x\": 9, \"1\": 10, \"2\": 11, \"3\": 12, \"f\": 13, \"i\": 14,"
    "\"he\": 20, \"ll\": 21, \"hell\": 22, \"hello\": 23, \"a-\": 24, \"-b\": 25, \"Ġa\": 26,"
    "\"12\": 27, \"123\": 28, \"fi\": 29, \"ab\": 30";
static const char *MERGES =
    "[\"l l\", \"h e\", \"he ll\", \"hell o\", \"a -\", \"- b\", \"Ġ a\", \"1 2\", \"12 3\", \"f i\", \"a b\"]";

/* Writes tokenizer.json with the given components (JSON text or "null"). */
static Tokenizer *load_with(const char *normalizer, const char *pre, const char *post,
                            const char *added, const char *extra_model) {
    char buf[8192];
    snprintf(buf, sizeof buf,
             "{\"version\": \"1.0\", \"added_tokens\": %s, \"normalizer\": %s,"
             " \"pre_tokenizer\": %s, \"post_processor\": %s,"
             " \"decoder\": {\"type\": \"ByteLevel\"},"
             " \"model\": {\"type\": \"BPE\", \"vocab\": {%s}, \"merges\": %s %s}}",
             added, normalizer, pre, post, VOCAB, MERGES, extra_model);
    write_file("tokenizer.json", buf);
    Tokenizer *tok = NULL;
    GrpoErr err = {{0}};
    if (tok_load(&tok, dir, &err)) {
        fprintf(stderr, "load failed: %s\n", err.msg);
        return NULL;
    }
    return tok;
}

static const char *BL = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}";

/* encode text; compare with want[0..n) */
static void expect_ids(Tokenizer *tok, const char *text, int add_special, const int32_t *want,
                       size_t n, const char *what) {
    TokIds ids = {0};
    GrpoErr err = {{0}};
    int rc = tok_encode(tok, text, strlen(text), add_special, &ids, &err);
    int same = rc == 0 && ids.n == n && (n == 0 || !memcmp(ids.ids, want, n * sizeof *want));
    T_CHECK(same, "%s: '%s' -> rc %d, %zu ids, first %d (want %zu ids, first %d)", what, text, rc,
            ids.n, ids.n ? ids.ids[0] : -1, n, n ? want[0] : -1);
    tok_ids_free(&ids);
}
#define EXPECT(tok, text, special, what, ...)                                                    \
    do {                                                                                         \
        const int32_t w_[] = {__VA_ARGS__};                                                      \
        expect_ids(tok, text, special, w_, sizeof w_ / sizeof w_[0], what);                      \
    } while (0)

static void test_bpe_and_split(void) {
    write_file("tokenizer_config.json", "{}");
    Tokenizer *tok = load_with("null", BL, "null", "[]", "");
    T_CHECK(tok != NULL, "plain byte-level BPE loads");
    if (!tok) return;
    /* "l l" ranks before "h e"; both then merge up to "hello" */
    EXPECT(tok, "hello", 0, "merge order", 23);
    /* leftmost of equal ranks: "a-b": a- (rank 4) beats -b (rank 5) */
    EXPECT(tok, "a-b", 0, "tie to lower rank", 24, 1);
    EXPECT(tok, " a", 0, "byte-level space", 26);
    char *text = NULL;
    size_t len = 0;
    GrpoErr err = {{0}};
    const int32_t ids[] = {23, 26, 7, 1};
    T_CHECK(tok_decode(tok, ids, 4, 0, &text, &len, &err) == 0 && !strcmp(text, "hello a-b"),
            "decode: '%s'", text ? text : "(null)");
    free(text);
    T_CHECK(tok_token_to_id(tok, "hello", 5) == 23, "token_to_id");
    size_t tl = 0;
    const char *t = tok_id_to_token(tok, 26, &tl);
    T_CHECK(t && tl == 3 && !memcmp(t, "Ġa", 3), "id_to_token");
    T_CHECK(tok_id_to_token(tok, 19, &tl) == NULL && tok_token_to_id(tok, "zz", 2) == -1, "absent tokens");
    /* invalid UTF-8 becomes U+FFFD; U+FFFD's bytes are not in this vocabulary
     * and there is no unk_token, so they are dropped: only 'a' and 'b' remain */
    EXPECT(tok, "a\xff" "b", 0, "invalid UTF-8", 0, 1);
    EXPECT(tok, "", 0, "empty text");
    tok_free(tok);

    /* Split "-" behaviours decide whether "a-" / "-b" can merge */
    static const struct { const char *beh; int32_t want[3]; size_t n; } cases[] = {
        {"Isolated", {0, 7, 1}, 3},           /* a | - | b */
        {"Removed", {30}, 1},                 /* a b: a and b are separate pieces... */
        {"MergedWithPrevious", {24, 1}, 2},   /* a- | b */
        {"MergedWithNext", {0, 25}, 2},       /* a | -b */
        {"Contiguous", {0, 7, 1}, 3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char pre[512];
        snprintf(pre, sizeof pre,
                 "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
                 "{\"String\": \"-\"}, \"behavior\": \"%s\", \"invert\": false}, %s]}",
                 cases[c].beh, BL);
        tok = load_with("null", pre, "null", "[]", "");
        T_CHECK(tok != NULL, "Split %s loads", cases[c].beh);
        if (!tok) continue;
        if (c == 1) { /* Removed: pieces "a" and "b" are encoded separately */
            const int32_t w[] = {0, 1};
            expect_ids(tok, "a-b", 0, w, 2, "Split Removed");
        } else
            expect_ids(tok, "a-b", 0, cases[c].want, cases[c].n, cases[c].beh);
        tok_free(tok);
    }
}

static void test_components(void) {
    /* NFKC: the ligature U+FB01 becomes "fi" before BPE */
    Tokenizer *tok = load_with("{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFKC\"}]}",
                               BL, "null", "[]", "");
    T_CHECK(tok != NULL, "NFKC loads");
    if (tok) { EXPECT(tok, "\xef\xac\x81", 0, "NFKC ligature", 29); tok_free(tok); }

    /* Digits individual_digits=true keeps "123" from merging */
    char pre[512];
    snprintf(pre, sizeof pre, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
             "\"individual_digits\": true}, %s]}", BL);
    tok = load_with("null", pre, "null", "[]", "");
    if (tok) { EXPECT(tok, "123", 0, "Digits individual", 10, 11, 12); tok_free(tok); }
    snprintf(pre, sizeof pre, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
             "\"individual_digits\": false}, %s]}", BL);
    tok = load_with("null", pre, "null", "[]", "");
    if (tok) { EXPECT(tok, "a123", 0, "Digits contiguous", 0, 28); tok_free(tok); }

    /* ignore_merges: a word in the vocabulary is one token without merging */
    tok = load_with("null", BL, "null", "[]", ", \"ignore_merges\": true");
    if (tok) { EXPECT(tok, "hello", 0, "ignore_merges", 23); tok_free(tok); }

    /* TemplateProcessing adds its special token only with add_special */
    const char *post =
        "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"}, {\"type\": "
        "\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, "
        "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": "
        "{\"<s>\": {\"id\": \"<s>\", \"ids\": [40], \"tokens\": [\"<s>\"]}}}]}";
    const char *added =
        "[{\"id\": 40, \"content\": \"<s>\", \"special\": true, \"normalized\": false},"
        " {\"id\": 41, \"content\": \"<L>\", \"special\": true, \"lstrip\": true, \"normalized\": false},"
        " {\"id\": 42, \"content\": \"<R>\", \"special\": false, \"rstrip\": true, \"normalized\": false},"
        " {\"id\": 43, \"content\": \"ab\", \"special\": false, \"single_word\": true, \"normalized\": true},"
        " {\"id\": 44, \"content\": \"<s>x\", \"special\": true, \"normalized\": false}]";
    write_file("tokenizer_config.json",
               "{\"bos_token\": \"<s>\", \"eos_token\": {\"content\": \"<L>\"}, \"pad_token\": null,"
               " \"model_max_length\": 1000000000000000019884624838656}");
    write_file("generation_config.json", "{\"eos_token_id\": [41, 42], \"pad_token_id\": 40}");
    tok = load_with("null", BL, post, added, "");
    T_CHECK(tok != NULL, "added tokens + TemplateProcessing load");
    if (tok) {
        EXPECT(tok, "a", 1, "BOS added", 40, 0);
        EXPECT(tok, "a", 0, "no BOS without add_special", 0);
        EXPECT(tok, "a <L> b", 0, "lstrip eats the space before", 0, 41, 8, 1);
        EXPECT(tok, "a <R> b", 0, "rstrip eats the space after", 0, 8, 42, 1);
        EXPECT(tok, "<s>xa", 0, "longest match first", 44, 0);
        EXPECT(tok, "ab cab ab", 0, "single_word", 43, 8, 2, 30, 8, 43);
        const TokSpecial *sp = tok_special(tok);
        T_CHECK(sp->bos == 40 && sp->eos == 41 && sp->pad == 40, "special ids %d %d %d", sp->bos,
                sp->eos, sp->pad);
        T_CHECK(sp->n_eos == 2 && sp->eos_ids[0] == 41 && sp->eos_ids[1] == 42, "eos ids (%d)", sp->n_eos);
        T_CHECK(tok_is_special(tok, 40) && !tok_is_special(tok, 42), "special flags");
        char *text = NULL;
        GrpoErr err = {{0}};
        const int32_t ids[] = {40, 0, 41, 42, 1};
        tok_decode(tok, ids, 5, 1, &text, NULL, &err);
        T_CHECK(text && !strcmp(text, "a<R>b"), "skip special: '%s'", text ? text : "");
        free(text);
        tok_decode(tok, ids, 5, 0, &text, NULL, &err);
        T_CHECK(text && !strcmp(text, "<s>a<L><R>b"), "keep special: '%s'", text ? text : "");
        free(text);
        const int32_t bad[] = {0, 999};
        T_CHECK(tok_decode(tok, bad, 2, 0, &text, NULL, &err) == -1 && strstr(err.msg, "id 999"),
                "decode out of range: %s", err.msg);
        tok_free(tok);
    }
    unlink("generation_config.json");
}

static void test_chat(void) {
    write_file("tokenizer_config.json",
               "{\"bos_token\": \"<s>\", \"chat_template\": "
               "\"{%- set ns = namespace(n=0) -%}\\n"
               "{%- for m in messages[::-1] if m.role != 'system' %}"
               "{%- set ns.n = ns.n + 1 %}"
               "{{ loop.index }}:{{ m['role'] | upper }}={{ m.content.split('|')[-1].strip() }};"
               "{%- endfor %}\\n"
               "  {% if add_generation_prompt %}\\nGEN {{ ns.n ~ '/' ~ messages|length }}{% endif %}"
               "{{ ' ' ~ (bos_token if bos_token is defined else 'none') }}"
               "{{ ['x', 'y'] | join('+') }}{{ ' %d' % 3 if false else '' }}\"}");
    Tokenizer *tok = load_with("null", BL, "null", "[]", "");
    if (!tok) return;
    const TokMessage msgs[] = {{"system", "sys"}, {"user", "a | b "}, {"assistant", "c"}};
    char *out = NULL;
    GrpoErr err = {{0}};
    int rc = tok_chat_render(tok, msgs, 3, 1, NULL, &out, &err);
    /* trim_blocks drops the newline after "%}", lstrip_blocks the indent before "{%" */
    T_CHECK(rc == 0 && !strcmp(out, "1:ASSISTANT=c;2:USER=b;GEN 2/3 <s>x+y"), "chat: rc %d '%s' %s", rc,
            out ? out : "", rc ? err.msg : "");
    free(out);
    tok_free(tok);

    write_file("tokenizer_config.json", "{\"chat_template\": \"{% for x in %}\"}");
    tok = load_with("null", BL, "null", "[]", "");
    if (!tok) return;
    rc = tok_chat_render(tok, msgs, 3, 1, NULL, &out, &err);
    T_CHECK(rc == -1 && strstr(err.msg, "chat_template: line 1") && strstr(err.msg, dir),
            "bad template: %s", err.msg);
    tok_free(tok);
    write_file("tokenizer_config.json", "{}");
}

static void expect_load_error(const char *json, const char *want, const char *what) {
    write_file("tokenizer.json", json);
    Tokenizer *tok = NULL;
    GrpoErr err = {{0}};
    int rc = tok_load(&tok, dir, &err);
    T_CHECK(rc == -1 && tok == NULL && strstr(err.msg, want) && strstr(err.msg, "tokenizer.json"),
            "%s: rc %d, '%s' lacks '%s'", what, rc, err.msg, want);
    tok_free(tok);
}

static void test_errors(void) {
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a q\"]}}",
                      "model.merges[0]: token 'q' is not in model.vocab", "unknown merge token");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}",
                      "model.merges[0]: token 'ab' is not in model.vocab", "merge result not in vocab");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                      "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Whitespace\"}]}}",
                      "pre_tokenizer.pretokenizers[0]: unsupported pre-tokenizer type 'Whitespace'",
                      "unsupported pre-tokenizer");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                      "\"normalizer\": {\"kind\": 1}}", "normalizer: expected an object with a \"type\"",
                      "normalizer without type");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}",
                      "is used twice", "duplicate id");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], \"dropout\": 0.1}}",
                      "dropout", "dropout");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merg", "invalid JSON",
                      "truncated");
    expect_load_error("[1, 2]", "expected a JSON object", "not an object");
    /* every component's Sequence: the child's path, nested, and a missing array */
#define MODEL_A "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}"
    expect_load_error("{" MODEL_A ", \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": "
                      "[{\"type\": \"NFC\"}, {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Bert\"}]}]}}",
                      "normalizer.normalizers[1].normalizers[0]: unsupported normalizer type 'Bert'",
                      "nested normalizer Sequence");
    expect_load_error("{" MODEL_A ", \"decoder\": {\"type\": \"Sequence\", \"decoders\": "
                      "[{\"type\": \"ByteLevel\"}, {\"type\": \"WordPiece\"}]}}",
                      "decoder.decoders[1]: unsupported decoder type 'WordPiece'", "decoder Sequence");
    expect_load_error("{" MODEL_A ", \"post_processor\": {\"type\": \"Sequence\", \"processors\": {}}}",
                      "post_processor: Sequence: expected an array \"processors\"", "post-processor Sequence");
    expect_load_error("{" MODEL_A ", \"pre_tokenizer\": {\"type\": \"Sequence\"}}",
                      "pre_tokenizer: Sequence: expected an array \"pretokenizers\"", "pre-tokenizer Sequence");
#undef MODEL_A
    /* a config file that cannot be read is an error, one that is absent is not */
    write_file("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}");
    CHECK(mkdir("generation_config.json", 0700) == 0);
    Tokenizer *tok = NULL;
    GrpoErr err = {{0}};
    int rc = tok_load(&tok, dir, &err);
    T_CHECK(rc == -1 && strstr(err.msg, "generation_config.json: is a directory"), "unreadable config: %s", err.msg);
    tok_free(tok);
    rmdir("generation_config.json");
    tok = NULL;
    rc = tok_load(&tok, dir, &err);
    T_CHECK(rc == 0 && tok, "absent generation_config.json is fine: %s", err.msg);
    tok_free(tok);
}

/* generation_config.json's eos ids: up to TOK_MAX_EOS kept in order, one more fails. */
static void test_eos_limit(void) {
    char ids[512];
    int n = 0;
    n += snprintf(ids + n, sizeof ids - n, "{\"eos_token_id\": [");
    for (int i = 0; i < TOK_MAX_EOS; i++) n += snprintf(ids + n, sizeof ids - n, "%s%d", i ? ", " : "", 100 + i);
    snprintf(ids + n, sizeof ids - n, ", 100]}");   /* a duplicate does not count */
    write_file("generation_config.json", ids);
    Tokenizer *tok = load_with("null", BL, "null", "[]", "");
    T_CHECK(tok != NULL, "%d eos ids load", TOK_MAX_EOS);
    if (tok) {
        const TokSpecial *sp = tok_special(tok);
        T_CHECK(sp->n_eos == TOK_MAX_EOS && sp->eos_ids[0] == 100 && sp->eos_ids[TOK_MAX_EOS - 1] == 100 + TOK_MAX_EOS - 1,
                "eos ids kept: %d", sp->n_eos);
        tok_free(tok);
    }
    snprintf(ids + n, sizeof ids - n, ", 999]}");
    write_file("generation_config.json", ids);
    tok = NULL;
    GrpoErr err = {{0}};
    int rc = tok_load(&tok, dir, &err);
    char want[64];
    snprintf(want, sizeof want, "more than %d distinct eos ids", TOK_MAX_EOS);
    T_CHECK(rc == -1 && tok == NULL && strstr(err.msg, "generation_config.json") && strstr(err.msg, want),
            "too many eos ids: rc %d '%s'", rc, err.msg);
    tok_free(tok);
    unlink("generation_config.json");
}

/* transformers' clean_up_tokenization, replacement by replacement over the whole
 * text (expected values from Python's str.replace chain in transformers). */
static void test_clean_up(void) {
    static const char *const cases[][2] = {
        {"Hello , world .", "Hello, world."},
        {"I do n't know ; it 's fine !", "I don't know ; it's fine!"},
        {"a ' s", "a's"},
        {"x  ..", "x .."},
        {" ?? ", "?? "},
        {"we 're 've 'm", "we're've'm"},
        {"no change", "no change"},
        {".  ,", ". ,"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s", cases[i][0]);
        size_t n = tok_clean_up_spaces(buf, strlen(buf));
        T_CHECK(n == strlen(cases[i][1]) && !strcmp(buf, cases[i][1]), "clean-up '%s': '%s' (want '%s')", cases[i][0],
                buf, cases[i][1]);
    }
}

/* Decoding on a kept TokDecodeWork (the rollout's, tokenizer.h) gives the text a
 * fresh decode gives, call after call, long and short texts in turn (a buffer left
 * longer by the call before must not show through), with ids out of the vocabulary
 * left out; on ByteLevel and on a Sequence of ByteFallback and Fuse. */
static void expect_same_decodes(Tokenizer *tok, const int32_t *const *seqs, const size_t *lens, int n_seqs,
                                const char *what) {
    TokDecodeWork *w = tok_decode_work_new();
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < n_seqs; i++) {
            char *fresh = NULL, *kept = NULL;
            size_t nf = 0, nk = 0;
            GrpoErr err = {{0}};
            int rf = tok_decode_generated(tok, seqs[i], lens[i], 1, &fresh, &nf, &err);
            int rk = tok_decode_generated_in(tok, w, seqs[i], lens[i], 1, &kept, &nk, &err);
            T_CHECK(rf == 0 && rk == 0 && nf == nk && !memcmp(fresh, kept, nf + 1),
                    "%s: sequence %d, round %d: kept work '%s' (%zu), fresh '%s' (%zu)", what, i, round,
                    kept ? kept : "(null)", nk, fresh ? fresh : "(null)", nf);
            free(fresh), free(kept);
        }
    tok_decode_work_free(w);
}

static void test_decode_work(void) {
    Tokenizer *tok = load_with("null", BL, "null",
                               "[{\"id\": 40, \"content\": \"<s>\", \"special\": true, \"single_word\": false,"
                               " \"lstrip\": false, \"rstrip\": false, \"normalized\": false},"
                               " {\"id\": 41, \"content\": \"<t>\", \"special\": false, \"single_word\": false,"
                               " \"lstrip\": false, \"rstrip\": false, \"normalized\": false}]",
                               "");
    T_CHECK(tok != NULL, "decode work: the ByteLevel tokenizer loads");
    if (tok) {
        static const int32_t a[] = {23, 8, 26, 24, 25, 41, 28, 9, 40, 22, 6, 8, 29, 30, 8, 23, 8, 23, 26, 26};
        static const int32_t b[] = {0, 500, 1};  /* 500: past the vocabulary, left out */
        static const int32_t c[] = {40};
        static const int32_t d[] = {41, 8, 41, 3};
        const int32_t *seqs[] = {a, b, c, d, a};
        const size_t lens[] = {20, 3, 1, 4, 0};
        expect_same_decodes(tok, seqs, lens, 5, "ByteLevel");
        tok_free(tok);
    }
    write_file("tokenizer.json",
               "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null, \"pre_tokenizer\": null,"
               " \"post_processor\": null, \"decoder\": {\"type\": \"Sequence\", \"decoders\": ["
               "{\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]},"
               " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": {\"a\": 0, \"b\": 1,"
               " \"<0xC3>\": 2, \"<0xA9>\": 3, \"<0xFF>\": 4, \"ab\": 5}, \"merges\": [\"a b\"]}}");
    tok = NULL;
    GrpoErr err = {{0}};
    T_CHECK(tok_load(&tok, dir, &err) == 0, "decode work: the ByteFallback tokenizer loads: %s", err.msg);
    if (tok) {
        static const int32_t a[] = {5, 2, 3, 0, 4, 1, 2, 3, 2, 3, 5, 5, 5, 4};
        static const int32_t b[] = {2, 7, 3}; /* 7: past the vocabulary, left out */
        static const int32_t c[] = {1};
        const int32_t *seqs[] = {a, b, c, a};
        const size_t lens[] = {14, 3, 1, 2};
        expect_same_decodes(tok, seqs, lens, 4, "Sequence(ByteFallback, Fuse)");
        tok_free(tok);
    }
}

int main(void) {
    CHECK(mkdtemp(dir));
    test_clean_up();
    CHECK(chdir(dir) == 0);
    test_bpe_and_split();
    test_components();
    test_chat();
    test_errors();
    test_eos_limit();
    test_decode_work();
    unlink("tokenizer.json");
    unlink("tokenizer_config.json");
    rmdir(dir);
    return t_summary("test_tokenizer");
}
