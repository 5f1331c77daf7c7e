/* reward/reward_openr1_len.c — open-r1's rewards that score a completion's
 * length: cosine (get_cosine_scaled_reward, "Demystifying Long Chain-of-Thought
 * Reasoning", Appendix C.1), length (len_reward, Kimi 1.5's length reward) and
 * soft_overlong_punishment (get_soft_overlong_punishment, DAPO's Eq. 13).
 *
 * Lengths are open-r1's: cosine and length count the completion's characters
 * (Python's len of the text), soft_overlong_punishment its tokens (the ids,
 * with the eos token when it stopped, as TRL passes completion_ids).
 * Correctness is math_openr1_correct (reward_math.c). Not here: the other
 * open-r1 rewards (reward_openr1.c). */
#include <math.h>
#include <stdlib.h>

#include "reward/reward_internal.h"

/* The completion's correctness as open-r1's cosine and len rewards see it:
 * 1, 0, or -1 when the gold `solution` has no LaTeX answer (or is null), which
 * open-r1 skips as "Failed to parse gold solution". A missing column is an
 * error, as it is a KeyError in open-r1. */
static int correctness(const RewardFunc *f, const RewardItem *it, int i, int *out, GrpoErr *err) {
    char num[64];
    const char *gold;
    int r = reward_column_text(f, it, i, "solution", num, &gold, err);
    if (r < 0) return -1;
    *out = r == 1 ? -1 : math_openr1_correct(it->completion, gold);
    return 0;
}

/* ---- cosine ----------------------------------------------------------------- */

static int cosine_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    const OpenR1Params *p = f->state;
    for (int i = 0; i < b->n; i++) {
        int ok;
        if (correctness(f, &b->items[i], i, &ok, err)) return -1;
        if (ok < 0) { /* open-r1: "Skip unparseable examples" with a reward of 1.0 */
            out[i] = 1.0;
            continue;
        }
        double progress = (double)reward_utf8_chars(b->items[i].completion) / p->cosine_max_len_chars;
        double cosine = cos(progress * M_PI);
        /* wrong answers swap the ends: the longest wrong completion is penalised least */
        double lo = ok ? p->cosine_min_value_correct : p->cosine_max_value_wrong;
        double hi = ok ? p->cosine_max_value_correct : p->cosine_min_value_wrong;
        out[i] = lo + 0.5 * (hi - lo) * (1.0 + cosine);
    }
    return 0;
}

static void free_state(RewardFunc *f) { free(f->state); }

int reward_openr1_cosine_init(RewardFunc *f, const OpenR1Params *p, GrpoErr *err) {
    if (p->cosine_max_len_chars < 1)
        return err_set(err, "reward 'cosine': cosine_max_len must be >= 1, got %d", p->cosine_max_len_chars);
    OpenR1Params *st = xmalloc(sizeof *st);
    *st = *p;
    f->state = st;
    f->compute = cosine_compute;
    f->column = "solution"; /* open-r1 reads it as solution[i]: a KeyError without it */
    f->destroy = free_state;
    return 0;
}

/* ---- length: Kimi 1.5's length reward over the completions scored together ---- */

/* lambda = 0.5 - (len - min_len) / (max_len - min_len) over the batch the
 * function is called with (TRL calls it with each process's share of the
 * generation batch; here too); correct (or no gold): lambda, else min(0,
 * lambda); all 0 when every length is the same. */
static int len_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    if (b->n == 0) return 0;
    long lo = 0, hi = 0;
    for (int i = 0; i < b->n; i++) {
        int ok;
        if (correctness(f, &b->items[i], i, &ok, err)) return -1;
        long len = reward_utf8_chars(b->items[i].completion);
        out[i] = ok != 0; /* 1 for correct and for an unparseable gold ("treat as correct") */
        if (i == 0 || len < lo) lo = len;
        if (i == 0 || len > hi) hi = len;
    }
    for (int i = 0; i < b->n; i++) {
        if (hi == lo) {
            out[i] = 0.0;
            continue;
        }
        double lambda = 0.5 - (double)(reward_utf8_chars(b->items[i].completion) - lo) / (double)(hi - lo);
        out[i] = out[i] != 0 ? lambda : lambda < 0 ? lambda : 0.0;
    }
    return 0;
}

int reward_openr1_len_init(RewardFunc *f, GrpoErr *err) {
    f->compute = len_compute;
    f->column = "solution";
    return 0;
}

/* ---- soft_overlong_punishment ---------------------------------------------- */

typedef struct {
    int max_tokens, cache_tokens;
} OverlongState;

/* 0 up to max - cache tokens, then (max - cache - len) / cache down to -1 at max,
 * and -1 beyond it. */
static int overlong_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    const OverlongState *st = f->state;
    long max = st->max_tokens, cache = st->cache_tokens;
    for (int i = 0; i < b->n; i++) {
        long len = b->items[i].n_completion_ids;
        if (len <= max - cache) out[i] = 0.0;
        else if (len <= max) out[i] = (double)(max - cache - len) / (double)cache;
        else out[i] = -1.0;
    }
    return 0;
}

int reward_openr1_overlong_init(RewardFunc *f, const OpenR1Params *p, GrpoErr *err) {
    if (p->max_completion_len_tokens < 0 || p->soft_punish_cache_tokens < 0)
        return err_set(err, "reward 'soft_overlong_punishment': max_completion_len (%d) and soft_punish_cache (%d) "
                       "must be >= 0", p->max_completion_len_tokens, p->soft_punish_cache_tokens);
    OverlongState *st = xmalloc(sizeof *st);
    *st = (OverlongState){p->max_completion_len_tokens, p->soft_punish_cache_tokens};
    f->state = st;
    f->compute = overlong_compute;
    f->destroy = free_state;
    return 0;
}
