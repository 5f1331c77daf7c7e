/* tokenizer/tokenizer.h — Hugging Face byte-level BPE tokenizers and chat templates.
 *
 * Loads a model directory's tokenizer.json (+ tokenizer_config.json, and
 * generation_config.json for extra eos ids) and encodes/decodes token for token
 * as HF `tokenizers` does for the byte-level BPE family (Qwen2/2.5/3, Llama 3,
 * GPT-2, SmolLM). Chat prompts are rendered from the model's own
 * `chat_template` by a Jinja subset (tokenizer/jinja.h).
 *
 * Errors: every function that can fail on bad input returns -1 and fills a
 * GrpoErr naming the file, the component and what was expected. Nothing here
 * prints or exits.
 *
 * Threads: a Tokenizer holds a word cache and regex scratch, so one Tokenizer
 * must be used by one thread at a time (load one per thread if needed). */
#ifndef GRPO_TOKENIZER_TOKENIZER_H
#define GRPO_TOKENIZER_TOKENIZER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/check.h"

typedef struct Tokenizer Tokenizer;

/* A growable id list; zero-initialise, free with tok_ids_free. */
typedef struct {
    int32_t *ids;
    size_t n, cap;
} TokIds;

void tok_ids_free(TokIds *ids);

/* Loads DIR/tokenizer.json, DIR/tokenizer_config.json (optional) and
 * DIR/generation_config.json (optional). */
int tok_load(Tokenizer **out, const char *model_dir, GrpoErr *err);
/* The same from explicit paths; config_path may be NULL. */
int tok_load_files(Tokenizer **out, const char *tokenizer_json, const char *config_path,
                   GrpoErr *err);
void tok_free(Tokenizer *tok);

/* Appends the ids of text[0..len) to out (out->n is not reset). Added tokens in
 * the text are always recognised; add_special adds what the post-processor adds
 * (e.g. Llama 3.1's <|begin_of_text|>). Invalid UTF-8 is replaced by U+FFFD, one
 * per maximal invalid subsequence (as a UTF-8 TextDecoder / Python's
 * errors="replace" would read the bytes). */
int tok_encode(Tokenizer *tok, const char *text, size_t len, int add_special, TokIds *out,
               GrpoErr *err);

/* Decodes ids into a malloc'd NUL-terminated string (*text, *len). With
 * skip_special, special added tokens are left out. Bytes that do not form
 * valid UTF-8 become U+FFFD. When tokenizer_config.json sets
 * clean_up_tokenization_spaces (Llama 3 does), transformers' clean-up follows:
 * " ." " ?" " !" " ," " ' " " n't" " 'm" " 's" " 've" " 're" lose their space. */
int tok_decode(const Tokenizer *tok, const int32_t *ids, size_t n, int skip_special, char **text,
               size_t *len, GrpoErr *err);

/* Overrides tokenizer_config.json's clean_up_tokenization_spaces (1: apply, 0: not). */
void tok_set_clean_up_spaces(Tokenizer *tok, int on);
/* transformers' clean_up_tokenization over s[0..n) in place; returns the new length. */
size_t tok_clean_up_spaces(char *s, size_t n);

/* The same for ids a model generated: ids the vocabulary does not have (a model's
 * vocab_size is often padded past the tokenizer's, e.g. Qwen2.5's 151936 vs
 * 151665) are left out, as Hugging Face's Rust decoder leaves them out. */
int tok_decode_generated(const Tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                         char **text, size_t *len, GrpoErr *err);
/* Decoding's buffers, kept between calls by a caller that decodes often (the
 * rollout decodes every completion of every round): tok_decode_generated_in on a
 * kept work allocates only the text it returns, once the buffers have grown to the
 * longest completion; with work NULL it makes and frees one of its own (what
 * tok_decode_generated does). One work per thread at a time. */
typedef struct TokDecodeWork TokDecodeWork;
TokDecodeWork *tok_decode_work_new(void);
void tok_decode_work_free(TokDecodeWork *w);
int tok_decode_generated_in(const Tokenizer *tok, TokDecodeWork *work, const int32_t *ids, size_t n,
                            int skip_special, char **text, size_t *len, GrpoErr *err);
/* Token string <-> id over the model vocabulary and the added tokens.
 * tok_token_to_id returns -1 when absent; tok_id_to_token NULL. */
int32_t tok_token_to_id(const Tokenizer *tok, const char *token, size_t len);
const char *tok_id_to_token(const Tokenizer *tok, int32_t id, size_t *len);
int32_t tok_vocab_size(const Tokenizer *tok); /* max id + 1 */
int tok_is_special(const Tokenizer *tok, int32_t id);

/* Special ids from tokenizer_config.json / generation_config.json; -1 when unset.
 * eos_ids lists every id that ends generation (config eos first, then
 * generation_config.json's eos_token_id entries); loading fails past TOK_MAX_EOS. */
#define TOK_MAX_EOS 16
typedef struct {
    int32_t bos, eos, pad;
    int32_t eos_ids[TOK_MAX_EOS];
    int n_eos;
} TokSpecial;
const TokSpecial *tok_special(const Tokenizer *tok);
/* The special token strings from tokenizer_config.json (NULL when unset). */
const char *tok_bos_token(const Tokenizer *tok);
const char *tok_eos_token(const Tokenizer *tok);

/* Chat templates. role is "system", "user", "assistant" (or "tool"). */
typedef struct {
    const char *role;
    const char *content;
} TokMessage;

/* Replaces the model's chat_template with template_text (open-r1's chat_template
 * option, as it sets tokenizer.chat_template), parsed first: -1 with the parse
 * error when it is not a template this engine runs, the old one kept. */
int tok_set_chat_template(Tokenizer *tok, const char *template_text, GrpoErr *err);
/* The chat template in use (the option's, else tokenizer_config.json's); NULL: none. */
const char *tok_chat_template(const Tokenizer *tok);

/* Renders msgs with the model's chat_template into a malloc'd string.
 * kwargs (a JSON object, or NULL): more template variables, as TRL's
 * chat_template_kwargs, e.g. {"enable_thinking": false} for Qwen3; they
 * override the special tokens, not messages or add_generation_prompt. */
int tok_chat_render(const Tokenizer *tok, const TokMessage *msgs, int n_msgs,
                    int add_generation_prompt, const json_t *kwargs, char **out, GrpoErr *err);
/* The same with messages a JSON list of message objects handed to the template
 * whole, as transformers does: an assistant's `tool_calls`, a tool message's
 * `name`, content null. Tools go in kwargs as {"tools": [JSON schemas...]}
 * (apply_chat_template's tools=). Each message needs a string role and a
 * content that is a string, null or absent; else -1 naming messages[i]. */
int tok_chat_render_json(const Tokenizer *tok, const json_t *messages, int add_generation_prompt,
                         const json_t *kwargs, char **out, GrpoErr *err);

#endif
