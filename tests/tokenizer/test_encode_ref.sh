#!/usr/bin/env bash
# Token-for-token equality of `grpo tokenize` with HF's tokenizers.js on the
# generated corpus (tests/tokenizer/gen_corpus.mjs, ~250 KB) for the real
# Qwen3, Llama 3 and Llama 3.1 tokenizer.json files; decode equality;
# clean_up_tokenization_spaces as the config sets it (Llama 3) and turned off;
# decode(encode(x)) == x without it (== NFC(x) for Qwen3, whose normalizer is NFC);
# invalid UTF-8, empty input and a 1 MB line.
source "$(dirname "$0")/common.sh"

node "$HERE/gen_corpus.mjs" > "$TMP/corpus.jsonl" || { fail "corpus generation"; finish; }
C="$TMP/corpus.jsonl"

for m in qwen3 llama3 llama31; do
    case $m in qwen3) D=$QWEN3 ;; llama3) D=$LLAMA3 ;; llama31) D=$LLAMA31 ;; esac
    "$GRPO" tokenize --model "$D" < "$C" > "$TMP/got.jsonl" || fail "$m: grpo tokenize exited $?"
    node "$REF" encode "$D" "$C" > "$TMP/want.jsonl"
    check "$m: encode == tokenizers.js" node "$REF" compare "$TMP/got.jsonl" "$TMP/want.jsonl"

    "$GRPO" tokenize --model "$D" --add_special_tokens < "$C" > "$TMP/got_s.jsonl" || fail "$m: --add_special_tokens"
    node "$REF" encode "$D" "$C" special > "$TMP/want_s.jsonl"
    check "$m: encode with special tokens == tokenizers.js" node "$REF" compare "$TMP/got_s.jsonl" "$TMP/want_s.jsonl"

    # decode as transformers does: the config's clean_up_tokenization_spaces (Llama 3: true, Qwen3: false)
    "$GRPO" tokenize --model "$D" --decode < "$TMP/got.jsonl" > "$TMP/dec.jsonl" || fail "$m: --decode"
    node "$REF" decode "$D" "$TMP/got.jsonl" > "$TMP/want_dec.jsonl"
    check "$m: decode == tokenizers.js" node "$REF" compare "$TMP/dec.jsonl" "$TMP/want_dec.jsonl"
    # and without the clean-up: then decode(encode(x)) == x
    "$GRPO" tokenize --model "$D" --decode --clean_up_tokenization_spaces false < "$TMP/got.jsonl" > "$TMP/raw.jsonl" \
        || fail "$m: --decode --clean_up_tokenization_spaces false"
    node "$REF" decode "$D" "$TMP/got.jsonl" noskip raw > "$TMP/want_raw.jsonl"
    check "$m: decode without clean-up == tokenizers.js" node "$REF" compare "$TMP/raw.jsonl" "$TMP/want_raw.jsonl"
    nfc=""; [ $m = qwen3 ] && nfc=nfc
    check "$m: decode(encode(x)) == x" node "$REF" roundtrip "$C" "$TMP/raw.jsonl" $nfc
    if [ $m = qwen3 ]; then
        check "$m: no clean-up (its config says false)" cmp -s "$TMP/dec.jsonl" "$TMP/raw.jsonl"
    else
        check "$m: the clean-up changes the corpus' decoded text" bash -c "! cmp -s '$TMP/dec.jsonl' '$TMP/raw.jsonl'"
    fi

    "$GRPO" tokenize --model "$D" --decode --skip_special_tokens < "$TMP/got_s.jsonl" > "$TMP/dec_s.jsonl"
    node "$REF" decode "$D" "$TMP/got_s.jsonl" skip > "$TMP/want_dec_s.jsonl"
    check "$m: decode skipping special tokens == tokenizers.js" node "$REF" compare "$TMP/dec_s.jsonl" "$TMP/want_dec_s.jsonl"
done

# The BOS of Llama 3.1's TemplateProcessing appears only with --add_special_tokens.
first=$(echo '{"text": "hi"}' | "$GRPO" tokenize --model "$LLAMA31" --add_special_tokens)
check "llama31: BOS added" test "$first" = '{"ids": [128000, 6151]}'

# Invalid UTF-8 inside the JSON text: read as a UTF-8 decoder with replacement
# reads it (one U+FFFD per maximal invalid subsequence), like the reference.
printf '{"text": "a\xffb \xc3 c\xed\xa0\x80d \xf0\x9f\x98 e\xc0\xaf f\xe2\x82"}\n{"text": "\xf4\x90\x80\x80 ok \xe6\x97\xa5\xe6"}\n' > "$TMP/bad_utf8.jsonl"
for D in "$QWEN3" "$LLAMA3"; do
    "$GRPO" tokenize --model "$D" < "$TMP/bad_utf8.jsonl" > "$TMP/got.jsonl" || fail "invalid UTF-8: exit $?"
    node "$REF" encode "$D" "$TMP/bad_utf8.jsonl" > "$TMP/want.jsonl"
    check "invalid UTF-8 == tokenizers.js ($(basename "$(dirname "$D")"))" node "$REF" compare "$TMP/got.jsonl" "$TMP/want.jsonl"
done

# Empty input: no lines in, no lines out; empty text <-> empty ids.
out=$("$GRPO" tokenize --model "$QWEN3" < /dev/null); rc=$?
check "empty stdin" test "$rc" = 0 -a -z "$out"
check "empty text" test "$(echo '{"text": ""}' | "$GRPO" tokenize --model "$QWEN3")" = '{"ids": []}'
check "empty ids" test "$(echo '{"ids": []}' | "$GRPO" tokenize --model "$QWEN3" --decode)" = '{"text": ""}'

# A single 1 MB line of mixed text, and a 256 KB line with no space at all.
node -e '
const fs = require("fs");
const texts = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").map((l) => JSON.parse(l).text);
let s = "", i = 0;
while (Buffer.byteLength(s) < 1 << 20) s += texts[i++ % texts.length];
console.log(JSON.stringify({ text: s }));
console.log(JSON.stringify({ text: "ab".repeat(1 << 17) }));
' "$C" > "$TMP/big.jsonl"
for D in "$QWEN3" "$LLAMA3"; do
    "$GRPO" tokenize --model "$D" < "$TMP/big.jsonl" > "$TMP/got.jsonl" || fail "1 MB line: exit $?"
    node "$REF" encode "$D" "$TMP/big.jsonl" > "$TMP/want.jsonl"
    check "1 MB line == tokenizers.js ($(basename "$(dirname "$D")"))" node "$REF" compare "$TMP/got.jsonl" "$TMP/want.jsonl"
done
finish
