/* gen/sampler.h — choosing the next token from logits, with the logits processors
 * Hugging Face `generate` applies when TRL samples completions, in the same order:
 * repetition_penalty, temperature, top_k, top_p, min_p; then a draw from the
 * resulting distribution. temperature == 0 means greedy (argmax).
 *
 * The draw takes its uniform number from the caller, so a completion's random
 * stream (core/rng.h) — not the batch it runs in — decides its tokens. */
#ifndef GRPO_GEN_SAMPLER_H
#define GRPO_GEN_SAMPLER_H

#include <stdint.h>

typedef struct {
    float temperature;          /* TRL default 1.0; 0 = greedy */
    int top_k;                  /* 0 = off */
    float top_p;                /* 1.0 = off */
    float min_p;                /* 0 = off */
    float repetition_penalty;   /* 1.0 = off */
} SamplerOpts;

void sampler_opts_default(SamplerOpts *o);
/* NULL when valid, else a message naming the option and its allowed range. */
const char *sampler_opts_check(const SamplerOpts *o);

typedef struct {
    int V;
    double *z;        /* [V] processed logits */
    double *p;        /* [V] probabilities */
    int32_t *order;   /* [V] */
    uint8_t *seen;    /* [V] repetition marks */
    float *e;         /* [V] unnormalised probabilities (temperature alone) */
} SamplerScratch;

void sampler_scratch_create(SamplerScratch *s, int V);
void sampler_scratch_free(SamplerScratch *s);

/* The final distribution over the vocabulary: probs[V] (zeros for removed tokens).
 * context[n_context] is every token so far (prompt and completion), for the
 * repetition penalty. For temperature 0 the distribution is one-hot on the argmax. */
void sampler_distribution(double *probs, const float *logits, int V, const SamplerOpts *o,
                          const int32_t *context, int n_context, SamplerScratch *s);

/* Draws a token with uniform u in [0, 1) by inverse CDF in token-id order. */
int32_t sampler_sample(const float *logits, int V, const SamplerOpts *o, const int32_t *context,
                       int n_context, double u, SamplerScratch *s);
/* The same draw, and *logp (when not NULL) the log-probability of the drawn token
 * under the distribution it was drawn from: after every processor (temperature,
 * top_k, top_p, min_p, repetition_penalty), as vLLM's processed_logprobs, which
 * TRL asks for as its sampling_per_token_logps. 0 for greedy decoding. */
int32_t sampler_sample_logp(const float *logits, int V, const SamplerOpts *o, const int32_t *context,
                            int n_context, double u, SamplerScratch *s, float *logp);

#endif
