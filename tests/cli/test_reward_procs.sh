#!/usr/bin/env bash
# Processes end with the run, and a reward process that fails is reported at
# once (issue 38). A `cmd:` reward and a Python reward each start three escapes
# — a child in a new session (setsid), a double-forked daemon, a child in a new
# process group — each a copy of sleep under $TMP (so that they can be found by
# their command line): none is left after a normal end, an error exit, SIGTERM
# or kill -9 of the trainer. A reward that exits 0 while a process it started
# holds its stdout, that exits 3, that closes its stdout and sleeps, or a Python
# reward whose function exits: each is reported within seconds under a
# reward_timeout of 600 s, one line naming the reward and its status.
# Outside tests/run.sh, set GRPO (the binary) and ROOT (the repository).
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
GRPO=${GRPO:-$ROOT/build/grpo}
cd "$ROOT"
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
for i in 1 2 3 4; do printf '{"prompt": "a%d"}\n' "$i"; done > "$TMP/d.jsonl"
SLEEP=$TMP/procs-sleep
cp "$(command -v sleep)" "$SLEEP"
R=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --num_generations 2 --per_device_train_batch_size 2
   --max_completion_length 4 --quiet --seed 3 --reward_timeout 600)

# escapes(): 3601 in a new session, 3602 a daemon (fork, setsid, fork), 3603 in a
# new process group; then a reward -|3 - len| that behaves as MODE says
cat > "$TMP/escapes.py" <<PY
import os, subprocess, sys
SLEEP = "$SLEEP"
def escapes():
    subprocess.Popen([SLEEP, "3601"], start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(SLEEP, [SLEEP, "3602"])
        os._exit(0)
    os.wait()
    subprocess.Popen([SLEEP, "3603"], preexec_fn=os.setpgrp)
PY
cat > "$TMP/reward.py" <<'PY'
import json, os, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from escapes import escapes, SLEEP
mode = sys.argv[1]
if mode != "close":         # (escapes holding stdout would keep it open)
    escapes()
if mode == "close":        # closes its stdout, then sleeps
    os.close(1)
    time.sleep(3600)
if mode == "held":         # a process it started holds its stdout
    subprocess.Popen([SLEEP, "3604"])
for line in sys.stdin:
    req = json.loads(line)
    step = req["trainer_state"]["global_step"]
    if mode in ("held", "exit0"):
        sys.exit(0)
    if mode == "exit3":
        sys.exit(3)
    if mode == "error" and step == 2:
        print(json.dumps({"error": "judge gone"}), flush=True)
        continue
    if mode == "once" and step == 1:
        sys.exit(0)
    if mode == "slow":
        time.sleep(0.2)
    print(json.dumps({"rewards": [-abs(3 - len(c)) for c in req["completions"]]}), flush=True)
PY
cat > "$TMP/pyreward.py" <<'PY'
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from escapes import escapes
escapes()
def length(completions, **kwargs):
    return [-abs(3 - len(c)) for c in completions]
def fails(completions, trainer_state, **kwargs):
    if trainer_state.global_step == 2:
        raise ValueError("judge gone")
    return length(completions)
def leaves(completions, **kwargs):
    os._exit(0)
PY

left() { pgrep -f "$SLEEP" >/dev/null; }
# none_left WHAT: every escape gone within 5 s of the run's end (then any left is killed)
none_left() {
    for _ in $(seq 100); do left || return 0; sleep 0.05; done
    fail "$1: processes left: $(pgrep -af "$SLEEP" | tr '\n' ';')"
    pkill -9 -f "$SLEEP"
}
# escapes_running: the three escapes run (up to 30 s)
escapes_running() {
    for _ in $(seq 300); do
        [ "$(pgrep -fc "$SLEEP 360[123]")" -ge 3 ] && return 0
        sleep 0.1
    done
    return 1
}

# ---- nothing outlives the run ----
for kind in cmd py; do
    if [ $kind = cmd ]; then F=(--reward_funcs "cmd:python3 $TMP/reward.py serve"); else F=(--reward_funcs "$TMP/pyreward.py:length"); fi
    # a normal end
    "$GRPO" "${R[@]}" --max_steps 2 --output_dir "$TMP/$kind-end" "${F[@]}" 2>"$TMP/e.err" \
        || fail "$kind: a normal run: $(cat "$TMP/e.err")"
    none_left "$kind: after a normal end"
    # an error exit: the reward fails at step 2 ({"error": ...}; the Python function raises)
    if [ $kind = cmd ]; then E=(--reward_funcs "cmd:python3 $TMP/reward.py error"); else E=(--reward_funcs "$TMP/pyreward.py:fails"); fi
    timeout -k 5 60 "$GRPO" "${R[@]}" --max_steps 4 --output_dir "$TMP/$kind-err" "${E[@]}" 2>"$TMP/e.err"
    rc=$?
    [ $rc -eq 1 ] || fail "$kind: an error exit: exit $rc: $(cat "$TMP/e.err")"
    none_left "$kind: after an error exit"
    # SIGTERM, and kill -9, of a trainer whose reward runs
    for sig in TERM KILL; do
        [ $kind = cmd ] && F=(--reward_funcs "cmd:python3 $TMP/reward.py slow")
        # steps enough that the trainer is still running when the signal comes (200 of the
        # Python reward's were done in under a second on a fast machine: kill found no process)
        "$GRPO" "${R[@]}" --max_steps 1000000 --output_dir "$TMP/$kind-$sig" "${F[@]}" 2>"$TMP/e.err" &
        pid=$!
        escapes_running || fail "$kind $sig: the escapes never started: $(cat "$TMP/e.err")"
        sleep 0.5
        kill -$sig $pid
        { wait $pid; } 2>/dev/null
        rc=$?
        [ $sig = KILL ] && [ $rc -ne 137 ] && fail "$kind: kill -9: exit $rc"
        [ $sig = TERM ] && { [ $rc -eq 143 ] || [ $rc -eq 0 ]; } || [ $sig = KILL ] || fail "$kind: SIGTERM: exit $rc: $(cat "$TMP/e.err")"
        none_left "$kind: after SIG$sig of the trainer"
    done
done

# ---- a reward that fails is reported at once, naming its status ----
# expect_soon PATTERN ARGS...: exit 1 within 20 s (reward_timeout is 600 s), one
# line matching PATTERN, nothing left running
expect_soon() {
    local pattern=$1; shift
    local t0=$SECONDS
    expect_error 1 "$pattern" timeout -k 5 60 "$GRPO" "${R[@]}" --max_steps 2 "$@"
    [ $((SECONDS - t0)) -le 20 ] || fail "reported after $((SECONDS - t0)) s: $*"
    none_left "after: $*"
}
C="reward command 'python3 $TMP/reward.py"
expect_soon "^grpo train: $C held': exited with status 0 before replying to request 1 (global_step 0)$" \
    --output_dir "$TMP/held" --reward_funcs "cmd:python3 $TMP/reward.py held"
expect_soon "^grpo train: $C exit3': exited with status 3 before replying to request 1 (global_step 0)$" \
    --output_dir "$TMP/exit3" --reward_funcs "cmd:python3 $TMP/reward.py exit3"
expect_soon "^grpo train: $C close': closed its stdout before replying to request 1 (global_step 0)$" \
    --output_dir "$TMP/close" --reward_funcs "cmd:python3 $TMP/reward.py close"
expect_soon "^grpo train: python reward '$TMP/pyreward.py:leaves': exited with status 0 before replying to request 1 (global_step 0)$" \
    --output_dir "$TMP/pyleaves" --reward_funcs "$TMP/pyreward.py:leaves"
# one that exits after replying, between requests: the next request says so (and
# where step 1 is kept)
t0=$SECONDS
timeout -k 5 60 "$GRPO" "${R[@]}" --max_steps 2 --output_dir "$TMP/once" --reward_funcs "cmd:python3 $TMP/reward.py once" 2>"$TMP/e.err"
rc=$?
[ $rc -eq 1 ] && [ $((SECONDS - t0)) -le 20 ] || fail "exit after a reply: exit $rc after $((SECONDS - t0)) s: $(cat "$TMP/e.err")"
head -1 "$TMP/e.err" | grep -q "^grpo train: $C once': exited with status 0 before replying to request 2 (global_step 1)$" \
    || fail "exit after a reply: $(cat "$TMP/e.err")"
none_left "exit after a reply"
finish
