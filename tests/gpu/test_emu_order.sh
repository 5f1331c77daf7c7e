#!/usr/bin/env bash
# tests/gpu/test_emu_order.sh — the GPU kernels have no race the emulated GPU can see:
# each kernel- and layer-level test under tests/gpu run on the emulated GPU in its
# forward order (what every other test runs), then in reverse and in one shuffle
# (GRPO_EMU_ORDER: tests/machine/gpu_emulator_threads.c), must exit the same and
# print the same stdout byte for byte, and must be given back the same bytes from the
# device (GRPO_EMU_DIGEST: a digest of every copy down to the host, so a race moving a
# value below the test's printed digits still shows). The kernels sum in a fixed
# order (docs/gpu.md), so without a race every order gives the same bits; a read of
# what another thread writes with no barrier or shuffle between gives other bits under
# some order. A shell test and not a C one: it runs the test binaries themselves,
# unchanged, each in a fresh process.
#
# Which tests: the kernel, layer and model tests (about 30 s an order here). Left out,
# for time (each 8-60 s an order, the emulated runs of whole commands through the same
# kernels): test_gpu_gen, _gen_lora, _mpi, _recompute, _train, _train_lora,
# _train_opts, _train_tools; EMU_ORDER_TESTS="..." (names after test_gpu_) runs those
# too, EMU_ORDER_ORDERS other orders (test_gpu_train_tools's digest differs between two
# forward runs: its tool workers' timing decides which rows share a device step, whose
# per-row results are the same bits; compare its stdout only). On a machine with a GPU
# the tests run there, not on the emulator: skipped.
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
tests=${EMU_ORDER_TESTS:-"ops attention decode decode_layer gemm grad head layer layer_train linear logprob lora
    lora_model model model_train qk_norm generate score"}
orders=${EMU_ORDER_ORDERS:-"reverse shuffle:1"}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0

# run TEST ORDER: its stdout (the process id in a scratch file's name, NAME_PID/ or .,
# made PID; lines ending in a time, "(chunking: 5.0 s)", dropped), exit status and
# digest lines (sorted: the processes of a test with several append theirs in any
# order) into $dir/TEST.ORDER.*
run() {
    local bin="$BUILD/tests/gpu/test_gpu_$1" base="$dir/$1.$2" pid
    GRPO_EMU_ORDER=$2 GRPO_EMU_DIGEST="$base.digest" "$bin" > "$base.raw" 2> "$base.err" &
    pid=$!
    wait $pid
    echo $? > "$base.rc"
    sed -e "s#_$pid\([/.]\)#_PID\1#g" -e '/[0-9] s)\?$/d' "$base.raw" > "$base.out"
    touch "$base.digest"
    sort -o "$base.digest" "$base.digest"
}

for t in $tests; do
    bin="$BUILD/tests/gpu/test_gpu_$t"
    [ -x "$bin" ] || { echo "FAIL no $bin (make tests-bin builds it)"; fail=1; continue; }
    t0=$SECONDS
    run "$t" forward
    emulated=$(grep -c "the kernels run on the emulated GPU" "$dir/$t.forward.out")
    if [ "$emulated" = 0 ] && [ ! -s "$dir/$t.forward.digest" ]; then
        echo "skipped test_gpu_$t: it did not run on the emulated GPU (a real GPU here?)"
        continue
    fi
    if [ ! -s "$dir/$t.forward.digest" ]; then
        echo "FAIL test_gpu_$t: no digest written (GRPO_EMU_DIGEST ignored?)"; fail=1; continue
    fi
    bad=0
    for o in $orders; do
        run "$t" "$o"
        for part in rc out digest; do
            if ! cmp -s "$dir/$t.forward.$part" "$dir/$t.$o.$part"; then
                echo "FAIL test_gpu_$t: $o's $part differs from forward's:"
                diff "$dir/$t.forward.$part" "$dir/$t.$o.$part" | head -8 | sed 's/^/    /'
                bad=1
            fi
        done
        [ "$(cat "$dir/$t.$o.rc")" = 0 ] || { echo "FAIL test_gpu_$t exits $(cat "$dir/$t.$o.rc") under $o:"; tail -5 "$dir/$t.$o.err" | sed 's/^/    /'; bad=1; }
    done
    [ "$(cat "$dir/$t.forward.rc")" = 0 ] || { echo "FAIL test_gpu_$t exits $(cat "$dir/$t.forward.rc") in the forward order"; bad=1; }
    if [ $bad = 0 ]; then
        echo "ok   test_gpu_$t: forward, ${orders// /, }: the same stdout ($(wc -l < "$dir/$t.forward.out") lines)" \
             "and digest ($(head -1 "$dir/$t.forward.digest" | cut -d, -f1-2)...; $(wc -l < "$dir/$t.forward.digest") lines), exit 0 ($((SECONDS - t0)) s)"
    fi
    fail=$((fail | bad))
done
exit $fail
