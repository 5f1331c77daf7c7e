#!/usr/bin/python3
"""bench/torch_grpo_step.py — the PyTorch peer of bench/bench_grpo_step.c: the same
GRPO optimizer step in plain PyTorch fp32 on the same random-weight Qwen2 shapes,
timed the same way (warm-up steps, then one timed step split into generation /
scoring / training).

The step (TRL GRPOTrainer with num_iterations 1, beta 0, loss_type dapo):
  generation  one 64-token prompt, G completions of exactly 128 tokens at temperature
              1.0: bench/torch_generate.py's generate() — prompt prefilled once, its
              keys/values expanded to G rows of a preallocated KV cache, decoding in
              place, torch.multinomial on the whole [G, V] block, inference_mode;
  scoring     decode each completion (byte-level: bytes 0..255, filler "x<id>", as
              bench_grpo_step.c's tokenizer), reward -|50 - len(text)| (`length:50`),
              advantages (r - mean) / (std + 1e-4) over the group;
  training    G/4 micro-batches of 4 sequences (prompt + completion, 192 tokens):
              forward with autograd, hidden states taken only at the 128 completion
              positions before the LM head, log-probs as logit[target] - logsumexp,
              ratio = exp(logp - logp.detach()), clipped surrogate (epsilon 0.2),
              summed and divided by the completion tokens of the whole step (dapo's
              num_items_in_batch), backward (accumulating into .grad); then
              clip_grad_norm_(1.0) and torch.optim.AdamW (lr 1e-6, weight decay 0,
              foreach) — the trainer's defaults.
Fairness: all cores (torch.set_num_threads(os.cpu_count())), no Python loop per
element or token (only per decode step and per layer), q/k/v and gate/up fused GEMMs,
GQA as one batched matmul per layer without repeating keys. Gradient checkpointing
is OFF (nothing is recomputed: the cheaper choice; at micro-batch 4 x 192 tokens the
activations of the Qwen2-0.5B shape fit easily), whereas grpo.c runs with its
default, checkpointing on, unless bench_grpo_step gets --no_ckpt. Entropies are not
computed (grpo.c computes them for its metrics).

--bf16: generation and the training forward under bf16 autocast (TRL's `bf16: true`:
fp32 weights, gradients and AdamW; matmuls in bf16), the loss in fp32.

  /usr/bin/python3 bench/torch_grpo_step.py [--shape small|qwen2-0.5b] [--G 32] [--warmup 1] [--bf16]
prints one line:
  grpo_step impl=torch|torch-bf16 shape=S G=N ckpt=0 beta=0 step_s=X gen_s=.. score_s=.. ref_s=0 train_s=.. mean_len=L
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_generate import SHAPES, Qwen2, generate  # noqa: E402

PROMPT = "Write a short story about a robot who learns to paint at night.\n"  # 64 bytes, as bench_grpo_step.c
COMPLETION_TOKENS = 128
MICRO_BATCH = 4
EPSILON = 0.2
LENGTH_TARGET = 50


def train_logprobs(m, ids, P, n):
    """ids [B, P + n]; returns the log-probs [B, n] of ids[:, P:] given what precedes,
    with autograd. Causal attention over the whole sequence (no cache)."""
    B, T = ids.shape
    H, Hkv, D = m.H, m.Hkv, m.D
    rep = H // Hkv
    q_dim, kv_dim = H * D, Hkv * D
    cos, sin = m.cos[:T], m.sin[:T]
    causal = torch.full((T, T), float("-inf")).triu_(1)
    scale = 1.0 / math.sqrt(D)
    x = F.embedding(ids, m.embed)
    for w in m.layers:
        h = m.rmsnorm(x, w["ln1"])
        qkv = F.linear(h, w["w_qkv"], w["b_qkv"])
        q = qkv[..., :q_dim].view(B, T, H, D).transpose(1, 2)
        k = qkv[..., q_dim:q_dim + kv_dim].view(B, T, Hkv, D).transpose(1, 2)
        v = qkv[..., q_dim + kv_dim:].view(B, T, Hkv, D).transpose(1, 2)
        q = m.rope(q, cos, sin)
        k = m.rope(k, cos, sin)
        qg = q.reshape(B, Hkv, rep * T, D)
        s = (torch.matmul(qg, k.transpose(-1, -2)) * scale).view(B, Hkv, rep, T, T) + causal
        p = torch.softmax(s.view(B, Hkv, rep * T, T), dim=-1)
        a = torch.matmul(p, v).view(B, H, T, D).transpose(1, 2).reshape(B, T, q_dim)
        x = x + F.linear(a, w["w_o"])
        h = m.rmsnorm(x, w["ln2"])
        gu = F.linear(h, w["w_gu"])
        x = x + F.linear(F.silu(gu[..., :m.F]) * gu[..., m.F:], w["w_down"])
    # only the positions that predict completion tokens go through the LM head
    hc = m.rmsnorm(x[:, P - 1:P - 1 + n], m.norm)
    logits = F.linear(hc, m.embed)  # [B, n, V]
    tgt = ids[:, P:P + n].unsqueeze(-1)
    return logits.gather(-1, tgt).squeeze(-1) - logits.logsumexp(-1)


def token_bytes(V):
    """Bytes of each id under bench_grpo_step.c's tokenizer (specials decode to nothing)."""
    return [bytes([i]) if i < 256 else (b"x%d" % i if i < V - 3 else b"") for i in range(V)]


def step(m, params, opt, prompt, G, V, tb, seed, bf16):
    """One GRPO step; returns (gen_s, score_s, train_s, mean_len)."""
    P = prompt.shape[1]
    t0 = time.perf_counter()
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        comp = generate(m, prompt, G, COMPLETION_TOKENS, seed=seed)  # [G, n]
    t1 = time.perf_counter()
    texts = [b"".join(tb[i] for i in row).decode("utf-8", errors="replace") for row in comp.tolist()]
    rewards = torch.tensor([-abs(LENGTH_TARGET - len(t)) for t in texts], dtype=torch.float32)
    adv = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    t2 = time.perf_counter()
    ids = torch.cat([prompt.expand(G, -1), comp], dim=1)
    n_items = G * COMPLETION_TOKENS  # completion tokens of the whole step (no eos: all 128)
    for p in params:
        p.grad = None
    for k in range(0, G, MICRO_BATCH):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logp = train_logprobs(m, ids[k:k + MICRO_BATCH], P, COMPLETION_TOKENS).float()
        ratio = torch.exp(logp - logp.detach())
        a = adv[k:k + MICRO_BATCH].unsqueeze(1)
        per_token = -torch.min(ratio * a, torch.clamp(ratio, 1 - EPSILON, 1 + EPSILON) * a)
        (per_token.sum() / n_items).backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, float(comp.shape[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="small", choices=list(SHAPES))
    ap.add_argument("--G", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (TRL's bf16: true)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    shape = SHAPES[a.shape]
    V = shape[5]
    m = Qwen2(shape, len(PROMPT) + COMPLETION_TOKENS)
    params = [m.embed, m.norm] + [t for w in m.layers for t in w.values()]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, foreach=True)
    prompt = torch.tensor([list(PROMPT.encode())])
    tb = token_bytes(V)
    for w in range(a.warmup):
        step(m, params, opt, prompt, a.G, V, tb, seed=100 + w, bf16=a.bf16)
    g, s, t, L = step(m, params, opt, prompt, a.G, V, tb, seed=1, bf16=a.bf16)
    impl = "torch-bf16" if a.bf16 else "torch"
    print(f"grpo_step impl={impl} shape={a.shape} G={a.G} ckpt=0 beta=0 step_s={g + s + t:.3f} gen_s={g:.3f} "
          f"score_s={s:.3f} ref_s=0.000 train_s={t:.3f} mean_len={L:.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
