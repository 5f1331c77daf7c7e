/* fuzz/fuzz_dataset.c — data/dataset.h over io/jsonl.h: the input is a dataset
 * file (JSON lines, blank and CRLF lines, string or message-list prompts,
 * extra columns), loaded by dataset_load, then rendered with a chat template
 * and tokenized (assets/byte-tokenizer, whose template is the ChatML one) with
 * left truncation, and walked by the shuffled epoch sampler as training does. */
#include "data/dataset.h"
#include "fuzz.h"

static Tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    GrpoErr err;
    if (tok_load(&tok, FUZZ_ROOT "/assets/byte-tokenizer", &err)) {
        fprintf(stderr, "fuzz_dataset: %s\n", err.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    Dataset d;
    GrpoErr err;
    if (dataset_load(&d, path, &err)) return 0;
    FUZZ_ASSERT(d.n > 0);
    int max_len = size ? 1 + data[0] % 64 : 8;
    /* chat_template_kwargs: none, enable_thinking false or true */
    json_t *kw = size > 1 && data[1] % 3 ? json_pack("{s:b}", "enable_thinking", data[1] % 3 == 2) : NULL;
    int tokenized = dataset_tokenize(&d, tok, max_len, kw, &err) == 0;
    json_decref(kw);
    if (tokenized) {
        int longest = 0;
        if (dataset_longest_prompt(&d, 0, &longest, &err) == 0) FUZZ_ASSERT(longest <= max_len);
        for (int i = 0; i < d.n; i++)
            FUZZ_ASSERT(d.ex[i].n_prompt_ids <= max_len && d.ex[i].n_prompt_ids <= d.ex[i].n_prompt_ids_full);
    }
    DatasetSampler s;
    dataset_sampler_init(&s, d.n, 1, size);
    for (long p = 0; p < 3L * d.n && p < 64; p++) {
        int i = dataset_sampler_index(&s, p);
        FUZZ_ASSERT(i >= 0 && i < d.n);
    }
    dataset_sampler_free(&s);
    dataset_free(&d);
    return 0;
}
