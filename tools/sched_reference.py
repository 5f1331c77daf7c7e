#!/usr/bin/env python3
"""tools/sched_reference.py — the learning-rate multipliers of transformers'
get_scheduler (transformers/optimization.py, written out again from its formulas in
plain Python: no torch, no transformers), for tests/optim/sched_cases.h.

Usage: python3 tools/sched_reference.py > tests/optim/sched_cases.h
Each case: a schedule name, its lr_scheduler_kwargs as JSON, learning_rate, warmup,
total, and the multiplier at steps 0 .. total + 1 (the last one past the end)."""
import json
import math


def warm(step, w):
    return step / max(1, w)


def factor(name, kw, lr, w, total, step):
    span = max(1, total - w)
    if name == "constant":
        return 1.0
    if name == "cosine_warmup_with_min_lr":
        r = kw.get("min_lr_rate", kw.get("min_lr", 0) / lr)
        if step < w:
            if "warmup_lr_rate" not in kw:
                return (step + 1.0) / max(1.0, w)
            a = kw["warmup_lr_rate"]
            return a + (1.0 - a) * step / max(1, w - 1)
        p = (step - w + 1.0) / max(1.0, total - w)
        f = 0.5 * (1.0 + math.cos(math.pi * kw.get("num_cycles", 0.5) * 2.0 * p))
        return max(0, f * (1 - r) + r)
    if name == "warmup_stable_decay":
        decay = kw["num_decay_steps"]
        stable = kw.get("num_stable_steps", total - w - decay)
        m = kw.get("min_lr_ratio", 0.0)
        cyc = kw.get("num_cycles", 0.5)
        if step < w:
            x = step / max(1, w)
            t = kw.get("warmup_type", "linear")
            f = x if t == "linear" else 0.5 * (1 - math.cos(math.pi * x)) if t == "cosine" else 1 - math.sqrt(1 - x)
            return max(0.0, f * (1 - m) + m)
        if step < w + stable:
            return 1.0
        if step < w + stable + decay:
            x = (step - w - stable) / max(1, decay)
            t = kw.get("decay_type", "cosine")
            f = 1 - x if t == "linear" else 0.5 * (1 + math.cos(math.pi * cyc * 2 * x)) if t == "cosine" else 1 - math.sqrt(x)
            return max(0.0, f * (1 - m) + m)
        return m
    if step < w:
        return warm(step, w)
    p = (step - w) / span
    if name == "linear":
        return max(0.0, (total - step) / span)
    if name == "cosine":
        return max(0.0, 0.5 * (1 + math.cos(math.pi * kw.get("num_cycles", 0.5) * 2 * p)))
    if name == "cosine_with_min_lr":
        r = kw["min_lr_rate"] if "min_lr_rate" in kw else kw["min_lr"] / lr
        f = 0.5 * (1 + math.cos(math.pi * kw.get("num_cycles", 0.5) * 2 * p))
        return max(0, f * (1 - r) + r)
    if name == "cosine_with_restarts":
        if p >= 1.0:
            return 0.0
        return max(0.0, 0.5 * (1 + math.cos(math.pi * ((kw.get("num_cycles", 1) * p) % 1.0))))
    if name == "polynomial":
        end, power = kw.get("lr_end", 1e-7), kw.get("power", 1.0)
        if step > total:
            return end / lr
        left = 1 - (step - w) / (total - w)
        return ((lr - end) * left ** power + end) / lr
    if name == "inverse_sqrt":
        ts = w or 10000
        return 1.0 / math.sqrt((step + ts - w) / ts)
    if name == "constant_with_warmup":
        return 1.0
    raise ValueError(name)


CASES = [
    ("linear", {}, 1e-3, 3, 10),
    ("cosine", {}, 2e-5, 2, 12),
    ("cosine", {"num_cycles": 1.5}, 2e-5, 0, 9),
    ("constant", {}, 1e-4, 5, 6),
    ("constant_with_warmup", {}, 1e-4, 4, 8),
    ("cosine_with_restarts", {}, 1e-4, 2, 11),
    ("cosine_with_restarts", {"num_cycles": 3}, 1e-4, 1, 13),
    ("polynomial", {}, 1e-3, 2, 10),
    ("polynomial", {"lr_end": 1e-4, "power": 2.0}, 1e-3, 3, 9),
    ("inverse_sqrt", {}, 1e-3, 4, 12),
    ("inverse_sqrt", {}, 1e-3, 0, 5),
    ("cosine_with_min_lr", {"min_lr_rate": 0.1}, 1e-6, 2, 20),
    ("cosine_with_min_lr", {"min_lr": 5e-7, "num_cycles": 0.25}, 2e-6, 0, 7),
    ("cosine_warmup_with_min_lr", {"min_lr_rate": 0.1}, 1e-6, 3, 10),
    ("cosine_warmup_with_min_lr", {"min_lr_rate": 0.2, "warmup_lr_rate": 0.1}, 1e-6, 4, 10),
    ("warmup_stable_decay", {"num_decay_steps": 4}, 1e-4, 2, 10),
    ("warmup_stable_decay", {"num_decay_steps": 3, "num_stable_steps": 2, "decay_type": "1-sqrt",
                             "warmup_type": "cosine", "min_lr_ratio": 0.1}, 1e-4, 3, 12),
    ("warmup_stable_decay", {"num_decay_steps": 5, "decay_type": "linear", "warmup_type": "1-sqrt"}, 1e-4, 4, 12),
]

print("/* tests/optim/sched_cases.h — written by tools/sched_reference.py: transformers'")
print(" * schedule formulas in plain Python, the multiplier at steps 0 .. total + 1. */")
print("typedef struct { const char *name, *kwargs; double lr; int warmup, total; double f[24]; } SchedCase;")
print("static const SchedCase sched_cases[] = {")
for name, kw, lr, w, total in CASES:
    vals = ", ".join(repr(float(factor(name, kw, lr, w, total, s))) for s in range(total + 2))
    print('    {"%s", "%s", %r, %d, %d, {%s}},' % (name, json.dumps(kw).replace('"', '\\"'), lr, w, total, vals))
print("};")
