/* cli/cmd_merge.c — `grpo merge --model BASE --adapter DIR --output_dir OUT`: a
 * PEFT LoRA adapter folded into its base model (W += scaling · B A, as PEFT's
 * merge_and_unload), written as a full Hugging Face model directory: the
 * base's tensors in their own dtype (or --dtype), its tokenizer and generation
 * files copied through. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "core/text.h"
#include "cli/commands.h"
#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/lora.h"
#include "model/model_io.h"

typedef struct {
    const char *model_dir, *adapter, *output_dir;
    int dtype;
} MergeArgs;

static const char *const DTYPE_NAMES[] = {"auto", "float32", "bfloat16", "float16", NULL};

#define A(f) offsetof(MergeArgs, f)
static const OptSpec merge_options[] = {
    {"model", OPT_STR, A(model_dir), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED | OPT_MODEL_PATH,
     "the base model directory (HF layout)"},
    {"adapter", OPT_STR, A(adapter), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED,
     "a PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors)"},
    {"output_dir", OPT_STR, A(output_dir), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED, "directory to create"},
    {"dtype", OPT_ENUM, A(dtype), 0, NULL, OPT_NO_RANGE, DTYPE_NAMES, NULL, 0,
     "stored tensor dtype (auto: each tensor's dtype in the base)"},
};
#undef A

/* Every adapted weight stays finite in the dtype it is written in (F16 ends at
 * 65504): else err names the weight, as a non-finite fp32 merge is (lora_merge). */
static int merged_fits(const LoraAdapter *lora, const Model *m, int dtype, GrpoErr *err) {
    for (int i = 0; i < lora->n; i++) {
        const ParamEntry *e = &m->table.entries[lora->pairs[i].param];
        int d = dtype >= 0 ? dtype : e->src_dtype;
        if (d != ST_F16 && d != ST_BF16) continue;
        const float *w = m->params + e->offset;
        for (size_t k = 0; k < e->numel; k++) {
            float back = d == ST_F16 ? st_f16_to_f32(st_f32_to_f16(w[k])) : st_bf16_to_f32(st_f32_to_bf16(w[k]));
            if (!isfinite(back))
                return err_set(err, "%s: merged into '%s', the adapter gives %g (value %zu of %zu), beyond %s's range: "
                               "choose --dtype float32", lora->dir, e->name, w[k], k, e->numel, st_dtype_name(d));
        }
    }
    return 0;
}

int cmd_merge(int argc, char **argv) {
    MergeArgs a;
    OptGroup g = OPT_GROUP(merge_options, 0);
    opts_defaults(&g, 1, &a);
    int rc = args_parse("merge", "--model DIR --adapter DIR --output_dir DIR [--dtype auto|float32|bfloat16|float16]",
                        argc, argv, &g, 1, &a);
    if (rc) {
        args_free();
        return rc == 1 ? 0 : rc;
    }
    GrpoErr err;
    if (fs_exists(a.output_dir)) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s: already exists; choose a new --output_dir", a.output_dir);
        args_free();
        return cli_fail("merge", msg);
    }
    cli_setup_threads();
    Model m;
    LoraAdapter lora;
    if (model_load(&m, a.model_dir, &err)) {
        args_free();
        return cli_fail("merge", err.msg);
    }
    if (lora_load(&lora, a.adapter, &m, &err)) {
        model_free(&m);
        args_free();
        return cli_fail("merge", err.msg);
    }
    static const int dtypes[] = {-1, ST_F32, ST_BF16, ST_F16};
    if (lora_merge(&lora, &m, &err) || merged_fits(&lora, &m, dtypes[a.dtype], &err)) {
        lora_free(&lora);
        model_free(&m);
        args_free();
        return cli_fail("merge", err.msg);
    }
    ModelSaveOpts so;
    model_save_opts_default(&so);
    so.dtype = dtypes[a.dtype];
    so.copy_from = a.model_dir;
    rc = model_save(&m, a.output_dir, &so, &err);
    char shown[300];
    if (!rc)
        fprintf(stderr, "grpo merge: wrote %s (%d adapted weights, r %d, scaling %g)\n",
                text_escaped(shown, sizeof shown, a.output_dir, 200), lora.n, lora.r,
                lora.scaling);
    lora_free(&lora);
    model_free(&m);
    args_free();
    return rc ? cli_fail("merge", err.msg) : 0;
}
