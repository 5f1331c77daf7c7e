/* train/adapters.c — a run's trainable LoRA adapters (adapters.h). */
#include "train/adapters.h"

#include <stdio.h>
#include <string.h>

#include "core/text.h"
#include "model/lora.h"

int train_adapters_attach(LoraLayers *lo, Model *m, const TrainingArgs *a, GrpoErr *err) {
    if (!a->use_peft && !a->adapter) return 0;
    if (a->adapter) {
        if (lora_layers_load(lo, a->adapter, m, a->seed, err)) return -1;
    } else {
        LoraSpec spec = {a->lora_r, a->lora_alpha, a->lora_dropout, a->use_rslora, 0};
        if (lora_parse_targets(a->lora_target_modules.v, a->lora_target_modules.n, &spec.targets, err)) return -1;
        lora_layers_create(lo, &m->cfg, &spec, a->seed);
        lora_init_peft(lo, a->seed);
    }
    m->lora = lo;
    return 1;
}

void train_adapters_describe(const LoraLayers *lo, const char *adapter, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "LoRA r %d, alpha %g%s, dropout %g on", lo->spec.r, lo->spec.alpha,
                                lo->spec.use_rslora ? " (rslora)" : "", lo->spec.dropout);
    for (int m = 0; m < LORA_N_MODULES && n < cap; m++)
        if (lo->spec.targets & 1u << m) n += (size_t)snprintf(buf + n, cap - n, " %s", lora_module_names[m]);
    size_t count = 0;
    for (int i = 0; i < lo->table.n; i++) count += lo->table.entries[i].numel;
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, ": %.2f M trainable parameters, base frozen", count / 1e6);
    char shown[160];
    if (adapter && n < cap) /* TRL trains a PeftModel given as its model whatever use_peft says; so does --adapter */
        snprintf(buf + n, cap - n, "\n  continuing --adapter %s: its r, alpha, dropout and targets, whatever use_peft "
                 "and the lora_* options say (as TRL trains a PeftModel given as the model)",
                 text_escaped(shown, sizeof shown, adapter, 120));
}
