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
                                        [--shape S] [--batch 4] [--prompt-tokens 1] [--completion-tokens 192]
prints one line per mode:
  model impl=torch dtype=fp32|bf16 tokens=768 train_s=X tokens_per_s=Y

--completions "L,L,L,L;L,L,L,L;...": bench/bench_packing.c's realistic-lengths workload
instead (it prints the lengths it drew): micro-batches of a 64-token prompt + L
completion tokens each, right-padded to the micro-batch's longest (as TRL pads), the
log-probs of the completion tokens only (TRL's logits_to_keep), their mean over the
real ones the objective; --ckpt 1 wraps each layer in torch.utils.checkpoint. The
seconds per micro-batch are the median (and range) over every micro-batch and
iteration after a warm-up, as bench_packing times its own; prints one line per mode:
  packing impl=torch dtype=fp32|bf16 ckpt=0|1 median_s=X min_s=.. max_s=.. passes=N

On a GPU (issue 35; bench/gpu_peers.sh): --device cuda --shape qwen2.5-1.5b --batch 8
--prompt-tokens 64 --completion-tokens 512 is a GRPO micro-batch (logits for the 512
completion positions only); attention is F.scaled_dot_product_attention there. It
prints the median and range of --iters passes after --warmup, and the MFU
(bench/torch_device.py's train_flops against 989 TFLOP/s):
  model impl=torch dtype=bf16 device=cuda shape=S batch=B seq=T logit_tokens=.. tokens=..
        train_s=MEDIAN min_s=.. max_s=.. passes=N tokens_per_s=.. tflop_per_pass=..
        tflops=.. mfu=.. peak_tflops=989 gpu=NAME
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_device import PEAK_BF16_TFLOPS, add_device_args, gpu_name, now, open_device, train_flops  # noqa: E402
from torch_generate import SHAPES, Qwen2  # noqa: E402
from torch_grpo_step import train_logprobs  # noqa: E402

B, T = 4, 192


PROMPT = 64


def completions_pass(m, ids, lens, ckpt):
    """One padded micro-batch's training pass: ids [B, PROMPT + max(lens)]."""
    w = max(lens)
    logp = train_logprobs(m, ids, PROMPT, w, ckpt=ckpt).float()  # [B, w]
    mask = (torch.arange(w).unsqueeze(0) < torch.tensor(lens).unsqueeze(1)).float()
    ((logp * mask).sum() / sum(lens)).backward()


def packing_peer(m, params, a):
    batches = [[int(x) for x in b.split(",")] for b in a.completions.split(";")]
    V = m.V
    ids = [torch.tensor([[(i * 7919 + s * 104729 + k * 15485863) % V for i in range(PROMPT + max(lens))]
                         for s in range(len(lens))]) for k, lens in enumerate(batches)]
    for mode in ("fp32", "bf16"):
        if a.mode not in ("both", mode):
            continue
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            completions_pass(m, ids[0], batches[0], a.ckpt)  # warm-up
            times = []
            for _ in range(a.iters):
                for x, lens in zip(ids, batches):
                    for p in params:
                        p.grad = None
                    t0 = time.perf_counter()
                    completions_pass(m, x, lens, a.ckpt)
                    times.append(time.perf_counter() - t0)
        times.sort()
        print(f"packing impl=torch dtype={mode} ckpt={a.ckpt} median_s={times[len(times) // 2]:.3f} "
              f"min_s={times[0]:.3f} max_s={times[-1]:.3f} passes={len(times)}", flush=True)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen2-0.5b", choices=list(SHAPES))
    ap.add_argument("--layers", type=int, default=0, help="layers of the shape (0: all; 24 for qwen2-0.5b)")
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1, help="untimed passes first")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--mode", default="both", choices=["fp32", "bf16", "both"])
    ap.add_argument("--batch", type=int, default=B, help="sequences per pass")
    ap.add_argument("--prompt-tokens", type=int, default=1, help="tokens before the first target (no logits)")
    ap.add_argument("--completion-tokens", type=int, default=T, help="target tokens per sequence (the logits)")
    ap.add_argument("--completions", default="", help="bench_packing's completion lengths: the padded peer")
    ap.add_argument("--ckpt", type=int, default=0, choices=[0, 1], help="with --completions: checkpoint each layer")
    add_device_args(ap)
    a = ap.parse_args()
    for name in ("iters", "batch", "prompt_tokens", "completion_tokens"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')}: expected at least 1, got {getattr(a, name)}")
    if a.completions and a.device != "cpu":
        ap.error("--completions: the packing peer is measured on the CPU only (--device cpu)")
    return a


def timed_passes(m, params, ids, a, dev, mode):
    """Seconds of each of a.iters forward + backward passes after a.warmup untimed ones."""
    P, n = a.prompt_tokens, a.completion_tokens
    times = []
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=mode == "bf16"):
        for i in range(a.warmup + a.iters):
            for p in params:
                p.grad = None
            t0 = now(dev)
            logp = train_logprobs(m, ids, P, n)  # [batch, n]
            logp.float().mean().backward()
            if i >= a.warmup:
                times.append(now(dev) - t0)
    return sorted(times)


def check_attention(m, ids, a):
    """Prints how far the fused attention's fp32 log-probs (what the GPU peer times) are
    from the explicit matmul + softmax form's, on the first two sequences."""
    P, n = a.prompt_tokens, a.completion_tokens
    with torch.no_grad():
        fused = train_logprobs(m, ids[:2], P, n, fused=True)
        explicit = train_logprobs(m, ids[:2], P, n, fused=False)
    d = (fused - explicit).abs().max().item()
    print(f"check attention=fused vs=explicit dtype=fp32 max_abs_logp_diff={d:.2e} logp_scale={explicit.abs().max().item():.3f}",
          flush=True)
    if d > 1e-3:
        raise SystemExit(f"fused attention disagrees with the explicit form (max |logp diff| {d:.3g})")


def main():
    a = parse_args()
    dev = open_device(a.device, a.threads)
    shape = SHAPES[a.shape]
    if a.layers:
        shape = shape[:1] + (a.layers,) + shape[2:]
    V = shape[5]
    Bn, P, n = a.batch, a.prompt_tokens, a.completion_tokens
    m = Qwen2(shape, PROMPT + 128 + 1 if a.completions else P + n, device=dev)
    params = [m.embed, m.norm] + [t for w in m.layers for t in w.values()]
    for p in params:
        p.requires_grad_(True)
    if a.completions:
        return packing_peer(m, params, a)
    ids = torch.tensor([[(i * 7919 + b * 104729) % V for i in range(P + n)] for b in range(Bn)], device=dev)
    if (dev.type == "cuda" or a.long) and hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0
        check_attention(m, ids, a)
    for mode in ("fp32", "bf16"):
        if a.mode not in ("both", mode):
            continue
        times = timed_passes(m, params, ids, a, dev, mode)
        if dev.type == "cpu" and not a.long:  # the CPU bench's line, as before --device existed
            best = times[0]
            print(f"model impl=torch dtype={mode} tokens={Bn * n} train_s={best:.3f} tokens_per_s={Bn * n / best:.1f}",
                  flush=True)
            continue
        med = times[len(times) // 2]
        flops = train_flops(shape, Bn, P + n, n)
        print(f"model impl=torch dtype={mode} device={dev.type} shape={a.shape} batch={Bn} seq={P + n} logit_tokens={Bn * n} "
              f"tokens={Bn * (P + n)} train_s={med:.4f} min_s={times[0]:.4f} max_s={times[-1]:.4f} passes={len(times)} "
              f"tokens_per_s={Bn * (P + n) / med:.1f} tflop_per_pass={flops / 1e12:.2f} tflops={flops / med / 1e12:.1f} "
              f"mfu={flops / med / 1e12 / PEAK_BF16_TFLOPS:.3f} peak_tflops={PEAK_BF16_TFLOPS:g} "
              f"gpu={gpu_name(dev).replace(' ', '_')}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
