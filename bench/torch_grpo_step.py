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
drawn uniformly from 16 to 128 (draw_lengths: completion i of the step seeded s stops
at 16 + rng_mix(s, i) mod 113, grpo.c's core/rng.h mixer, the rule
bench_grpo_step.c --lengths uniform draws by, so both sides train on the same lengths;
an eos forced there; the group is decoded until its
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

On a GPU (issue 35's GRPO step; bench/gpu_peers.sh): --device cuda --shape qwen2.5-1.5b
--G 64 --completion-tokens 512 --micro-batch 8 --bf16 --gen transformers. --gen
transformers generates with transformers' Qwen2ForCausalLM.generate (bench/torch_hf.py)
from a bf16 model whose weights are copied from the trained ones at each step (in
gen_s); --warmup-tokens shortens the warm-up steps' completions. Each phase is timed
after torch.cuda.synchronize(); the line gains device, gen, completion_tokens,
micro_batch, tokens_per_s (prompt + completion tokens of the step per second),
completion_tokens_per_s and gpu.
"""
import argparse
import copy
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_device import add_device_args, gpu_name, now, open_device  # noqa: E402
from torch_generate import SHAPES, Qwen2, generate  # noqa: E402

PROMPT = "Write a short story about a robot who learns to paint at night.\n"  # 64 bytes, as bench_grpo_step.c
COMPLETION_TOKENS = 128
MICRO_BATCH = 4
EPSILON = 0.2
LENGTH_TARGET = 50
MIN_COMPLETION = 16


def train_logprobs(m, ids, P, n, ckpt=False, fused=None, logits_fp32=False):
    """ids [B, P + n] (right-padded: a causal mask is all they need); returns the
    log-probs [B, n] of ids[:, P:] given what precedes, with autograd (ckpt: each
    layer recomputed in backward). Causal attention over the whole sequence, fused
    (fused_attention) or explicit; None: fused on a GPU. logits_fp32: the logits
    widened to fp32 before the log-softmax (bench/torch_cli.py's scoring of a bf16
    model; training here takes them as autocast gives them)."""
    B, T = ids.shape
    H, Hkv, D = m.H, m.Hkv, m.D
    rep = H // Hkv
    q_dim, kv_dim = H * D, Hkv * D
    cos, sin = m.cos[:T], m.sin[:T]
    causal = torch.full((T, T), float("-inf"), dtype=m.dtype, device=ids.device).triu_(1)
    scale = 1.0 / math.sqrt(D)
    # On the GPU attention is torch's fused kernel (flash attention under bf16), as
    # transformers' default "sdpa" attention runs it: scores materialised by
    # matmul + softmax there would make the peer a strawman. Debian's torch 1.13 has no
    # scaled_dot_product_attention, so the CPU peer keeps the explicit form.
    if fused is None:
        fused = ids.device.type == "cuda"

    def layer(x, w):
        h = m.rmsnorm(x, w["ln1"])
        qkv = F.linear(h, w["w_qkv"], w["b_qkv"])
        q = qkv[..., :q_dim].view(B, T, H, D).transpose(1, 2)
        k = qkv[..., q_dim:q_dim + kv_dim].view(B, T, Hkv, D).transpose(1, 2)
        v = qkv[..., q_dim + kv_dim:].view(B, T, Hkv, D).transpose(1, 2)
        q = m.rope(q, cos, sin)
        k = m.rope(k, cos, sin)
        if fused:
            a = fused_attention(q, k, v).transpose(1, 2).reshape(B, T, q_dim)
        else:
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
    if logits_fp32 and logits.dtype != torch.float64:
        logits = logits.float()
    tgt = ids[:, P:P + n].unsqueeze(-1)
    return logits.gather(-1, tgt).squeeze(-1) - logits.logsumexp(-1)


def fused_attention(q, k, v):
    """Causal GQA attention by F.scaled_dot_product_attention: q [B, H, T, D], k/v
    [B, Hkv, T, D], head h reading kv head h // (H / Hkv); returns [B, H, T, D].
    q and k are brought to v's dtype: RoPE's fp32 tables promote them under autocast
    (transformers casts its tables to the activations' dtype instead)."""
    q, k = q.to(v.dtype), k.to(v.dtype)
    try:  # torch >= 2.5 reads the shared kv heads without copying them
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    except TypeError:
        rep = q.shape[1] // k.shape[1]
        return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                              is_causal=True)


MASK64 = (1 << 64) - 1


def rng_mix(a, b):
    """grpo.c's rng_mix (src/core/rng.c): splitmix64's finalizer applied to a, then
    to the result combined with b; 64-bit wrap-around arithmetic."""
    def fin(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)
    h = fin((a + 0x9E3779B97F4A7C15) & MASK64)
    return fin(h ^ ((b + 0x3C6EF372FE94F82A) & MASK64))


def draw_lengths(seed, G, n):
    """Completion lengths [G] uniform over MIN_COMPLETION..n: bench_grpo_step.c's
    drawn_length, the same numbers for the same seed."""
    span = n - MIN_COMPLETION + 1
    return torch.tensor([MIN_COMPLETION + rng_mix(seed, i) % span for i in range(G)])


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


def generate_completions(m, hm, prompt, G, n, seed, a):
    """[G, n] completions sampled from m's current weights: by our generate() from m
    (or its bf16 copy), or by transformers' generate() from hm after the weights are
    copied in, as a trainer syncs its generation model each step."""
    with torch.inference_mode():
        if hm is not None:
            from torch_hf import hf_generate, load_weights
            load_weights(hm, m)
            return hf_generate(hm, prompt, G, n, seed)
        return generate(bf16_copy(m) if a.bf16 else m, prompt, G, n, seed=seed)


def step(m, hm, ref, params, opt, prompt, G, n, tb, seed, a):
    """One GRPO step with completions of n tokens; returns (gen_s, score_s, ref_s,
    train_s, mean_len, loss). Each phase is timed after the device has finished it."""
    P, dev, mb = prompt.shape[1], prompt.device, a.micro_batch
    t0 = now(dev)
    comp = generate_completions(m, hm, prompt, G, n, seed, a)  # [G, n]
    if a.lengths == "uniform":  # an eos forced at each completion's drawn length
        lens = draw_lengths(seed, G, n)
    else:
        lens = torch.full((G,), n)
    t1 = now(dev)
    texts = [b"".join(tb[i] for i in row[:L]).decode("utf-8", errors="replace")
             for row, L in zip(comp.tolist(), lens.tolist())]
    rewards = torch.tensor([-abs(LENGTH_TARGET - len(t)) for t in texts], dtype=torch.float32)
    adv = ((rewards - rewards.mean()) / (rewards.std() + 1e-4)).to(dev)
    ids = torch.cat([prompt.expand(G, -1), comp], dim=1)
    mask = (torch.arange(n).unsqueeze(0) < lens.unsqueeze(1)).float().to(dev)  # [G, n]
    n_items = float(lens.sum())  # completion tokens of the whole step (dapo's num_items_in_batch)
    batches = []
    for k in range(0, G, mb):  # each micro-batch right-padded to its longest
        w = int(lens[k:k + mb].max())
        batches.append((k, w, ids[k:k + mb, :P + w]))
    t2 = now(dev)
    ref_logp = []
    if a.beta > 0:
        with torch.inference_mode():
            ref_logp = [train_logprobs(ref, x, P, w).float() for _, w, x in batches]
    t3 = now(dev)
    for p in params:
        p.grad = None
    losses = []
    for i, (k, w, x) in enumerate(batches):
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.bf16):
            logp = train_logprobs(m, x, P, w, ckpt=a.ckpt).float()
        ratio = torch.exp(logp - logp.detach())
        adv_k = adv[k:k + mb].unsqueeze(1)
        per_token = -torch.min(ratio * adv_k, torch.clamp(ratio, 1 - EPSILON, 1 + EPSILON) * adv_k)
        if a.beta > 0:
            d = ref_logp[i] - logp
            per_token = per_token + a.beta * (torch.exp(d) - d - 1)
        loss = (per_token * mask[k:k + mb, :w]).sum() / n_items
        loss.backward()
        losses.append(loss.detach())  # read once at the end: no wait on the GPU per micro-batch
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    total = sum(x.item() for x in losses)
    t4 = now(dev)
    return t1 - t0, t2 - t1, t3 - t2, t4 - t3, float(lens.float().mean()), total


def parse_args():
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
    ap.add_argument("--completion-tokens", type=int, default=COMPLETION_TOKENS, help="tokens per completion")
    ap.add_argument("--warmup-tokens", type=int, default=0,
                    help="completion tokens of the warm-up steps (0: --completion-tokens)")
    ap.add_argument("--micro-batch", type=int, default=MICRO_BATCH, help="sequences per training micro-batch")
    ap.add_argument("--gen", default="ours", choices=["ours", "transformers"],
                    help="generation by torch_generate.py's generate() or transformers' (bf16 weights under --bf16)")
    add_device_args(ap)
    a = ap.parse_args()
    for name in ("G", "completion_tokens", "micro_batch"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')}: expected at least 1, got {getattr(a, name)}")
    if a.warmup_tokens < 0 or a.warmup_tokens > a.completion_tokens:
        ap.error(f"--warmup-tokens: expected 0 to --completion-tokens ({a.completion_tokens}), got {a.warmup_tokens}")
    if a.lengths == "uniform" and a.completion_tokens < MIN_COMPLETION:
        ap.error(f"--completion-tokens: --lengths uniform draws from {MIN_COMPLETION} up, got {a.completion_tokens}")
    return a


def main():
    a = parse_args()
    dev = open_device(a.device, a.threads)
    shape = SHAPES[a.shape]
    if a.layers:
        shape = shape[:1] + (a.layers,) + shape[2:]
    V, n = shape[5], a.completion_tokens
    m = Qwen2(shape, len(PROMPT) + n, device=dev)
    hm = None
    if a.gen == "transformers":  # a persistent generation model, re-synced each step
        from torch_hf import hf_model
        hm = hf_model(m)
        if a.bf16:
            hm.to(torch.bfloat16)
    ref = None
    if a.beta > 0:  # the initial weights, frozen, in the dtype the run loads them in
        ref = bf16_copy(m) if a.bf16 else copy.deepcopy(m)
    params = [m.embed, m.norm] + [t for w in m.layers for t in w.values()]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, foreach=True)
    prompt = torch.tensor([list(PROMPT.encode())], device=dev)
    tb = token_bytes(V)
    for w in range(a.warmup):
        step(m, hm, ref, params, opt, prompt, a.G, a.warmup_tokens or n, tb, 100 + w, a)
    g, s, r, t, L, loss = step(m, hm, ref, params, opt, prompt, a.G, n, tb, 1, a)
    impl = "torch-bf16" if a.bf16 else "torch"
    extra = ""
    if dev.type == "cuda" or a.long:
        step_s = g + s + r + t
        extra = (f" device={dev.type} gen={a.gen} completion_tokens={n} micro_batch={a.micro_batch} "
                 f"tokens_per_s={a.G * (len(PROMPT) + n) / step_s:.1f} "
                 f"completion_tokens_per_s={a.G * L / step_s:.1f} gpu={gpu_name(dev).replace(' ', '_')}")
    print(f"grpo_step impl={impl} shape={a.shape} G={a.G} ckpt={a.ckpt} beta={a.beta:g} lengths={a.lengths} "
          f"step_s={g + s + r + t:.3f} gen_s={g:.3f} score_s={s:.3f} ref_s={r:.3f} train_s={t:.3f} mean_len={L:.1f} "
          f"loss={loss:.6g}{extra}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
