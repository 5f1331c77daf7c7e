/* gpu/kernels/mix.cu — TRL's SyncRefModelCallback on the device: the moving KL
 * reference's fp32 weights mixed with the policy's fp32 master weights,
 * ref = alpha * policy + (1 - alpha) * ref, in float as train/model.c's
 * train_model_mix_reference computes it (two products and a sum, each rounded: the
 * PTX build's -ffp-contract=off forms no FMA, as the CPU's C11 build forms none), so
 * the result is the CPU's bits. A grid-stride loop over n: each element alone. */
#include "device.h"

KERNEL void mix_reference(float *ref, const float *policy, u64 n, float alpha) {
    float keep = 1 - alpha; /* the CPU's (1 - a), rounded once */
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < n; i += (u64)grid_dim_x() * block_dim_x())
        ref[i] = alpha * policy[i] + keep * ref[i];
}
