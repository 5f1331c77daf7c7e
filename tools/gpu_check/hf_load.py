#!/usr/bin/env python3
"""tools/gpu_check/hf_load.py DIR NAME SEQS.jsonl TOK_IN.jsonl — hf_load.sh's comparisons for one shape.

DIR holds what hf_load.sh made: init/ (grpo init), full/ (2 steps of full fine-tuning),
lora/ (2 steps of LoRA: PEFT's adapter_config.json and adapter_model.safetensors over
init/), grpo score's output for SEQS.jsonl's sequences —
{full,init,lora}_cpu.jsonl with --use_cpu true --bf16 false, {full,lora}_gpu.jsonl on the
GPU — and tok_out.jsonl (grpo tokenize's ids of TOK_IN.jsonl's text).

Checks, each printed with its figure:
- the training moved grpo's fp32 log-probs (full and LoRA) by more than 10 x BOUND from
  the initial model's, so a checkpoint equal to its start cannot pass the loading checks;
- grpo score on the GPU beside the CPU's fp32 (reported; an exact match fails off a dry
  run, as tools/gpu_score_compare.py's: the GPU's bf16 products cannot give fp32's bits);
- transformers' AutoModelForCausalLM of full/ and PEFT's PeftModel of lora/ over init/,
  fp32 on the CPU (the models are tiny; no TF32 question), within BOUND of grpo's fp32
  log-probs (max |difference|); AutoTokenizer's ids equal grpo tokenize's.
Without transformers or PEFT: "skipped: no transformers" (GPU_CHECK_DRY=1) or a failure.
Exit 0 when everything checked held.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gpu_score_compare import distance, model_logprobs, read_scores  # noqa: E402

# fp32 on both sides, the same function: the difference is the order of fp32 sums in
# ~10 products of at most 384 terms and a log-softmax over 259 values, ~1e-6 on log-probs
# of magnitude ~6; 1e-4 leaves room and still fails any real difference (one wrong weight,
# a RoPE base, an epsilon, a missing bias or adapter scale moves them by 1e-3 and more).
BOUND = 1e-4


def same_shape(a, b):
    return [len(x) for x in a] == [len(x) for x in b]


def compare(name, what, got, ref):
    """one loading check against grpo's fp32 log-probs: prints, returns whether it holds"""
    if not same_shape(got, ref):
        print(f"FAILED: {name} {what}: another number of log-probs than grpo score's")
        return False
    mean, mx, n = distance(got, ref)
    ok = mx <= BOUND
    print(f"{name} {what} vs grpo score --use_cpu true --bf16 false: {n} log-probs, mean |diff| {mean:.3g}, "
          f"max {mx:.3g} {'<=' if ok else '> (FAILED)'} {BOUND:g}")
    return ok


def grpo_checks(d, name, s, dry):
    ok = True
    for what in ("full", "lora"):
        cpu, gpu, init = s[what + "_cpu"], s[what + "_gpu"], s["init_cpu"]
        if not (same_shape(cpu, gpu) and same_shape(cpu, init)):
            print(f"FAILED: {name} {what}: grpo score's outputs have other shapes")
            ok = False
            continue
        _, moved, _ = distance(cpu, init)
        good = moved > 10 * BOUND
        print(f"{name} {what}: 2 steps moved grpo's fp32 log-probs by up to {moved:.3g} from the initial model's"
              f"{'' if good else ' (FAILED: a loading check could not tell this checkpoint from its start)'}")
        ok &= good
        mean, mx, n = distance(gpu, cpu)
        exact = n and mx == 0 and not dry
        where = "without --use_cpu (a dry run: the CPU's default form)" if dry else "on the GPU"
        print(f"{name} {what}: grpo score {where} vs on the CPU in fp32: mean |diff| {mean:.3g}, max {mx:.3g}"
              f"{' (FAILED: the fp32 bits exactly: not the GPU bf16 products)' if exact else ''}")
        ok &= not exact
    return ok


def hf_checks(d, name, tok_in, s, rows):
    import torch
    import transformers
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    ok = True
    try:
        full = AutoModelForCausalLM.from_pretrained(d + "/full").float().eval()
        ok &= compare(name, f"full: transformers {transformers.__version__} {type(full).__name__} (fp32, CPU)",
                      model_logprobs(full, rows, "cpu"), s["full_cpu"])
    except Exception as e:  # a first run on the device must say what broke
        print(f"FAILED: {name} full: transformers could not load it: {type(e).__name__}: {str(e)[:300]}")
        ok = False
    try:
        import peft
        base = AutoModelForCausalLM.from_pretrained(d + "/init").float().eval()
        lora = PeftModel.from_pretrained(base, d + "/lora").eval()
        ok &= compare(name, f"LoRA: peft {peft.__version__} PeftModel over the base (fp32, CPU)",
                      model_logprobs(lora, rows, "cpu"), s["lora_cpu"])
    except Exception as e:
        print(f"FAILED: {name} LoRA: PEFT could not load it: {type(e).__name__}: {str(e)[:300]}")
        ok = False
    try:
        text = json.load(open(tok_in))["text"]
        want = json.load(open(d + "/tok_out.jsonl"))["ids"]
        got = AutoTokenizer.from_pretrained(d + "/full")(text, add_special_tokens=False)["input_ids"]
        same = got == want
        at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        print(f"{name} tokenizer: AutoTokenizer's {len(got)} ids {'equal' if same else 'differ from (FAILED)'} "
              f"grpo tokenize's {len(want)}" + ("" if same else f"; from id {at}: {got[at:at + 12]} vs {want[at:at + 12]}"))
        ok &= same
    except Exception as e:
        print(f"FAILED: {name} tokenizer: AutoTokenizer: {type(e).__name__}: {str(e)[:300]}")
        ok = False
    return ok


def main():
    d, name, seqs, tok_in = sys.argv[1:5]
    dry = os.environ.get("GPU_CHECK_DRY") == "1"
    rows = [json.loads(line) for line in open(seqs)]
    s = {k: read_scores(f"{d}/{k}.jsonl") for k in ("init_cpu", "full_cpu", "full_gpu", "lora_cpu", "lora_gpu")}
    ok = grpo_checks(d, name, s, dry)
    missing = None
    for module, said in (("transformers", "no transformers"), ("peft", "no peft"), ("torch", "no torch")):
        try:
            __import__(module)
        except ImportError:
            missing = missing or said
    if missing:
        if dry:
            print(f"{name}: loading in transformers and PEFT: skipped: {missing}")
        else:
            print(f"FAILED: {name}: {missing} in {sys.executable}: the loading checks cannot run")
            ok = False
        return 0 if ok else 1
    ok &= hf_checks(d, name, tok_in, s, rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
