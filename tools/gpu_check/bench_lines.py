#!/usr/bin/env python3
"""tools/gpu_check/bench_lines.py — the comparison lines of the device check's benchmark
section (tools/gpu_check/bench.sh): reads what grpo.c printed or logged and what its
PyTorch peer printed in the same run, and prints each of issue 35's targets as a ratio
with "met" or "missed". Counts come from bench/gpu_counts.py, the file the peers count
with, so both sides of a ratio are counted alike. No torch needed.

  bench_lines.py decode --model DIR --G N --new N --ours GEN.err --ours-json GEN.jsonl --peer LOG [--lean LOG] --gpu NAME
  bench_lines.py train  --model DIR --batch B --prompt P --completion N --micro-batches K --ours metrics.jsonl --peer LOG
  bench_lines.py grpo   --model DIR --G N --prompt P --completion N --ours metrics.jsonl --peer LOG
Appends one word per target (met, missed, no-peer) to --verdicts FILE when given.
Exits 1 when grpo.c's own figure is missing or not what was asked (the run broke), else 0:
a missed target is a figure, not a failed check.
"""
import argparse
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from gpu_counts import PEAK_BF16_TFLOPS, decode_step_bytes, peak_tbs, train_flops  # noqa: E402

# issue 35's targets on the H100 (its table)
DECODE_VS_TRANSFORMERS = 3.0
DECODE_FRACTION_OF_BOUND = 0.50
TRAIN_MFU = 0.40
TRAIN_VS_EAGER = 1.3
GRPO_STEP_VS_TORCH = 2.0


class Missing(Exception):
    """grpo.c's figure is not there: the section reports the run as broken."""


def shape_of(model_dir):
    """(C, L, H, Hkv, F, V) of the model grpo.c ran, from its config.json."""
    c = json.load(open(os.path.join(model_dir, "config.json")))
    return (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"],
            c["intermediate_size"], c["vocab_size"])


def peer_fields(paths, prefix, **want):
    """key=value fields of the first line of the peers' logs that starts with prefix and
    has every field of want; None when there is none (the peer skipped, failed or was cut)."""
    for path in paths:
        if not os.path.exists(path):
            continue
        for line in open(path):
            if not line.startswith(prefix + " "):
                continue
            f = dict(re.findall(r"(\S+?)=(\S+)", line))
            if all(f.get(k) == str(v) for k, v in want.items()):
                return f
    return None


def peer_reason(paths):
    """Why a peer gave no figure: the last 'skipped'/'peer:'/'not run' line of its log."""
    said = [ln.strip() for path in paths if os.path.exists(path)
            for ln in open(path) if ln.startswith(("skipped", "peer:", "not run"))]
    return said[-1] if said else "no line in its log"


class Verdicts:
    def __init__(self, path):
        self.path = path

    def say(self, what, value, target, unit="x"):
        """One target's line; value None: no peer figure to compare with."""
        if value is None:
            word = "no-peer"
            print(f"  {what}: no ratio (target >= {target:g}{unit})", flush=True)
        else:
            word = "met" if value >= target else "missed"
            print(f"  {what}: {value:.3g}{unit} (target >= {target:g}{unit}): {word}", flush=True)
        if self.path:
            with open(self.path, "a") as f:
                f.write(word + "\n")


def metric_rows(path):
    rows = []
    if os.path.exists(path):
        for line in open(path):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "step_time" in r:
                rows.append(r)
    if not rows:
        raise Missing(f"{path}: no step with step_time (the run stopped before its first logged step)")
    return rows


def decode(a, v):
    shape = shape_of(a.model)
    m = re.search(r"grpo generate: (\d+) tokens in ([0-9.]+) s", open(a.ours).read())
    if not m:
        raise Missing(f"{a.ours}: no 'grpo generate: N tokens in S s' line")
    tokens, seconds = int(m.group(1)), float(m.group(2))
    rows = [json.loads(ln) for ln in open(a.ours_json) if ln.strip()]
    full = sum(1 for r in rows if r.get("finish_reason") == "length" and len(r.get("ids", [])) == a.new)
    if tokens != a.G * a.new or full != a.G:
        raise Missing(f"grpo generate made {tokens} tokens, {full} of {a.G} completions of {a.new}: "
                      f"expected every completion to run to {a.new} tokens (no eos)")
    ours = tokens / seconds
    print(f"decode grpo.c G={a.G} new_tokens={a.new} layers={shape[1]} tokens_per_s={ours:.1f} seconds={seconds:.3f}",
          flush=True)
    p = peer_fields(a.peer, "gen", G=a.G, impl="transformers-bf16")
    peer = float(p["tokens_per_s"]) if p else None
    if p:
        print(f"decode transformers-bf16 G={a.G} tokens_per_s={peer:.1f} (same run)", flush=True)
    else:
        print(f"decode transformers-bf16 G={a.G}: {peer_reason(a.peer)}", flush=True)
    v.say(f"decode G={a.G} grpo.c / transformers generate", ours / peer if p else None, DECODE_VS_TRANSFORMERS)
    lean = peer_fields(a.lean, "gen", G=a.G, impl="torch-bf16")
    if lean:  # the hand-written torch Qwen2: a second peer, no target of its own
        print(f"  decode G={a.G} grpo.c / hand-written torch bf16 ({lean['tokens_per_s']} tokens/s): "
              f"{ours / float(lean['tokens_per_s']):.3g}x", flush=True)
    if a.G <= 8:  # the bandwidth bound, as torch_generate.py's bandwidth_line counts it
        w, kv = decode_step_bytes(shape, a.G, a.prompt + (a.new - 1) / 2)
        tbs = peak_tbs(a.gpu)
        step_s = seconds / a.new
        if not tbs:
            print(f"  decode G={a.G} bandwidth bound: no HBM figure for {a.gpu!r} (bench/gpu_counts.py): not read",
                  flush=True)
            return
        bound_s = (w + kv) / (tbs * 1e12)
        pb = peer_fields(a.peer, "bw", G=a.G, impl="transformers-bf16")
        print(f"decode grpo.c G={a.G} step_ms={step_s * 1e3:.3f} bound_ms={bound_s * 1e3:.3f} "
              f"(weights {w / 1e9:.3f} GB + kv {kv / 1e9:.4f} GB at {tbs:g} TB/s); transformers-bf16 fraction "
              f"{pb['fraction_of_bound'] if pb else 'none'}", flush=True)
        v.say(f"decode G={a.G} fraction of the bandwidth bound", bound_s / step_s, DECODE_FRACTION_OF_BOUND, "")


def train(a, v):
    shape = shape_of(a.model)
    rows = metric_rows(a.ours)
    if "step_time/training" not in rows[0]:
        raise Missing(f"{a.ours}: no step_time/training key")
    # the first step warms up (kernels loaded, cuBLASLt's choices made): the others are read
    timed = rows[1:] or rows
    # a step of K micro-batches gives their mean pass: one figure per step
    passes = sorted(r["step_time/training"] / a.micro_batches for r in timed)
    med = statistics.median(passes)
    flops = train_flops(shape, a.batch, a.prompt + a.completion, a.completion)
    mfu = flops / med / 1e12 / PEAK_BF16_TFLOPS
    print(f"train grpo.c batch={a.batch} seq={a.prompt + a.completion} layers={shape[1]} pass_s={med:.4f} "
          f"min_s={passes[0]:.4f} max_s={passes[-1]:.4f} steps={len(passes)}x{a.micro_batches}_passes"
          f"{'' if len(rows) > 1 else ' (no warm-up step)'} tflop_per_pass={flops / 1e12:.2f} "
          f"tflops={flops / med / 1e12:.1f} mfu={mfu:.3f}", flush=True)
    v.say("train MFU (grpo.c)", mfu, TRAIN_MFU, "")
    p = peer_fields(a.peer, "model", dtype="bf16", batch=a.batch)
    if p:
        print(f"train torch-eager-bf16 pass_s={p['train_s']} min_s={p['min_s']} max_s={p['max_s']} mfu={p['mfu']} "
              f"(same run)", flush=True)
    else:
        print(f"train torch-eager-bf16: {peer_reason(a.peer)}", flush=True)
    v.say("train grpo.c / PyTorch eager bf16", float(p["train_s"]) / med if p else None, TRAIN_VS_EAGER)


def grpo(a, v):
    rows = metric_rows(a.ours)
    r = rows[-1]  # the last step: the first warmed up when there were two
    step = r["step_time"]
    tokens = a.G * (a.prompt + a.completion)
    print(f"grpo grpo.c G={a.G} completion_tokens={a.completion} layers={shape_of(a.model)[1]} step_s={step:.3f} "
          f"generation_s={r.get('step_time/generation', float('nan')):.3f} "
          f"training_s={r.get('step_time/training', float('nan')):.3f} steps_logged={len(rows)} "
          f"tokens_per_s={tokens / step:.1f}", flush=True)
    p = peer_fields(a.peer, "grpo_step", G=a.G)
    if p:
        print(f"grpo torch-bf16+transformers step_s={p['step_s']} gen_s={p['gen_s']} train_s={p['train_s']} "
              f"tokens_per_s={p.get('tokens_per_s', 'none')} (same run)", flush=True)
    else:
        print(f"grpo torch-bf16+transformers: {peer_reason(a.peer)}", flush=True)
    v.say("grpo step grpo.c / PyTorch", float(p["step_s"]) / step if p else None, GRPO_STEP_VS_TORCH)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["decode", "train", "grpo"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ours", required=True)
    ap.add_argument("--ours-json")
    ap.add_argument("--peer", action="append", default=[], help="the peer's log")
    ap.add_argument("--lean", action="append", default=[], help="decode: the hand-written torch peer's log")
    ap.add_argument("--gpu", default="")
    ap.add_argument("--G", type=int, default=8)
    ap.add_argument("--new", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--completion", type=int, default=512)
    ap.add_argument("--micro-batches", type=int, default=1)
    ap.add_argument("--verdicts")
    a = ap.parse_args()
    try:
        {"decode": decode, "train": train, "grpo": grpo}[a.what](a, Verdicts(a.verdicts))
    except (Missing, OSError, KeyError, ValueError) as e:
        print(f"  {a.what}: grpo.c's figure is missing: {e}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
