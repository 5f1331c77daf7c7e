/* gpu/kernels/kv_write.cu — decoding's new keys and values into a layer's KV cache
 * (gpu/decode.h), as model/kvcache.c's model_decode copies them: row r's k and v
 * (RoPE applied to k already) to position own[r] of slot slots[r]. Copies only: the
 * CPU's bits. A block a row, its threads over the kv_dim values. */
#include "device.h"

/* kc, vc [n_slots, cap, kv_dim]; row r's k at qkv[r ld + k_off ..], v at
 * qkv[r ld + v_off ..] (kv_dim floats each). Grid: n blocks. */
KERNEL void kv_write(float *kc, float *vc, const float *qkv, const int *slots, const int *own, int cap, int kv_dim,
                     int ld, int k_off, int v_off) {
    int r = block_x();
    u64 at = ((u64)slots[r] * cap + own[r]) * kv_dim;
    const float *row = qkv + (u64)r * ld;
    for (int i = thread_x(); i < kv_dim; i += block_dim_x()) {
        kc[at + i] = row[k_off + i];
        vc[at + i] = row[v_off + i];
    }
}
