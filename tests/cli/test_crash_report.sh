#!/usr/bin/env bash
# A fault in grpo leaves a report on stderr (src/cli/crash.c): one line naming the
# signal and the version, then the stack as addresses that addr2line names, and
# the process dies of the signal (its exit status). Shown with SIGSEGV and SIGABRT
# sent to `grpo tokenize` while it waits for its next input line. Not under
# AddressSanitizer (its own report replaces ours).
# Outside tests/run.sh, set GRPO (the binary) and ROOT (the repository).
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
GRPO=${GRPO:-$ROOT/build/grpo}
cd "$ROOT"
. "$ROOT/tests/cli/lib.sh"
if ldd "$GRPO" | grep -q libasan; then echo "skipped: an AddressSanitizer build"; exit 0; fi

# crash SIG STATUS NAME: tokenize one line (so it is past start-up, in its read
# loop), send SIG, and check what it leaves
crash() {
    local sig=$1 want=$2 name=$3
    rm -f "$TMP/in" && mkfifo "$TMP/in"
    "$GRPO" tokenize --model assets/byte-tokenizer <"$TMP/in" >"$TMP/out" 2>"$TMP/err" &
    local pid=$!
    exec 3>"$TMP/in"
    echo '{"text": "hi"}' >&3
    for _ in $(seq 200); do [ -s "$TMP/out" ] && break; sleep 0.05; done
    [ -s "$TMP/out" ] || fail "$sig: tokenize never answered: $(head -c 300 "$TMP/err")"
    kill -"$sig" $pid
    { wait $pid; } 2>/dev/null
    local rc=$?
    exec 3>&-
    [ $rc -eq "$want" ] || fail "$sig: exit $rc (want $want, death by the signal): $(head -c 300 "$TMP/err")"
    head -1 "$TMP/err" | grep -q "^grpo [0-9][^:]*: internal error: $name; a bug: please report it" \
        || fail "$sig: first line: $(head -1 "$TMP/err")"
    # the frames in the binary: addresses that addr2line names (main among them)
    local offs
    offs=$(grep -o "^[^ ]*grpo(+0x[0-9a-f]*)" "$TMP/err" | sed 's/.*(+\(0x[0-9a-f]*\))/\1/')
    [ -n "$offs" ] || fail "$sig: no frame in the binary: $(cat "$TMP/err")"
    # shellcheck disable=SC2086
    addr2line -f -e "$GRPO" $offs | grep -qx main || fail "$sig: addr2line names no main among: $offs"
}
crash SEGV 139 "SIGSEGV (invalid memory access)"
crash ABRT 134 "SIGABRT (abort)"
finish
