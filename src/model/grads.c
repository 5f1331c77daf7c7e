/* model/grads.c — each gradient tensor's write-or-add state in an optimizer step
 * (grads.h). Not here: the gradients' arithmetic (model/transformer.c,
 * model/lora_layers.c) and who owns the buffer (train/model.c). */
#include "model/grads.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"

void grad_state_create(GradState *s, const ParamTable *t, float *data) {
    s->table = t;
    s->data = data;
    s->written = xcalloc(t->n ? (size_t)t->n : 1, 1);
}

void grad_state_free(GradState *s) {
    free(s->written);
    memset(s, 0, sizeof *s);
}

void grad_state_begin(GradState *s) { memset(s->written, 0, (size_t)s->table->n); }

/* The entry starting at offset off (the table's offsets grow with the index). */
static int entry_at(const ParamTable *t, size_t off) {
    int lo = 0, hi = t->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        size_t o = t->entries[mid].offset;
        if (o == off) return mid;
        if (o < off) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int grad_state_take(GradState *s, const float *t, size_t n) {
    if (!s || !t) return 0;
    CHECK(t >= s->data && (size_t)(t - s->data) + n <= s->table->total);
    size_t off = (size_t)(t - s->data);
    int e = entry_at(s->table, off);
    CHECK(e >= 0); /* a gradient pointer that starts no tensor: a view over another buffer */
    int first = !s->written[e];
    for (int i = e; i < s->table->n && s->table->entries[i].offset < off + n; i++) {
        CHECK(s->written[i] == !first); /* fused tensors are reached together */
        s->written[i] = 1;
    }
    return first;
}

void grad_state_settle(GradState *s) {
    const ParamTable *t = s->table;
    for (int e = 0; e < t->n; e++) {
        if (s->written[e]) continue;
        memset(s->data + t->entries[e].offset, 0, sizeof(float) * t->entries[e].numel);
        s->written[e] = 1;
    }
}
