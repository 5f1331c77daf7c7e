"""bench/torch_hf.py — transformers' own Qwen2ForCausalLM as a peer (issue 35: "transformers'
`generate` with bf16 weights and its KV cache"). The model is built from the shape of
bench/torch_generate.py's Qwen2 and given the same random weights (q/k/v and gate/up
split out of the fused ones), so both peers compute one function; check_logits shows
that they do before anything is timed. Its generate() is used as a user calls it:
sampling at temperature 1.0 with top-k and top-p off, num_return_sequences copies of
the prompt, transformers' default KV cache (DynamicCache) and attention implementation.

Needs transformers (the GPU machine's image has 5.x; Debian's python3-torch has none,
so the CPU bench never imports this file).
"""
import torch

from torch_generate import RMS_EPS, ROPE_THETA


def hf_config(m):
    import transformers
    from transformers import Qwen2Config
    fields = dict(vocab_size=m.V, hidden_size=m.C, intermediate_size=m.F, num_hidden_layers=m.L,
                  num_attention_heads=m.H, num_key_value_heads=m.Hkv, hidden_act="silu",
                  max_position_embeddings=32768, rms_norm_eps=RMS_EPS, tie_word_embeddings=True,
                  use_sliding_window=False, max_window_layers=m.L)
    # transformers 5 keeps RoPE's base in rope_parameters, 4.x in rope_theta (whose
    # default there is 10000, not Qwen2.5's 1e6): check_logits catches a wrong one
    if int(transformers.__version__.split(".")[0]) >= 5:
        fields["rope_parameters"] = {"rope_type": "default", "rope_theta": ROPE_THETA}
    else:
        fields["rope_theta"] = ROPE_THETA
    return Qwen2Config(**fields)


def hf_model(m):
    """transformers' Qwen2ForCausalLM made on m's device, in fp32, holding m's weights."""
    from transformers import Qwen2ForCausalLM
    with torch.device(m.device):
        hm = Qwen2ForCausalLM(hf_config(m))
    hm.eval()
    if hm.lm_head.weight is not hm.model.embed_tokens.weight:
        # the config asks for tying; should a version tie only in from_pretrained, tie
        # here as it would (check_logits would show an untied random head)
        hm.lm_head.weight = hm.model.embed_tokens.weight
    hm.requires_grad_(False)
    load_weights(hm, m)
    return hm


def hf_names(m):
    """transformers' parameter name -> the tensor of m that holds it."""
    q, kv = m.H * m.D, m.Hkv * m.D
    src = {"model.embed_tokens.weight": m.embed, "model.norm.weight": m.norm}
    for i, w in enumerate(m.layers):
        p = f"model.layers.{i}."
        src[p + "input_layernorm.weight"] = w["ln1"]
        for name, rows in (("q", slice(0, q)), ("k", slice(q, q + kv)), ("v", slice(q + kv, q + 2 * kv))):
            src[p + f"self_attn.{name}_proj.weight"] = w["w_qkv"][rows]
            src[p + f"self_attn.{name}_proj.bias"] = w["b_qkv"][rows]
        src[p + "self_attn.o_proj.weight"] = w["w_o"]
        src[p + "post_attention_layernorm.weight"] = w["ln2"]
        src[p + "mlp.gate_proj.weight"] = w["w_gu"][:m.F]
        src[p + "mlp.up_proj.weight"] = w["w_gu"][m.F:]
        src[p + "mlp.down_proj.weight"] = w["w_down"]
    return src


def load_weights(hm, m):
    """Copies m's current weights into hm (cast to hm's dtype): once at start, and at
    every GRPO step as a trainer syncs its generation model."""
    src = hf_names(m)
    dst = dict(hm.named_parameters())  # the tied lm_head is listed once, as embed_tokens
    if set(src) != set(dst):
        raise SystemExit(f"transformers' Qwen2ForCausalLM: parameters {sorted(set(dst) - set(src))[:4]} have no "
                         f"source here and {sorted(set(src) - set(dst))[:4]} no destination")
    with torch.no_grad():
        for name, t in dst.items():
            if t.shape != src[name].shape:
                raise SystemExit(f"transformers' {name}: shape {tuple(t.shape)}, ours {tuple(src[name].shape)}")
            t.copy_(src[name])


def check_logits(hm, m, prompt):
    """(max |transformers - ours|, max |ours|) of the last position's logits for prompt
    [1, P]; both fp32 here, so a wrong config value (RoPE base, epsilon, tying) shows."""
    with torch.inference_mode():
        ours = m.forward(prompt, 0, *m.new_cache(1, prompt.shape[1]))[0].float()
        theirs = hm(input_ids=prompt).logits[0, -1].float()
    return (theirs - ours).abs().max().item(), ours.abs().max().item()


def hf_generate(hm, prompt, G, n, seed):
    """G sampled completions of exactly n tokens of prompt [1, P]: returns [G, n]. The
    last id is made the eos and min_new_tokens forbids it, so no row stops early."""
    torch.manual_seed(seed)  # generate draws from the global generator
    V = hm.config.vocab_size
    out = hm.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), do_sample=True,
                      temperature=1.0, top_k=0, top_p=1.0, num_return_sequences=G,
                      max_new_tokens=n, min_new_tokens=n, eos_token_id=V - 1, pad_token_id=V - 1)
    return out[:, prompt.shape[1]:]
