#!/usr/bin/python3
"""PyTorch bf16 autocast on the model fixtures: the bar for grpo.c's mixed precision.

For each fixture made by make_model_reference.py (tests/fixtures/<name>/), runs the
same model, inputs and loss as its float64 reference, but in fp32 weights under
torch.autocast("cpu", dtype=torch.bfloat16) — what TRL's `bf16: true` gives on a
CPU — and writes

    tests/fixtures/<name>/autocast_bf16.safetensors
        logprobs        [B,T] F64   the log-probs autocast gives (0 at padding)
        grad.<param>    F64         the gradient of the same loss

tests/model/test_bf16_compute.c measures both its own and these against the
float64 reference: the log-prob error of grpo.c's bf16 compute must be at most
1.5x autocast's, and its gradients at least as close (docs/reference-fixtures.md).

The log-softmax runs on the logits as autocast returns them (bf16 from the LM
head's matmul, widened to fp32 for the log-softmax — kinder to autocast than TRL,
whose selective_log_softmax works on the bf16 logits): the error measured is that
of the matmuls, which is what the comparison is about.

Usage (Debian's torch lives in /usr/bin/python3):
    /usr/bin/python3 tools/make_bf16_reference.py [--out tests/fixtures]
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_model_reference as ref  # noqa: E402

torch.set_num_threads(1)


def build(name, d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    W = ref.read_safetensors(os.path.join(d, "model.safetensors"))
    R = ref.read_safetensors(os.path.join(d, "reference.safetensors"))
    ids = torch.from_numpy(R["input_ids"].copy())
    mask = torch.from_numpy(R["attention_mask"].copy())
    tgt = torch.from_numpy(R["target_ids"].copy())
    lw = torch.from_numpy(R["loss_weight"].copy()).to(torch.float32)
    temp = float(R["temperature"][0])
    pos = ref.position_ids_from_mask(mask)
    names = [n for n, _, _ in ref.param_specs(cfg)]
    P = {n: torch.from_numpy(W[n].astype("float32")).requires_grad_(True) for n in names}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = ref.forward(cfg, P, ids, mask, pos, rope_dtype=torch.float32)
    lp, _, loss = ref.heads(logits.float(), mask, tgt, lw, temp)
    grads = torch.autograd.grad(loss[0], [P[n] for n in names])
    want = torch.from_numpy(R["logprobs"].copy())
    m = mask.bool()
    err = (lp.double() - want).abs()[m].max().item()
    print("  %s: autocast bf16 log-prob max error %.3e (logits dtype %s)" % (name, err, logits.dtype))
    items = [("logprobs", lp.detach().double())]
    items += [("grad." + n, g.detach().double()) for n, g in zip(names, grads)]
    ref.write_safetensors(os.path.join(d, "autocast_bf16.safetensors"), items)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(here), "tests", "fixtures"))
    ap.add_argument("--only", nargs="*", default=list(ref.CONFIGS))
    args = ap.parse_args()
    for n in args.only:
        build(n, os.path.join(args.out, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
