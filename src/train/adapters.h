/* train/adapters.h — the trainable LoRA adapters of a run: fresh ones with
 * PEFT's initialisation (use_peft, lora_* options) or an adapter directory to
 * continue (--adapter), attached by the trainable model (train/model.c), which
 * then optimises them alone and saves them in PEFT's layout; the base stays
 * frozen. */
#ifndef GRPO_TRAIN_ADAPTERS_H
#define GRPO_TRAIN_ADAPTERS_H

#include "core/check.h"
#include "model/lora_layers.h"
#include "model/transformer.h"
#include "train/args.h"

/* With use_peft or adapter: builds lo and sets m->lora = lo, returns 1; else
 * returns 0 with nothing done; -1 with err on bad options or a bad adapter. */
int train_adapters_attach(LoraLayers *lo, Model *m, const TrainingArgs *a, GrpoErr *err);

/* The plan's line on the adapters: "LoRA r R, alpha A, dropout D on MODULES: P M
 * trainable parameters, base frozen", and with adapter (--adapter's directory) a
 * second line saying the adapter's options are used whatever use_peft and the
 * lora_* options say. */
void train_adapters_describe(const LoraLayers *lo, const char *adapter, char *buf, size_t cap);

#endif
