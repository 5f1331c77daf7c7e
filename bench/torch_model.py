#!/usr/bin/python3
"""bench/torch_model.py — the PyTorch peer of bench/bench_model.c's training line:
forward + backward of 4 sequences x 192 target tokens through the random-weight
Qwen2-0.5B shape (bench/torch_generate.py's model), log-probs of every position's
target as logit[target] - logsumexp, loss = their mean, backward into .grad.

Each sequence is 193 tokens with targets at positions 1..192 (bench/torch_grpo_step.py's
train_logprobs), so the 192 predicting positions match bench_model's 4 x 192 targets
(the one extra input token costs 0.5 % more).

Modes, both measured by default: fp32, and bf16 autocast (torch.autocast("cpu",
torch.bfloat16): what TRL's `bf16: true` gives on CPU, weights kept fp32 and cast per
op, matmuls on oneDNN in bf16 where the CPU has bf16 instructions). Same thread count
as ours (--threads, default all cores); a warm-up pass, then the best of --iters.

  /usr/bin/python3 bench/torch_model.py [--layers 24] [--iters 2] [--threads N] [--mode fp32|bf16|both]
prints one line per mode:
  model impl=torch dtype=fp32|bf16 tokens=768 train_s=X tokens_per_s=Y
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_generate import SHAPES, Qwen2  # noqa: E402
from torch_grpo_step import train_logprobs  # noqa: E402

B, T = 4, 192


def fwd_bwd(m, ids):
    logp = train_logprobs(m, ids, 1, T)  # [B, T]
    logp.float().mean().backward()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--mode", default="both", choices=["fp32", "bf16", "both"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    C, _, H, Hkv, Fi, V = SHAPES["qwen2-0.5b"]
    m = Qwen2((C, a.layers, H, Hkv, Fi, V), T + 1)
    params = [m.embed, m.norm] + [t for w in m.layers for t in w.values()]
    for p in params:
        p.requires_grad_(True)
    ids = torch.tensor([[(i * 7919 + b * 104729) % V for i in range(T + 1)] for b in range(B)])
    for mode in ("fp32", "bf16"):
        if a.mode not in ("both", mode):
            continue
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            fwd_bwd(m, ids)  # warm-up
            best = float("inf")
            for _ in range(a.iters):
                for p in params:
                    p.grad = None
                t0 = time.perf_counter()
                fwd_bwd(m, ids)
                best = min(best, time.perf_counter() - t0)
        print(f"model impl=torch dtype={mode} tokens={B * T} train_s={best:.3f} tokens_per_s={B * T / best:.1f}",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
