"""bench/torch_device.py — what the PyTorch peers need to run on a GPU as well as on
the CPU: the device choice, timing that waits for the GPU, the GPU's published peaks
(for MFU and the decode bandwidth bound) and the FLOP and byte counts those are read
against. Imported by torch_model.py, torch_generate.py and torch_grpo_step.py; on the
CPU (the default) nothing here changes what they did before.
"""
import time

import torch

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


def add_device_args(ap):
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cpu (default: the CPU bench, unchanged) or cuda (issue 35's GPU peers)")
    ap.add_argument("--long", action="store_true",
                    help="print the GPU run's lines (MFU, bandwidth bound, GPU name) on the CPU too: "
                         "checks those paths where no GPU is (bench/gpu_peers.sh TINY=1)")


def open_device(name, threads):
    """The torch.device to build on. Threads are a CPU setting only: on the GPU torch's
    own default stays (its host threads only launch kernels)."""
    if name == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no CUDA device (torch.cuda.is_available() is False)")
        return torch.device("cuda")
    torch.set_num_threads(threads)
    return torch.device("cpu")


def now(device):
    """Wall time after the device has finished what was queued (kernels run
    asynchronously on a GPU: without the sync a timing measures only the launches)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def gpu_name(device):
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


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
