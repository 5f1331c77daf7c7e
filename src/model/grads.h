/* model/grads.h — where an optimizer step stands with each tensor of a gradient
 * buffer: written this step, or not yet.
 *
 * A step's first backward to reach a tensor writes its gradient over whatever the
 * buffer held (the weight-gradient products run with beta 0); every later backward
 * of the step adds into it. So no step clears its gradients first, and a tensor
 * reached only by a later micro-batch (an adapter the first pass left off) is still
 * written, never added to last step's values. A tensor that no backward reached is
 * zeroed once, when the step's gradient is read (grad_state_settle).
 *
 * The trainable model (train/model.c) owns the buffer and its state; the passes
 * (model_backward, lora_linear_backward) ask the state through ModelGrads
 * (model/transformer.h) whether to write or add, tensor by tensor. */
#ifndef GRPO_MODEL_GRADS_H
#define GRPO_MODEL_GRADS_H

#include <stddef.h>
#include <stdint.h>

#include "model/params.h"

typedef struct {
    const ParamTable *table; /* the buffer's layout (borrowed) */
    float *data;             /* the buffer, table->total floats (borrowed) */
    uint8_t *written;        /* [table->n]: tensor e holds this step's gradient */
} GradState;

/* State over the buffer data laid out by t; no tensor written. */
void grad_state_create(GradState *s, const ParamTable *t, float *data);
void grad_state_free(GradState *s);
/* A new optimizer step: no tensor written. Touches no gradient. */
void grad_state_begin(GradState *s);
/* For a backward about to put a gradient into t[0, n) — one tensor, or adjacent ones
 * a product fills at once (q|k|v): 1 when this step has not written them yet (the
 * caller writes over them), 0 when it has (the caller adds). Marks them written.
 * s NULL or t NULL: 0 (a buffer without state is always summed into). t must start
 * a tensor of the table, and the tensors it spans must share their state. */
int grad_state_take(GradState *s, const float *t, size_t n);
/* The step's gradient complete: every tensor not yet written is zeroed and marked
 * written (a later call changes nothing, so a sum over processes survives it). */
void grad_state_settle(GradState *s);

#endif
