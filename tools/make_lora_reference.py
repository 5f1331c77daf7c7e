#!/usr/bin/python3
"""Float64 reference for training LoRA adapters on a frozen model (model/lora_layers.c).

For two of the fixture models of tools/make_model_reference.py (their weights and
padded batch, tests/fixtures/<model>/), adds PEFT LoRA adapters with random A and
B (B non-zero, so every gradient is exercised) and computes in float64, as PEFT's
LoraLayer does without dropout, y = W x + b + scaling * B (A x):

  qwen3_all     qwen3 (q/k norm), all-linear, r 4, lora_alpha 8  (scaling alpha/r)
  qwen2_rslora  qwen2 (qkv bias, tied), q_proj v_proj down_proj, r 2, lora_alpha 3,
                use_rslora (scaling alpha/sqrt(r))

and writes tests/fixtures/lora_train/<case>/:
  adapter/adapter_config.json, adapter/adapter_model.safetensors   (PEFT's layout, F32)
  reference.safetensors   logprobs, loss (sum of loss_weight * logprob, the base
                          fixture's weights) and grad.<adapter tensor name> (F64)

The base weights take no gradient; A and B of the lower layer get theirs through
the input gradient of the frozen upper layer. Central finite differences check a
few entries of every A and B.

Usage (Debian's torch lives in /usr/bin/python3):
    /usr/bin/python3 tools/make_lora_reference.py
"""
import json
import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from make_model_reference import (forward, heads, position_ids_from_mask,  # noqa: E402
                                  read_safetensors, write_safetensors)

torch.set_num_threads(1)
OUT = os.path.join(ROOT, "tests", "fixtures", "lora_train")
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
CASES = {
    "qwen3_all": dict(model="qwen3", targets=ALL, r=4, alpha=8, rslora=False, seed=11),
    "qwen2_rslora": dict(model="qwen2", targets=["q_proj", "v_proj", "down_proj"], r=2, alpha=3, rslora=True, seed=12),
}


def part(t):
    return "self_attn" if t in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"


def build(name, case):
    base_dir = os.path.join(ROOT, "tests", "fixtures", case["model"])
    cfg = json.load(open(os.path.join(base_dir, "config.json")))
    P = {k: torch.tensor(v, dtype=torch.float64) for k, v in read_safetensors(os.path.join(base_dir, "model.safetensors")).items()}
    ref = read_safetensors(os.path.join(base_dir, "reference.safetensors"))
    ids = torch.tensor(ref["input_ids"], dtype=torch.int64)
    mask = torch.tensor(ref["attention_mask"], dtype=torch.int64)
    tgt = torch.tensor(ref["target_ids"], dtype=torch.int64)
    lw = torch.tensor(ref["loss_weight"], dtype=torch.float64)
    temp = float(ref["temperature"][0])
    pos = position_ids_from_mask(mask)

    r, scaling = case["r"], case["alpha"] / (math.sqrt(case["r"]) if case["rslora"] else case["r"])
    g = torch.Generator().manual_seed(case["seed"])
    names, tensors = [], {}
    lora = {}
    for layer in range(cfg["num_hidden_layers"]):
        for t in case["targets"]:
            mod = "model.layers.%d.%s.%s" % (layer, part(t), t)
            out_f, in_f = P[mod + ".weight"].shape
            # stored as F32; the reference computes with exactly those values
            A = ((torch.rand(r, in_f, generator=g, dtype=torch.float64) - 0.5) * 0.6).to(torch.float32).to(torch.float64)
            B = ((torch.rand(out_f, r, generator=g, dtype=torch.float64) - 0.5) * 0.6).to(torch.float32).to(torch.float64)
            A.requires_grad_(True)
            B.requires_grad_(True)
            lora[mod] = (A, B, scaling)
            for which, w in (("lora_A", A), ("lora_B", B)):
                n = "base_model.model.%s.%s.weight" % (mod, which)
                names.append(n)
                tensors[n] = w

    def loss_of(lo):
        return heads(forward(cfg, P, ids, mask, pos, lora=lo), mask, tgt, lw, temp)

    lp, _, loss = loss_of(lora)
    grads = dict(zip(names, torch.autograd.grad(loss[0], [tensors[n] for n in names])))

    # finite differences on a few entries of every A and B
    gen = torch.Generator().manual_seed(case["seed"] + 100)
    worst = 0.0
    for n in names:
        w, gr = tensors[n], grads[n]
        for i in torch.randint(0, w.numel(), (3,), generator=gen).tolist():
            def at(delta):
                lo = {}
                for mod, (A, B, s) in lora.items():
                    A2, B2 = A.detach().clone(), B.detach().clone()
                    if n == "base_model.model.%s.lora_A.weight" % mod:
                        A2.view(-1)[i] += delta
                    if n == "base_model.model.%s.lora_B.weight" % mod:
                        B2.view(-1)[i] += delta
                    lo[mod] = (A2, B2, s)
                with torch.no_grad():
                    return loss_of(lo)[2].item()
            h = 1e-6
            fd = (at(h) - at(-h)) / (2 * h)
            ag = gr.view(-1)[i].item()
            rel = abs(fd - ag) / max(abs(ag), 1e-3 * gr.abs().max().item(), 1e-12)
            worst = max(worst, rel)
            assert rel < 1e-5, "FD mismatch %s[%d]: %g vs %g" % (n, i, ag, fd)
    print("  %s: loss %.10f  FD worst rel err %.2e" % (name, loss.item(), worst))

    d = os.path.join(OUT, name)
    os.makedirs(os.path.join(d, "adapter"), exist_ok=True)
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": r, "lora_alpha": case["alpha"],
              "lora_dropout": 0.0, "target_modules": case["targets"], "use_rslora": case["rslora"],
              "base_model_name_or_path": "tests/fixtures/" + case["model"], "bias": "none",
              "fan_in_fan_out": False, "inference_mode": True}
    with open(os.path.join(d, "adapter", "adapter_config.json"), "w") as f:
        f.write(json.dumps(config, indent=2) + "\n")
    write_safetensors(os.path.join(d, "adapter", "adapter_model.safetensors"),
                      [(n, tensors[n].detach().to(torch.float32)) for n in names])
    out = [("logprobs", lp.detach()), ("loss", loss.detach())]
    out += [("grad." + n, grads[n].detach()) for n in names]
    write_safetensors(os.path.join(d, "reference.safetensors"), out)


def main():
    for name, case in CASES.items():
        build(name, case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
