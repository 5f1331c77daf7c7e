/* cli/gpu_pick.c — the device a generating command runs on (gpu_pick.h). */
#include "cli/gpu_pick.h"

#include <stdio.h>

#include "dist/dist.h"

int cli_gpu_pick(const char *cmd, int use_cpu, const Bf16Options *bf16, GpuDevice *d, int *form, GrpoErr *err) {
    if (use_cpu) return 0;
    char why[256] = "";
    int r = gpu_open_local(d, dist_local_rank(), dist_local_size(), why, sizeof why, err);
    if (r < 0) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return err_set(err, "the GPU: %s (--use_cpu true generates on the CPU)", msg);
    }
    if (r == 0) return 0; /* no GPU here: as before, in silence */
    /* the GPU's layers run bf16 products only (gpu/layer.h, gpu/decode.h); an adapter runs there beside the
     * bf16 base, unmerged (gen_session_open_gpu), where the CPU folds it into fp32 weights */
    const char *fp32 = bf16->held > 0 ? "--bf16_held" : bf16->bf16 == 0 ? "--bf16 false" : NULL;
    if (fp32) {
        fprintf(stderr, "grpo %s: %s: fp32 products, generated on the CPU (the GPU runs bf16 products only; "
                "--use_cpu true chooses the CPU outright)\n", cmd, fp32);
        gpu_close(d);
        return 0;
    }
    *form = WEIGHTS_BF16;
    return 1;
}
