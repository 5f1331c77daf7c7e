/* gen/device.h — what the generator's one loop (gen/generate.c) shares with its
 * device form (gen/device.c): a completion's live state and the loop's steps on the
 * GPU. Internal to gen/; the public face is generate.h's GenOpts.device. */
#ifndef GRPO_GEN_DEVICE_H
#define GRPO_GEN_DEVICE_H

#include "core/rng.h"
#include "gen/generate.h"

/* The pick row of a group's first logits (the shared prompt's last row). */
#define GEN_FIRST (-1)

/* Per-completion state while decoding a chunk; live[i].ctx is row i of one block
 * of chunk rows of max_prompt + max_completion_length ids (generate.c's GenRows). */
typedef struct {
    Rng rng;          /* the host sampler's draws */
    int32_t *ctx;     /* prompt + completion, for the repetition penalty */
    int n_ctx;
    int done;
    uint64_t stream;  /* its Philox stream of the seed: rng_mix(stream_id, index) */
    uint64_t words;   /* u32 words drawn from it so far (the device sampler's draw index) */
} Live;

/* The device form's state for g (chunk completions in n_slots cache slots, steps
 * of up to max_rows rows), its bytes added to g->bytes: -1 with err, nothing kept. */
int gen_gpu_create(Generator *g, const GenDevice *dv, int n_slots, int max_rows, GrpoErr *err);
void gen_gpu_free(Generator *g); /* g->gpu NULL: nothing */
/* generate.c's steps (step_prefill, step_share, step_first, step_decode,
 * step_sample) on the device: 0, or -1 with g->err set. */
int gen_gpu_prefill(Generator *g, int slot, const int32_t *prompt, int n, int at);
int gen_gpu_share(Generator *g, int slot, int parent);
int gen_gpu_first(Generator *g, int at, int n);
int gen_gpu_decode(Generator *g, int n, const int *slots, const int32_t *tok, const uint8_t *want, int at);
int gen_gpu_sample(Generator *g, Live *live, const int *which, int n, int32_t *tok, float *logp);

#endif
