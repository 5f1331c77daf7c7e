#!/usr/bin/env bash
# Chat templates with tools (issue 37): `grpo tokenize --chat` renders the tool
# sections of the real Qwen3 and Qwen2.5 templates byte-identically to HF's
# @huggingface/jinja — the tools' JSON schemas in the system turn (tools= in
# the template context, as apply_chat_template), assistant turns carrying
# tool_calls (arguments an object or a string), tool results one or several in
# a row, with and without a system message. Llama 3 / 3.1's templates as
# packaged here have no tool section: they must render the same either way. A
# `tools` that is not a list and a message without a role are one-line errors.
source "$(dirname "$0")/common.sh"

CALC='{"type": "function", "function": {"name": "calculator", "description": "Evaluates an arithmetic expression exactly.", "parameters": {"type": "object", "properties": {"expression": {"type": "string", "description": "e.g. 123456789 * 987654321"}}, "required": ["expression"]}}}'
NOW='{"type": "function", "function": {"name": "now", "description": "The time.", "parameters": {"type": "object", "properties": {}}}}'
CALL='{"type": "function", "function": {"name": "calculator", "arguments": {"expression": "12345678901 + 98765432109"}}}'
CALL_STR='{"type": "function", "function": {"name": "calculator", "arguments": "{\"expression\": \"2*3\"}"}}'
U='{"role": "user", "content": "What is 12345678901 + 98765432109?"}'
S='{"role": "system", "content": "You are exact."}'
A_CALL="{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [$CALL]}"
A_TWO="{\"role\": \"assistant\", \"content\": \"Two calls.\", \"tool_calls\": [$CALL, $CALL_STR]}"
T1='{"role": "tool", "name": "calculator", "content": "111111111010"}'
T2='{"role": "tool", "name": "calculator", "content": "{'"'"'error'"'"': '"'"'Tool calc not found.'"'"'}"}'
A_END='{"role": "assistant", "content": "The sum is 111111111010."}'
cat > "$TMP/cases.jsonl" <<JSONL
{"messages": [$U], "tools": [$CALC]}
{"messages": [$S, $U], "tools": [$CALC, $NOW]}
{"messages": [$U, $A_CALL, $T1], "tools": [$CALC], "add_generation_prompt": true}
{"messages": [$S, $U, $A_CALL, $T1, $A_END], "tools": [$CALC], "add_generation_prompt": false}
{"messages": [$U, $A_TWO, $T1, $T2], "tools": [$CALC], "add_generation_prompt": true}
{"messages": [$U, $A_TWO, $T1, $T2], "tools": [$CALC], "add_generation_prompt": true, "enable_thinking": false}
{"messages": [$U, $A_CALL, $T1], "add_generation_prompt": true}
{"messages": [$U], "tools": []}
JSONL
for D in "$QWEN3" "$QWEN25" "$LLAMA3" "$LLAMA31"; do
    name=$(basename "$(dirname "$D")")
    "$GRPO" tokenize --model "$D" --chat < "$TMP/cases.jsonl" > "$TMP/got.jsonl" || fail "$name: --chat exited $?"
    node "$REF" chat "$D" "$TMP/cases.jsonl" > "$TMP/want.jsonl"
    check "$name: chat with tools == @huggingface/jinja" node "$REF" compare "$TMP/got.jsonl" "$TMP/want.jsonl"
    cp "$TMP/got.jsonl" "$TMP/got-$name.jsonl"
done
# the tools reach the prompt: Qwen's <tools> section holds the schema
check "qwen3: the calculator's schema is in the prompt" grep -q '<tools>.*calculator.*</tools>' <(head -1 "$TMP/got-tokenizer-qwen3.jsonl" | sed 's/\\n/ /g')

echo "{\"messages\": [$U], \"tools\": {\"name\": \"x\"}}" > "$TMP/bad1.jsonl"
err=$("$GRPO" tokenize --model "$QWEN3" --chat < "$TMP/bad1.jsonl" 2>&1 >/dev/null); rc=$?
check "tools not a list: exit 1 ($err)" bash -c '[ "$1" = 1 ] && grep -q "\"tools\" must be a list of JSON schemas, got an object" <<<"$2"' _ "$rc" "$err"
echo '{"messages": [{"content": "hi"}]}' > "$TMP/bad2.jsonl"
err=$("$GRPO" tokenize --model "$QWEN3" --chat < "$TMP/bad2.jsonl" 2>&1 >/dev/null); rc=$?
check "message without a role: exit 1 ($err)" bash -c '[ "$1" = 1 ] && grep -q "messages\[0\]: expected an object with a string \"role\"" <<<"$2"' _ "$rc" "$err"
finish
