/* fuzz/fuzz_tokenizer_config.c — tokenizer/tokenizer.h's second file: the input
 * is a tokenizer_config.json (added_tokens_decoder, bos/eos/pad tokens as
 * strings or objects, chat_template as a string or a list of named templates),
 * loaded beside the fixed assets/byte-tokenizer/tokenizer.json; a tokenizer that
 * loads is used (tok_use.h), its chat template rendered. */
#include "tok_use.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    Tokenizer *tok = NULL;
    GrpoErr err;
    if (tok_load_files(&tok, FUZZ_ROOT "/assets/byte-tokenizer/tokenizer.json", path, &err)) return 0;
    fuzz_tokenizer_use(tok);
    tok_free(tok);
    return 0;
}
