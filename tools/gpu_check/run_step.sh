# tools/gpu_check/run_step.sh — sourced by the device check's sections (demo, hf_load,
# trl_step; splits for ran_on_gpu).
# Nothing here has run on a GPU before, so each command is bounded and says how it
# ended: a first run on the device has to show what broke, not only that something did.

# run_step NAME SECONDS STDOUT STDERR CMD...: CMD under `timeout` (cut to what is left of
# GPU_CHECK_LEFT, counted on bash's SECONDS from the section's start, less 20 s: a command
# told to stop may take a while to (grpo finishes its step), and is killed 10 s after; the
# section then still has time to report), then one line "NAME: rc R in T s"; on failure the
# last lines of its stderr. Returns CMD's rc (124: cut off).
run_step() {
    local name=$1 limit=$2 out=$3 err=$4
    shift 4
    local left=$((${GPU_CHECK_LEFT:-600} - SECONDS - 20))
    [ "$limit" -gt "$left" ] && limit=$left
    if [ "$limit" -lt 1 ]; then
        echo "$name: not run (the section's ${GPU_CHECK_LEFT:-600} s are spent)"
        return 124
    fi
    local t0 rc
    t0=$(date +%s%N)
    timeout -k 10 "$limit" "$@" > "$out" 2> "$err"
    rc=$?
    local ms=$((($(date +%s%N) - t0) / 1000000))
    echo "$name: rc $rc in $((ms / 1000)).$(printf '%03d' $((ms % 1000))) s$([ $rc = 124 ] && echo " (cut off at $limit s)")"
    if [ $rc != 0 ]; then
        echo "  last lines of its stderr:"
        tail -6 "$err" | sed 's/^/  | /'
    fi
    return $rc
}

# ran_on_gpu NAME STDERR: whether a grpo command's plan says it ran on the GPU ("on the
# GPU (" in its memory plan, never "trains on the CPU"); prints the plan line either way.
# A dry run (GPU_CHECK_DRY=1, no GPU) prints it and asserts nothing.
ran_on_gpu() {
    local name=$1 err=$2 plan
    plan=$(grep -m1 "memory plan" "$err")
    echo "  $name plan: ${plan:-(no memory plan line)}" | cut -c1-400
    if [ "${GPU_CHECK_DRY:-0}" = 1 ]; then
        echo "  $name: dry run, where it ran is not asserted"
        return 0
    fi
    if grep -q "trains on the CPU" "$err" || ! grep -q "on the GPU (" "$err"; then
        echo "FAILED: $name did not run on the GPU: $(grep -m1 "trains on the CPU" "$err" || echo 'no "on the GPU (" in its plan')"
        return 1
    fi
    return 0
}
