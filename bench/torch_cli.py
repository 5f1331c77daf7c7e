#!/usr/bin/python3
"""bench/torch_cli.py — the PyTorch peer of `grpo score`, `grpo generate` and `grpo eval`
(bench/run.sh's cli section): the same work on the same model directory, loaded from
its model.safetensors and config.json, in fp32 or with the weights in bf16
(--dtype bf16: model.to(torch.bfloat16), how transformers and vLLM load a model), or
in float64 (--dtype fp64: the reference the bf16 log-prob error is measured against).

Run with Debian's python3-torch (1.13; `/usr/bin/python3`). transformers is not in
Debian 12 and is not used: the Qwen2 forward is bench/torch_generate.py's (HF's
computation written with torch ops: fused q/k/v and gate/up GEMMs, GQA as one batched
matmul, a preallocated KV cache, torch.multinomial over the whole [G, V] block), and
the full-sequence forward for scoring is bench/torch_grpo_step.py's, under
inference_mode. The safetensors file is read here (its header is JSON, the tensors
follow it raw), so both sides compute with the same weights.

  score     rows of {"prompt_ids", "completion_ids"} (--data), --batch rows per
            forward (grpo score --batch_tokens 1536 puts 8 rows of 192 in one): the
            log-probs of the completion tokens, log_softmax over fp32 logits (what a
            scoring script does with HF's logits); every row of the file has one
            prompt length and one completion length;
  generate  --G completions of --tokens tokens of each prompt of --dataset (JSON lines,
            `prompt`, its bytes the ids: the bench's byte-level tokenizer), temperature
            1.0, decoded to text; prompts of one length are decoded together (a batch
            of B prompts x G rows, as HF generate with num_return_sequences), as grpo
            decodes several groups in one chunk;
  eval      the same, then the reward `length:50` (-|50 - characters|) of each
            completion and their mean.

The time is the work after the model is loaded (the load is printed apart), as
`grpo generate` and `grpo eval` time theirs; no warm-up (one command, as a user runs it).
prints one line:
  cli impl=torch|torch-bf16 cmd=score|generate|eval tokens=T load_s=L seconds=S tokens_per_s=Y
"""
import argparse
import json
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_generate import Qwen2, generate  # noqa: E402
from torch_grpo_step import token_bytes, train_logprobs  # noqa: E402

DTYPES = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "F16": (torch.float16, 2)}  # torch 1.13: no itemsize
LENGTH_TARGET = 50


def read_safetensors(path):
    """{name: tensor} of one safetensors file: 8 bytes of header length, the JSON
    header (dtype, shape, data_offsets per tensor), then the data."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = bytearray(f.read())
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        dt, size = DTYPES[h["dtype"]]
        t = torch.frombuffer(data, dtype=dt, count=(b - a) // size, offset=a) if b > a else torch.empty(0, dtype=dt)
        out[name] = t.view(h["shape"])
    return out


def load_qwen2(model_dir, dtype, max_pos):
    """The model directory as torch_generate's Qwen2 (fp32, or every tensor cast to
    bf16 as model.to(torch.bfloat16))."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for f in files:
        w.update(read_safetensors(os.path.join(model_dir, f)))
    m = Qwen2.__new__(Qwen2)  # the attributes below, not Qwen2's random ones
    C, L, H = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    m.C, m.L, m.H, m.Hkv = C, L, H, cfg["num_key_value_heads"]
    m.F, m.V, m.D = cfg["intermediate_size"], cfg["vocab_size"], C // H
    f32 = lambda name: w[name].float()  # noqa: E731
    m.embed, m.norm = f32("model.embed_tokens.weight"), f32("model.norm.weight")
    m.layers = []
    for i in range(L):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        m.layers.append(dict(
            ln1=f32(p + "input_layernorm.weight"),
            w_qkv=torch.cat([f32(a + "q_proj.weight"), f32(a + "k_proj.weight"), f32(a + "v_proj.weight")]),
            b_qkv=torch.cat([f32(a + "q_proj.bias"), f32(a + "k_proj.bias"), f32(a + "v_proj.bias")]),
            w_o=f32(a + "o_proj.weight"),
            ln2=f32(p + "post_attention_layernorm.weight"),
            w_gu=torch.cat([f32(p + "mlp.gate_proj.weight"), f32(p + "mlp.up_proj.weight")]),
            w_down=f32(p + "mlp.down_proj.weight"),
        ))
    theta = cfg.get("rope_theta", 10000.0)
    inv_freq = 1.0 / (theta ** (torch.arange(0, m.D, 2, dtype=torch.float32) / m.D))
    ang = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv_freq)
    emb = torch.cat([ang, ang], dim=-1)
    m.cos, m.sin = emb.cos(), emb.sin()
    m.dtype = torch.float32
    m.device = torch.device("cpu")  # what torch_generate's Qwen2 builds its caches on
    return m.to_bf16() if dtype == "bf16" else m.to_f64() if dtype == "fp64" else m


def score(m, rows, batch, out=None):
    """Completion log-probs of every row, batch rows per forward; returns tokens scored
    (prompt and completion, as grpo score's forwards hold them). out: a file the
    log-probs go to, a {"logprobs": [...]} line per row, as grpo score writes them."""
    tokens = 0
    for k in range(0, len(rows), batch):
        part = rows[k:k + batch]
        P, n = len(part[0]["prompt_ids"]), len(part[0]["completion_ids"])
        ids = torch.tensor([r["prompt_ids"] + r["completion_ids"] for r in part])
        lp = train_logprobs(m, ids, P, n, logits_fp32=True)
        assert lp.shape == (len(part), n) and bool(torch.isfinite(lp).all())
        tokens += ids.numel()
        for row in lp.tolist() if out else []:
            out.write(json.dumps({"logprobs": row}) + "\n")
    return tokens


def complete(m, prompt_texts, G, n, tb, seed):
    """G completions of n tokens of each prompt (of one length in bytes: decoded
    together), as text, prompt by prompt."""
    prompt = torch.tensor([list(p.encode()) for p in prompt_texts])
    out = generate(m, prompt, G, n, seed=seed)
    return [b"".join(tb[i] for i in row).decode("utf-8", errors="replace") for row in out.tolist()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["score", "generate", "eval"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp64"],
                    help="fp64: every tensor in float64, the computation's reference")
    ap.add_argument("--out", help="score: write the log-probs here, a line per row")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--data", help="score: JSON lines {prompt_ids, completion_ids}")
    ap.add_argument("--batch", type=int, default=8, help="score: rows per forward")
    ap.add_argument("--dataset", help="generate, eval: JSON lines with a prompt column")
    ap.add_argument("--G", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64, help="generate, eval: tokens per completion")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    rows = prompts = None
    if a.cmd == "score":
        rows = [json.loads(line) for line in open(a.data) if line.strip()]
        max_pos = max(len(r["prompt_ids"]) + len(r["completion_ids"]) for r in rows)
    else:
        prompts = [json.loads(line)["prompt"] for line in open(a.dataset) if line.strip()]
    if prompts:
        max_pos = max(len(p.encode()) for p in prompts) + a.tokens
    m = load_qwen2(a.model, a.dtype, max_pos)
    t1 = time.perf_counter()
    with torch.inference_mode():
        if a.cmd == "score":
            out = open(a.out, "w") if a.out else None
            tokens = score(m, rows, a.batch, out)
            if out:
                out.close()
        else:
            tb = token_bytes(m.V)
            rewards = []
            # prompts of one length decoded together, as grpo decodes several groups in a chunk
            # (bench/run.sh's are 64 bytes each); otherwise one at a time
            same = len({len(p.encode()) for p in prompts}) == 1
            for i, batch in enumerate([prompts] if same else [[p] for p in prompts]):
                texts = complete(m, batch, a.G, a.tokens, tb, seed=1 + i)
                if a.cmd == "eval":
                    rewards += [-abs(LENGTH_TARGET - len(t)) for t in texts]
            tokens = len(prompts) * a.G * a.tokens
    t2 = time.perf_counter()
    impl = {"bf16": "torch-bf16", "fp64": "torch-fp64"}.get(a.dtype, "torch")
    print(f"cli impl={impl} cmd={a.cmd} tokens={tokens} load_s={t1 - t0:.3f} seconds={t2 - t1:.3f} "
          f"tokens_per_s={tokens / (t2 - t1):.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
