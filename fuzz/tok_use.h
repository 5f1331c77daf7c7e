/* fuzz/tok_use.h — what the tokenizer targets do with a tokenizer that loaded:
 * a fixed text (ASCII, whitespace runs, added-token strings, non-ASCII, invalid
 * UTF-8) encoded with and without special tokens and decoded back (also as
 * generated ids), every id up to 4096 looked up both ways, the special ids
 * checked and the chat template rendered when there is one. */
#ifndef GRPO_FUZZ_TOK_USE_H
#define GRPO_FUZZ_TOK_USE_H

#include "fuzz.h"
#include "tokenizer/tokenizer.h"

static const char tok_use_text[] = "Hello, world! 12345  tabs\tand\nnewlines <|im_end|> <|endoftext|> "
                           "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x99\x82 bad \xff\xfe\xc3 end's";

static void fuzz_tokenizer_use(Tokenizer *tok) {
    GrpoErr err;
    for (int add_special = 0; add_special <= 1; add_special++) {
        TokIds ids = {0};
        if (tok_encode(tok, tok_use_text, sizeof tok_use_text - 1, add_special, &ids, &err) == 0) {
            for (int skip = 0; skip <= 1; skip++) {
                char *s = NULL;
                size_t len = 0;
                if (tok_decode(tok, ids.ids, ids.n, skip, &s, &len, &err) == 0) free(s);
                s = NULL;
                if (tok_decode_generated(tok, ids.ids, ids.n, skip, &s, &len, &err) == 0) free(s);
            }
        }
        tok_ids_free(&ids);
    }
    int32_t v = tok_vocab_size(tok);
    FUZZ_ASSERT(v >= 0);
    for (int32_t id = -1; id <= v && id < 4096; id++) {
        size_t len = 0;
        const char *t = tok_id_to_token(tok, id, &len);
        if (t) FUZZ_ASSERT(tok_token_to_id(tok, t, len) >= 0);
        (void)tok_is_special(tok, id);
    }
    const TokSpecial *sp = tok_special(tok);
    FUZZ_ASSERT(sp->n_eos >= 0 && sp->n_eos <= TOK_MAX_EOS);
    TokMessage msgs[2] = {{"system", "Be terse."}, {"user", "What is 2 + 2?"}};
    char *out = NULL;
    GrpoErr cerr;
    if (tok_chat_render(tok, msgs, 2, 1, NULL, &out, &cerr) == 0) free(out);
}

#endif
