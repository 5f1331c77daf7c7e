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
GQA as one batched matmul per layer without repeating keys, logits only for the
completion positions (as TRL's logits_to_keep). Entropies are not computed (grpo.c
computes them for its metrics).

--ckpt 1: torch.utils.checkpoint around each layer (non-reentrant), what
gradient_checkpointing gives a transformers model — the pair of grpo.c's default
(checkpointing on); --ckpt 0 (the default) the pair of its --no_ckpt.

--beta B > 0: the KL term of TRL (k3: exp(ref - logp) - (ref - logp) - 1, times beta)
against a frozen reference, whose log-probs are one no-grad forward per micro-batch
(ref_s). The reference is a copy of the initial weights held in the dtype a user
loads it in: bf16 under --bf16 (a bf16-weights forward is faster than an autocast one
over fp32 weights, which casts every weight per forward), fp32 otherwise.

--lengths uniform: realistic completion lengths. Each completion stops at a length
drawn uniformly from 16 to 128 (an eos forced there; the group is decoded until its
longest stops, as HF generate does, so generation costs the same as fixed lengths);
each micro-batch is right-padded to its longest sequence (TRL pads; its padding_free
is for SFT), the loss masked to the real tokens and divided by the step's real
completion tokens. --lengths fixed (the default): every completion 128 tokens.

--bf16: generation from a bf16 copy of the weights made at the start of each step
(vLLM's or transformers' bf16 model; the copy's cost is in gen_s), the training
forward and backward under bf16 autocast over fp32 weights (TRL's `bf16: true`:
fp32 weights, gradients and AdamW; matmuls in bf16), the loss in fp32.

  /usr/bin/python3 bench/torch_grpo_step.py [--shape small|qwen2-0.5b] [--G 32] [--warmup 1] [--bf16]
                                            [--ckpt 0|1] [--beta B] [--lengths fixed|uniform] [--layers L]
prints one line:
  grpo_step impl=torch|torch-bf16 shape=S G=N ckpt=0|1 beta=B lengths=fixed|uniform step_s=X gen_s=.. score_s=..
            ref_s=.. train_s=.. mean_len=L loss=..
"""
import argparse
import copy
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_generate import SHAPES, Qwen2, generate  # noqa: E402

PROMPT = "Write a short story about a robot who learns to paint at night.\n"  # 64 bytes, as bench_grpo_step.c
COMPLETION_TOKENS = 128
MICRO_BATCH = 4
EPSILON = 0.2
LENGTH_TARGET = 50
MIN_COMPLETION = 16


def train_logprobs(m, ids, P, n, ckpt=False):
    """ids [B, P + n] (right-padded: a causal mask is all they need); returns the
    log-probs [B, n] of ids[:, P:] given what precedes, with autograd (ckpt: each
    layer recomputed in backward). Causal attention over the whole sequence."""
    B, T = ids.shape
    H, Hkv, D = m.H, m.Hkv, m.D
    rep = H // Hkv
    q_dim, kv_dim = H * D, Hkv * D
    cos, sin = m.cos[:T], m.sin[:T]
    causal = torch.full((T, T), float("-inf"), dtype=m.dtype).triu_(1)
    scale = 1.0 / math.sqrt(D)

    def layer(x, w):
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
        return x + F.linear(F.silu(gu[..., :m.F]) * gu[..., m.F:], w["w_down"])

    x = F.embedding(ids, m.embed)
    for w in m.layers:
        x = checkpoint(layer, x, w, use_reentrant=False) if ckpt else layer(x, w)
    # only the positions that predict completion tokens go through the LM head
    hc = m.rmsnorm(x[:, P - 1:P - 1 + n], m.norm)
    logits = F.linear(hc, m.embed)  # [B, n, V]
    tgt = ids[:, P:P + n].unsqueeze(-1)
    return logits.gather(-1, tgt).squeeze(-1) - logits.logsumexp(-1)


def bf16_copy(m):
    """A no-grad bf16 copy of m's current weights (model.to(torch.bfloat16))."""
    c = copy.copy(m)
    with torch.no_grad():
        c.embed, c.norm = m.embed.detach(), m.norm.detach()
        c.layers = [{k: v.detach() for k, v in w.items()} for w in m.layers]
        return c.to_bf16()


def token_bytes(V):
    """Bytes of each id under bench_grpo_step.c's tokenizer (specials decode to nothing)."""
    return [bytes([i]) if i < 256 else (b"x%d" % i if i < V - 3 else b"") for i in range(V)]


def step(m, ref, params, opt, prompt, G, V, tb, seed, a):
    """One GRPO step; returns (gen_s, score_s, ref_s, train_s, mean_len, loss)."""
    P, n = prompt.shape[1], COMPLETION_TOKENS
    t0 = time.perf_counter()
    with torch.inference_mode():
        comp = generate(bf16_copy(m) if a.bf16 else m, prompt, G, n, seed=seed)  # [G, n]
    if a.lengths == "uniform":  # an eos forced at each completion's drawn length
        lens = torch.randint(MIN_COMPLETION, n + 1, (G,), generator=torch.Generator().manual_seed(seed))
    else:
        lens = torch.full((G,), n)
    t1 = time.perf_counter()
    texts = [b"".join(tb[i] for i in row[:L]).decode("utf-8", errors="replace")
             for row, L in zip(comp.tolist(), lens.tolist())]
    rewards = torch.tensor([-abs(LENGTH_TARGET - len(t)) for t in texts], dtype=torch.float32)
    adv = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    ids = torch.cat([prompt.expand(G, -1), comp], dim=1)
    mask = (torch.arange(n).unsqueeze(0) < lens.unsqueeze(1)).float()  # [G, n]
    n_items = float(lens.sum())  # completion tokens of the whole step (dapo's num_items_in_batch)
    batches = []
    for k in range(0, G, MICRO_BATCH):  # each micro-batch right-padded to its longest
        w = int(lens[k:k + MICRO_BATCH].max())
        batches.append((k, w, ids[k:k + MICRO_BATCH, :P + w]))
    t2 = time.perf_counter()
    ref_logp = []
    if a.beta > 0:
        with torch.inference_mode():
            ref_logp = [train_logprobs(ref, x, P, w).float() for _, w, x in batches]
    t3 = time.perf_counter()
    for p in params:
        p.grad = None
    total = 0.0
    for i, (k, w, x) in enumerate(batches):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logp = train_logprobs(m, x, P, w, ckpt=a.ckpt).float()
        ratio = torch.exp(logp - logp.detach())
        adv_k = adv[k:k + MICRO_BATCH].unsqueeze(1)
        per_token = -torch.min(ratio * adv_k, torch.clamp(ratio, 1 - EPSILON, 1 + EPSILON) * adv_k)
        if a.beta > 0:
            d = ref_logp[i] - logp
            per_token = per_token + a.beta * (torch.exp(d) - d - 1)
        loss = (per_token * mask[k:k + MICRO_BATCH, :w]).sum() / n_items
        loss.backward()
        total += loss.item()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    t4 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, t4 - t3, float(lens.float().mean()), total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="small", choices=list(SHAPES))
    ap.add_argument("--layers", type=int, default=0, help="layers of the shape (0: all), for a quick look")
    ap.add_argument("--G", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--bf16", action="store_true", help="bf16 generation weights, bf16 autocast training")
    ap.add_argument("--ckpt", type=int, default=0, choices=[0, 1], help="torch.utils.checkpoint per layer")
    ap.add_argument("--beta", type=float, default=0.0, help="KL coefficient (0: no reference)")
    ap.add_argument("--lengths", default="fixed", choices=["fixed", "uniform"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    shape = SHAPES[a.shape]
    if a.layers:
        shape = shape[:1] + (a.layers,) + shape[2:]
    V = shape[5]
    m = Qwen2(shape, len(PROMPT) + COMPLETION_TOKENS)
    ref = None
    if a.beta > 0:  # the initial weights, frozen, in the dtype the run loads them in
        ref = bf16_copy(m) if a.bf16 else copy.deepcopy(m)
    params = [m.embed, m.norm] + [t for w in m.layers for t in w.values()]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, foreach=True)
    prompt = torch.tensor([list(PROMPT.encode())])
    tb = token_bytes(V)
    for w in range(a.warmup):
        step(m, ref, params, opt, prompt, a.G, V, tb, 100 + w, a)
    g, s, r, t, L, loss = step(m, ref, params, opt, prompt, a.G, V, tb, 1, a)
    impl = "torch-bf16" if a.bf16 else "torch"
    print(f"grpo_step impl={impl} shape={a.shape} G={a.G} ckpt={a.ckpt} beta={a.beta:g} lengths={a.lengths} "
          f"step_s={g + s + r + t:.3f} gen_s={g:.3f} score_s={s:.3f} ref_s={r:.3f} train_s={t:.3f} mean_len={L:.1f} "
          f"loss={loss:.6g}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
