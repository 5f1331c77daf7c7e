#!/usr/bin/env python3
"""tools/gpu_check/memory_verdict.py — the memory section's reading of one run
(tools/gpu_check/memory.sh): the device's part of `grpo train`'s memory plan and the
most memory nvidia-smi saw in use, each against the bound.

    memory_verdict.py --plan STDERR --smi SMI_CSV --bound-mib N --rc RC [--dry 0|1]

STDERR: the run's stderr, whose "memory plan" line on a GPU reads
  memory plan T MB: on the GPU (NAME, F MB free): <what> W[, reference R (...)],
  activations A (...); on the host: ...[, generation on the GPU G (...)]
(train/model.c train_model_describe, train/model_gpu.c train_gpu_describe, rollout/
source.c rollout_source_describe). SMI_CSV: lines "used, total" in MiB. Prints the
figures (the plan line itself is run_step.sh's ran_on_gpu's to print) and "met" or
"missed"; exits 1 when the run failed (RC not 0) or, outside a dry run, the plan has no
device figures or nvidia-smi read nothing. A miss exits 0.
"""
import argparse
import re
import sys


def device_plan(line):
    """{part: MB} of the plan's device figures, or None where it names no GPU."""
    m = re.search(r"on the GPU \((.*?), (\d+) MB free\): (.*?); on the host", line)
    if not m:
        return None
    parts = {"free at start": int(m.group(2))}
    for key, value in re.findall(r"(AdamW|reference|activations) (\d+)", m.group(3)):
        parts["weights and AdamW" if "AdamW" in key else key] = int(value)
    g = re.search(r"generation on the GPU (\d+)", line)
    if g:
        parts["generation"] = int(g.group(1))
    return parts


def peak(path):
    """(most used, total) MiB over the readings, or None."""
    best = None
    for row in open(path, errors="replace"):
        f = [x.strip() for x in row.split(",")]
        if len(f) == 2 and f[0].isdigit() and f[1].isdigit():
            used, total = int(f[0]), int(f[1])
            best = (used, total) if best is None or used > best[0] else best
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan", required=True)
    ap.add_argument("--smi", required=True)
    ap.add_argument("--bound-mib", type=int, required=True)
    ap.add_argument("--rc", type=int, required=True)
    ap.add_argument("--dry", type=int, default=0)
    a = ap.parse_args()
    lines = [l for l in open(a.plan, errors="replace") if "memory plan" in l]
    if not lines:
        print("  no memory plan line in the run's stderr")
        return 1
    parts = device_plan(lines[0])
    fail = a.rc != 0
    if parts is None:
        print("  the plan names no GPU" + (" (a dry run: on the CPU)" if a.dry else ""))
        return 1 if fail or not a.dry else 0
    device = sum(v for k, v in parts.items() if k != "free at start")
    print(f"  the plan's device part: {device} MB = " +
          " + ".join(f"{k} {v}" for k, v in parts.items() if k != "free at start") +
          f" ({parts['free at start']} MB free at the start)")
    p = peak(a.smi)
    if p is None:
        print("  nvidia-smi read nothing: the run's peak is not measured")
        return 1
    print(f"  most in use during the run (nvidia-smi, every 0.1 s): {p[0]} MiB of {p[1]} MiB")
    # the plan counts MB of 2^20 bytes, as nvidia-smi's MiB
    met = not fail and device <= a.bound_mib and p[0] <= a.bound_mib
    print(f"  fits an H100 80GB ({a.bound_mib} MiB): {'met' if met else 'missed'}"
          f"{' (the run failed)' if fail else ''}")
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
