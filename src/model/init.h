/* model/init.h — random initialisation of a model's parameters, as Hugging Face
 * initialises these architectures: weights of linear layers and the embedding
 * ~ N(0, initializer_range^2), biases 0, RMSNorm weights 1. */
#ifndef GRPO_MODEL_INIT_H
#define GRPO_MODEL_INIT_H

#include <stdint.h>

#include "model/transformer.h"

/* Deterministic in (seed, tensor, element): independent of thread count. */
void model_init_random(Model *m, uint64_t seed, float std);

#endif
