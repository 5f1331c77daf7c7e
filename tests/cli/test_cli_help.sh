#!/usr/bin/env bash
# What a person meets first (issue 39): grpo --version and grpo version (the VERSION
# file's number), grpo help (the commands), grpo help CMD (CMD's options, as CMD
# --help), an unknown command or option: one line with a likely intended name, exit 2.
set -u
. "$ROOT/tests/cli/lib.sh"

v=$(cat "$ROOT/VERSION")
out=$("$GRPO" --version) || fail "--version exits $?"
case "$out" in "grpo $v"|"grpo $v (git "*")") ;; *) fail "--version: '$out' (VERSION is $v)" ;; esac
[ "$(echo "$out" | wc -l)" -eq 1 ] || fail "--version is not one line"
[ "$("$GRPO" version)" = "$out" ] || fail "grpo version differs from grpo --version"
"$GRPO" train --help | head -n 1 | grep -qxF "$out" || fail "train --help does not open with the version"

"$GRPO" help > "$TMP/help.out" || fail "grpo help exits $?"
grep -q '^  train ' "$TMP/help.out" && grep -q '^  help ' "$TMP/help.out" || fail "grpo help does not list the commands"
for c in train sft eval generate score init merge plot tokenize; do
    "$GRPO" help $c > "$TMP/h1" 2>&1 || fail "grpo help $c exits $?"
    "$GRPO" $c --help > "$TMP/h2" 2>&1
    cmp -s "$TMP/h1" "$TMP/h2" || fail "grpo help $c is not grpo $c --help"
done
"$GRPO" help train | grep -q -- '^  --max_completion_length N' || fail "grpo help train lacks train's options"

# unknown names: one line, a likely intended one where there is one, exit 2
expect_error 2 "^grpo: unknown command 'trian'; did you mean 'train'? (grpo help lists the commands)$" "$GRPO" trian
expect_error 2 "^grpo: unknown command 'trian'; did you mean 'train'?" "$GRPO" help trian
expect_error 2 "^grpo: unknown command 'bogus' (grpo help lists the commands)$" "$GRPO" help bogus
[ "$(wc -l < "$TMP/expect.err")" -eq 1 ] || fail "unknown command: not one line"
T=(train --model m --dataset d --output_dir o --reward_funcs length:3)
expect_error 2 "unknown option '--lora_rank'; did you mean '--lora_r'?" "$GRPO" "${T[@]}" --lora_rank 8
expect_error 2 "unknown option '--lr'; did you mean '--learning_rate'?" "$GRPO" "${T[@]}" --lr 1e-5
expect_error 2 "unknown option '--per_device_batch_size'; did you mean '--per_device_train_batch_size'?" \
    "$GRPO" "${T[@]}" --per_device_batch_size 4
expect_error 2 "unknown option '--max_new_tokens'; did you mean '--max_completion_length'?" "$GRPO" "${T[@]}" --max_new_tokens 9
expect_error 2 "unknown option '--grad_accum'; did you mean '--gradient_accumulation_steps'?" "$GRPO" "${T[@]}" --grad_accum 2
expect_error 2 "unknown option '--lr'; did you mean '--learning_rate'?" "$GRPO" sft --model m --dataset d --output_dir o --lr 1
expect_error 2 "unknown option '--banana' (see grpo train --help)" "$GRPO" "${T[@]}" --banana 1
grep -q "did you mean" "$TMP/expect.err" && fail "a suggestion for a name close to nothing"
printf 'lr: 0.1\nbanana: 1\n' > "$TMP/u.yaml"
"$GRPO" "${T[@]}" --config "$TMP/u.yaml" 2> "$TMP/u.err"
grep -q "u.yaml:1: unknown option 'lr'; did you mean 'learning_rate'?" "$TMP/u.err" || fail "YAML key lr: $(cat "$TMP/u.err")"
grep -q "u.yaml:2: unknown option 'banana'$" "$TMP/u.err" || fail "YAML key banana: $(cat "$TMP/u.err")"
finish
