#!/usr/bin/env bash
# Messages are one line and safe; resume state is not silently wrong (issue 38).
# - What another process or a file wrote reaches a message escaped, on one line:
#   a reward command's reply that is not JSON (an ANSI escape in it), its
#   {"error"} text with a newline, a plugin's error text, a Python reward's
#   exception, a BOM in a dataset past its start, a model's config.json with a BOM,
#   a YAML value with an escape, the reward command itself.
# - A UTF-8 BOM at the start of a dataset is skipped, as datasets reads such a file.
# - A ~5,000-byte --output_dir and a name over NAME_MAX are refused in one short
#   line, before any directory is made.
# - YAML null: the default for TRL's Optional fields with default None, refused
#   with FILE:LINE elsewhere.
# - resume_from_checkpoint latest is the highest checkpoint-N directory; a resume
#   from an earlier checkpoint while later ones are there is refused, or with
#   --overwrite_output_dir removes them; a file named checkpoint-N is no checkpoint.
# - A corrupted metrics.jsonl line stops a resume with FILE:LINE; an unfinished last
#   line is dropped with a warning naming it.
# Prints the number of checks that failed (0 with this build; run with
# GRPO=/work/old/grpo for the count before).
set -u
. "$ROOT/tests/cli/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
ESC=$(printf '\033')
BOM=$(printf '\357\273\277')
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' "$ROOT/tests/fixtures/qwen3/config.json" > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer "$ROOT/assets/byte-tokenizer" --seed 1 --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' > "$TMP/p.jsonl"
T=(train --model "$TMP/m" --dataset "$TMP/p.jsonl" --num_generations 2 --per_device_train_batch_size 2
   --max_completion_length 4 --logging_steps 1 --quiet)
CHECKS=0
# family NAME: the checks from here on count for NAME; family "" reports the last one
FAMILY="" FAMILY_CHECKS=0 FAMILY_FAILED=0 SUMMARY=""
family() {
    [ -n "$FAMILY" ] && SUMMARY="$SUMMARY  $FAMILY: $((FAILED - FAMILY_FAILED)) of $((CHECKS - FAMILY_CHECKS)) checks failed
"
    FAMILY=$1 FAMILY_CHECKS=$CHECKS FAMILY_FAILED=$FAILED
}

# safe STATUS FIXED-TEXT CMD...: exit STATUS, stderr one line holding FIXED-TEXT
# (grep -F), without a raw ESC, CR or BOM, nothing on stdout
safe() {
    local want=$1 text=$2; shift 2
    CHECKS=$((CHECKS + 1))
    "$@" >"$TMP/safe.out" 2>"$TMP/safe.err"
    local got=$?
    if [ "$got" -ne "$want" ]; then fail "exit $got (want $want): $* :: $(head -c 400 "$TMP/safe.err")"; return; fi
    if ! grep -qF -- "$text" "$TMP/safe.err"; then fail "stderr lacks '$text': $(head -c 600 "$TMP/safe.err" | cat -v)"; return; fi
    if [ "$(wc -l < "$TMP/safe.err")" -ne 1 ]; then fail "not one line ($(wc -l < "$TMP/safe.err")): $(head -c 600 "$TMP/safe.err" | cat -v)"; return; fi
    if grep -q "[$ESC$(printf '\r')]" "$TMP/safe.err" || grep -qF "$BOM" "$TMP/safe.err"; then
        fail "a raw control character or BOM in: $(cat -v "$TMP/safe.err")"; return
    fi
}
check() { CHECKS=$((CHECKS + 1)); "$@"; }

# ---- untrusted text in messages ----
family "untrusted text escaped, one line"
safe 1 "reply is not JSON" "$GRPO" "${T[@]}" --max_steps 1 --output_dir "$TMP/o1" \
    --reward_funcs "cmd:while read -r l; do printf '\\033[31mboom\\033[0m\\n'; done"
safe 1 "'\\x1b[31mboom\\x1b[0m'" "$GRPO" "${T[@]}" --max_steps 1 --output_dir "$TMP/o1" \
    --reward_funcs "cmd:while read -r l; do printf '\\033[31mboom\\033[0m\\n'; done"
safe 1 'judge down\nretry\x1b[2J' "$GRPO" "${T[@]}" --max_steps 1 --output_dir "$TMP/o2" \
    --reward_funcs "cmd:while read -r l; do printf '%s\\n' '{\"error\": \"judge down\\nretry\\u001b[2J\"}'; done"
safe 1 "reward command 'exit 3\\n'" "$GRPO" "${T[@]}" --max_steps 1 --output_dir "$TMP/o3" --reward_funcs "cmd:exit 3
"
cat > "$TMP/bad_plugin.c" <<'C'
#include <stdio.h>
#include "reward/reward_plugin.h"
int grpo_reward(const GrpoRewardItem *items, int n, double *out, char *err, size_t err_size) {
    (void)items, (void)n, (void)out;
    snprintf(err, err_size, "line one\nline two \033[1mbold\033[0m");
    return 1;
}
C
if cc -shared -fPIC -I "$ROOT/src" "$TMP/bad_plugin.c" -o "$TMP/bad_plugin.so"; then
    safe 1 "failed: 'line one\\nline two \\x1b[1mbold\\x1b[0m'" "$GRPO" "${T[@]}" --max_steps 1 --output_dir "$TMP/o4" \
        --reward_funcs "plugin:$TMP/bad_plugin.so"
else
    fail "building the plugin"
fi
if command -v python3 >/dev/null; then
    printf 'def bad(completions, **kwargs):\n    raise ValueError("first\\nsecond \\x1b[7m")\n' > "$TMP/bad_reward.py"
    # the function's own stderr (its traceback) is relayed as it wrote it, "[reward bad] " a line, as TRL
    # shows a reward's output; grpo's message is the last line
    CHECKS=$((CHECKS + 1))
    "$GRPO" "${T[@]}" --max_steps 1 --output_dir "$TMP/o5" --reward_funcs "$TMP/bad_reward.py:bad" 2>"$TMP/py.err"
    [ $? -eq 1 ] && grep -v '^\[reward bad\] ' "$TMP/py.err" > "$TMP/py.msg" && [ "$(wc -l < "$TMP/py.msg")" -eq 1 ] &&
        grep -qF 'first\nsecond \x1b[7m' "$TMP/py.msg" && ! grep -q "$ESC" "$TMP/py.msg" \
        || fail "a Python reward's exception: $(cat -v "$TMP/py.err")"
fi
# a BOM at a dataset's start is skipped (datasets' JSON loader does so); past it, shown escaped
printf '%s%s\n%s\n' "$BOM" '{"prompt": "ab"}' '{"prompt": "cd"}' > "$TMP/bom.jsonl"
check "$GRPO" train --model "$TMP/m" --dataset "$TMP/bom.jsonl" --num_generations 2 --per_device_train_batch_size 2 \
    --max_completion_length 4 --quiet --reward_funcs length:5 --max_steps 1 --save_steps 0 --output_dir "$TMP/bom" \
    2>"$TMP/bom.err" || fail "a dataset starting with a BOM: $(cat -v "$TMP/bom.err")"
printf '%s\n%s%s\n' '{"prompt": "ab"}' "$BOM" '{"prompt": "cd"}' > "$TMP/bom2.jsonl"
safe 1 "bom2.jsonl:2: not valid JSON: invalid token near '\\ufeff'" "$GRPO" train --model "$TMP/m" \
    --dataset "$TMP/bom2.jsonl" --num_generations 2 --per_device_train_batch_size 2 --quiet --reward_funcs length:5 \
    --max_steps 1 --output_dir "$TMP/bom2"
# a model's config.json saved with a BOM: transformers' json.load refuses it too; the message shows it
cp -r "$TMP/m" "$TMP/mbom"
{ printf '%s' "$BOM"; cat "$TMP/m/config.json"; } > "$TMP/mbom/config.json"
safe 1 '\ufeff' "$GRPO" generate --model "$TMP/mbom" --prompt hi --max_completion_length 2
# a YAML value with an escape in it
printf 'lr_scheduler_type: "cos\\eine"\n' > "$TMP/esc.yaml"
safe 2 'cos\x1bine' "$GRPO" "${T[@]}" --config "$TMP/esc.yaml" --reward_funcs length:5 --max_steps 1 --output_dir "$TMP/o6"

# a --config key with an escape in it (a quoted YAML key)
printf '"lear\\e[2Jning_rate\\n": 1\n' > "$TMP/key.yaml"
safe 2 "unknown option 'lear\x1b[2Jning_rate\n'" "$GRPO" "${T[@]}" --config "$TMP/key.yaml" --reward_funcs length:5 \
    --output_dir "$TMP/o7"
# the command line's own words: a --config file named with a newline and an escape, an unknown command, a stray
# argument of grpo plot (the file name is shown escaped wherever it appears)
mkdir -p "$TMP/odd"
NLESC="$TMP/odd/a$(printf '\n\033')b.yaml"
printf 'foo_bar: 1\n' > "$NLESC"
safe 2 "a\n\x1bb.yaml:1: unknown option 'foo_bar'" "$GRPO" "${T[@]}" --config "$NLESC" --reward_funcs length:5 \
    --output_dir "$TMP/o8"
printf 'learning_rate: [\n' > "$NLESC"
CHECKS=$((CHECKS + 1))
"$GRPO" "${T[@]}" --config "$NLESC" --reward_funcs length:5 --output_dir "$TMP/o9" 2>"$TMP/yaml.err"
grep -qF 'a\n\x1bb.yaml:2: invalid YAML' "$TMP/yaml.err" && ! grep -q "$ESC" "$TMP/yaml.err" \
    || fail "invalid YAML in an oddly named file: $(cat -v "$TMP/yaml.err")"
safe 2 "unknown command 'tr\x1b[2Jain\n.'" "$GRPO" "$(printf 'tr\033[2Jain\n.')"
safe 2 "unexpected argument 'x\ny'" "$GRPO" plot "$TMP/o1" "$(printf 'x\ny')"

# ---- paths the system cannot hold: refused at once, nothing made ----
family "paths refused before anything is made"
long=$(python3 -c "print('/'.join(['d' * 240] * 21))") # 5,060 bytes, relative: made under $TMP/w if at all
mkdir "$TMP/w"
safe 2 "output_dir 'dddd" sh -c 'cd "$1" && shift && exec "$@"' sh "$TMP/w" "$GRPO" "${T[@]}" --reward_funcs length:5 \
    --max_steps 1 --output_dir "$long"
check [ "$(wc -c < "$TMP/safe.err")" -lt 400 ] || fail "the message is not shortened: $(wc -c < "$TMP/safe.err") bytes"
check [ -z "$(ls -A "$TMP/w")" ] || fail "a refused output_dir left $(find "$TMP/w" -type d | wc -l) directories"
name=$(printf 'n%.0s' $(seq 300))
safe 2 "NAME_MAX" "$GRPO" "${T[@]}" --reward_funcs length:5 --max_steps 1 --output_dir "$TMP/x/$name"
check [ ! -e "$TMP/x" ] || fail "a refused output_dir left $TMP/x"
printf '%s\n' '{"text": "hello world"}' '{"text": "abc"}' > "$TMP/s.jsonl"
check "$GRPO" sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --quiet --use_peft true \
    --lora_r 2 --max_steps 1 --save_steps 0 --output_dir "$TMP/ad" || fail "a LoRA run"
safe 1 "NAME_MAX" "$GRPO" merge --model "$TMP/m" --adapter "$TMP/ad" --output_dir "$TMP/y/$name"
check [ ! -e "$TMP/y" ] || fail "a refused merge left $TMP/y"
safe 2 "NAME.tmp-PID-N" "$GRPO" "${T[@]}" --reward_funcs length:5 --max_steps 1 --output_dir "$TMP/z/$(printf 'z%.0s' $(seq 230))"
check [ ! -e "$TMP/z" ] || fail "a refused output_dir left $TMP/z"

# ---- YAML null: TRL's Optional fields' default, refused elsewhere ----
family "YAML null as TRL reads it"
printf 'epsilon_high: null\nreward_weights: ~\nsave_total_limit:\nlora_target_modules: Null\ndataset_mixture: null\n' > "$TMP/null_ok.yaml"
check "$GRPO" "${T[@]}" --config "$TMP/null_ok.yaml" --reward_funcs length:5 --max_steps 1 --save_steps 0 \
    --output_dir "$TMP/n1" 2>"$TMP/n1.err" || fail "nulls of Optional fields: $(cat "$TMP/n1.err")"
printf 'seed: 3\nlearning_rate: null\n' > "$TMP/null_lr.yaml"
safe 2 "null_lr.yaml:2: learning_rate: null is not a value" "$GRPO" "${T[@]}" --config "$TMP/null_lr.yaml" \
    --reward_funcs length:5 --max_steps 1 --output_dir "$TMP/n2"
printf 'max_completion_length: NULL\n' > "$TMP/null_len.yaml"
safe 2 "null_len.yaml:1: max_completion_length: null is not a value" "$GRPO" "${T[@]}" --config "$TMP/null_len.yaml" \
    --reward_funcs length:5 --max_steps 1 --output_dir "$TMP/n3"
printf 'use_peft: ~\n' > "$TMP/null_peft.yaml"
safe 2 "null_peft.yaml:1: use_peft: null" "$GRPO" "${T[@]}" --config "$TMP/null_peft.yaml" --reward_funcs length:5 \
    --max_steps 1 --output_dir "$TMP/n4"

# ---- resume: latest is the highest checkpoint-N directory, of this history ----
family "stale later checkpoints and latest"
R=("${T[@]}" --reward_funcs length:5 --output_dir "$TMP/r")
check "$GRPO" "${R[@]}" --max_steps 4 --save_steps 2 || fail "a 4-step run"
safe 1 "holds checkpoint-4, later than step 2 resumed from" "$GRPO" "${R[@]}" --max_steps 3 --save_steps 1 \
    --resume_from_checkpoint "$TMP/r/checkpoint-2"
check [ "$(wc -l < "$TMP/r/metrics.jsonl")" -ge 4 ] || fail "a refused resume cut metrics.jsonl: $(cat "$TMP/r/metrics.jsonl")"
check "$GRPO" "${R[@]}" --max_steps 3 --save_steps 1 --resume_from_checkpoint "$TMP/r/checkpoint-2" \
    --overwrite_output_dir true 2>"$TMP/r.err" || fail "resume with --overwrite_output_dir: $(cat "$TMP/r.err")"
check [ ! -e "$TMP/r/checkpoint-4" ] || fail "the later checkpoint-4 is still there: latest would pick it"
touch "$TMP/r/checkpoint-99"
check "$GRPO" "${R[@]}" --max_steps 4 --save_steps 1 --resume_from_checkpoint latest 2>"$TMP/l.err" \
    || fail "latest with a file named checkpoint-99: $(cat "$TMP/l.err")"
check [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["global_step"])' "$TMP/r/checkpoint-4/trainer_state.json")" = 4 ] \
    || fail "latest did not continue to checkpoint-4"

# ---- a corrupted metrics.jsonl line: said, never dropped silently ----
family "corrupted metrics.jsonl lines on resume"
M=(train --model "$TMP/m" --dataset "$TMP/p.jsonl" --num_generations 2 --per_device_train_batch_size 2
   --max_completion_length 4 --logging_steps 1 --reward_funcs length:5 --output_dir "$TMP/c")
check "$GRPO" "${M[@]}" --quiet --max_steps 2 --save_steps 2 || fail "a 2-step run"
sed -i '1s/.*/{"step": 1, "lo/' "$TMP/c/metrics.jsonl"
cp "$TMP/c/metrics.jsonl" "$TMP/c.before"
safe 1 "metrics.jsonl:1: not JSON" "$GRPO" "${M[@]}" --quiet --max_steps 3 --resume_from_checkpoint latest
check cmp -s "$TMP/c.before" "$TMP/c/metrics.jsonl" || fail "a refused resume changed metrics.jsonl"
sed -i '1s/.*/{"step": 1}/' "$TMP/c/metrics.jsonl"
printf '{"step": 3, "lo\033' >> "$TMP/c/metrics.jsonl" # an interrupted write
"$GRPO" "${M[@]}" --max_steps 3 --resume_from_checkpoint latest >/dev/null 2>"$TMP/c.err"
check [ $? -eq 0 ] || fail "resume after an unfinished last line: $(cat "$TMP/c.err")"
check grep -q "metrics.jsonl:[0-9]*: an unfinished last line" "$TMP/c.err" || fail "no warning for the unfinished line: $(cat "$TMP/c.err")"
CHECKS=$((CHECKS + 1))
grep -q "$ESC" "$TMP/c.err" && fail "the warning holds a raw ESC: $(cat -v "$TMP/c.err")"
check python3 -c '
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
assert steps[:3] == [1, 2, 3], steps' "$TMP/c/metrics.jsonl" || fail "metrics.jsonl after the resume: $(cat "$TMP/c/metrics.jsonl")"

family ""
printf '%s' "$SUMMARY"
echo "$CHECKS checks, $FAILED failed"
finish
