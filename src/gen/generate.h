/* gen/generate.h — sampling a GRPO group: G completions of one prompt.
 *
 * The prompt is prefilled once into a cache slot that the completions share
 * (share_prefix), and completions are decoded in chunks whose KV-cache memory stays
 * under a limit, so G = 64 or 256 fits where one batch would not.
 *
 * Samples do not depend on chunking or batch size: completion i of a group draws
 * its uniforms from its own stream rng_mix(stream_id, i) of the seed, one draw per
 * token, and the decode kernels are batch-invariant (ops/matmul_rowwise.c), so its
 * logits are the same bits whatever other sequences share its batch. */
#ifndef GRPO_GEN_GENERATE_H
#define GRPO_GEN_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "gen/sampler.h"
#include "gpu/model.h"
#include "model/kvcache.h"

/* Where a Generator decodes when not on the host Model: a GPU and the model's
 * weights uploaded there (gpu_model_upload, of the same Model: bf16 products). Both
 * are the caller's and outlive the generator. LoRA adapters decode beside the base
 * where model->lora has views (its own upload's, or a trainer's views into its device
 * adapters: read in place at each step, gpu/generate.h). */
typedef struct {
    GpuDevice *dev;
    const GpuModel *model;
} GenDevice;

/* The most distinct eos ids a generation stops on: the model's (MODEL_MAX_EOS) and
 * the tokenizer's (TOK_MAX_EOS) together. */
#define GEN_MAX_EOS 32

typedef struct {
    SamplerOpts sampler;
    int max_completion_length;   /* TRL default 256 */
    uint64_t seed;
    int share_prefix;            /* 1: prefill the prompt once per group (default) */
    int chunk_size;              /* completions decoded together; 0: the most kv_cache_bytes allows */
    size_t kv_cache_bytes;       /* memory limit of the generation KV cache */
    int n_eos;
    int32_t eos_ids[GEN_MAX_EOS];
    const char *chat_template_kwargs; /* a JSON object's text or NULL: more chat template variables
                                         for the prompts (gen/pretrained.c renders them) */
    const char *tools_json;      /* NULL, or a JSON list of tool schemas (the `tools` file, tools/tool_args.h): the
                                    prompts' tools= where a row has no `tools` column; not an option of its own */
    const char *chat_template;   /* NULL, or a Jinja template set on the session's tokenizer before its
                                    prompts are rendered: the prompt options' (gen/options.h), not an
                                    option of its own */
    int weights;                 /* the WeightForm the model is loaded in (model/transformer.h): nothing trains
                                    it; set from the bf16 options, not an option of its own */
    const GenDevice *device;     /* NULL: decode on the host Model; else on this GPU (gen/device.c), the same
                                    loop, streams and options; resolved by the command, not an option */
} GenOpts;

/* The declared defaults (gen/options.c: gen_options, seed_option), prefix shared. */
void gen_opts_default(GenOpts *o);
/* Sets o's eos ids to the union of a[na] and b[nb] (the model's config and the
 * tokenizer's), in that order, without duplicates or negative ids. Returns -1
 * (o's eos ids unchanged) when the union has more than GEN_MAX_EOS ids. */
int gen_opts_set_eos(GenOpts *o, const int32_t *a, int na, const int32_t *b, int nb, GrpoErr *err);

typedef struct {
    int32_t *ids;      /* completion tokens; ends with the eos token when stopped */
    float *logp;       /* [n] each token's log-probability under the distribution it was drawn from
                          (sampler_sample_logp: the sampling log-probs), or NULL */
    int n;
    int stopped;       /* 1: ended by an eos token; 0: truncated at max_completion_length */
    uint8_t *mask;     /* with turns (GenTurns): [n] 1 for the model's tokens, 0 for the ones a turn
                          appended (TRL's tool_mask); NULL without */
    int n_turns;       /* turns appended */
} Completion;

/* Multi-turn generation (tool calling, tools/): when completion `index` of a group
 * ends a turn with an eos token, turn_end sees its ids so far and may hand back
 * ids to append — the tool results and the next assistant header — after which
 * the model goes on (TRL's _tool_call_loop). It returns the count (> 0; *ids
 * valid until the next call), 0 to end the completion there, -1 on an error
 * (its own to report). Appended ids are in the context, masked out (mask 0), and
 * draw nothing from the completion's random stream, so samples still do not
 * depend on chunking. The completion (the model's ids and the appended ones)
 * stays within max_completion_length, as TRL's: ids that would pass it end the
 * completion instead; the model's last turn is cut at it. turn_end must give the
 * same ids for the same completion whatever the order it is called in. */
typedef struct {
    int (*turn_end)(void *ctx, int index, const Completion *c, const int32_t **ids);
    void *ctx;
} GenTurns;

/* Overlapped turns (gen_set_overlap), on the same ctx as turn_end: turn_begin
 * answers as turn_end does, or GEN_TURN_PENDING when the answer comes later
 * from turn_wait — meanwhile the completion waits aside and the others go on
 * decoding. turn_wait hands back one pending turn's answer (*index its
 * completion's; the count, 0 or -1 as turn_end's) in any order, or
 * GEN_TURN_PENDING when none is done yet (block 0; block 1 waits for one).
 * Each answer must be what turn_end would give: then samples do not depend on
 * when the answers arrive (a waiting row's cache slot and random stream are its
 * own, its ids decoded on their own when they come). */
typedef struct {
    int (*turn_begin)(void *ctx, int index, const Completion *c, const int32_t **ids);
    int (*turn_wait)(void *ctx, int block, int *index, const int32_t **ids);
} GenOverlap;

#define GEN_TURN_PENDING (-2)

void completion_free(Completion *c);

typedef struct {
    Model *m;
    GenOpts opts;
    int max_prompt;    /* longest prompt planned for */
    int chunk;         /* completions per decode batch */
    int cap;           /* tokens per cache slot */
    KVCache kv;
    DecodeState ds;
    SamplerScratch *scratch;   /* one per thread: omp_get_max_threads() at gen_create */
    int n_scratch;             /* sampling runs on at most this many threads */
    float *logits;     /* [max(chunk, 1), V] */
    float *first;      /* [V] the prompt's last logits */
    struct GenRows *rows; /* a chunk's per-row decoding state (generate.c), planned here so that
                             gen_group_part allocates nothing */
    GenTurns turns;    /* turn_end NULL: one turn (gen_set_turns) */
    GenOverlap overlap; /* turn_begin NULL: turns made in the decode batch (gen_set_overlap) */
    size_t bytes;      /* planned memory (the device's too, on a GPU) */
    struct GenGpu *gpu; /* the device form's state (gen/device.c); NULL: the host's kv, ds, scratch, logits */
    GrpoErr err;       /* why the device failed when gen_group_part returned -1 for it (msg empty otherwise) */
    long steps;        /* decode steps made so far, each one batch of a chunk's rows (a count for tests and benches) */
} Generator;

/* Plans the chunk size from opts (kv_cache_bytes) and allocates everything: on the
 * host, or with opts->device on that GPU (its KV caches, step buffers and sampler
 * scratch in device memory, checked against the GPU's free memory; m gives the
 * config, its weights are the device model's). Fails with a message stating the
 * numbers when even one completion does not fit. */
int gen_create(Generator *g, Model *m, const GenOpts *opts, int max_prompt, GrpoErr *err);
void gen_free(Generator *g);
/* Generates with turns from now on (t NULL: one turn again); plans the decode
 * scratch for a turn's appended ids (up to max_completion_length rows). */
void gen_set_turns(Generator *g, const GenTurns *t);
/* With turns set, makes them overlapped from now on (both callbacks set; NULL: off). */
void gen_set_overlap(Generator *g, const GenOverlap *ov);

/* Samples G completions of prompt[n_prompt] (1 <= n_prompt <= max_prompt) into
 * out[G] (each out[i].ids malloc'd; free with completion_free). stream_id names
 * this prompt occurrence, e.g. rng_mix(step, prompt_index). Returns the number of
 * tokens generated (the model's), or -1 when a turn_end failed (out freed) or the
 * device did (g->err says why; its msg is empty for a turn). */
long gen_group(Generator *g, const int32_t *prompt, int n_prompt, int G, uint64_t stream_id,
               Completion *out);
/* Completions first .. first+G-1 of that group into out[G]: each the same as
 * gen_group's (its own stream), so a group can be split between processes.
 * Allocates nothing: out[i].ids and .logp (and .mask with turns) are the caller's
 * buffers of max_completion_length, written in place — a trainer's rollout reuses
 * them step after step (.mask is set to NULL without turns). Returns as gen_group;
 * on -1 every out[i] is left empty (n 0). */
long gen_group_part(Generator *g, const int32_t *prompt, int n_prompt, int first, int G, uint64_t stream_id,
                    Completion *out);

/* One group's part in gen_groups: completions first .. first+n-1 (n >= 1) of the
 * group of prompt[n_prompt] and stream stream_id, into out[n] (gen_group_part's). */
typedef struct {
    const int32_t *prompt;
    int n_prompt;
    int first, n;
    uint64_t stream_id;
    Completion *out;
} GenGroup;

/* Several groups' parts decoded together: a chunk takes rows from as many groups
 * as it has room for (each group's prompt prefilled once into a cache slot of its
 * own beside its completions' with the shared prefix), so G = 8 groups decode at
 * the rate of a chunk's rows rather than 8 (decoding is weight-bandwidth bound).
 * With turns a chunk holds one group only (their callbacks see a group's indices).
 * Every completion is the one gen_group_part gives alone (its own stream; the
 * decode kernels are batch-invariant). Returns the tokens generated over all, or
 * -1 as gen_group_part (every part's out left empty). */
long gen_groups(Generator *g, const GenGroup *groups, int n_groups);
/* How many whole groups of G completions one chunk decodes together (>= 1): the
 * count a caller hands gen_groups at once to fill a chunk. */
int gen_groups_per_chunk(const Generator *g, int G);

#endif
