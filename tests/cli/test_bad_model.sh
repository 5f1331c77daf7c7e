#!/usr/bin/env bash
# A careless or hostile model directory: sizes in config.json are checked
# against the supported range, against model.safetensors and against the memory
# available before anything is allocated (grpo init, generate, train, score);
# so are generation's and score's buffers; eos ids outside the vocabulary,
# prompt tokens the tokenizer has but the model's vocabulary lacks, and
# generation_config.json fields of the wrong type are refused; a prompt (or a
# scored sequence) that does not fit max_position_embeddings is refused with its
# dataset line. Each is one line naming the file and the field.
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/b" 2>/dev/null || { fail init; finish; }
printf '{"prompt": "ab"}\n' > "$TMP/d.jsonl"
# variant NAME PYTHON: a copy of config.json with PYTHON applied to c
variant() {
    python3 -c "import json, sys; c = json.load(open(sys.argv[1])); $2; json.dump(c, open(sys.argv[2], 'w'))" \
        "$TMP/b/config.json" "$TMP/$1.json"
    rm -rf "$TMP/m_$1" && mkdir "$TMP/m_$1" && cp "$TMP"/b/* "$TMP/m_$1/" && cp "$TMP/$1.json" "$TMP/m_$1/config.json"
}
limited() { timeout 20 "$@"; }
bad() { # NAME PYTHON PATTERN: init and generate both refuse it, at once (an allocation first would abort instead)
    variant "$1" "$2"
    expect_error 1 "$3" limited "$GRPO" init --config "$TMP/$1.json" --tokenizer assets/byte-tokenizer --output_dir "$TMP/o_$1"
    expect_error 1 "m_$1/config.json: $3" limited "$GRPO" generate --model "$TMP/m_$1" --dataset "$TMP/d.jsonl"
}
bad layers "c['num_hidden_layers'] = 100000" "num_hidden_layers (100000) is larger than any supported model (at most 1024)"
bad layers7 "c['num_hidden_layers'] = 10000000" "num_hidden_layers (10000000) is larger than any supported model"
bad vocab "c['vocab_size'] = 2147483647" "vocab_size (2147483647) is larger than any supported model"
bad inter "c['intermediate_size'] = 2000000000" "intermediate_size (2000000000) is larger than any supported model"
bad hidden "c['hidden_size'] = 2147483646; c['intermediate_size'] = 2147483647" "hidden_size (2147483646) is larger than any supported model"
bad tensor "c['vocab_size'] = 16000000; c['hidden_size'] = 65536; c['num_attention_heads'] = 512" \
    "vocab_size x hidden_size = 1048576000000 values in one tensor; at most 2147483647 are supported"
bad eos "c['eos_token_id'] = 99999" "eos_token_id 99999 is outside the vocabulary (vocab_size 259)"
# sizes inside the range, a model beyond this machine: refused with the numbers before allocating
bad huge "c.update(hidden_size=16384, intermediate_size=53248, num_hidden_layers=126, num_attention_heads=128, num_key_value_heads=8, vocab_size=128256, head_dim=128)" \
    "the model needs 1615.0 GB for its [0-9]* parameters in fp32 (hidden_size 16384, intermediate_size 53248, num_hidden_layers 126, vocab_size 128256) and [0-9.]* [MG]B is available"
GRPO_MEMORY_LIMIT_MB=2 expect_error 1 "b/config.json: the model needs 3.3 MB for its 820992 parameters in fp32 .* and 2.[01] MB is available" \
    "$GRPO" train --model "$TMP/b" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --output_dir "$TMP/t"
GRPO_MEMORY_LIMIT_MB=4 "$GRPO" generate --model "$TMP/b" --dataset "$TMP/d.jsonl" --max_completion_length 2 >/dev/null 2>&1 \
    || fail "a model that fits the memory limit should load"
# config.json promising more than model.safetensors holds: refused before the
# parameters are allocated (~17 GB here; under an 8 GB address-space limit an
# allocation first would abort; a machine with less available refuses it by the numbers).
# AddressSanitizer reserves terabytes of shadow address space, so under ASan
# there is no ulimit; its allocator aborts on a 17 GB request by itself.
variant deep "c.update(hidden_size=1024, intermediate_size=4096, num_attention_heads=8, num_key_value_heads=8, head_dim=128, num_hidden_layers=256)"
ldd "$GRPO" 2>/dev/null | grep -q libasan && vlimit=unlimited || vlimit=8388608
(ulimit -v "$vlimit"; expect_error 1 "m_deep/model.safetensors: tensor 'model.embed_tokens.weight' has shape \[259, 128\]; config.json implies \[259, 1024\]\|m_deep/config.json: the model needs" \
    limited "$GRPO" generate --model "$TMP/m_deep" --dataset "$TMP/d.jsonl"; [ "$FAILED" -eq 0 ] || exit 1) || fail "config larger than its weights"
variant short "c['num_hidden_layers'] = 5"
expect_error 1 "m_short/model.safetensors: missing tensor 'model.layers.4.input_layernorm.weight'" \
    "$GRPO" generate --model "$TMP/m_short" --dataset "$TMP/d.jsonl"
# a tokenizer with more ids than vocab_size: the prompt's token would index past the embedding
variant tok "pass"
python3 -c "import json, sys; t = json.load(open(sys.argv[1])); t['added_tokens'].append(dict(t['added_tokens'][0], id=400, content='<|big|>')); json.dump(t, open(sys.argv[1], 'w'))" "$TMP/m_tok/tokenizer.json"
printf '{"prompt": "ab"}\n{"prompt": "ab<|big|>"}\n' > "$TMP/big.jsonl"
expect_error 1 "big.jsonl:2: the prompt's token 400 ('<|big|>') is outside the model's vocabulary (config.json: vocab_size 259; the tokenizer has 401 ids)" \
    "$GRPO" generate --model "$TMP/m_tok" --dataset "$TMP/big.jsonl"
"$GRPO" generate --model "$TMP/m_tok" --dataset "$TMP/d.jsonl" --max_completion_length 2 >/dev/null 2>&1 || fail "prompts inside the vocabulary"
# generation's KV cache and logits, and score's activations, against the memory available
GRPO_MEMORY_LIMIT_MB=8 expect_error 1 "generation needs [0-9]* MB (KV cache [0-9]* MB: 4 layers x 100001 slots x 8 tokens; .* and 8 MB is available; lower generation_chunk_size" \
    "$GRPO" generate --model "$TMP/b" --dataset "$TMP/d.jsonl" --max_completion_length 8 --generation_chunk_size 100000
printf '{"prompt_ids": [1, 2], "completion_ids": [3]}\n' > "$TMP/s.jsonl"
GRPO_MEMORY_LIMIT_MB=8 expect_error 1 "activations for --batch_tokens 4096 need [0-9]* MB and 8 MB is available; lower --batch_tokens" \
    "$GRPO" score --model "$TMP/b" --data "$TMP/s.jsonl"
GRPO_MEMORY_LIMIT_MB=8 "$GRPO" score --model "$TMP/b" --data "$TMP/s.jsonl" --batch_tokens 64 >/dev/null 2>&1 || fail "score within the limit"

# generation_config.json: the types transformers' GenerationConfig gives its fields
gen_bad() { # JSON PATTERN
    rm -rf "$TMP/g" && mkdir "$TMP/g" && cp "$TMP"/b/* "$TMP/g/" && printf '%s\n' "$1" > "$TMP/g/generation_config.json"
    expect_error 1 "g/generation_config.json: $2" "$GRPO" generate --model "$TMP/g" --dataset "$TMP/d.jsonl"
}
gen_bad '{"temperature": "hot"}' "temperature must be a number"
gen_bad '{"top_p": -1}' "top_p must be a finite number >= 0"
gen_bad '{"top_k": 5.5}' "top_k must be an integer"
gen_bad '{"do_sample": "yes"}' "do_sample must be true or false"
gen_bad '{"eos_token_id": [1, 70000]}' "eos_token_id 70000 is outside the vocabulary"
rm -rf "$TMP/g" && mkdir "$TMP/g" && cp "$TMP"/b/* "$TMP/g/" && printf '{"temperature": 0.7, "top_k": 20, "top_p": 0.8, "do_sample": true, "eos_token_id": [1, 2]}\n' > "$TMP/g/generation_config.json"
"$GRPO" generate --model "$TMP/g" --dataset "$TMP/d.jsonl" --max_completion_length 2 >/dev/null 2>"$TMP/g.err" || fail "a good generation_config.json: $(cat "$TMP/g.err")"

# a prompt past the model's positions (512 here)
python3 -c "print('{\"prompt\": \"%s\"}' % ('x' * 600))" > "$TMP/long.jsonl"
cat "$TMP/d.jsonl" "$TMP/long.jsonl" > "$TMP/two.jsonl"
expect_error 1 "two.jsonl:2: the prompt's 600 tokens and max_completion_length 8 are more than the model's max_position_embeddings (512)" \
    "$GRPO" generate --model "$TMP/b" --dataset "$TMP/two.jsonl" --max_prompt_length 1000 --max_completion_length 8
"$GRPO" generate --model "$TMP/b" --dataset "$TMP/two.jsonl" --max_prompt_length 500 --max_completion_length 8 >/dev/null 2>"$TMP/p.err" \
    || fail "a truncated prompt fits: $(cat "$TMP/p.err")"
python3 -c "print('{\"prompt_ids\": [1], \"completion_ids\": [%s]}' % ', '.join(['5'] * 600))" > "$TMP/long_s.jsonl"
cat "$TMP/s.jsonl" "$TMP/long_s.jsonl" > "$TMP/two_s.jsonl"
expect_error 1 "two_s.jsonl:2: prompt_ids and completion_ids are 601 tokens, more than the model's max_position_embeddings (512)" \
    "$GRPO" score --model "$TMP/b" --data "$TMP/two_s.jsonl"
# sft: a sequence past the model's positions, unless max_length truncates it
python3 -c "print('{\"text\": \"%s\"}' % ('y' * 600))" > "$TMP/long_sft.jsonl"
expect_error 1 "long_sft.jsonl:1: 601 tokens (after truncation to max_length 1024) are more than the model's max_position_embeddings (512); lower max_length" \
    "$GRPO" sft --model "$TMP/b" --dataset "$TMP/long_sft.jsonl" --output_dir "$TMP/s1" --max_steps 1
"$GRPO" sft --model "$TMP/b" --dataset "$TMP/long_sft.jsonl" --output_dir "$TMP/s2" --max_steps 1 --max_length 512 --quiet \
    || fail "sft truncated to max_length 512 fits"
finish
