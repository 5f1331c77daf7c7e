#!/usr/bin/env python3
"""tests/cli/tool_model.py DIR [P_CALL] — makes the model directory `grpo init` wrote in DIR
(a tiny Qwen3 on the byte tokenizer, untied head) one that calls a tool, so the
tool tests do not wait for a random model to write a well-formed <tool_call>.

Honestly a model, only a trivial one: the tokenizer gets one more token, a whole
Hermes tool call (<tool_call>{"name": "calc", "arguments": {"expression":
"6*7"}}</tool_call>), and the weights are edited so the network is a bigram
table on two rows: every attention and MLP output projection zeroed (the final
hidden state is the current token's embedding), the newline's and the call
token's embeddings made orthogonal one-hot vectors, and the head's rows of the
call token and of <|im_end|> pointed at them. So after a newline (the end of
`<|im_start|>assistant\\n`) the model writes the call with probability P_CALL
(default ~1 - 1e-12; else any other token, each as likely), after the call
<|im_end|> (~1 - 1e-12); elsewhere it is as random as before. The
chat template is a small Hermes one (tools, tool_calls, tool messages),
prefix-preserving as TRL's tool loop needs. Pure Python (struct), no numpy."""
import json
import math
import struct
import sys

d = sys.argv[1]
p_call = float(sys.argv[2]) if len(sys.argv) > 2 else None
CALL = '<tool_call>\n{"name": "calc", "arguments": {"expression": "6*7"}}\n</tool_call>'
NL, EOS, MARGIN = 10, 258, 3.0

tj = json.load(open(f"{d}/tokenizer.json"))
call_id = max(t["id"] for t in tj["added_tokens"]) + 1
tj["added_tokens"].append({"id": call_id, "content": CALL, "single_word": False, "lstrip": False,
                           "rstrip": False, "normalized": False, "special": False})
json.dump(tj, open(f"{d}/tokenizer.json", "w"), ensure_ascii=False)

TEMPLATE = (
    "{%- if tools %}{{ '<|im_start|>system\\n<tools>' }}{%- for t in tools %}{{ '\\n' + (t | tojson) }}{%- endfor %}"
    "{{ '\\n</tools><|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'tool' %}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{{ '<|im_start|>assistant\\n' + message.content }}"
    "{%- if message.tool_calls %}{%- for tc in message.tool_calls %}"
    "{{ '<tool_call>\\n{\"name\": \"' + tc.function.name + '\", \"arguments\": ' + (tc.function.arguments | tojson) + '}\\n</tool_call>' }}"
    "{%- endfor %}{%- endif %}{{ '<|im_end|>\\n' }}"
    "{%- else %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}")
tc = json.load(open(f"{d}/tokenizer_config.json"))
tc["chat_template"] = TEMPLATE
tc.setdefault("added_tokens_decoder", {})[str(call_id)] = {"content": CALL, "single_word": False, "lstrip": False,
                                                           "rstrip": False, "normalized": False, "special": False}
json.dump(tc, open(f"{d}/tokenizer_config.json", "w"), ensure_ascii=False, indent=1)

cfg = json.load(open(f"{d}/config.json"))
assert cfg["vocab_size"] > call_id and not cfg["tie_word_embeddings"], "init with vocab_size > call id, untied head"
C = cfg["hidden_size"]
# the final hidden state of a one-hot embedding is sqrt(C) there (RMSNorm, weight 1): logit = weight x sqrt(C),
# every other token's logit 0 (their head columns 0 and 1 are zeroed below)
call_weight = MARGIN if p_call is None else math.log(p_call / (1 - p_call) * (cfg["vocab_size"] - 1)) / math.sqrt(C)

raw = bytearray(open(f"{d}/model.safetensors", "rb").read())
(hlen,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + hlen])
base = 8 + hlen


def tensor(name):
    info = header[name]
    assert info["dtype"] == "F32", (name, info["dtype"])
    a, b = info["data_offsets"]
    return base + a, info["shape"]


def put(name, row, col, value):
    off, shape = tensor(name)
    struct.pack_into("<f", raw, off + 4 * (row * shape[1] + col), value)


for name in header:
    if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
        off, shape = tensor(name)
        raw[off:off + 4 * shape[0] * shape[1]] = bytes(4 * shape[0] * shape[1])
E, H = "model.embed_tokens.weight", "lm_head.weight"
V = tensor(E)[1][0]
for v in range(V):  # dims 0 and 1 belong to the newline and the call token alone
    put(E, v, 0, 0.0), put(E, v, 1, 0.0)
for v, dim in ((NL, 0), (call_id, 1)):
    for k in range(C):
        put(E, v, k, 1.0 if k == dim else 0.0)
for v in range(V):
    put(H, v, 0, 0.0), put(H, v, 1, 0.0)
put(H, call_id, 0, call_weight)  # after a newline: the call
put(H, EOS, 1, MARGIN)      # after the call: the end of the turn
open(f"{d}/model.safetensors", "wb").write(raw)
print(call_id)
