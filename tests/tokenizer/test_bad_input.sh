#!/usr/bin/env bash
# Bad tokenizer files and bad input lines: `grpo tokenize` exits 1 with one
# line naming the file and the component (never a crash), 2 on usage errors.
source "$(dirname "$0")/common.sh"

# expect_error NAME WANT_RC PATTERN MODEL_DIR [ARGS...] < stdin
expect_error() {
    local name=$1 want_rc=$2 pattern=$3; shift 3
    local err rc
    err=$("$GRPO" tokenize "$@" 2>&1 >/dev/null); rc=$?
    if [ "$rc" != "$want_rc" ]; then fail "$name: exit $rc, want $want_rc ($err)"; return; fi
    if [ "$want_rc" = 1 ] && [ "$(printf '%s\n' "$err" | wc -l)" != 1 ]; then fail "$name: want one line, got: $err"; return; fi
    err=$(printf '%s\n' "$err" | head -n 1)
    if ! printf '%s' "$err" | grep -qF -- "$pattern"; then fail "$name: '$err' lacks '$pattern'"; return; fi
    ok "$name: $err"
}

# variant NAME JS: a copy of Qwen3's files where JS edits the parsed tokenizer.json `t`.
variant() {
    local dir="$TMP/$1"
    mkdir -p "$dir"
    cp "$QWEN3/tokenizer_config.json" "$dir/"
    node -e '
const fs = require("fs");
const t = JSON.parse(fs.readFileSync(process.argv[1] + "/tokenizer.json", "utf8"));
'"$2"'
fs.writeFileSync(process.argv[2] + "/tokenizer.json", JSON.stringify(t));
' "$QWEN3" "$dir"
    echo "$dir"
}

echo '{"text": "hello"}' > "$TMP/in.jsonl"

mkdir -p "$TMP/notjson" "$TMP/trunc" "$TMP/empty" "$TMP/none"
echo 'this is not JSON' > "$TMP/notjson/tokenizer.json"
head -c 3000000 "$QWEN3/tokenizer.json" > "$TMP/trunc/tokenizer.json"
: > "$TMP/empty/tokenizer.json"
expect_error "malformed tokenizer.json" 1 "notjson/tokenizer.json: invalid JSON" --model "$TMP/notjson" < "$TMP/in.jsonl"
expect_error "truncated tokenizer.json" 1 "trunc/tokenizer.json: invalid JSON" --model "$TMP/trunc" < "$TMP/in.jsonl"
expect_error "empty tokenizer.json" 1 "empty/tokenizer.json: invalid JSON" --model "$TMP/empty" < "$TMP/in.jsonl"
expect_error "missing tokenizer.json" 1 "none/tokenizer.json: cannot open" --model "$TMP/none" < "$TMP/in.jsonl"

d=$(variant unknown_merge 't.model.merges[7] = ["Ġ", "zzqqxx"];')
expect_error "merge naming an unknown token" 1 "model.merges[7]: token 'zzqqxx' is not in model.vocab" --model "$d" < "$TMP/in.jsonl"
d=$(variant bad_merge 't.model.merges[3] = 42;')
expect_error "malformed merge entry" 1 "model.merges[3]: expected" --model "$d" < "$TMP/in.jsonl"
d=$(variant no_vocab 'delete t.model.vocab;')
expect_error "missing vocab" 1 "model.vocab: expected an object" --model "$d" < "$TMP/in.jsonl"
# a regex that backtracks past Oniguruma's retry limit on this text: an error, never a different split
printf '{"text": "%s!"}\n' "$(printf 'x%.0s' $(seq 40))" > "$TMP/xs.jsonl"
d=$(variant backtrack_split 't.pre_tokenizer = {type: "Sequence", pretokenizers: [{type: "Split", pattern: {Regex: "(x+x+)+[yz]"}, behavior: "Isolated", invert: false}, t.pre_tokenizer]};')
expect_error "Split regex over its backtracking limit" 1 "tokenizer.json: pre_tokenizer Split: the regex search failed (Oniguruma: retry-limit-in-match over)" --model "$d" < "$TMP/xs.jsonl"
d=$(variant backtrack_replace 't.normalizer = {type: "Replace", pattern: {Regex: "(x+x+)+[yz]"}, content: "-"};')
expect_error "Replace regex over its backtracking limit" 1 "tokenizer.json: normalizer Replace: the regex search failed (Oniguruma: retry-limit-in-match over)" --model "$d" < "$TMP/xs.jsonl"
d=$(variant ok_split 't.pre_tokenizer = {type: "Sequence", pretokenizers: [{type: "Split", pattern: {Regex: "x+!"}, behavior: "Isolated", invert: false}, t.pre_tokenizer]};')
out=$("$GRPO" tokenize --model "$d" < "$TMP/xs.jsonl" 2>&1) && ok "a regex within the limit: $out" || fail "a regex within the limit: $out"
d=$(variant empty_vocab 't.model.vocab = {}; t.model.merges = []; t.added_tokens = [];')
expect_error "empty vocab" 1 "model.vocab: is empty" --model "$d" < "$TMP/in.jsonl"
d=$(variant bad_id 't.model.vocab["!"] = "zero";')
expect_error "non-integer id" 1 "model.vocab: token '!'" --model "$d" < "$TMP/in.jsonl"
d=$(variant unigram 't.model.type = "Unigram";')
expect_error "unsupported model" 1 "model: unsupported model type 'Unigram'" --model "$d" < "$TMP/in.jsonl"
d=$(variant metaspace 't.pre_tokenizer.pretokenizers[1] = {type: "Metaspace", replacement: "▁"};')
expect_error "unsupported pre-tokenizer" 1 "pre_tokenizer.pretokenizers[1]: unsupported pre-tokenizer type 'Metaspace'" --model "$d" < "$TMP/in.jsonl"
d=$(variant precompiled 't.normalizer = {type: "Precompiled", precompiled_charsmap: "AAAA"};')
expect_error "unsupported normalizer" 1 "normalizer: unsupported normalizer type 'Precompiled'" --model "$d" < "$TMP/in.jsonl"
d=$(variant bert 't.post_processor = {type: "BertProcessing", sep: ["[SEP]", 1], cls: ["[CLS]", 0]};')
expect_error "unsupported post-processor" 1 "post_processor: unsupported post-processor type 'BertProcessing'" --model "$d" < "$TMP/in.jsonl"
d=$(variant wordpiece 't.decoder = {type: "Sequence", decoders: [{type: "WordPiece", prefix: "##"}]};')
expect_error "unsupported decoder" 1 "decoder.decoders[0]: unsupported decoder type 'WordPiece'" --model "$d" < "$TMP/in.jsonl"
d=$(variant bad_regex 't.pre_tokenizer.pretokenizers[0].pattern = {Regex: "(unclosed"};')
expect_error "bad regex" 1 "pre_tokenizer.pretokenizers[0]: Split: bad regex" --model "$d" < "$TMP/in.jsonl"
d=$(variant bad_added 't.added_tokens[2] = {content: 5};')
expect_error "bad added token" 1 "added_tokens[2]: expected" --model "$d" < "$TMP/in.jsonl"
d=$(variant cleanup "")
node -e 'const fs = require("fs"); const p = process.argv[1] + "/tokenizer_config.json"; const c = JSON.parse(fs.readFileSync(p, "utf8"));
c.clean_up_tokenization_spaces = "yes"; fs.writeFileSync(p, JSON.stringify(c));' "$d"
expect_error "clean_up_tokenization_spaces not a boolean" 1 "tokenizer_config.json: clean_up_tokenization_spaces: expected true or false" --model "$d" < "$TMP/in.jsonl"

# Bad lines on stdin: the line number and what was expected.
printf '{"text": "fine"}\n{"text": 12}\n' > "$TMP/l2.jsonl"
expect_error "text not a string" 1 "<stdin> line 2: expected {\"text\": string}" --model "$QWEN3" < "$TMP/l2.jsonl"
printf '{"text": "fine"\n' > "$TMP/l1.jsonl"
expect_error "malformed JSON line" 1 "<stdin> line 1: expected a JSON object" --model "$QWEN3" < "$TMP/l1.jsonl"
printf '{"ids": [1, 99999999]}\n' > "$TMP/ids.jsonl"
expect_error "id out of range" 1 "decode: id 99999999 at position 1 is not in the vocabulary" --model "$QWEN3" --decode < "$TMP/ids.jsonl"
printf '{"ids": [1, -2]}\n' > "$TMP/ids.jsonl"
expect_error "negative id" 1 "ids[1]: expected a non-negative integer" --model "$QWEN3" --decode < "$TMP/ids.jsonl"

# Usage errors exit 2.
expect_error "missing --model" 2 "grpo tokenize: model is required" < /dev/null
expect_error "--model without a value" 2 "grpo tokenize: --model needs a value" --model < /dev/null
expect_error "unknown option" 2 "unknown option '--frobnicate' (see grpo tokenize --help)" --model "$QWEN3" --frobnicate < /dev/null
expect_error "stray argument" 2 "unexpected argument 'hello'" --model "$QWEN3" hello < /dev/null
help=$("$GRPO" tokenize --help 2>&1); rc=$?
if [ "$rc" = 0 ] && printf '%s' "$help" | grep -qF -- "usage: grpo tokenize --model DIR" &&
    printf '%s' "$help" | grep -qF -- "--skip_special_tokens"; then ok "--help: exit 0, the options"
else fail "--help: exit $rc: $help"; fi
finish
