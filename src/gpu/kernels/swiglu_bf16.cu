/* gpu/kernels/swiglu_bf16.cu — mixed precision's SwiGLU backward, as ops/swiglu.c's
 * swiglu_backward_bf16: the gate/up values the forward kept in bf16 (gu16, widened
 * exactly), the gradient rounded to bf16 as it is written, since the gate/up
 * product's two backward products read it in bf16 (gpu/layer_train.c). One pass
 * over the N x F pairs, a grid-stride loop; sigmoid() from swiglu.cu,
 * f32_to_bf16_rne() from bf16.cu (all.cu includes them first). */
#include "device.h"
#include "kmath.h"

/* dgu16[N, 2F] = [d u s (1 + g (1 - s)) | d g s] rounded, s = sigmoid(g), g and u
 * from gu16[N, 2F]; written over. */
KERNEL void swiglu_backward_bf16(unsigned short *dgu16, const float *dout, const unsigned short *gu16, int N, int F) {
    u64 total = (u64)N * F;
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < total; i += (u64)grid_dim_x() * block_dim_x()) {
        u64 n = i / F, f = i % F, row = n * 2 * F;
        float g = f32_from_bits((unsigned)gu16[row + f] << 16), u = f32_from_bits((unsigned)gu16[row + F + f] << 16);
        float d = dout[i], s = sigmoid(g);
        dgu16[row + F + f] = f32_to_bf16_rne(d * (g * s));
        dgu16[row + f] = f32_to_bf16_rne(d * u * s * (1.0f + g * (1.0f - s)));
    }
}
