#!/usr/bin/env python3
"""tools/gpu_check/sparse_model.py — a Qwen2 model directory whose weights cost no time
to make: for the device check's memory section, where only the shapes matter.

    sparse_model.py DIR HIDDEN LAYERS HEADS KV_HEADS INTERMEDIATE VOCAB TIED

writes DIR/config.json (Qwen2ForCausalLM at those widths: q/k/v biases, the head tied
when TIED is 1, the byte tokenizer's files copied beside it with eos_token null, no eos
in the config, so every completion runs its full length) and DIR/model.safetensors: a
real safetensors header (every tensor BF16, in the layout HF writes for Qwen2), the
norms' values 1.0, and every other byte a hole in a sparse file, read back as zeros. A
7B directory appears in well under a second and takes a few KiB of disk; `grpo init`'s
random 7B would take minutes to draw and write. Zero weights decode uniformly over the
vocabulary, so no completion ends early: the memory a run needs at full length.
"""
import json
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.join(HERE, "..", "..", "assets", "byte-tokenizer")


def tensors(C, L, H, KV, F, V, tied):
    """(name, shape) of a Qwen2 checkpoint, in HF's order."""
    D = C // H
    yield "model.embed_tokens.weight", [V, C]
    for l in range(L):
        p = f"model.layers.{l}."
        yield p + "input_layernorm.weight", [C]
        yield p + "self_attn.q_proj.weight", [H * D, C]
        yield p + "self_attn.q_proj.bias", [H * D]
        yield p + "self_attn.k_proj.weight", [KV * D, C]
        yield p + "self_attn.k_proj.bias", [KV * D]
        yield p + "self_attn.v_proj.weight", [KV * D, C]
        yield p + "self_attn.v_proj.bias", [KV * D]
        yield p + "self_attn.o_proj.weight", [C, H * D]
        yield p + "post_attention_layernorm.weight", [C]
        yield p + "mlp.gate_proj.weight", [F, C]
        yield p + "mlp.up_proj.weight", [F, C]
        yield p + "mlp.down_proj.weight", [C, F]
    yield "model.norm.weight", [C]
    if not tied:
        yield "lm_head.weight", [V, C]


def main():
    if len(sys.argv) != 9:
        sys.exit(__doc__.strip().splitlines()[3].strip())
    d = sys.argv[1]
    try:
        C, L, H, KV, F, V, tied = map(int, sys.argv[2:])
    except ValueError:
        sys.exit(f"sparse_model.py: the widths must be whole numbers, got {sys.argv[2:]!r}")
    if min(C, L, H, KV, F, V) < 1 or C % H or H % KV or tied not in (0, 1):
        sys.exit(f"sparse_model.py: expected positive widths, HIDDEN a multiple of HEADS, HEADS of KV_HEADS "
                 f"and TIED 0 or 1, got {sys.argv[2:]!r}")
    os.makedirs(d, exist_ok=True)
    json.dump({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": C,
               "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H,
               "num_key_value_heads": KV, "hidden_act": "silu", "rms_norm_eps": 1e-06,
               "rope_theta": 1000000.0, "tie_word_embeddings": bool(tied), "max_position_embeddings": 32768,
               "vocab_size": V, "bos_token_id": None, "eos_token_id": None, "initializer_range": 0.02,
               "torch_dtype": "bfloat16"}, open(os.path.join(d, "config.json"), "w"), indent=2)
    for name in os.listdir(TOKENIZER):
        shutil.copy(os.path.join(TOKENIZER, name), d)
    tc = os.path.join(d, "tokenizer_config.json")
    c = json.load(open(tc))
    c["eos_token"] = None
    json.dump(c, open(tc, "w"), indent=2)
    head, at, ones = {"__metadata__": {"format": "pt"}}, 0, []
    for name, shape in tensors(C, L, H, KV, F, V, tied):
        n = 2 * shape[0] * (shape[1] if len(shape) > 1 else 1)
        head[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [at, at + n]}
        if name.endswith("norm.weight"):
            ones.append((at, n))
        at += n
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-aligned, as the format's writers keep it
    base = 8 + len(text)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for off, n in ones:
            f.seek(base + off)
            f.write(b"\x80\x3f" * (n // 2))  # bf16 1.0, little-endian
        f.truncate(base + at)
    print(f"{d}: {C} wide, {L} layers, {at / 2:.0f} parameters ({at / 2**30:.1f} GiB in bf16, sparse)")


if __name__ == "__main__":
    main()
