#!/usr/bin/env bash
# A TRL user's config (cli/trl_keys.c): TRL's own keys are mapped
# (model_name_or_path, dataset_name, save_strategy 'no'), accepted with one
# warning that lists every key without effect and why, or accepted only with
# TRL's default value (use_peft, load_in_4bit, ...); unknown keys
# are refused together in one error, each with a did-you-mean; Hub ids resolve
# in the local Hugging Face cache, a missing one is refused with how to get it;
# a .json file holding one array of records is a dataset.
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
printf '{"prompt": "ab"}\n{"prompt": "cd"}\n' > "$TMP/d.jsonl"
# the keys a no-effect warning lists, one a line
listed() { grep "warning: TRL options" "$1" | sed 's/^[^:]*: warning: [^:]*: //; s/ ([^()]*)//g; s/; /\n/g; s/, /\n/g'; }
SMALL=(--num_generations 2 --per_device_train_batch_size 2 --max_completion_length 4 --max_steps 2 --quiet)

# the shape of TRL's docs (clis.md's grpo_config.yaml) plus the keys of a typical TRL recipe
cat > "$TMP/trl.yaml" <<EOF
model_name_or_path: $TMP/m
dataset_name: $TMP/d.jsonl
reward_funcs:
  - reward_len
bf16: True
tf32: True
use_vllm: false
vllm_mode: colocate
report_to: none
gradient_checkpointing: true
learning_rate: 3.0e-4
lr_scheduler_type: constant
save_strategy: "no"
save_steps: 1
num_completions_to_print: 2
push_to_hub: False
scale_rewards: False
use_peft: false
entropy_coef: 0.0
eval_strategy: "no"
lora_target_modules: [q_proj, v_proj]
model_init_kwargs:
  torch_dtype: bfloat16
EOF
"$GRPO" train --config "$TMP/trl.yaml" --output_dir "$TMP/o" "${SMALL[@]}" 2>"$TMP/o.err" || fail "TRL config: $(cat "$TMP/o.err")"
[ "$(wc -l < "$TMP/o.err")" -eq 1 ] && grep -q "warning: TRL options without effect here: " "$TMP/o.err" \
    || fail "one warning line: $(cat "$TMP/o.err")"
# bf16 True: the precision keys' reason says what bf16 does, not "computation is fp32"
for k in "tf32 (precision is bf16's: bf16 products with fp32 sums" "; vllm_mode (generation is built in);" \
    "num_completions_to_print" "model_init_kwargs"; do
    grep -qF "$k" "$TMP/o.err" || fail "the warning lacks '$k': $(cat "$TMP/o.err")"
done
# the listed keys, one a line: none took effect, and TRL's defaults that match grpo.c (use_vllm false,
# push_to_hub False) are silent
listed "$TMP/o.err" | grep -xE "learning_rate|scale_rewards|use_peft|entropy_coef|eval_strategy|save_strategy|use_vllm|push_to_hub" \
    && fail "keys that took effect or have TRL's default are not 'without effect': $(cat "$TMP/o.err")"
ls -d "$TMP"/o/checkpoint-* >/dev/null 2>&1 && fail "save_strategy 'no' should write no checkpoint (save_steps 1 notwithstanding)"
python3 - "$TMP/o/metrics.jsonl" <<'PY' || fail "the run did not use the TRL config's values"
import json, sys
m = [json.loads(l) for l in open(sys.argv[1]) if '"learning_rate"' in l]
assert m and abs(m[0]["learning_rate"] - 3e-4) < 1e-12, m
assert any(k.startswith("rewards/reward_len") for k in m[0]), m[0].keys()
PY
# examples/trl/grpo_config.yaml (TRL's names only) runs with one warning
"$GRPO" train --config examples/trl/grpo_config.yaml --model_name_or_path "$TMP/m" --output_dir "$TMP/ex" --max_steps 1 \
    --num_generations 2 --per_device_train_batch_size 2 --gradient_accumulation_steps 1 --max_completion_length 4 \
    --quiet false 2>"$TMP/ex.err" || fail "examples/trl/grpo_config.yaml: $(cat "$TMP/ex.err")"
[ "$(grep -c warning "$TMP/ex.err")" -eq 1 ] && ls "$TMP"/ex/runs/*/events.out.tfevents.* >/dev/null 2>&1 \
    || fail "the example: one warning and TensorBoard files: $(cat "$TMP/ex.err")"

# the same on the command line, TRL's flag forms included
"$GRPO" train --model_name_or_path "$TMP/m" --dataset_name "$TMP/d.jsonl" --reward_funcs reward_len --output_dir "$TMP/c" \
    "${SMALL[@]}" --bf16 --tf32 --use_vllm False --report_to tensorboard wandb --vllm_mode=colocate --lora_r 16 2>"$TMP/c.err" \
    || fail "TRL keys on the command line: $(cat "$TMP/c.err")"
grep -qF "tf32 (precision is bf16's" "$TMP/c.err" && ! listed "$TMP/c.err" | grep -qxE "bf16|use_vllm" \
    && ! grep -qF "lora_r" "$TMP/c.err" && grep -qF "report_to wandb (metrics go to" "$TMP/c.err" \
    || fail "command-line warning: $(cat "$TMP/c.err")"

# TRL's default only: anything else is refused with the reason
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --output_dir "$TMP/bad" "${SMALL[@]}")
expect_error 2 "use_dora 'true' is not supported: DoRA is not supported" "$GRPO" "${T[@]}" --use_peft --use_dora
expect_error 2 "lora_task_type 'SEQ_CLS' is not supported" "$GRPO" "${T[@]}" --use_peft --lora_task_type SEQ_CLS
expect_error 2 "save_strategy 'best' saves when an evaluation improves metric_for_best_model" \
    "$GRPO" "${T[@]}" --save_strategy best
"$GRPO" "${T[@]}" --entropy_coef 0.01 --output_dir "$TMP/ent" --logging_steps 1 || fail "entropy_coef"
grep -q '"entropy_coef": 0.01' "$TMP/ent/metrics.jsonl" || fail "entropy_coef is logged, as TRL does"
# adaptive entropy control (TRL's use_adaptive_entropy): the coefficient moves by entropy_coef_delta each step,
# up while the step's entropy is <= entropy_target; the bonus applies from the step after a measurement
A=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --num_generations 2 --per_device_train_batch_size 2
   --max_completion_length 4 --max_steps 3 --logging_steps 1 --quiet --adam_epsilon 1e-2 --learning_rate 1e-3)
"$GRPO" "${A[@]}" --output_dir "$TMP/ad" --use_adaptive_entropy --entropy_coef_delta 0.01 --entropy_target 100 --save_steps 1 \
    || fail "use_adaptive_entropy"
[ "$(grep -o '"entropy_coef": [0-9.]*' "$TMP/ad/metrics.jsonl" | tr '\n' ,)" = '"entropy_coef": 0.01,"entropy_coef": 0.02,"entropy_coef": 0.03,' ] \
    || fail "the coefficient climbs while the entropy is below the target: $(grep -o '"entropy_coef": [0-9.]*' "$TMP/ad/metrics.jsonl")"
"$GRPO" "${A[@]}" --output_dir "$TMP/plain3" || fail "plain run"
"$GRPO" "${A[@]}" --output_dir "$TMP/ad0" --use_adaptive_entropy --entropy_coef 0.5 --entropy_target -1 || fail "target -1"
cmp -s "$TMP/ad0/model.safetensors" "$TMP/plain3/model.safetensors" \
    || fail "an entropy above the target never applies the bonus: the weights should equal a run without it"
cmp -s "$TMP/ad/model.safetensors" "$TMP/plain3/model.safetensors" && fail "the applied bonus changed nothing"
grep -q '"entropy_coef": 0.49' "$TMP/ad0/metrics.jsonl" && grep -q '"entropy_coef": 0.485' "$TMP/ad0/metrics.jsonl" \
    || fail "the coefficient falls while the entropy is above the target: $(grep -o '"entropy_coef": [0-9.]*' "$TMP/ad0/metrics.jsonl")"
# the controller's state is in the checkpoint: a resume gives the uninterrupted run's weights
cp "$TMP/ad/model.safetensors" "$TMP/ad_full.safetensors"
rm -rf "$TMP/ad/checkpoint-2" "$TMP/ad/checkpoint-3" "$TMP/ad/model.safetensors"
"$GRPO" "${A[@]}" --output_dir "$TMP/ad" --use_adaptive_entropy --entropy_coef_delta 0.01 --entropy_target 100 \
    --resume_from_checkpoint "$TMP/ad/checkpoint-1" || fail "resume with adaptive entropy control"
cmp -s "$TMP/ad/model.safetensors" "$TMP/ad_full.safetensors" || fail "resumed adaptive run differs"
"$GRPO" "${A[@]}" --output_dir "$TMP/plain3c" --save_steps 1 >/dev/null 2>&1
rm -rf "$TMP/plain3c/checkpoint-2" "$TMP/plain3c/checkpoint-3"
expect_error 1 "trainer_state.json: entropy_control (entropy_coef, last_world_entropy) is missing" \
    "$GRPO" "${A[@]}" --output_dir "$TMP/plain3c" --use_adaptive_entropy --resume_from_checkpoint "$TMP/plain3c/checkpoint-1"
printf 'eval_strategy: steps\n' > "$TMP/e.yaml"
printf '{"text": "hello"}\n' > "$TMP/s0.jsonl"
expect_error 2 "e.yaml:1: eval_strategy 'steps' is not supported: SFT has no evaluation during training yet" \
    "$GRPO" sft --model "$TMP/m" --dataset "$TMP/s0.jsonl" --output_dir "$TMP/s0" --config "$TMP/e.yaml"
printf 'generation_kwargs:\n  do_sample: true\n' > "$TMP/g.yaml"
expect_error 2 "g.yaml:1: generation_kwargs '(a list or mapping)' is not supported: set temperature" \
    "$GRPO" "${T[@]}" --config "$TMP/g.yaml"
printf 'generation_kwargs: {}\nreward_model_name_or_path: null\n' > "$TMP/g0.yaml"
"$GRPO" "${T[@]}" --config "$TMP/g0.yaml" --output_dir "$TMP/g0" 2>/dev/null || fail "empty generation_kwargs, null reward model"

# unknown keys: all of them in one error, each with where it is and a likely name
printf 'lerning_rate: 1e-5\nnum_generation: 4\nfoo_bar_baz: 1\n' > "$TMP/u.yaml"
"$GRPO" "${T[@]}" --config "$TMP/u.yaml" --max_step 3 >/dev/null 2>"$TMP/u.err"
[ $? -eq 2 ] || fail "unknown keys: exit status"
for l in "grpo train: 4 unknown options (see grpo train --help):" \
    "  $TMP/u.yaml:1: unknown option 'lerning_rate'; did you mean 'learning_rate'?" \
    "  $TMP/u.yaml:2: unknown option 'num_generation'; did you mean 'num_generations'?" \
    "  $TMP/u.yaml:3: unknown option 'foo_bar_baz'" \
    "  unknown option '--max_step'; did you mean '--max_steps'?"; do
    grep -qxF "$l" "$TMP/u.err" || fail "unknown-key report lacks the line '$l': $(cat "$TMP/u.err")"
done
grep -q "foo_bar_baz'; did you mean" "$TMP/u.err" && fail "no suggestion for a name close to nothing"
# a file of 20000 unknown keys is reported at once, the first 50 listed; 20000 repeats of one
# key are refused at once
python3 -c "print('\n'.join('unknown_key_%d: 1' % i for i in range(20000)))" > "$TMP/many.yaml"
timeout 10 "$GRPO" "${T[@]}" --config "$TMP/many.yaml" >/dev/null 2>"$TMP/many.err"
[ $? -eq 2 ] && grep -q "^grpo train: 20000 unknown options" "$TMP/many.err" && grep -qx "  ... and 19950 more" "$TMP/many.err" \
    || fail "20000 unknown keys: $(head -3 "$TMP/many.err")"
python3 -c "print('\n'.join('use_vllm: true' for i in range(20000)))" > "$TMP/rep.yaml"
expect_error 2 "rep.yaml:2: 'use_vllm' is given twice (first at line 1)" timeout 10 "$GRPO" "${T[@]}" \
    --config "$TMP/rep.yaml" --output_dir "$TMP/rep" # at once, not after 20000 comparisons each
# a GRPO-only key is unknown to sft, an SFT-only key to train
expect_error 2 "unknown option '--use_vllm'" "$GRPO" sft --model "$TMP/m" --dataset "$TMP/d.jsonl" --output_dir "$TMP/s" --use_vllm
expect_error 2 "unknown option '--packing'" "$GRPO" "${T[@]}" --packing
printf '{"text": "hello"}\n' > "$TMP/s.jsonl"
"$GRPO" sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --output_dir "$TMP/s" --max_steps 1 --quiet --packing false \
    --dataset_text_field text --bf16 2>/dev/null || fail "sft with TRL's SFTConfig keys"
expect_error 2 "dataset_text_field 'content' is not supported" \
    "$GRPO" sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --output_dir "$TMP/s2" --dataset_text_field content

# Hub ids: a model in the local Hugging Face cache is used from there
snap="$TMP/hf/hub/models--TinyOrg--tiny-model/snapshots/0123abcd"
mkdir -p "$snap" "$TMP/hf/hub/models--TinyOrg--tiny-model/refs" && cp "$TMP"/m/* "$snap/" \
    && echo 0123abcd > "$TMP/hf/hub/models--TinyOrg--tiny-model/refs/main"
HF_HOME="$TMP/hf" "$GRPO" generate --model TinyOrg/tiny-model --prompt hi --max_completion_length 2 >/dev/null 2>"$TMP/h.err" \
    || fail "model from the Hub cache: $(cat "$TMP/h.err")"
grep -qF "TinyOrg/tiny-model: the Hugging Face cache's $snap" "$TMP/h.err" || fail "the cache path is said: $(cat "$TMP/h.err")"
HF_HUB_CACHE="$TMP/hf/hub" "$GRPO" generate --model TinyOrg/tiny-model --prompt hi --max_completion_length 2 >/dev/null 2>&1 \
    || fail "HF_HUB_CACHE"
expect_error 2 "--model 'TinyOrg/other' is neither a directory nor a model in the Hugging Face cache ($TMP/hf/hub); download it first" \
    env HF_HOME="$TMP/hf" "$GRPO" generate --model TinyOrg/other --prompt hi
expect_error 2 "--dataset 'trl-lib/tldr' is not a local file; grpo.c reads JSON lines (or a JSON array): convert a Hub dataset with python3" \
    "$GRPO" train --model "$TMP/m" --dataset_name trl-lib/tldr --reward_funcs reward_len --output_dir "$TMP/x"

# dataset_name as a directory (a downloaded dataset repository): its dataset_train_split file,
# SPLIT.jsonl or SPLIT.json, also under data/; eval_dataset's with dataset_test_split
mkdir -p "$TMP/dsd/data" && cp "$TMP/d.jsonl" "$TMP/dsd/data/train.jsonl" && printf '[{"prompt": "x"}]' > "$TMP/dsd/test.json"
printf 'dataset_name: %s\ndataset_train_split: train\neval_strategy: steps\neval_dataset: %s\n' "$TMP/dsd" "$TMP/dsd" > "$TMP/dsd.yaml"
"$GRPO" train --model "$TMP/m" --reward_funcs reward_len --output_dir "$TMP/dsdo" "${SMALL[@]}" --config "$TMP/dsd.yaml" \
    || fail "a dataset directory"
grep -q '"eval_reward"' "$TMP/dsdo/metrics.jsonl" || fail "eval_dataset directory (test.json)"
expect_error 2 "dsd is a directory without validation.jsonl or validation.json (nor under data/)" \
    "$GRPO" train --model "$TMP/m" --dataset "$TMP/dsd" --dataset_train_split validation --reward_funcs reward_len --output_dir "$TMP/x"

# a .json file holding one JSON array of records
python3 -c "import json; json.dump([{'prompt': 'ab'}, {'prompt': 'cd'}], open('$TMP/d.json', 'w'), indent=2)"
"$GRPO" train --model "$TMP/m" --dataset "$TMP/d.json" --reward_funcs reward_len --output_dir "$TMP/j" "${SMALL[@]}" --seed 7 \
    || fail "train on a JSON array"
"$GRPO" train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --output_dir "$TMP/l" "${SMALL[@]}" --seed 7 \
    || fail "train on JSON lines"
cmp -s "$TMP/j/model.safetensors" "$TMP/l/model.safetensors" || fail "the same records as an array and as lines train differently"
printf '[\n  {"prompt": "ab"},\n  {"prompt": 5}\n]\n' > "$TMP/bad.json"
expect_error 1 "bad.json:3: " "$GRPO" generate --model "$TMP/m" --dataset "$TMP/bad.json"

# chat_template_kwargs (a JSON object on the command line, a mapping in YAML) reach the chat template
cp -r "$TMP/m" "$TMP/kw"
python3 -c "import json, sys; p = sys.argv[1]; c = json.load(open(p)); c['chat_template'] = \"{{ greeting | default('none') }}:{% for m in messages %}{{ m.content }}{% endfor %}\"; json.dump(c, open(p, 'w'))" \
    "$TMP/kw/tokenizer_config.json"
"$GRPO" generate --model "$TMP/kw" --chat hi --chat_template_kwargs '{"greeting": "HEY"}' --max_completion_length 1 \
    --num_generations 1 2>/dev/null | grep -qx "=== prompt 0: HEY:hi" || fail "generate --chat_template_kwargs"
printf '{"prompt": [{"role": "user", "content": "ab"}]}\n' > "$TMP/chat.jsonl"
printf 'chat_template_kwargs:\n  greeting: YO\n  enable_thinking: false\n' > "$TMP/kw.yaml"
"$GRPO" train --model "$TMP/kw" --dataset "$TMP/chat.jsonl" --reward_funcs reward_len --output_dir "$TMP/kwt" --config "$TMP/kw.yaml" \
    "${SMALL[@]}" --log_completions || fail "train with chat_template_kwargs"
grep -q '"YO:ab"' "$TMP/kwt/completions.jsonl" || fail "train's prompts rendered with the kwargs: $(head -c 300 "$TMP/kwt/completions.jsonl")"
expect_error 2 "chat_template_kwargs expects a JSON object such as" "$GRPO" generate --model "$TMP/kw" --chat hi --chat_template_kwargs '[1]'

# the output directory is save_pretrained's: config.json with the special ids, a
# generation_config.json (the source's when it has one, else the ids and the
# sampling the run used), in the final model and in checkpoints
cp -r "$TMP/m" "$TMP/nogen" && rm -f "$TMP/nogen/generation_config.json"
python3 -c "import json, sys; p = sys.argv[1]; c = json.load(open(p)); c.pop('pad_token_id', None); json.dump(c, open(p, 'w'))" "$TMP/nogen/config.json"
"$GRPO" train --model "$TMP/nogen" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --output_dir "$TMP/sp" "${SMALL[@]}" \
    --temperature 0.7 --top_p 0.9 --save_steps 1 || fail "train from a model without generation_config.json"
for d in "$TMP/sp" "$TMP/sp/checkpoint-1"; do
    python3 - "$d" <<'PY' || fail "$d: save_pretrained's files"
import json, sys
cfg = json.load(open(sys.argv[1] + "/config.json"))
gen = json.load(open(sys.argv[1] + "/generation_config.json"))
assert cfg["pad_token_id"] == 256 and cfg["eos_token_id"] == 258, cfg   # the byte tokenizer's <pad>, <eos>
assert gen == {"eos_token_id": 258, "pad_token_id": 256, "do_sample": True, "temperature": 0.7, "top_p": 0.9,
               "top_k": 0, "repetition_penalty": 1.0}, gen
PY
done
printf '{"eos_token_id": 258, "temperature": 0.6}\n' > "$TMP/nogen/generation_config.json"
"$GRPO" train --model "$TMP/nogen" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --output_dir "$TMP/sp2" "${SMALL[@]}" \
    && cmp -s "$TMP/nogen/generation_config.json" "$TMP/sp2/generation_config.json" || fail "the source's generation_config.json is kept"

# TRL's reward names reach the run: the log names are TRL's
printf '{"prompt": "1+1=", "solution": "2"}\n{"prompt": "2+2=", "solution": "4"}\n' > "$TMP/math.jsonl"
"$GRPO" train --model "$TMP/m" --dataset "$TMP/math.jsonl" --reward_funcs accuracy_reward think_format_reward reward_len \
    --output_dir "$TMP/r" "${SMALL[@]}" --logging_steps 1 || fail "TRL's reward names"
grep -q '"rewards/accuracy_reward/mean": 0, "rewards/accuracy_reward/std": 0, "rewards/think_format_reward/mean": 0' \
    "$TMP/r/metrics.jsonl" || fail "TRL's reward names in metrics.jsonl: $(head -c 600 "$TMP/r/metrics.jsonl")"
finish
