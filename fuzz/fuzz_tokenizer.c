/* fuzz/fuzz_tokenizer.c — tokenizer/tokenizer.h's loader: the input is a
 * tokenizer.json (model, vocab, merges, added tokens, normalizer,
 * pre-tokenizer with its regex, post-processor, decoder), loaded with
 * tok_load_files and no tokenizer_config.json; a tokenizer that loads is then
 * used (tok_use.h). fuzz_tokenizer_config.c covers the config file. */
#include "tok_use.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    Tokenizer *tok = NULL;
    GrpoErr err;
    if (tok_load_files(&tok, path, NULL, &err)) return 0;
    fuzz_tokenizer_use(tok);
    tok_free(tok);
    return 0;
}
