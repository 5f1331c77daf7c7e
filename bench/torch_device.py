"""bench/torch_device.py — what the PyTorch peers need to run on a GPU as well as on
the CPU: the device choice and timing that waits for the GPU; the GPU's published
peaks and the FLOP and byte counts (gpu_counts.py) are re-exported from here.
Imported by torch_model.py, torch_generate.py and torch_grpo_step.py; on the CPU (the
default) nothing here changes what they did before.
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the counts live in a torch-free file so that tools/gpu_check/bench_lines.py reads grpo.c's
# timings against the same formulas without importing torch; re-exported for the peers
from gpu_counts import (PEAK_BF16_TFLOPS, PEAK_TBS_BY_NAME, decode_step_bytes, param_count,  # noqa: E402,F401
                        peak_tbs, train_flops)


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
