"""bench/gpu_counts.py — the figures issue 35's GPU targets are read against, with no
torch: the GPU's published peaks (for MFU and the decode bandwidth bound) and the FLOP
and byte counts of the Qwen2 shapes. The PyTorch peers use them through
torch_device.py and tools/gpu_check/bench_lines.py reads grpo.c's own timings against
the same functions, so both sides of a ratio are counted alike.
"""

# Dense bf16 tensor-core peak of an H100 SXM (989.4 TFLOP/s without sparsity, NVIDIA's
# H100 datasheet); the H200 has the same compute. Issue 35's MFU target is against it.
PEAK_BF16_TFLOPS = 989.0

# HBM bandwidth by the name torch reports (NVIDIA's datasheets): H100 SXM 3.35 TB/s,
# H100 NVL 3.9, H100 PCIe 2.0, H200 4.8. The first entry whose words all appear wins.
PEAK_TBS_BY_NAME = [
    (("H200",), 4.8),
    (("H100", "NVL"), 3.9),
    (("H100", "PCIe"), 2.0),
    (("H100",), 3.35),
]


def peak_tbs(name):
    """HBM bandwidth in TB/s of the GPU called name, or 0 when it is not in the table."""
    for words, tbs in PEAK_TBS_BY_NAME:
        if all(w in name for w in words):
            return tbs
    return 0.0


def train_flops(shape, B, T, n_logits):
    """FLOPs of one forward + backward of B sequences of T tokens whose last n_logits
    positions go through the LM head (model FLOPs: recomputation is not counted).
      6 x (trunk matmul weights) x B*T            every token through every layer
    + 6 x V*C x B*n_logits                         the tied LM head, logit positions only
    + 6 x L*H*D*T^2 x B                            attention: QK^T and PV are 2*T^2*D
                                                   each per head forward, half of it
                                                   under the causal mask, x3 with backward
    Biases, norms, RoPE, softmax and SwiGLU's elementwise work are left out (< 1 %)."""
    C, L, H, Hkv, Fi, V = shape
    D = C // H
    per_layer = C * (H + 2 * Hkv) * D + H * D * C + 3 * C * Fi
    return 6 * L * per_layer * B * T + 6 * V * C * B * n_logits + 6 * L * H * D * T * T * B


def param_count(shape):
    """Every weight of the tied Qwen2 shape (embedding counted once; biases and norms in)."""
    C, L, H, Hkv, Fi, V = shape
    D = C // H
    qkv = (H + 2 * Hkv) * D
    per_layer = C * qkv + qkv + H * D * C + 3 * C * Fi + 2 * C
    return V * C + L * per_layer + C


def decode_step_bytes(shape, G, ctx_mean, bytes_per_el=2):
    """Bytes one decode step must read at least: every weight once (the tied head reads
    the whole V x C matrix) and, per sequence, the cached keys and values of ctx_mean
    positions in each layer (L x 2 x Hkv*D values per position)."""
    C, L, H, Hkv, Fi, V = shape
    D = C // H
    weights = param_count(shape) * bytes_per_el
    kv = G * ctx_mean * L * 2 * Hkv * D * bytes_per_el
    return weights, kv
