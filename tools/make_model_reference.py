#!/usr/bin/python3
"""Float64 PyTorch reference for the decoder-only transformer implemented by grpo.c.

Builds three tiny random models (qwen2, llama with llama3 rope scaling + BF16
weights, qwen3 with q/k norm and explicit head_dim), runs a padded batch through
a plain-torch float64 re-implementation of the Hugging Face modeling code
(modeling_llama.py / modeling_qwen2.py / modeling_qwen3.py semantics) and writes

    tests/fixtures/<name>/config.json            HF-style config
    tests/fixtures/<name>/model.safetensors      weights (F32; BF16 for llama), HF names
    tests/fixtures/<name>/reference.safetensors  inputs, logits, logprobs, entropy,
                                                 loss and grad.<param> (F64)

Usage (Debian's torch lives in /usr/bin/python3):
    /usr/bin/python3 tools/make_model_reference.py [--out tests/fixtures]
    /usr/bin/python3 tools/make_model_reference.py --check   # regenerate + byte compare

See docs/reference-fixtures.md.
"""

import argparse
import filecmp
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch

torch.set_num_threads(1)  # fixed reduction order -> reproducible float64 bytes

B, T = 3, 7
TEMPERATURE = 0.7
# row 0 fully real, row 1 left-padded by 2, row 2 right-padded by 3
MASK = [[1, 1, 1, 1, 1, 1, 1],
        [0, 0, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 0, 0, 0]]

# --------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------

CONFIGS = {
    "qwen2": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 48,
        "max_position_embeddings": 128,
        "max_window_layers": 2,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "sliding_window": 128,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 96,
    },
    "llama": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "head_dim": 8,
        "hidden_act": "silu",
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 48,
        "max_position_embeddings": 128,
        "mlp_bias": False,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 1,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "factor": 4.0,
            "high_freq_factor": 4.0,
            "low_freq_factor": 1.0,
            "original_max_position_embeddings": 32,
            "rope_type": "llama3",
        },
        "rope_theta": 100.0,
        "tie_word_embeddings": False,
        # weights in model.safetensors are BF16 for this fixture
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": 96,
    },
    "qwen3": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "head_dim": 12,
        "hidden_act": "silu",
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 48,
        "max_position_embeddings": 128,
        "max_window_layers": 2,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 96,
    },
}

SEEDS = {"qwen2": 1001, "llama": 2002, "qwen3": 3003}
STORE_BF16 = {"qwen2": False, "llama": True, "qwen3": False}


def head_dim_of(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def has_qkv_bias(cfg):
    return cfg["model_type"] == "qwen2" or bool(cfg.get("attention_bias", False))


def has_o_bias(cfg):
    return cfg["model_type"] != "qwen2" and bool(cfg.get("attention_bias", False))


def has_qk_norm(cfg):
    return cfg["model_type"] == "qwen3"


# --------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------

def param_specs(cfg):
    """[(hf_name, shape, kind)] in HF module order; kind picks the init law."""
    Hd, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh, nkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim_of(cfg)
    s = [("model.embed_tokens.weight", (V, Hd), "embed")]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        s.append((p + "input_layernorm.weight", (Hd,), "norm"))
        for nm, out in (("q", nh * D), ("k", nkv * D), ("v", nkv * D)):
            s.append((p + "self_attn.%s_proj.weight" % nm, (out, Hd), "proj"))
            if has_qkv_bias(cfg):
                s.append((p + "self_attn.%s_proj.bias" % nm, (out,), "bias"))
        s.append((p + "self_attn.o_proj.weight", (Hd, nh * D), "proj"))
        if has_o_bias(cfg):
            s.append((p + "self_attn.o_proj.bias", (Hd,), "bias"))
        if has_qk_norm(cfg):
            s.append((p + "self_attn.q_norm.weight", (D,), "norm"))
            s.append((p + "self_attn.k_norm.weight", (D,), "norm"))
        s.append((p + "post_attention_layernorm.weight", (Hd,), "norm"))
        s.append((p + "mlp.gate_proj.weight", (I, Hd), "proj"))
        s.append((p + "mlp.up_proj.weight", (I, Hd), "proj"))
        s.append((p + "mlp.down_proj.weight", (Hd, I), "proj"))
    s.append(("model.norm.weight", (Hd,), "norm"))
    if not cfg["tie_word_embeddings"]:
        s.append(("lm_head.weight", (V, Hd), "proj"))
    return s


def draw_params(cfg, gen, bf16):
    """float32 draws (optionally rounded to bf16); returns {name: float32/bf16 tensor}."""
    out = {}
    for name, shape, kind in param_specs(cfg):
        z = torch.randn(shape, generator=gen, dtype=torch.float32)
        if kind == "embed":
            w = z * 0.5
        elif kind == "proj":
            w = z * 0.2
        elif kind == "norm":
            w = 1.0 + z * 0.1
        elif kind == "bias":
            w = z * 0.1
        else:
            raise AssertionError(kind)
        if bf16:
            w = w.to(torch.bfloat16)  # round-to-nearest-even
        out[name] = w.contiguous()
    return out


# --------------------------------------------------------------------------
# model (float64, HF semantics)
# --------------------------------------------------------------------------

def rope_inv_freq(cfg):
    """inv_freq[i] = theta^(-2i/D), then HF _compute_llama3_parameters if rope_type llama3.

    Returns (inv_freq float64 [D/2], regimes list or None)."""
    D = head_dim_of(cfg)
    theta = float(cfg["rope_theta"])
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv, None
    rtype = rs.get("rope_type", rs.get("type"))
    assert rtype == "llama3", rtype
    factor = float(rs["factor"])
    lo, hi = float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
    old = float(rs["original_max_position_embeddings"])
    low_freq_wavelen = old / lo
    high_freq_wavelen = old / hi
    wavelen = 2 * math.pi / inv
    # long wavelengths (low frequency): divide by factor; short: keep
    inv_l = torch.where(wavelen > low_freq_wavelen, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
    medium = (~(wavelen < high_freq_wavelen)) & (~(wavelen > low_freq_wavelen))
    inv_l = torch.where(medium, smoothed, inv_l)
    regimes = []
    for w in wavelen.tolist():
        if w < high_freq_wavelen:
            regimes.append("unchanged")
        elif w > low_freq_wavelen:
            regimes.append("divided")
        else:
            regimes.append("smoothed")
    return inv_l, regimes


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def linear(x, w, b=None):
    y = x @ w.t()
    return y + b if b is not None else y


def forward(cfg, P, input_ids, mask, position_ids, lora=None, rope_dtype=torch.float64):
    """P: {hf name: float64 tensor}. Returns logits [B,T,V] (float64).
    rope_dtype: cos/sin computed in float64 and used in this dtype (float32 under
    autocast, as HF's rotary embedding returns them for fp32 hidden states).
    lora: None, or {module name ("model.layers.0.self_attn.q_proj"): (A, B, scaling)}
    added as PEFT's LoraLayer does (no dropout): y = W x + b + scaling * B (A x)."""
    def proj(x, module):
        y = linear(x, P[module + ".weight"], P.get(module + ".bias"))
        if lora and module in lora:
            A, Bm, s = lora[module]
            y = y + linear(linear(x, A), Bm) * s
        return y

    Bn, Tn = input_ids.shape
    nh, nkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim_of(cfg)
    G = nh // nkv
    eps = float(cfg["rms_norm_eps"])
    inv_freq, _ = rope_inv_freq(cfg)
    ang = position_ids.to(torch.float64)[..., None] * inv_freq  # [B,T,D/2]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos()[:, None].to(rope_dtype), emb.sin()[:, None].to(rope_dtype)  # [B,1,T,D]

    t_idx = torch.arange(Tn)
    causal = t_idx[None, :] <= t_idx[:, None]  # [t,s]: s <= t
    allowed = causal[None] & mask.bool()[:, None, :]  # [B,t,s]
    # pad queries with no visible key would give NaN; let them see themselves.
    # They never influence real tokens (real queries never attend pad keys).
    allowed = allowed | torch.eye(Tn, dtype=torch.bool)[None]

    h = P["model.embed_tokens.weight"][input_ids]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        x = rms_norm(h, P[p + "input_layernorm.weight"], eps)
        q = proj(x, p + "self_attn.q_proj")
        k = proj(x, p + "self_attn.k_proj")
        v = proj(x, p + "self_attn.v_proj")
        q = q.view(Bn, Tn, nh, D)
        k = k.view(Bn, Tn, nkv, D)
        v = v.view(Bn, Tn, nkv, D)
        if has_qk_norm(cfg):  # per-head RMSNorm, before RoPE
            q = rms_norm(q, P[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, P[p + "self_attn.k_norm.weight"], eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B,h,T,D]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # kv head j serves query heads j*G .. j*G+G-1 (HF repeat_kv)
        k = k.repeat_interleave(G, dim=1)
        v = v.repeat_interleave(G, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (D ** -0.5)
        scores = scores.masked_fill(~allowed[:, None], float("-inf"))
        a = torch.softmax(scores, dim=-1) @ v  # [B,h,T,D]
        a = a.transpose(1, 2).reshape(Bn, Tn, nh * D)
        h = h + proj(a, p + "self_attn.o_proj")
        x = rms_norm(h, P[p + "post_attention_layernorm.weight"], eps)
        g = proj(x, p + "mlp.gate_proj")
        u = proj(x, p + "mlp.up_proj")
        h = h + proj(torch.nn.functional.silu(g) * u, p + "mlp.down_proj")
    h = rms_norm(h, P["model.norm.weight"], eps)
    lm = P["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else P["lm_head.weight"]
    return h @ lm.t()


def heads(logits, mask, target_ids, loss_weight, temperature):
    m = mask.bool()
    lp_all = torch.log_softmax(logits / temperature, dim=-1)
    lp = lp_all.gather(-1, target_ids[..., None])[..., 0]
    lp = torch.where(m, lp, torch.zeros_like(lp))
    ent = -(lp_all.exp() * lp_all).sum(-1)
    ent = torch.where(m, ent, torch.zeros_like(ent))
    loss = (loss_weight * lp).sum().reshape(1)
    return lp, ent, loss


def position_ids_from_mask(mask):
    pos = mask.cumsum(-1) - 1
    return pos.masked_fill(mask == 0, 1)


# --------------------------------------------------------------------------
# safetensors writer
# --------------------------------------------------------------------------

def tensor_bytes(t):
    """(dtype string, shape, little-endian bytes) for a CPU tensor."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return "BF16", list(t.shape), t.view(torch.int16).numpy().astype("<i2").tobytes()
    m = {torch.float32: ("F32", "<f4"), torch.float64: ("F64", "<f8"), torch.int64: ("I64", "<i8")}
    name, npdt = m[t.dtype]
    return name, list(t.shape), t.numpy().astype(npdt).tobytes()


def write_safetensors(path, items):
    """items: list of (name, tensor); data laid out contiguously in list order."""
    header = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for name, t in items:
        dt, shape, b = tensor_bytes(t)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((-len(hj)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    npd = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "BF16": "<u2"}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        arr = np.frombuffer(data[base + a:base + b], dtype=npd[v["dtype"]]).reshape(v["shape"])
        if v["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[k] = arr
    return out


# --------------------------------------------------------------------------
# self checks
# --------------------------------------------------------------------------

def check_finite_differences(cfg, P64, inputs, gen, grads, per_tensor=3):
    """Central differences in float64 on a few random entries of every parameter."""
    ids, mask, pos, tgt, lw = inputs

    def loss_of(P):
        with torch.no_grad():
            return heads(forward(cfg, P, ids, mask, pos), mask, tgt, lw, TEMPERATURE)[2].item()

    worst = 0.0
    for name, _, _ in param_specs(cfg):
        w = P64[name]
        g = grads[name]
        gscale = g.abs().max().item()
        flat_n = w.numel()
        idxs = torch.randint(0, flat_n, (per_tensor,), generator=gen).tolist()
        for i in idxs:
            base = w.detach().clone()
            x0 = base.view(-1)[i].item()
            hstep = 1e-5 * max(1.0, abs(x0))
            Pp = dict(P64)
            wp = base.clone(); wp.view(-1)[i] = x0 + hstep; Pp[name] = wp
            fp = loss_of(Pp)
            wm = base.clone(); wm.view(-1)[i] = x0 - hstep; Pp[name] = wm
            fm = loss_of(Pp)
            fd = (fp - fm) / (2 * hstep)
            ag = g.view(-1)[i].item()
            denom = max(abs(ag), 1e-3 * gscale, 1e-12)
            rel = abs(fd - ag) / denom
            worst = max(worst, rel)
            assert rel < 1e-6, "FD mismatch %s[%d]: autograd %.12g fd %.12g rel %.3g" % (
                name, i, ag, fd, rel)
    return worst


def check_padding_invariance(cfg, P64, ids, mask, logits):
    worst = 0.0
    for row in (1, 2):
        real = mask[row].bool()
        sub = ids[row][real][None]
        n = sub.shape[1]
        m1 = torch.ones(1, n, dtype=torch.int64)
        pos = torch.arange(n)[None]
        with torch.no_grad():
            solo = forward(cfg, P64, sub, m1, pos)[0]
        padded = logits[row][real]
        d = (solo - padded).abs().max().item()
        scale = padded.abs().max().item()
        worst = max(worst, d / scale)
        assert d <= 1e-12 * scale, "padding changes row %d logits: %g" % (row, d)
    return worst


# --------------------------------------------------------------------------
# generation
# --------------------------------------------------------------------------

def build(name, outdir, verbose=True):
    cfg = CONFIGS[name]
    V = cfg["vocab_size"]
    gen = torch.Generator().manual_seed(SEEDS[name])
    W = draw_params(cfg, gen, STORE_BF16[name])

    _, regimes = rope_inv_freq(cfg)
    if name == "llama":
        assert set(regimes) == {"unchanged", "smoothed", "divided"}, regimes
    if regimes and verbose:
        print("  %s llama3 rope regimes per frequency: %s" % (name, regimes))

    mask = torch.tensor(MASK, dtype=torch.int64)
    ids = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    tgt = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    lw = torch.randn(B, T, generator=gen, dtype=torch.float64) * mask.to(torch.float64)
    lw = torch.where(mask.bool(), lw, torch.zeros_like(lw))  # exact +0 at pads
    temp = torch.tensor([TEMPERATURE], dtype=torch.float64)
    pos = position_ids_from_mask(mask)

    P64 = {k: v.to(torch.float64).requires_grad_(True) for k, v in W.items()}
    logits = forward(cfg, P64, ids, mask, pos)
    lp, ent, loss = heads(logits, mask, tgt, lw, TEMPERATURE)
    names = [n for n, _, _ in param_specs(cfg)]
    gl = torch.autograd.grad(loss[0], [P64[n] for n in names])
    grads = dict(zip(names, gl))

    logits_out = torch.where(mask.bool()[..., None], logits, torch.zeros_like(logits)).detach()

    # self-checks
    Pd = {k: v.detach() for k, v in P64.items()}
    fd_gen = torch.Generator().manual_seed(SEEDS[name] + 7)
    fd_worst = check_finite_differences(cfg, Pd, (ids, mask, pos, tgt, lw), fd_gen, grads)
    pad_worst = check_padding_invariance(cfg, Pd, ids, mask, logits.detach())
    assert torch.isfinite(logits).all() and all(torch.isfinite(g).all() for g in gl)
    # attention should be far from uniform; a cheap proxy: logits spread
    if verbose:
        print("  %s: loss %.10f  FD worst rel err %.2e  padding worst rel diff %.2e"
              % (name, loss.item(), fd_worst, pad_worst))

    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2) + "\n")
    write_safetensors(os.path.join(d, "model.safetensors"), [(n, W[n]) for n in names])
    ref = [("input_ids", ids), ("attention_mask", mask), ("target_ids", tgt),
           ("loss_weight", lw), ("temperature", temp), ("logits", logits_out),
           ("logprobs", lp.detach()), ("entropy", ent.detach()), ("loss", loss.detach())]
    ref += [("grad." + n, grads[n].detach()) for n in names]
    write_safetensors(os.path.join(d, "reference.safetensors"), ref)
    return d


FILES = ("config.json", "model.safetensors", "reference.safetensors")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(os.path.dirname(here), "tests", "fixtures")
    ap.add_argument("--out", default=default_out)
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temp dir and byte-compare with --out")
    ap.add_argument("--only", nargs="*", default=list(CONFIGS))
    args = ap.parse_args()

    if not args.check:
        for n in args.only:
            print("generating", n)
            d = build(n, args.out)
            for fn in FILES:
                print("   %-60s %8d bytes" % (os.path.join(d, fn), os.path.getsize(os.path.join(d, fn))))
        return 0

    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.only:
            print("checking", n)
            build(n, tmp)
            for fn in FILES:
                want = os.path.join(args.out, n, fn)
                got = os.path.join(tmp, n, fn)
                if not os.path.exists(want):
                    print("  MISSING committed file", want); bad += 1; continue
                if filecmp.cmp(want, got, shallow=False):
                    print("  ok      ", want)
                    continue
                bad += 1
                print("  MISMATCH", want)
                if fn.endswith(".safetensors"):
                    try:
                        a, b = read_safetensors(want), read_safetensors(got)
                        for k in sorted(set(a) | set(b)):
                            if k not in a or k not in b or a[k].shape != b[k].shape:
                                print("     %s: present/shape differs" % k); continue
                            dd = np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)).max() if a[k].size else 0
                            if dd:
                                print("     %s: max abs diff %g" % (k, dd))
                    except Exception as e:  # diagnostics only
                        print("     (could not diff: %s)" % e)
    print("check:", "FAILED (%d file(s) differ)" % bad if bad else "all fixtures reproduce byte-exactly")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
