#!/usr/bin/env python3
"""tools/gpu_check/demo_curve.py METRICS.jsonl CPU.json BASE_DIR

The demo section's judgement (tools/gpu_check/demo.sh): the GRPO run's mean reward per
step printed beside the CPU's recorded curve (CPU.json, demo_cpu.json's layout), the first
and last fifth's means of both over the steps the run logged, its step time and tokens/s.
Exits 0 when the run learned as the rule says, 1 otherwise:
    gain = mean(last k) - mean(first k), k = steps // 5 (12 of the demo's 60),
    pass when gain > 0 and gain >= 0.5 * the CPU's gain over the same steps, with at
    least 10 steps logged.
Half, not all: the GPU trains in bf16 products where the CPU's recorded run is fp32, so
its completions part from the CPU's at the first step and its curve is another draw of
the same process; a run that does not learn stays near its first steps' mean. A run of
fewer steps than the record's 60 decays its learning rate faster (the linear schedule
spans max_steps), so it parts from the CPU's curve at step 2 even on the CPU and learns
less by step N than the 60-step run had (a dry run of 15 steps here: gain 11.55 against
14.32); the 60-step run on the CPU gives the record's curve exactly.
"""
import hashlib
import json
import statistics
import sys

PER_LINE = 10


def spread(xs, fmt="%.3g"):
    """median and range, the way the project reports timings"""
    return ("median " + fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(xs), min(xs), max(xs))


def main():
    metrics, cpu_path, base = sys.argv[1:4]
    rows = [json.loads(l) for l in open(metrics) if '"reward"' in l]
    cpu = json.load(open(cpu_path))
    n = len(rows)
    if n < 10:
        print("FAILED: %d steps logged; the rule needs at least 10" % n)
        return 1
    if n > len(cpu["reward"]):
        print("FAILED: %d steps logged, the CPU's record has %d" % (n, len(cpu["reward"])))
        return 1
    got = [r["reward"] for r in rows]
    ref = cpu["reward"][:n]
    with open(base + "/model.safetensors", "rb") as f:
        same_base = hashlib.sha256(f.read()).hexdigest() == cpu.get("base_sha256")
    print("mean reward per step (this run, then the CPU's recorded run%s):" %
          ("; the same base model, by its sha256" if same_base else
           "; NOTE: not the base the CPU's run started from (another sha256)"))
    for i in range(0, n, PER_LINE):
        print("  here steps %2d-%2d: %s" % (i + 1, min(i + PER_LINE, n), " ".join("%6.2f" % v for v in got[i:i + PER_LINE])))
        print("  cpu  steps %2d-%2d: %s" % (i + 1, min(i + PER_LINE, n), " ".join("%6.2f" % v for v in ref[i:i + PER_LINE])))
    k = n // 5
    mean = lambda xs: sum(xs) / len(xs)
    gain, cpu_gain = mean(got[-k:]) - mean(got[:k]), mean(ref[-k:]) - mean(ref[:k])
    print("first %d steps %.2f -> last %d %.2f: gain %.2f; the CPU's %.2f -> %.2f: gain %.2f" %
          (k, mean(got[:k]), k, mean(got[-k:]), gain, mean(ref[:k]), mean(ref[-k:]), cpu_gain))
    same = max(abs(a - b) for a, b in zip(got, ref))
    print("max |this run - the CPU's| over the steps: %.4g%s" % (same, " (the CPU's curve exactly)" if same == 0 else ""))
    times = [r["step_time"] for r in rows]
    gen = [r.get("step_time/generation") or 0.0 for r in rows]
    train = [r.get("step_time/training") or 0.0 for r in rows]
    tokens = [r["num_tokens"] for r in rows]
    per_step = [tokens[0]] + [b - a for a, b in zip(tokens, tokens[1:])]
    tps = [t / s for t, s in zip(per_step, times) if s > 0]
    print("step time (s): %s; generation %s, training %s" % (spread(times), spread(gen), spread(train)))
    print("tokens/s (prompt + completion tokens of the step / its time): %s; %d tokens in %.1f s" %
          (spread(tps, "%.0f"), tokens[-1], sum(times)))
    if "step_time" in cpu:
        print("the CPU's recorded step time over the same steps (s): %s (%s; recorded, not this run)" %
              (spread(cpu["step_time"][:n]), cpu.get("machine", "?")))
    ok = gain > 0 and gain >= 0.5 * cpu_gain
    print("%s: gain %.2f %s half the CPU's %.2f over %d steps" %
          ("learns" if ok else "FAILED: does not learn", gain, ">=" if ok else "<", cpu_gain, n))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
