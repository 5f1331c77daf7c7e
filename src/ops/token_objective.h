/* ops/token_objective.h — a token-local policy objective given as data: what a
 * token's gradient d objective / d logp needs besides its own log-prob, so that a
 * trainable model can evaluate it wherever the log-probs are (the CPU through
 * LogprobGrad's function, the GPU in a kernel after each chunk of the LM head,
 * with no round trip to the host). The formulas are ops/token_objective_math.h's,
 * one source for both.
 *
 * Per token t of sequence s = seq_of[t] (seq_of NULL: every token of sequence 0),
 * with r = exp(logp - old[t]) (1 without old), A = adv[s], w = w[s] (0 where
 * tmask[t] is 0), e = isw[t] (1 without isw):
 *   clip   d/dlogp of  w e (-min(min(r, delta) A, clamp(r, 1 - eps_low, 1 + eps_high) A))
 *   cispo  d/dlogp of  w e (-sg(min(r, eps_high)) A logp)
 *   sapo   d/dlogp of  w e (-sigmoid(tau (r - 1)) 4 / tau A), tau = tau_pos if A > 0 else tau_neg
 *   nll    -w (a mean negative log-likelihood: SFT)
 * plus, with ref, d/dlogp of w beta (exp(ref - logp) - (ref - logp) - 1) (the k3 KL).
 * That is GRPO's per-token loss at token level (grpo/loss.h, where the weights w
 * and the normalisers come from) and SFT's. */
#ifndef GRPO_OPS_TOKEN_OBJECTIVE_H
#define GRPO_OPS_TOKEN_OBJECTIVE_H

enum { TOKOBJ_CLIP, TOKOBJ_CISPO, TOKOBJ_SAPO, TOKOBJ_NLL };

/* The objective's constants (plain data: a GPU kernel takes them by value). delta 0: none. */
typedef struct {
    int kind;
    double eps_low, eps_high, delta, beta, tau_pos, tau_neg;
} TokenObjectiveParams;

/* The inputs, indexed as LogprobGrad's rows name targets (grpo: CSR over the micro-batch's
 * completion tokens); any pointer but w may be NULL (adv: only where kind is nll). */
typedef struct TokenObjective {
    TokenObjectiveParams p;
    const int *seq_of;          /* [tokens] */
    const double *w, *adv;      /* [sequences] */
    const float *old, *ref;     /* [tokens]: the generating policy's and the reference's log-probs */
    const double *isw;          /* [tokens]: the sampler correction's weights */
    const unsigned char *tmask; /* [tokens]: 0 = a tool's token, gradient 0 */
} TokenObjective;

#ifndef __CUDA__
/* The formulas on the host (ops/token_objective.c; the kernel's are the same source). */
/* l(r) and dl/dr of the ratio-based kinds (clip, sapo) */
void tokobj_surrogate(const TokenObjectiveParams *p, double r, double A, double *l, double *dl_dr);
/* A token's policy term at ratio r: its loss times w e added to *loss; returns its gradient */
double tokobj_term(const TokenObjectiveParams *p, double w, double e, double A, double r, float logp, double *loss);
/* The k3 KL estimate of a token (*kl), its beta w term added to *loss and to g, returned */
double tokobj_kl(const TokenObjectiveParams *p, double w, float logp, float ref_logp, double g, double *loss,
                 double *kl);
/* d objective / d logp of one token (old, ref: its values or NULL; isw: its weight, 1 without) */
double tokobj_grad(const TokenObjectiveParams *p, double w, double A, float logp, const float *old, const float *ref,
                   double isw);
/* dlogprob[i] of the m tokens js[i] from logprob[i] (LogprobGrad's form, o its ctx) */
void tokobj_grads(const TokenObjective *o, const int *js, int m, const float *logprob, float *dlogprob);
#endif

#endif
