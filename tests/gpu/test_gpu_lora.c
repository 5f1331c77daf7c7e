/* tests/gpu/test_gpu_lora.c — LoRA adapters on the GPU (gpu/lora.h) against the
 * CPU's (model/lora_layers.c: lora_linear_forward / lora_linear_backward), on the GPU
 * where there is one and on the tests' emulated GPU and cuBLASLt otherwise.
 *
 * A 2-layer config (C 44, 4 heads over 2 KV heads of 12, F 84: inputs whose keep bits
 * end mid-byte), rank 8, every module adapted, A from PEFT's init and B random (PEFT's
 * zero B would hide the whole second product), layer 1 (the layer is in the dropout
 * stream's key); 29 rows packed in 3 sequences. For each fused linear layer (q|k|v,
 * o, gate|up, down): the forward adds to a random y and saves u; the backward adds to
 * random dx and to random dA, dB. With dropout p = 0.25 and keys, with p = 0.25 and no
 * keys (no dropout: the CPU's rule), and with p = 0.
 *
 * Tolerance: the keep bits are the CPU's, bit for bit (drawn on the device from the
 * same Philox streams). The rest are fp32 products of K <= 84 terms summed in
 * cuBLASLt's order (the CPU: its BLAS's), so per tensor |gpu - cpu| <= 1e-5 max|cpu| +
 * 1e-5 |cpu| (a dropped or kept element, a wrong scale or a wrong row, is of the
 * order of the values themselves). The figures seen are printed. Bad input: a dropout
 * probability out of range, dropout without its scratch, each one line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/lora.h"
#include "model/lora_layers.h"
#define GPU_TEST_SEED 3511
#include "gpu_test.h"

enum { C = 44, H = 4, HKV = 2, D = 12, F = 84, R = 8, LAYER = 1, NSEQ = 3, N = 29 };
static const int seq_len[NSEQ] = {7, 15, 7};

static void make_config(ModelConfig *c) {
    memset(c, 0, sizeof *c);
    c->type = MODEL_QWEN2;
    c->hidden_size = C, c->intermediate_size = F, c->n_layers = 2, c->n_heads = H, c->n_kv_heads = HKV;
    c->head_dim = D, c->vocab_size = 64, c->max_position_embeddings = 4096, c->rms_norm_eps = 1e-6f;
}

/* |got - want| <= 1e-5 max|want| + 1e-5 |want| over n values. */
static void compare(const char *what, const float *got, const float *want, size_t n) {
    double top = 0, worst = 0;
    for (size_t i = 0; i < n; i++) top = fmax(top, fabs(want[i]));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= 1e-5 * top + 1e-5 * fabs(want[i]))) bad++;
        worst = isnan(got[i]) ? INFINITY : fmax(worst, e);
    }
    printf("    %-22s %6zu values: max |gpu - cpu| %.3g = %.3g max|cpu|\n", what, n, worst, top > 0 ? worst / top : 0);
    T_CHECK(bad == 0, "%s: %zu of %zu values outside 1e-5 max|cpu| + 1e-5 |cpu| (worst %.3g)", what, bad, n, worst);
}

static float *fetch(CUdeviceptr p, size_t n) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    download(x, p, sizeof(float) * n);
    return x;
}

static CUdeviceptr scratch(size_t bytes) {
    CUdeviceptr p;
    T_CHECK(!gpu_alloc(&dev, &p, bytes, &err), "%s", err.msg);
    return p;
}

/* The batch's rows: sequence and position of each, the sequences' dropout keys. */
static int32_t seq[N], pos[N];
static uint64_t keys[NSEQ] = {0x1234567887654321ULL, 42, 0xfedcba9876543210ULL};

/* Module mod's keep bits in the CPU's mask rows (model/lora_layers.c's mask_offset). */
static size_t cpu_mask_offset(const ModelConfig *cfg, int mod) {
    size_t off = 0;
    for (int m = 0; m < mod; m++) {
        LoraLinear lin;
        int row0, out, in;
        lora_module_geometry(cfg, (LoraModule)m, &lin, &row0, &out, &in);
        off += ((size_t)in + 7) / 8;
    }
    return off;
}

/* One fused linear layer's adapters, forward then backward, CPU against GPU. */
static void check_linear(const LoraLayers *lo, const ModelConfig *cfg, LoraLinear lin, int ldy, int in, int with_keys,
                         CUdeviceptr d_params, CUdeviceptr d_keys, CUdeviceptr d_seq, CUdeviceptr d_pos) {
    static const char *lin_names[] = {"q|k|v", "o", "gate|up", "down"};
    printf("  %s (in %d, out %d)\n", lin_names[lin], in, ldy);
    size_t stride = lora_mask_bytes_per_token(cfg), total = lo->table.total;
    float *x = randoms((size_t)N * in, 1.0f), *y = randoms((size_t)N * ldy, 1.0f);
    float *u = malloc(sizeof(float) * LORA_N_MODULES * N * R);
    float *dy = randoms((size_t)N * ldy, 1.0f), *dx = randoms((size_t)N * in, 1.0f), *grads = randoms(total, 0.1f);
    uint8_t *mask = calloc((size_t)N * stride, 1), ready[LORA_N_MODULES] = {0};
    float *cpu_scratch = malloc(sizeof(float) * N * (F > C ? F : C) * 2), *cpu_du = malloc(sizeof(float) * N * R);
    LoraBatch b = {N, seq, pos, with_keys ? keys : NULL, cpu_scratch, cpu_du, mask, ready};
    CUdeviceptr d_x = upload(x, 4 * (size_t)N * in), d_y = upload(y, 4 * (size_t)N * ldy);
    CUdeviceptr d_dy = upload(dy, 4 * (size_t)N * ldy), d_dx = upload(dx, 4 * (size_t)N * in);
    CUdeviceptr d_grads = upload(grads, 4 * total), d_u = scratch(4 * (size_t)LORA_N_MODULES * N * R);
    CUdeviceptr d_xd = scratch(4 * (size_t)N * in), d_du = scratch(4 * (size_t)N * R);
    CUdeviceptr d_bits[LORA_N_MODULES] = {0};
    lora_linear_forward(lo, cfg, LAYER, lin, y, ldy, x, u, &b);
    lora_linear_backward(lo, cfg, LAYER, lin, dx, dy, ldy, x, u, grads, NULL, &b); /* NULL: added, as the GPU's */

    int drop_on = with_keys && lo->spec.dropout > 0;
    GpuLoraAdapter a[LORA_N_MODULES];
    GpuLoraDropout drop[LORA_N_MODULES];
    for (int mod = 0; mod < LORA_N_MODULES; mod++) { /* the forward, each module in order, masks drawn */
        LoraLinear ml;
        int row0, out, min;
        lora_module_geometry(cfg, (LoraModule)mod, &ml, &row0, &out, &min);
        if (ml != lin || !gpu_lora_view(&a[mod], lo, cfg, LAYER, (LoraModule)mod, d_params, d_grads)) continue;
        drop[mod] = (GpuLoraDropout){0, (float)(1.0 / (1.0 - lo->spec.dropout))};
        if (drop_on) {
            d_bits[mod] = drop[mod].bits = scratch((size_t)N * ((in + 7) / 8));
            T_CHECK(!gpu_lora_dropout_mask(&dev, d_bits[mod], d_keys, d_seq, d_pos, N, in, lo, LAYER, (LoraModule)mod,
                                           &err), "%s", err.msg);
        }
        T_CHECK(!gpu_lora_forward(&dev, &a[mod], d_y, ldy, d_u + 4 * (size_t)mod * N * R, d_x, d_xd, &drop[mod], N,
                                  &err), "%s", err.msg);
    }
    for (int mod = 0; mod < LORA_N_MODULES; mod++) { /* the backward, in the CPU's order */
        LoraLinear ml;
        int row0, out, min;
        lora_module_geometry(cfg, (LoraModule)mod, &ml, &row0, &out, &min);
        if (ml != lin || lo->entry[LAYER][mod] < 0) continue;
        T_CHECK(!gpu_lora_backward(&dev, &a[mod], d_dx, d_dy, ldy, d_x, d_u + 4 * (size_t)mod * N * R, d_du, d_xd,
                                   &drop[mod], N, &err), "%s", err.msg);
        char what[64];
        snprintf(what, sizeof what, "u of %s", lora_module_names[mod]);
        float *got = fetch(d_u + 4 * (size_t)mod * N * R, (size_t)N * R);
        compare(what, got, u + (size_t)mod * N * R, (size_t)N * R);
        free(got);
        if (!d_bits[mod]) continue;
        size_t rb = ((size_t)in + 7) / 8, off = cpu_mask_offset(cfg, mod), differ = 0;
        uint8_t *bits = malloc((size_t)N * rb);
        download(bits, d_bits[mod], (size_t)N * rb);
        for (int n = 0; n < N; n++) differ += memcmp(bits + n * rb, mask + n * stride + off, rb) != 0;
        printf("    keep bits of %-10s %d rows: %zu differ from the CPU's\n", lora_module_names[mod], N, differ);
        T_CHECK(differ == 0, "%s's keep bits: %zu of %d rows differ from the CPU's", lora_module_names[mod], differ, N);
        free(bits);
        gpu_free(&dev, d_bits[mod]);
    }
    float *g_y = fetch(d_y, (size_t)N * ldy), *g_dx = fetch(d_dx, (size_t)N * in), *g_grads = fetch(d_grads, total);
    compare("y (+=)", g_y, y, (size_t)N * ldy);
    compare("dx (+=)", g_dx, dx, (size_t)N * in);
    compare("dA, dB (+=), all", g_grads, grads, total);
    free(g_y), free(g_dx), free(g_grads);
    CUdeviceptr all[] = {d_x, d_y, d_dy, d_dx, d_grads, d_u, d_xd, d_du};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu_free(&dev, all[i]);
    free(x), free(y), free(u), free(dy), free(dx), free(grads), free(mask), free(cpu_scratch), free(cpu_du);
}

static void check_case(double p, int with_keys) {
    printf(" dropout %g, %s\n", p, with_keys ? "with keys" : "no keys (no dropout)");
    ModelConfig cfg;
    make_config(&cfg);
    LoraSpec spec = {R, 16.0, p, 0, (1u << LORA_N_MODULES) - 1};
    LoraLayers lo;
    lora_layers_create(&lo, &cfg, &spec, 0x5eedULL);
    lora_init_peft(&lo, 7);
    for (int i = 0; i < lo.table.n; i++) /* B random: PEFT's zeros would hide the second product */
        if (strstr(lo.table.entries[i].name, ".lora_B."))
            for (size_t k = 0; k < lo.table.entries[i].numel; k++)
                lo.params[lo.table.entries[i].offset + k] = 0.3f * frand();
    CUdeviceptr d_params = upload(lo.params, 4 * lo.table.total), d_keys = upload(keys, sizeof keys);
    CUdeviceptr d_seq = upload(seq, sizeof seq), d_pos = upload(pos, sizeof pos);
    int QKV = (H + 2 * HKV) * D;
    check_linear(&lo, &cfg, LORA_LIN_QKV, QKV, C, with_keys, d_params, d_keys, d_seq, d_pos);
    check_linear(&lo, &cfg, LORA_LIN_O, C, H * D, with_keys, d_params, d_keys, d_seq, d_pos);
    check_linear(&lo, &cfg, LORA_LIN_GU, 2 * F, C, with_keys, d_params, d_keys, d_seq, d_pos);
    check_linear(&lo, &cfg, LORA_LIN_DOWN, C, F, with_keys, d_params, d_keys, d_seq, d_pos);
    if (p > 0 && with_keys) { /* bad input: one line each */
        GpuLoraAdapter a;
        gpu_lora_view(&a, &lo, &cfg, LAYER, LORA_Q, d_params, 0);
        GpuLoraDropout drop = {d_keys, 1.0f}; /* any non-zero bits pointer: dropout on */
        T_CHECK(gpu_lora_forward(&dev, &a, 0, 0, d_params, d_params, 0, &drop, N, &err) == -1 &&
                    strstr(err.msg, "xd"), "dropout without its scratch was not refused (%s)", err.msg);
        printf("  refused: %s\n", err.msg);
        lo.spec.dropout = 1.0;
        T_CHECK(gpu_lora_dropout_mask(&dev, d_keys, d_keys, d_seq, d_pos, N, C, &lo, LAYER, LORA_Q, &err) == -1 &&
                    strstr(err.msg, "p 1"), "dropout p = 1 was not refused (%s)", err.msg);
        printf("  refused: %s\n", err.msg);
    }
    gpu_free(&dev, d_params), gpu_free(&dev, d_keys), gpu_free(&dev, d_seq), gpu_free(&dev, d_pos);
    lora_layers_free(&lo);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    for (int s = 0, n = 0; s < NSEQ; s++)
        for (int t = 0; t < seq_len[s]; t++, n++) seq[n] = s, pos[n] = t;
    check_case(0.25, 1);
    check_case(0.25, 0);
    check_case(0.0, 1);
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_lora", check_all);
}
