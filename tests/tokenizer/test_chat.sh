#!/usr/bin/env bash
# Chat templates: `grpo tokenize --chat` renders the real chat_template of
# Qwen3, Qwen2.5, Llama 3 and Llama 3.1 byte-identically to HF's @huggingface/jinja
# (tests/tokenizer/chat_cases.mjs: single and multi-turn, with and without a
# system message, add_generation_prompt on/off, Qwen3's enable_thinking unset,
# true and false). Missing and unsupported templates fail with a clear error.
source "$(dirname "$0")/common.sh"

node "$HERE/chat_cases.mjs" > "$TMP/cases.jsonl" || { fail "case generation"; finish; }
for D in "$QWEN3" "$QWEN25" "$LLAMA3" "$LLAMA31"; do
    name=$(basename "$(dirname "$D")")
    "$GRPO" tokenize --model "$D" --chat < "$TMP/cases.jsonl" > "$TMP/got.jsonl" || fail "$name: --chat exited $?"
    node "$REF" chat "$D" "$TMP/cases.jsonl" > "$TMP/want.jsonl"
    check "$name: chat == @huggingface/jinja" node "$REF" compare "$TMP/got.jsonl" "$TMP/want.jsonl"
done

# A model whose tokenizer_config.json has no chat_template, and one whose
# template uses a construct outside the subset: one line naming the model.
mkdir -p "$TMP/notmpl" "$TMP/macro"
for d in notmpl macro; do ln -s "$QWEN3/tokenizer.json" "$TMP/$d/tokenizer.json"; done
echo '{"eos_token": "<|im_end|>"}' > "$TMP/notmpl/tokenizer_config.json"
echo '{"chat_template": "{% macro m() %}x{% endmacro %}{{ m() }}"}' > "$TMP/macro/tokenizer_config.json"
echo '{"messages": [{"role": "user", "content": "hi"}]}' > "$TMP/one.jsonl"
err=$("$GRPO" tokenize --model "$TMP/notmpl" --chat < "$TMP/one.jsonl" 2>&1 >/dev/null); rc=$?
check "no chat_template: exit 1 naming the model ($err)" \
    bash -c '[ "$1" = 1 ] && grep -q "notmpl: tokenizer_config.json has no chat_template (supported: " <<<"$2"' _ "$rc" "$err"
err=$("$GRPO" tokenize --model "$TMP/macro" --chat < "$TMP/one.jsonl" 2>&1 >/dev/null); rc=$?
check "unsupported template: exit 1 naming the model ($err)" \
    bash -c '[ "$1" = 1 ] && grep -q "macro: chat_template: line 1: unsupported statement .macro. .*supported: " <<<"$2"' _ "$rc" "$err"
finish
