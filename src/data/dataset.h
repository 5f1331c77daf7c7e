/* data/dataset.h — prompt datasets in JSON lines, rendered and tokenized the
 * way TRL's GRPOTrainer does, and a seeded, resumable, epoch-aware order.
 *
 * A dataset file has one JSON object per line (blank lines are skipped). Its
 * `prompt` is either
 *   - a string ("standard" format): used as text as it is, or
 *   - a list of {"role": ..., "content": ...} messages ("conversational"):
 *     rendered with the tokenizer's chat template and add_generation_prompt
 *     (TRL: maybe_apply_chat_template).
 * Every other column (e.g. `answer`) travels with the example in `row`, so
 * reward functions receive them (TRL passes every column as a keyword list).
 * Prompt text is tokenized without special tokens (TRL: add_special_tokens=
 * False) and left-truncated to the last max_prompt_length tokens.
 *
 * Errors name the file and line: "data.jsonl:7: 'prompt' must be ...".
 * Nothing here prints or exits. */
#ifndef GRPO_DATA_DATASET_H
#define GRPO_DATA_DATASET_H

#include <jansson.h>
#include <stdint.h>

#include "core/check.h"
#include "tokenizer/tokenizer.h"

/* TRL's GRPOConfig.max_prompt_length default. */
#define DATASET_DEFAULT_MAX_PROMPT_LENGTH 512

typedef struct {
    json_t *row;            /* owned: the parsed line, every column incl. `prompt` */
    const json_t *prompt;   /* borrowed from row: the original `prompt` value */
    int conversational;     /* 1 when `prompt` is a message list */
    long line;              /* 1-based line number in the file */
    /* Filled by dataset_tokenize (NULL / 0 before): */
    char *prompt_text;      /* owned: the rendered prompt (whole, never truncated) */
    int32_t *prompt_ids;    /* owned: [n_prompt_ids] the ids after left truncation */
    int n_prompt_ids;
    int n_prompt_ids_full;  /* ids before truncation */
    int truncated;          /* 1 when ids were dropped from the left */
} DatasetExample;

typedef struct {
    char *path;             /* owned: the file name, for messages */
    DatasetExample *ex;     /* [n] in file order */
    int n;
    char **columns;         /* owned: [n_columns] every column of any row (`prompt` too), in first-seen
                               order: the dataset's columns, which reward functions get for every row */
    int n_columns;
} Dataset;

/* Reads (io/jsonl.h; "-" is standard input) and validates every line of `path`.
 * On success *d owns the examples; on error *d is left empty (nothing to free)
 * and err names path:line and what was expected. A file with no examples is an
 * error. */
int dataset_load(Dataset *d, const char *path, GrpoErr *err);
/* open-r1's prompt (src/open_r1/grpo.py, make_conversation): every row's `prompt`
 * becomes [{"role": "system", "content": system_prompt} when system_prompt is not
 * NULL, {"role": "user", "content": row[prompt_column]}], replacing a `prompt` the
 * row had, and its `messages` column is dropped, as open-r1 drops it. The column must
 * hold a string ("data.jsonl:3: no 'problem' column for the user message
 * (dataset_prompt_column; the row has question, answer)"). */
typedef struct {
    const char *system_prompt;   /* NULL: no system message */
    const char *prompt_column;   /* open-r1's dataset_prompt_column */
} DatasetConversation;

/* dataset_load with each row made into open-r1's conversation first (conv NULL:
 * dataset_load itself). */
int dataset_load_conversation(Dataset *d, const char *path, const DatasetConversation *conv, GrpoErr *err);

/* The same from rows[n] already in memory (borrowed; the dataset takes its own
 * references), e.g. a one-prompt dataset built from the command line. `name`
 * stands for the path in messages, row i (0-based) for line i+1. */
int dataset_from_rows(Dataset *d, const char *name, json_t *const *rows, int n, GrpoErr *err);

/* Renders and tokenizes every prompt with tok. max_prompt_length <= 0 keeps
 * all tokens. chat_kwargs (a JSON object or NULL) are more chat template
 * variables (TRL's chat_template_kwargs). Returns -1 with "path:line: ..." if a template fails. May be
 * called again (e.g. with another tokenizer); earlier results are replaced. */
int dataset_tokenize(Dataset *d, Tokenizer *tok, int max_prompt_length, const json_t *chat_kwargs,
                     GrpoErr *err);

/* After dataset_tokenize: the longest tokenized prompt among the first n examples
 * (all when n <= 0 or n > d->n), for planning generation memory. An example whose
 * prompt has no tokens is an error naming path:line. */
int dataset_longest_prompt(const Dataset *d, int n, int *longest, GrpoErr *err);

/* Frees everything d owns and zeroes it. Safe on a zeroed Dataset. */
void dataset_free(Dataset *d);

/* The order in which examples are visited. A position p is a single integer
 * counting examples since the start of training: epoch = p / n and the index
 * within the epoch is p % n. With shuffle, each epoch visits a permutation
 * drawn from (seed, epoch) alone (Fisher-Yates on a core/rng stream), so a
 * checkpoint that records p resumes with the same examples; without shuffle
 * the order is the file order. */
typedef struct {
    int n;
    int shuffle;
    uint64_t seed;
    long epoch;   /* epoch whose permutation is in perm; -1: none yet */
    int *perm;    /* [n] owned, only with shuffle */
} DatasetSampler;

void dataset_sampler_init(DatasetSampler *s, int n, int shuffle, uint64_t seed);
/* The example index (0..n-1) visited at position p >= 0. */
int dataset_sampler_index(DatasetSampler *s, long position);
void dataset_sampler_free(DatasetSampler *s);

#endif
