#!/usr/bin/env python3
"""tools/gpu_score_compare.py MODEL_DIR DATA.jsonl CPU_FP32.jsonl GPU.jsonl

`grpo score`'s log-probs on the GPU (bf16 products) against the CPU's fp32 ones of
the same lines (tools/gpu-check.sh runs both), printed as mean and max |difference|;
then, where torch and transformers import and a GPU is there, the same for
transformers' model in bf16 (`.to(torch.bfloat16)`, the peer's precision) and in
fp32 (a check that both programs score the same tokens: it should sit near fp32's
rounding). Exits 1 when the files disagree in shape, the GPU's scores are not
finite where the CPU's are, or they equal the CPU's fp32 ones exactly (the run was
not on the GPU's bf16 products); the figures themselves are reported, not judged.
"""
import json
import math
import sys


def read_scores(path):
    return [json.loads(line)["logprobs"] for line in open(path)]


def distance(got, ref):
    diffs = [abs(g - r) for gl, rl in zip(got, ref) for g, r in zip(gl, rl)]
    return sum(diffs) / max(len(diffs), 1), max(diffs, default=0.0), len(diffs)


def model_logprobs(model, rows, device):
    """`grpo score`'s output for rows ({"prompt_ids", "completion_ids"}) computed by a torch
    causal LM (transformers' or PEFT's) on device: per row, each completion token's log-prob,
    the logits taken in fp32. tools/gpu_check/hf_load.py uses it too."""
    import torch

    out = []
    with torch.no_grad():
        for row in rows:
            ids = row["prompt_ids"] + row["completion_ids"]
            if not row["completion_ids"]:
                out.append([])
                continue
            logits = model(torch.tensor([ids], device=device)).logits[0].float()
            logp = torch.log_softmax(logits, dim=-1)
            first = len(row["prompt_ids"])
            out.append([logp[t - 1, ids[t]].item() for t in range(first, len(ids))])
    return out


def torch_scores(model_dir, rows, dtype_name):
    import torch
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, dtype_name)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).to(dtype).cuda().eval()
    out = model_logprobs(model, rows, "cuda")
    del model
    torch.cuda.empty_cache()
    return out


def main():
    model_dir, data, cpu_path, gpu_path = sys.argv[1:5]
    rows = [json.loads(line) for line in open(data)]
    cpu, gpu = read_scores(cpu_path), read_scores(gpu_path)
    if [len(x) for x in cpu] != [len(x) for x in gpu] or len(cpu) != len(rows):
        print("FAILED: the GPU's output has another shape than the CPU's")
        return 1
    bad = sum(1 for gl, cl in zip(gpu, cpu) for g, c in zip(gl, cl) if c is not None and (g is None or not math.isfinite(g)))
    if bad:
        print(f"FAILED: {bad} GPU scores are not finite where the CPU's are")
        return 1
    mean, mx, n = distance(gpu, cpu)
    print(f"grpo score, GPU bf16 vs CPU fp32: {n} log-probs, mean |diff| {mean:.3g}, max {mx:.3g}")
    if n and mx == 0:  # bf16 products cannot give fp32's bits on every token
        print("FAILED: the GPU run gave the CPU fp32 run's values exactly: it did not run with bf16 products")
        return 1
    for dtype in ("bfloat16", "float32"):
        try:
            peer = torch_scores(model_dir, rows, dtype)
        except Exception as e:  # the figure is a comparison only: say why it is missing
            print(f"transformers {dtype}: not measured ({type(e).__name__}: {str(e).splitlines()[0][:200]})")
            continue
        mean, mx, n = distance(peer, cpu)
        print(f"transformers {dtype} on the GPU vs grpo's CPU fp32: {n} log-probs, mean |diff| {mean:.3g}, max {mx:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
