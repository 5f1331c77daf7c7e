/* core/suggest.h — did-you-mean: which of the names a program knows a person most
 * likely meant by one it does not (an option, a command, a reward). */
#ifndef GRPO_CORE_SUGGEST_H
#define GRPO_CORE_SUGGEST_H

/* The name among cands[0..n) that `name` most likely stands for, or NULL when none
 * is close enough to suggest. Names are compared as words split at '_' and '-'
 * (case ignored): a word equal, a prefix of the other ("grad" for "gradient", the
 * candidate's "r" for "rank"), a typo of one or two letters; a few common
 * abbreviations are read out ("lr" learning_rate, "bs" batch_size and alone
 * per_device_train_batch_size, "wd"
 * weight_decay, "ckpt" checkpoint; HF generate's max_new_tokens and
 * num_return_sequences); and the whole name within a few typos (insertions,
 * deletions, substitutions, adjacent swaps). Ties go to the earlier candidate, so
 * a caller lists its own names before aliases. */
const char *suggest_name(const char *name, const char *const *cands, int n);

/* How close `name` is to `cand` (0: nothing alike; 1: the same words), the measure
 * suggest_name ranks by; it suggests above 0.5. */
double suggest_score(const char *name, const char *cand);

#endif
