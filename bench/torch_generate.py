#!/usr/bin/python3
"""bench/torch_generate.py — the PyTorch peer of bench/bench_generate.c: the same
group generation (one 64-token prompt, G completions of exactly 128 tokens, sampled
at temperature 1.0 with no other filter) on the same random-weight Qwen2 shapes in
fp32, timed the same way (completion tokens / wall time, prompt prefill included).

Run with Debian's python3-torch (1.13; `/usr/bin/python3`). transformers is not
used: the Qwen2 forward is written here with torch ops, as HF computes it (RMSNorm,
fused-rotate-half RoPE, GQA attention with q/k/v bias, SwiGLU MLP, tied LM head).

What makes it a fair peer rather than a strawman:
  - torch.inference_mode(), torch.set_num_threads(all cores) — the C side uses all
    cores through OpenMP;
  - q/k/v are one fused weight [(H+2Hkv)D, C] with its bias (one addmm), gate/up one
    fused weight [2F, C]: the same GEMM count as grpo.c;
  - the prompt is prefilled once (batch 1) and its keys/values expanded to G rows of a
    KV cache preallocated for prompt + completion (as HF generate expands the prompt
    for num_return_sequences, but without recomputing it G times); decoding writes
    each step's key/value in place — no torch.cat, so no O(T^2) copying;
  - GQA without repeat_interleave: q is viewed as [G, Hkv, H/Hkv, D] so one batched
    matmul per layer reads each cached key once for all heads sharing it;
  - RoPE cos/sin precomputed for every position once, outside the timed region;
  - sampling is torch.multinomial(softmax(logits / T), 1) on the whole [G, V] block,
    no per-sequence Python loop, and the next tokens stay on the tensor side (no
    .item() per step). Python overhead is ~15 ops per layer per step; at 24 layers
    that is a few ms against steps of tens to hundreds of ms.
F.scaled_dot_product_attention does not exist in 1.13, so attention is matmul +
softmax, which at one query row per sequence is what a fused kernel would do too.

--dtype picks the precision:
  fp32      the weights and the KV cache in fp32;
  bf16      the peer a user would run (issue 36): the model cast to bf16 as
            model.to(torch.bfloat16) does, what transformers' torch_dtype=bfloat16 and
            vLLM load — weights, KV cache, RoPE tables and the mask in bf16; RMSNorm
            computed in fp32 and cast back, and the logits widened to fp32 before
            sampling, as HF's Qwen2 and generate do;
  autocast  fp32 weights under torch.autocast("cpu", torch.bfloat16) (TRL's `bf16: true`
            during training): autocast casts the fp32 weights to bf16 as it goes (issue 36
            measured 118 tokens/s at G = 32 on a 2-core Zen 5 where bf16 weights gave 324). Kept as
            the figure of that set-up, not as the bf16 peer.
--bf16 is --dtype bf16.

  /usr/bin/python3 bench/torch_generate.py [--shape qwen2-0.5b|small|all] [--G N] [--reps R]
                                           [--dtype fp32|bf16|autocast] [--check]
prints one line per case:
  gen impl=torch|torch-bf16|torch-autocast shape=S G=N tokens=T seconds=X tokens_per_s=Y
--check also prints, per case, how far the first decode step's fp32 logits of the same
prompt are from this dtype's (max |difference| and whether the top tokens agree): a
bf16 peer that computed something else would show it there.

On a GPU (issue 35; bench/gpu_peers.sh runs it): --device cuda builds the weights on the
GPU, times after torch.cuda.synchronize() and warms each G up untimed; --G takes a list
(64,8); --new-tokens sets the completion length (512 there); --impl transformers times
transformers' Qwen2ForCausalLM.generate holding the same weights (bench/torch_hf.py,
which first checks both models' fp32 logits agree). A GPU run adds device, new_tokens
and gpu to each gen line and, at G <= 8, a line of the decode bandwidth bound:
  bw impl=I shape=S G=8 gpu=NAME peak_TBs=B weights_GB=W kv_GB_per_step=K step_ms=X
     bound_ms=Y fraction_of_bound=Y/X
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_device import add_device_args, decode_step_bytes, gpu_name, now, open_device, peak_tbs  # noqa: E402

PROMPT_TOKENS = 64
COMPLETION_TOKENS = 128

# name: (hidden, layers, heads, kv_heads, intermediate, vocab) — as bench_generate.c
SHAPES = {
    "qwen2-0.5b": (896, 24, 14, 2, 4864, 151936),
    "small": (256, 4, 8, 4, 768, 32000),
    # issue 35's GPU shapes, from the published config.json files
    # (huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json: hidden_size 896,
    # intermediate_size 4864, num_hidden_layers 24, num_attention_heads 14,
    # num_key_value_heads 2, vocab_size 151936, tie_word_embeddings true, rope_theta
    # 1000000.0, rms_norm_eps 1e-06 — the qwen2-0.5b shape above under its own name;
    # huggingface.co/Qwen/Qwen2.5-1.5B-Instruct/blob/main/config.json, as the base
    # model's: hidden_size 1536, intermediate_size 8960, num_hidden_layers 28,
    # num_attention_heads 12, num_key_value_heads 2, vocab_size 151936,
    # tie_word_embeddings true, rope_theta 1000000.0, rms_norm_eps 1e-06)
    "qwen2.5-0.5b": (896, 24, 14, 2, 4864, 151936),
    "qwen2.5-1.5b": (1536, 28, 12, 2, 8960, 151936),
}
CPU_SHAPES = ("qwen2-0.5b", "small")  # what --shape all runs: the CPU bench's pair
RMS_EPS = 1e-6
ROPE_THETA = 1000000.0


class Qwen2:
    """Random-weight Qwen2 (q/k/v bias, tied embeddings), fp32, HF initialisation:
    linear weights and embedding ~ N(0, 0.02^2), biases 0, norm weights 1."""

    def __init__(self, shape, max_pos, seed=1, device=torch.device("cpu")):
        C, L, H, Hkv, Fi, V = shape
        self.C, self.L, self.H, self.Hkv, self.F, self.V = C, L, H, Hkv, Fi, V
        self.D = C // H
        self.device = device
        # made where they are used (a GPU run never copies them over); the CPU
        # generator gives the same weights as before --device existed
        g = torch.Generator(device=device).manual_seed(seed)
        std = 0.02

        def randn(*s):
            return torch.randn(*s, generator=g, device=device) * std

        def ones(n):
            return torch.ones(n, device=device)

        def zeros(n):
            return torch.zeros(n, device=device)

        D, q, kv = self.D, H * self.D, Hkv * self.D
        self.embed = randn(V, C)  # tied: also the LM head
        self.layers = []
        for _ in range(L):
            self.layers.append(dict(
                ln1=ones(C),
                w_qkv=randn(q + 2 * kv, C), b_qkv=zeros(q + 2 * kv),
                w_o=randn(C, q),
                ln2=ones(C),
                w_gu=randn(2 * Fi, C),
                w_down=randn(C, Fi),
            ))
        self.norm = ones(C)
        inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, D, 2, dtype=torch.float32, device=device) / D))
        ang = torch.outer(torch.arange(max_pos, dtype=torch.float32, device=device), inv_freq)
        emb = torch.cat([ang, ang], dim=-1)  # [max_pos, D]
        self.cos, self.sin = emb.cos(), emb.sin()

    dtype = torch.float32

    def cast(self, dtype):
        """Every weight and the RoPE tables in dtype (HF casts cos/sin to the
        activations' dtype); the cache follows."""
        c = lambda t: t.to(dtype)  # noqa: E731
        self.embed, self.norm = c(self.embed), c(self.norm)
        self.layers = [{k: c(v) for k, v in w.items()} for w in self.layers]
        self.cos, self.sin = c(self.cos), c(self.sin)
        self.dtype = dtype
        return self

    def to_bf16(self):
        """The model in bf16, as model.to(torch.bfloat16)."""
        return self.cast(torch.bfloat16)

    def to_f64(self):
        """The model in float64: the same computation's float64 reference (bench/run.sh's
        bf16 log-prob error)."""
        return self.cast(torch.float64)

    @staticmethod
    def rmsnorm(x, w):
        # HF's Qwen2RMSNorm: the statistics in fp32 (float64 kept), the result back in
        # x's dtype, then the weight (a no-op cast in fp32)
        xf = x if x.dtype == torch.float64 else x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + RMS_EPS)).to(x.dtype) * w

    @staticmethod
    def rope(x, cos, sin):
        # x [B, heads, T, D]; cos/sin [T, D]; HF rotate_half convention
        h = x.shape[-1] // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
        return x * cos + rot * sin

    def forward(self, ids, pos0, k_cache, v_cache):
        """ids [B, T] at positions pos0..pos0+T-1; k_cache/v_cache: per layer
        [B, Hkv, cap, D], written at [pos0, pos0+T). Returns logits of the last
        position [B, V]."""
        B, T = ids.shape
        H, Hkv, D = self.H, self.Hkv, self.D
        rep = H // Hkv
        q_dim, kv_dim = H * D, Hkv * D
        end = pos0 + T
        cos, sin = self.cos[pos0:end], self.sin[pos0:end]
        scale = 1.0 / math.sqrt(D)
        causal = None
        if T > 1:
            # [T, end] additive mask: query t sees keys <= pos0 + t
            causal = torch.full((T, end), float("-inf"), dtype=self.dtype, device=ids.device).triu_(pos0 + 1)
        x = F.embedding(ids, self.embed)  # [B, T, C]
        for li, w in enumerate(self.layers):
            h = self.rmsnorm(x, w["ln1"])
            qkv = F.linear(h, w["w_qkv"], w["b_qkv"])  # [B, T, q+2kv]
            q = qkv[..., :q_dim].view(B, T, H, D).transpose(1, 2)
            k = qkv[..., q_dim:q_dim + kv_dim].view(B, T, Hkv, D).transpose(1, 2)
            v = qkv[..., q_dim + kv_dim:].view(B, T, Hkv, D).transpose(1, 2)
            q = self.rope(q, cos, sin)
            k = self.rope(k, cos, sin)
            kc, vc = k_cache[li], v_cache[li]
            kc[:, :, pos0:end] = k
            vc[:, :, pos0:end] = v
            K, Vv = kc[:, :, :end], vc[:, :, :end]  # [B, Hkv, end, D]
            # GQA: heads sharing a KV head are one batched matmul, no repeat
            qg = q.reshape(B, Hkv, rep * T, D)  # heads h = kvh*rep + r, contiguous per kv head
            s = torch.matmul(qg, K.transpose(-1, -2)) * scale  # [B, Hkv, rep*T, end]
            if causal is not None:
                s = s.view(B, Hkv, rep, T, end) + causal
                s = s.view(B, Hkv, rep * T, end)
            p = torch.softmax(s, dim=-1)
            a = torch.matmul(p, Vv)  # [B, Hkv, rep*T, D]
            a = a.view(B, H, T, D).transpose(1, 2).reshape(B, T, q_dim)
            x = x + F.linear(a, w["w_o"])
            h = self.rmsnorm(x, w["ln2"])
            gu = F.linear(h, w["w_gu"])
            x = x + F.linear(F.silu(gu[..., :self.F]) * gu[..., self.F:], w["w_down"])
        x = self.rmsnorm(x[:, -1], self.norm)
        return F.linear(x, self.embed)  # [B, V]

    def new_cache(self, B, cap):
        e = dict(dtype=self.dtype, device=self.device)
        return ([torch.empty(B, self.Hkv, cap, self.D, **e) for _ in range(self.L)],
                [torch.empty(B, self.Hkv, cap, self.D, **e) for _ in range(self.L)])


def sample(logits, temperature, gen):
    logits = logits.float()  # HF generate widens the last position's logits to fp32
    if temperature != 1.0:  # HF adds no TemperatureLogitsWarper at 1.0
        logits = logits / temperature
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=gen)  # [G, 1]


def generate(model, prompt, G, n_tokens, temperature=1.0, seed=0):
    """G completions of exactly n_tokens (no eos) of each row of prompt [B, P] (prompts
    of one length, decoded together as HF generate does a batch of them with
    num_return_sequences=G); returns [B * G, n], prompt b's completions rows b*G ..."""
    gen = torch.Generator(device=prompt.device).manual_seed(seed)
    B, P = prompt.shape
    cap = P + n_tokens
    # prefill once into a batch-B cache, then expand each prompt's to its G rows
    k1, v1 = model.new_cache(B, P)
    logits = model.forward(prompt, 0, k1, v1)  # [B, V]
    kc, vc = model.new_cache(B * G, cap)
    for li in range(model.L):
        kc[li][:, :, :P] = k1[li].repeat_interleave(G, dim=0)
        vc[li][:, :, :P] = v1[li].repeat_interleave(G, dim=0)
    G = B * G
    logits = logits.repeat_interleave(G // B, dim=0)
    tok = sample(logits, temperature, gen)
    out = torch.empty(G, n_tokens, dtype=torch.long, device=prompt.device)
    out[:, 0:1] = tok
    for t in range(1, n_tokens):
        logits = model.forward(tok, P + t - 1, kc, vc)
        tok = sample(logits, temperature, gen)
        out[:, t:t + 1] = tok
    return out


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="all", choices=["all"] + list(SHAPES), help="all: " + " and ".join(CPU_SHAPES))
    ap.add_argument("--G", default="0", help="group size, or sizes separated by commas (0: 8, 32 and 64)")
    ap.add_argument("--prompts", type=int, default=1,
                    help="P prompts' groups of G decoded together ([P*G] rows a step, as bench_generate --prompts)")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--layers", type=int, default=0, help="layers of the shape (0: all), for a quick look")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "autocast"])
    ap.add_argument("--bf16", action="store_true", help="--dtype bf16 (weights in bf16)")
    ap.add_argument("--check", action="store_true", help="compare the first step's logits with fp32's")
    ap.add_argument("--impl", default="ours", choices=["ours", "transformers"],
                    help="ours: the Qwen2 written here; transformers: Qwen2ForCausalLM.generate (torch_hf.py)")
    ap.add_argument("--new-tokens", type=int, default=COMPLETION_TOKENS, help="tokens generated per completion")
    add_device_args(ap)
    a = ap.parse_args()
    try:
        a.G = [int(g) for g in a.G.split(",")]
    except ValueError:
        ap.error(f"--G: expected a number or numbers separated by commas, got {a.G!r}")
    if a.new_tokens < 1:
        ap.error(f"--new-tokens: expected at least 1, got {a.new_tokens}")
    if a.prompts < 1 or (a.prompts > 1 and a.impl == "transformers"):
        ap.error(f"--prompts: expected at least 1 (more than 1 with --impl ours only), got {a.prompts}")
    if a.impl == "transformers" and a.dtype == "autocast":
        ap.error("--impl transformers: --dtype fp32 or bf16 expected (autocast is the training set-up)")
    return a


def build(a, dtype, name, shape, dev, prompt):
    """The model in dtype and its generate(G, n, seed) -> [G, n]; prints the check lines."""
    model = Qwen2(shape, PROMPT_TOKENS + a.new_tokens, device=dev)
    impl = {"fp32": "torch", "bf16": "torch-bf16", "autocast": "torch-autocast"}[dtype]
    if a.impl == "transformers":
        from torch_hf import check_logits, hf_generate, hf_model
        hm = hf_model(model)
        d, scale = check_logits(hm, model, prompt)
        print(f"check impl=transformers shape={name} vs=ours max_abs_logit_diff={d:.2e} logit_scale={scale:.4f} "
              f"attn={getattr(hm.config, '_attn_implementation', 'unknown')}", flush=True)
        if d > 1e-3 * scale + 1e-5:  # fp32 both: far below this unless the config differs
            raise SystemExit(f"transformers' Qwen2 computes another function than ours (max |logit diff| {d:.3g})")
        del model
        if dtype == "bf16":
            hm.to(torch.bfloat16)
        impl = "transformers" + ("-bf16" if dtype == "bf16" else "")
        return impl, lambda G, n, seed: hf_generate(hm, prompt, G, n, seed)
    if a.check:
        with torch.inference_mode():
            ref_logits = model.forward(prompt[:1], 0, *model.new_cache(1, PROMPT_TOKENS))[0]
    if dtype == "bf16":
        model.to_bf16()
    elif dtype == "autocast":  # trainable weights, as in training
        for w in [model.embed, model.norm] + [t for L in model.layers for t in L.values()]:
            w.requires_grad_(True)
    if a.check:
        with torch.inference_mode(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dtype == "autocast"):
            got = model.forward(prompt[:1], 0, *model.new_cache(1, PROMPT_TOKENS))[0].float()
        d = (got - ref_logits).abs().max().item()
        print(f"check impl={impl} shape={name} max_abs_logit_diff={d:.4f} logit_scale={ref_logits.abs().max().item():.4f} "
              f"top1_same={int(got.argmax() == ref_logits.argmax())} "
              f"top10_overlap={len(set(got.topk(10).indices.tolist()) & set(ref_logits.topk(10).indices.tolist()))}",
              flush=True)
    return impl, lambda G, n, seed: generate(model, prompt, G, n, seed=seed)


def bandwidth_line(impl, name, shape, G, n, seconds, dtype, dev):
    """The G = 8 figure of issue 35: the bytes a decode step must read (weights + the
    cached keys/values of the mean context P + (n-1)/2) over the GPU's bandwidth,
    against the measured seconds per token step (prefill included)."""
    gpu = gpu_name(dev)
    tbs = peak_tbs(gpu)
    w, kv = decode_step_bytes(shape, G, PROMPT_TOKENS + (n - 1) / 2, 4 if dtype == "fp32" else 2)
    step_s = seconds / n
    bound_s = (w + kv) / (tbs * 1e12) if tbs else float("nan")
    print(f"bw impl={impl} shape={name} G={G} gpu={gpu.replace(' ', '_')} peak_TBs={tbs:g} weights_GB={w / 1e9:.3f} "
          f"kv_GB_per_step={kv / 1e9:.4f} step_ms={step_s * 1e3:.3f} bound_ms={bound_s * 1e3:.3f} "
          f"fraction_of_bound={bound_s / step_s:.3f}", flush=True)


def main():
    a = parse_args()
    dtype = "bf16" if a.bf16 else a.dtype
    dev = open_device(a.device, a.threads)
    gpu = dev.type == "cuda"
    long = gpu or a.long
    for name, shape in SHAPES.items():
        if (a.shape == "all" and name not in CPU_SHAPES) or a.shape not in ("all", name):
            continue
        if a.layers:
            shape = shape[:1] + (a.layers,) + shape[2:]
        V = shape[5]
        # prompt p: ids p*64 .. p*64+63 of the sequence bench_generate.c uses (prompt 0 the same whatever P)
        P = a.prompts
        prompt = torch.tensor([[(t * 7919 + 13) % V for t in range(p * PROMPT_TOKENS, (p + 1) * PROMPT_TOKENS)]
                               for p in range(P)], device=dev)
        impl, gen = build(a, dtype, name, shape, dev, prompt)
        n = a.new_tokens
        with torch.inference_mode(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dtype == "autocast"):
            if not gpu:
                gen(2, 4, 99)  # warm-up, as bench_generate.c (all P prompts: a few rows more)
            for G in (8, 32, 64) if a.G == [0] else a.G:
                if gpu:  # kernels picked, the allocator's pool grown for this G
                    gen(G, min(n, 16), 99)
                best = float("inf")
                for r in range(a.reps):
                    t0 = now(dev)
                    out = gen(G, n, 1 + r)
                    best = min(best, now(dev) - t0)
                    assert out.shape == (P * G, n)
                    assert int(out.min()) >= 0 and int(out.max()) < V
                extra = f" device={dev.type} new_tokens={n} gpu={gpu_name(dev).replace(' ', '_')}" if long else ""
                print(f"gen impl={impl} shape={name} G={G} P={P} tokens={P * G * n} seconds={best:.3f} "
                      f"tokens_per_s={P * G * n / best:.1f}{extra}", flush=True)
                if long and G <= 8:
                    bandwidth_line(impl, name, shape, G, n, best, dtype, dev)
        del gen


if __name__ == "__main__":
    sys.exit(main())
