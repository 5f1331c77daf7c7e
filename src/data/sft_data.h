/* data/sft_data.h — supervised training examples in JSON lines, tokenized the way
 * TRL's SFTTrainer reads its dataset formats:
 *   {"text": ...}                       language modelling: every token is a target
 *   {"prompt": ..., "completion": ...}  loss on the completion only (completion_only_loss)
 *   {"messages": [{role, content}...]}  the conversation rendered by the chat template,
 *                                       every token a target
 *   {"prompt": [messages], "completion": [messages]}
 *                                       conversational: the prompt rendered with the
 *                                       generation prompt, loss after it (completion_only_loss)
 * Messages go to the template whole (an assistant's tool_calls, tool messages), and a
 * row's "tools" (JSON schemas, or that list as a JSON string) as its tools=, as TRL's
 * SFTTrainer renders them. An eos token is appended to text and string completions
 * (a template ends its turns itself); examples are cut to their first max_length tokens. Errors name the file and line ("data.jsonl:7: ...").
 * Nothing here prints. */
#ifndef GRPO_DATA_SFT_DATA_H
#define GRPO_DATA_SFT_DATA_H

#include <stdint.h>

#include "core/check.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    int32_t *ids;       /* [n] */
    int n;
    int loss_start;     /* tokens at index >= loss_start are predicted (>= 1) */
} SftExample;

/* How examples are read: the tokenizer and the model they are for. */
typedef struct {
    Tokenizer *tok;
    int32_t eos;               /* appended to text and completions (-1: none) */
    int vocab_size;            /* every id must index the model's embedding */
    int max_positions;         /* the model's max_position_embeddings */
    int max_length;            /* tokens kept per example, from the left */
    int completion_only_loss;  /* prompt + completion: the loss on the completion only */
} SftFormat;

typedef struct {
    SftExample *ex;
    int n, cap;
    int longest;               /* tokens of the longest example (>= 2) */
} SftData;

/* Reads path; an example with no token left to learn is an error. */
int sft_data_load(SftData *d, const char *path, const SftFormat *f, GrpoErr *err);
void sft_data_free(SftData *d);

#endif
