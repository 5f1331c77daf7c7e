#!/usr/bin/python3
"""Writes tests/fixtures/lora/: PEFT LoRA adapters for the tiny Qwen3 fixture model
(tests/fixtures/qwen3) and what merging them must give, computed with torch in
float64 the way PEFT's LoraLayer.merge does (W += (B @ A) * scaling, scaling =
lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora).

  adapter/        adapter_config.json + adapter_model.safetensors as PEFT saves them
                  (save_pretrained: tensor names base_model.model.<module>.lora_A.weight
                  [r, in] and .lora_B.weight [out, r], the adapter name left out);
                  r 4, lora_alpha 8, targets q_proj, v_proj, gate_proj, down_proj
  adapter_rslora/ the same tensors, use_rslora true, lora_alpha 6, r 4
  merged.safetensors          the targeted weights after merging adapter/
  merged_rslora.safetensors   the same for adapter_rslora/

Usage (Debian's torch lives in /usr/bin/python3):
    /usr/bin/python3 tools/make_lora_fixture.py
"""
import json
import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from make_model_reference import read_safetensors, write_safetensors  # noqa: E402

OUT = os.path.join(ROOT, "tests", "fixtures", "lora")
BASE = os.path.join(ROOT, "tests", "fixtures", "qwen3")
R = 4
TARGETS = ["q_proj", "v_proj", "gate_proj", "down_proj"]


def module_of(target):
    return "self_attn" if target.endswith(("q_proj", "k_proj", "v_proj", "o_proj")) else "mlp"


def main():
    base = {k: torch.tensor(v, dtype=torch.float64) for k, v in read_safetensors(os.path.join(BASE, "model.safetensors")).items()}
    cfg = json.load(open(os.path.join(BASE, "config.json")))
    g = torch.Generator().manual_seed(7)
    tensors = []
    for layer in range(cfg["num_hidden_layers"]):
        for t in TARGETS:
            mod = f"model.layers.{layer}.{module_of(t)}.{t}"
            out_f, in_f = base[mod + ".weight"].shape
            A = (torch.rand(R, in_f, generator=g, dtype=torch.float64) - 0.5) * 0.2
            B = (torch.rand(out_f, R, generator=g, dtype=torch.float64) - 0.5) * 0.2
            A, B = A.to(torch.float32), B.to(torch.float32)      # stored as F32, as PEFT saves fp32 adapters
            tensors.append((f"base_model.model.{mod}.lora_A.weight", A))
            tensors.append((f"base_model.model.{mod}.lora_B.weight", B))
    for name, alpha, rs in (("adapter", 8, False), ("adapter_rslora", 6, True)):
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        conf = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": "tests/fixtures/qwen3",
                "r": R, "lora_alpha": alpha, "lora_dropout": 0.05, "target_modules": TARGETS, "use_rslora": rs,
                "use_dora": False, "bias": "none", "fan_in_fan_out": False, "inference_mode": True,
                "modules_to_save": None, "rank_pattern": {}, "alpha_pattern": {}, "init_lora_weights": True,
                "layers_to_transform": None, "layers_pattern": None, "revision": None}
        with open(os.path.join(d, "adapter_config.json"), "w") as f:
            json.dump(conf, f, indent=2)
        write_safetensors(os.path.join(d, "adapter_model.safetensors"), tensors)
        scaling = alpha / math.sqrt(R) if rs else alpha / R
        merged = []
        named = dict(tensors)
        for layer in range(cfg["num_hidden_layers"]):
            for t in TARGETS:
                mod = f"model.layers.{layer}.{module_of(t)}.{t}"
                A = named[f"base_model.model.{mod}.lora_A.weight"].to(torch.float64)
                B = named[f"base_model.model.{mod}.lora_B.weight"].to(torch.float64)
                merged.append((mod + ".weight", base[mod + ".weight"] + (B @ A) * scaling))
        write_safetensors(os.path.join(OUT, "merged.safetensors" if not rs else "merged_rslora.safetensors"), merged)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
