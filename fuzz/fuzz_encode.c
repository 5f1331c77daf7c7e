/* fuzz/fuzz_encode.c — tokenizer/tokenizer.h's encoder and decoder on hostile
 * text: the input is the text, encoded (with and without special tokens) by a
 * real byte-level BPE tokenizer — fuzz/corpus/tokenizer/tiny_qwen3.json, Qwen3's
 * tokenizer.json cut to 700 ids with its NFC normalizer, split regex, merges
 * and added tokens — and decoded back; then the input's bytes are read as
 * token ids (in and out of range) and decoded as generated ids are. Encoding
 * must succeed unless Oniguruma gives up on the split regex (its retry limit). */
#include "fuzz.h"
#include "tokenizer/tokenizer.h"

static Tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    GrpoErr err;
    if (tok_load_files(&tok, FUZZ_ROOT "/fuzz/corpus/tokenizer/tiny_qwen3.json", NULL, &err)) {
        fprintf(stderr, "fuzz_encode: %s\n", err.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    GrpoErr err;
    for (int add_special = 0; add_special <= 1; add_special++) {
        TokIds ids = {0};
        /* the one error encoding may give: the regex engine's backtracking limit */
        if (tok_encode(tok, (const char *)data, size, add_special, &ids, &err)) {
            FUZZ_ASSERT(strstr(err.msg, "the regex search failed (Oniguruma: "));
            tok_ids_free(&ids);
            continue;
        }
        char *s = NULL;
        size_t len = 0;
        FUZZ_ASSERT(tok_decode(tok, ids.ids, ids.n, 0, &s, &len, &err) == 0);
        free(s);
        tok_ids_free(&ids);
    }
    size_t n = size / 4;
    int32_t *ids = malloc(n * sizeof *ids + 1);
    memcpy(ids, data, n * sizeof *ids);
    char *s = NULL;
    size_t len = 0;
    if (tok_decode_generated(tok, ids, n, 1, &s, &len, &err) == 0) free(s);
    free(ids);
    return 0;
}
