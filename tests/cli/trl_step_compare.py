#!/usr/bin/env python3
"""Compares a `grpo train` run with the float64 TRL reference of its steps that
tools/trl_step_reference.py --write saved (tests/fixtures/trl_step/). Standard
library only (CI has no numpy or torch).

  trl_step_compare.py INIT_MODEL_DIR RUN_DIR EXPECTED.safetensors MAX_BOUND NORM_BOUND

First the run's completions must be the ones the reference was computed from
(else one line: the sampler changed). Then, with d = final - initial weights,
per tensor max|d_ours - d_ref| / max|d_ref| after taking off each element's
float32 rounding floor (steps x ulp32(w): the stored weights cannot be closer),
and ||d_ours - d_ref|| / ||d_ref|| over all tensors, against the two bounds;
the same figures as the reference script prints. Exit 1 over a bound."""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import score_fixture  # noqa: E402 (its safetensors reader)


def read_safetensors(path):
    return score_fixture.read_safetensors(path, strict=True)


def ulp32(x):
    """The spacing of float32 numbers at |x|."""
    if x == 0.0:
        return 2.0 ** -149
    _, e = math.frexp(abs(x))
    return 2.0 ** (e - 24)


def run_completions(run_dir):
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "completions.jsonl")) if l.strip()]
    return [(r["step"], [int(t) for t in r["completion_ids"]]) for r in rows]


def expected_completions(exp):
    shape, ids = exp["completion_ids"]
    L = shape[1]
    steps = exp["completion_steps"][1]
    return [(steps[i], [t for t in ids[i * L:(i + 1) * L] if t >= 0]) for i in range(shape[0])]


def main():
    init_dir, run_dir, exp_path = sys.argv[1:4]
    max_bound, norm_bound = float(sys.argv[4]), float(sys.argv[5])
    exp = read_safetensors(exp_path)
    want, got = expected_completions(exp), run_completions(run_dir)
    if want != got:
        first = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
        step = (want[first] if first < len(want) else got[first])[0]
        why = ("the sampler changed; regenerate the fixture with tools/trl_step_reference.py --make_fixture"
               if step == 1 else
               "the weights after step %d differ (the training, or the sampler, changed)" % (step - 1))
        print("%s: completion %d (step %d) differs from %s's: %s" % (run_dir, first, step, exp_path, why))
        return 1
    steps = len({s for s, _ in want})
    init = read_safetensors(os.path.join(init_dir, "model.safetensors"))
    ours = read_safetensors(os.path.join(run_dir, "model.safetensors"))
    worst, num, den = ("", 0.0, 0.0), 0.0, 0.0
    for key in sorted(k for k in exp if k.startswith("weight.")):
        name = key[len("weight."):]
        if name not in ours:
            print("%s/model.safetensors: %s missing" % (run_dir, name))
            return 1
        w0, w1, wr = init[name][1], ours[name][1], exp[key][1]
        mx = max(max(abs(r - a) for a, r in zip(w0, wr)), 1e-300)
        beyond = mx_diff = 0.0
        for a, b, r in zip(w0, w1, wr):
            diff = abs((b - a) - (r - a))
            num += diff * diff
            den += (r - a) * (r - a)
            mx_diff = max(mx_diff, diff)
            beyond = max(beyond, diff - steps * max(ulp32(r), ulp32(a)))
        if beyond / mx >= worst[1]:
            worst = (name, beyond / mx, mx_diff / mx)
    total = math.sqrt(num / max(den, 1e-300))
    ok = worst[1] <= max_bound and total <= norm_bound
    print("%d completions as the fixture's; worst %s: max %.3e, beyond fp32 %.3e (bound %.1e); all tensors' "
          "norm %.3e (bound %.1e): %s" % (len(got), worst[0], worst[2], worst[1], max_bound, total, norm_bound,
                                          "ok" if ok else "OVER"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
