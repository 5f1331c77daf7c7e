#!/usr/bin/python3
"""Float64 reference of what TRL's GRPOTrainer does with the completions of a
`grpo train` run, step by step, and the comparison of the run's weights to it.

This is the end-to-end check of a training step: rollout -> advantages -> loss
-> backward -> gradient clipping -> AdamW -> weights. It takes the completions
the run drew (completions.jsonl: completion_ids, reward, advantage per step) and
recomputes everything after sampling in float64 with plain torch, independently
of grpo.c's code: the model is tools/make_model_reference.py's float64
re-implementation of the Hugging Face modeling code (forward()), the optimizer
torch.optim.AdamW and torch.nn.utils.clip_grad_norm_ themselves.

Formulas follow TRL 1.10.0.dev0 (main at f2cd577, after v1.9.0),
trl/trainer/grpo_trainer.py:
  - _generate_and_score_completions: rewards = nansum of the weighted reward
    functions (completions.jsonl's `reward`); multi_objective_aggregation
    sum_then_normalize; advantages = (r - group nanmean) / (std + 1e-4) with
    std the group's (scale_rewards group) or the batch's (batch) unbiased
    nanstd, not divided for scale_rewards none; NaN advantages -> 0.
    completion_mask: the tokens up to and including the first EOS;
    mask_truncated_completions zeroes a completion whose last id is neither
    EOS nor pad.
  - _get_per_token_logps_and_entropies: log_softmax(logits / temperature) of
    the completion tokens; the reference model (beta > 0) is the initial model.
  - _compute_loss: coef_1 = exp(logp - old_logp) with old_logp = logp.detach()
    (num_iterations 1: the ratio is 1, its gradient is not 0), coef_2 =
    clamp(coef_1, 1 - epsilon, 1 + epsilon_high), per-token loss
    -min(coef_1 A, coef_2 A) + beta (exp(ref - logp) - (ref - logp) - 1);
    loss_type grpo: the mean over sequences of each sequence's token mean;
    bnpo: the sum over the batch's kept tokens / their count; dapo: the sum /
    num_items_in_batch; dr_grpo: the sum / (sequences * max_completion_length).
    dapo's num_items_in_batch counts the loss mask's tokens, after
    mask_truncated_completions zeroes the truncated completions (TRL >= 1.9,
    huggingface/trl#6439; 1.0 to 1.8 counted them before).
The batch is the whole generation batch of a step at once: grpo.c's claim is
that its micro-batch split (per_device_train_batch_size x
gradient_accumulation_steps) gives that batch's gradient, so the same reference
checks the split and unsplit runs (for bnpo TRL itself differs by split).
Then transformers' Trainer: clip_grad_norm_(max_grad_norm), AdamW (betas,
adam_epsilon, weight_decay on all but biases and norms: get_decay_parameter_names)
at the scheduler's learning rate for that step (linear, cosine, constant; with
warmup).

Usage (Debian's torch lives in /usr/bin/python3):
  trl_step_reference.py --model INIT_DIR --run RUN_DIR [--bound 1e-5] [--norm_bound 1e-5]
                        [--write FILE] [--expected FILE]
      INIT_DIR: the model the run started from; RUN_DIR: a `grpo train` output_dir
      with log_completions true (its trainer_state.json holds the run's options).
      Prints per tensor max|d_ours - d_ref| / max|d_ref|, ||d_ours - d_ref|| /
      ||d_ref|| (d = final - initial weights) and the max figure beyond the
      float32 rounding of the stored weights (see compare()); exit 1 when the
      worst tensor's figure beyond fp32 is over --bound or all tensors' norm
      figure over --norm_bound. --write saves the reference's final weights and
      the completion ids it used (F64/I64 safetensors); --expected reads one back
      as the reference of a run that drew the same completions (a split run).
  trl_step_reference.py --check [--grpo build/grpo]
      reruns the committed fixture tests/fixtures/trl_step/ (fp32) and compares
      the completions and the reference to the committed expected files.
  trl_step_reference.py --make_fixture [--grpo build/grpo]
      writes tests/fixtures/trl_step/ (see docs/reference-fixtures.md).
The prompts are tokenized here: only tokenizers with one token per byte and no
merges (assets/byte-tokenizer) are supported, standard-format (string) prompts.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_model_reference as mm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "trl_step")
F64 = torch.float64


class RefError(Exception):
    """Bad input: one line naming the file, the field and what was expected."""


# --------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------

def load_weights(path):
    """{hf name: float64 tensor} from a safetensors file (F32, BF16 or F64)."""
    return {k: torch.from_numpy(np.array(v, dtype=np.float64)) for k, v in mm.read_safetensors(path).items()}


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise RefError("%s: cannot read JSON: %s" % (path, e))


def run_options(run_dir):
    """The options grpo train recorded: trainer_state.json's GrpoTrainer args."""
    path = os.path.join(run_dir, "trainer_state.json")
    st = load_json(path)
    try:
        return st["stateful_callbacks"]["GrpoTrainer"]["args"]
    except (KeyError, TypeError):
        raise RefError("%s: stateful_callbacks.GrpoTrainer.args missing: not a grpo train output_dir" % path)


def byte_tokenizer(model_dir):
    """(encode(text) -> ids, eos id, pad id) for a one-token-per-byte tokenizer."""
    tj = load_json(os.path.join(model_dir, "tokenizer.json"))
    tc = load_json(os.path.join(model_dir, "tokenizer_config.json"))
    model = tj.get("model", {})
    alphabet = byte_alphabet()
    vocab = model.get("vocab", {})
    if model.get("merges") or any(vocab.get(alphabet[b]) != b for b in range(256)):
        raise RefError("%s/tokenizer.json: model: expected one token per byte, no merges "
                       "(assets/byte-tokenizer)" % model_dir)
    specials = {t["content"]: t["id"] for t in tj.get("added_tokens", [])}

    def token_id(field):
        tok = tc.get(field)
        tok = tok.get("content") if isinstance(tok, dict) else tok
        if tok not in specials:
            raise RefError("%s/tokenizer_config.json: %s: expected an added token, got %r" % (model_dir, field, tok))
        return specials[tok]

    def encode(text):
        # added tokens are matched in the text (TRL tokenizes with add_special_tokens=False,
        # which still reads an added token's string as that token)
        ids, i = [], 0
        while i < len(text):
            hit = next((s for s in specials if text.startswith(s, i)), None)
            if hit:
                ids.append(specials[hit])
                i += len(hit)
            else:
                ids.extend(text[i].encode("utf-8"))
                i += 1
        return ids

    return encode, token_id("eos_token"), token_id("pad_token")


def byte_alphabet():
    """GPT-2's byte -> printable character map (the ByteLevel alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def read_completions(run_dir):
    path = os.path.join(run_dir, "completions.jsonl")
    if not os.path.exists(path):
        raise RefError("%s: missing: run grpo train with --log_completions true" % path)
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                r = json.loads(line)
                if not isinstance(r.get("prompt"), str) or "tool_spans" in r:
                    raise RefError("%s:%d: prompt: expected a standard-format (string) prompt, no tool calls"
                                   % (path, n))
                rows.append(r)
    return rows


# --------------------------------------------------------------------------
# TRL's formulas
# --------------------------------------------------------------------------

def nanstd(x):
    """TRL's nanstd: the unbiased std of the non-NaN values."""
    m = torch.nanmean(x)
    n = (~torch.isnan(x)).sum()
    var = torch.nanmean((x - m) ** 2) * n / (n - 1)
    return var.sqrt()


def advantages_of(rewards, G, scale):
    """_generate_and_score_completions, sum_then_normalize: rewards [N] (NaN: unscorable)."""
    grouped = rewards.view(-1, G)
    mean = torch.stack([torch.nanmean(g) for g in grouped]).repeat_interleave(G)
    if scale in ("group", "none"):
        std = torch.stack([nanstd(g) for g in grouped]).repeat_interleave(G)
    elif scale == "batch":
        std = nanstd(rewards).expand_as(rewards)
    else:
        raise RefError("trainer_state.json: scale_rewards: expected group, batch or none, got %r" % scale)
    adv = rewards - mean
    if scale != "none":
        adv = adv / (std + 1e-4)
    return torch.nan_to_num(adv, nan=0.0)


def completion_mask(ids, eos, pad, mask_truncated):
    """(mask, n): mask 1 up to and including the first EOS, all 0 for a truncated
    completion when asked; n its tokens before that truncation masking."""
    m = []
    for i, t in enumerate(ids):
        m.append(1.0)
        if t == eos:
            m.extend([0.0] * (len(ids) - i - 1))
            break
    n = sum(m)
    if mask_truncated and (not ids or ids[-1] not in (eos, pad)):
        m = [0.0] * len(ids)
    return torch.tensor(m, dtype=F64), n


def token_logps(cfg, P, seqs, temperature):
    """[log p(completion token | prefix) at the temperature] for seqs [(prompt ids,
    completion ids)], in one forward: each row prompt + completion from position 0,
    right-padded (causal attention: a real token never sees the padding after it)."""
    T = max(len(p) + len(c) for p, c in seqs)
    ids = torch.zeros((len(seqs), T), dtype=torch.int64)
    for i, (p, c) in enumerate(seqs):
        ids[i, :len(p) + len(c)] = torch.tensor(p + c)
    pos = torch.arange(T)[None].expand(len(seqs), T)
    logits = mm.forward(cfg, P, ids, torch.ones_like(ids), pos)
    out = []
    for i, (p, c) in enumerate(seqs):
        lp = torch.log_softmax(logits[i, len(p) - 1:len(p) + len(c) - 1] / temperature, dim=-1)
        out.append(lp.gather(-1, torch.tensor(c)[:, None])[:, 0])
    return out


def sequence_weights(loss_type, masks, max_len):
    """Each sequence's factor on its masked token-loss sum, for the whole batch.
    dapo's num_items_in_batch counts the tokens kept after truncation masking
    (TRL >= 1.9; 1.0 to 1.8 counted them before)."""
    N = len(masks)
    kept = sum(float(m.sum()) for m in masks)
    if loss_type == "grpo":
        return [1.0 / (N * max(1.0, float(m.sum()))) for m in masks]
    if loss_type == "dapo":
        return [1.0 / max(1.0, kept)] * N
    if loss_type == "bnpo":
        return [1.0 / max(1.0, kept)] * N
    if loss_type == "dr_grpo":
        return [1.0 / (N * max_len)] * N
    raise RefError("trainer_state.json: loss_type: this reference knows grpo, dapo, bnpo, dr_grpo; got %r" % loss_type)


def lr_at(opt, step0):
    """transformers' get_scheduler's learning rate for the optimizer step after step0 scheduler steps."""
    T = int(opt["max_steps"])
    w = int(opt.get("warmup_steps") or 0) or math.ceil(float(opt.get("warmup_ratio") or 0.0) * T)
    kind, lr = opt["lr_scheduler_type"], float(opt["learning_rate"])
    if kind == "constant":
        return lr
    if step0 < w:
        return lr * step0 / max(1, w)
    if kind == "constant_with_warmup":
        return lr
    progress = (step0 - w) / max(1, T - w)
    if kind == "linear":
        return lr * max(0.0, 1.0 - progress)
    if kind == "cosine":
        return lr * max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
    raise RefError("trainer_state.json: lr_scheduler_type: this reference knows linear, cosine, constant, "
                   "constant_with_warmup; got %r" % kind)


def decays(name):
    """transformers' get_decay_parameter_names: no decay for biases and norms."""
    n = name.lower()
    return not ("bias" in n or "layernorm" in n or "rmsnorm" in n or ".norm." in n or n.startswith("norm.")
                or "_norm." in n)


# --------------------------------------------------------------------------
# the steps
# --------------------------------------------------------------------------

def check_option(opt, key, want, run_dir):
    if opt.get(key) != want:
        raise RefError("%s/trainer_state.json: %s: this reference needs %r, got %r"
                       % (run_dir, key, want, opt.get(key)))


def step_gradient(cfg, P, P0, batch, opt, adv):
    """Accumulates TRL's loss gradient of one generation batch into P's .grad; returns the loss."""
    temp, beta = float(opt["temperature"]), float(opt["beta"])
    eps_low = float(opt["epsilon"])
    eps_high = float(opt["epsilon_high"]) if opt.get("epsilon_high") is not None else eps_low
    weights = sequence_weights(opt["loss_type"], [b[2] for b in batch], int(opt["max_completion_length"]))
    rows = [i for i, b in enumerate(batch) if b[1]]
    seqs = [(batch[i][0], batch[i][1]) for i in rows]
    lps = token_logps(cfg, P, seqs, temp)
    with torch.no_grad():
        refs = token_logps(cfg, P0, seqs, temp) if beta != 0.0 else lps
    loss = torch.zeros((), dtype=F64)
    for i, lp, ref in zip(rows, lps, refs):
        A = float(adv[i])
        coef_1 = torch.exp(lp - lp.detach())
        coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
        ptl = -torch.min(coef_1 * A, coef_2 * A)
        if beta != 0.0:
            ptl = ptl + beta * (torch.exp(ref - lp) - (ref - lp) - 1)
        loss = loss + weights[i] * (ptl * batch[i][2]).sum()
    loss.backward()
    return loss.item()


def reference_run(model_dir, run_dir, log):
    """Replays every step of the run in float64. Returns (final weights, [(step, ids)], the initial weights)."""
    opt = run_options(run_dir)
    for key, want in (("num_iterations", 1), ("use_peft", False), ("importance_sampling_level", "token"),
                      ("multi_objective_aggregation", "sum_then_normalize"), ("top_entropy_quantile", 1.0),
                      ("entropy_coef", 0.0), ("sync_ref_model", False),
                      ("vllm_importance_sampling_correction", False)):
        check_option(opt, key, want, run_dir)
    check_option(opt, "filter_groups", False, run_dir)
    if opt.get("delta"):
        raise RefError("%s/trainer_state.json: delta: this reference needs none (0)" % run_dir)
    if int(opt.get("max_steps") or 0) <= 0:
        raise RefError("%s/trainer_state.json: max_steps: this reference needs the run's step count, got %r"
                       % (run_dir, opt.get("max_steps")))
    cfg = load_json(os.path.join(model_dir, "config.json"))
    encode, eos, pad = byte_tokenizer(model_dir)
    P0 = load_weights(os.path.join(model_dir, "model.safetensors"))
    P = {k: v.clone().requires_grad_(True) for k, v in P0.items()}
    groups = [{"params": [P[k] for k in P if decays(k)], "weight_decay": float(opt["weight_decay"])},
              {"params": [P[k] for k in P if not decays(k)], "weight_decay": 0.0}]
    adamw = torch.optim.AdamW(groups, lr=float(opt["learning_rate"]), eps=float(opt["adam_epsilon"]),
                              betas=(float(opt["adam_beta1"]), float(opt["adam_beta2"])))
    rows = read_completions(run_dir)
    G, maxp = int(opt["num_generations"]), int(opt["max_prompt_length"])
    metrics = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if l.strip()]
    used = []
    for step in sorted({r["step"] for r in rows}):
        rs = [r for r in rows if r["step"] == step]
        if len(rs) != int(opt["per_device_train_batch_size"]) * int(opt["gradient_accumulation_steps"]):
            # a generation batch serving several steps (steps_per_generation) or processes: its
            # advantages are the whole generation batch's, which one step's rows do not hold
            raise RefError("%s/completions.jsonl: step %d: %d completions, expected per_device_train_batch_size x "
                           "gradient_accumulation_steps (one generation batch a step, one process)"
                           % (run_dir, step, len(rs)))
        rewards = torch.tensor([float("nan") if r["reward"] is None else r["reward"] for r in rs], dtype=F64)
        adv = advantages_of(rewards, G, opt["scale_rewards"])
        ours_adv = torch.tensor([0.0 if r["advantage"] is None else r["advantage"] for r in rs], dtype=F64)
        batch = []
        for r in rs:
            prompt = encode(r["prompt"])
            prompt = prompt[-maxp:] if maxp > 0 else prompt
            comp = [int(t) for t in r["completion_ids"]]
            batch.append((prompt, comp) + completion_mask(comp, eos, pad, bool(opt["mask_truncated_completions"])))
            used.append((step, comp))
        adamw.zero_grad(set_to_none=False)
        loss = step_gradient(cfg, P, P0, batch, opt, adv)
        norm = float(torch.nn.utils.clip_grad_norm_(list(P.values()), float(opt["max_grad_norm"])))
        lr = lr_at(opt, step - 1)
        for g in adamw.param_groups:
            g["lr"] = lr
        adamw.step()
        m = next((x for x in metrics if x.get("step") == step and "grad_norm" in x), {})
        log("step %d: %d completions, advantage max |ours - TRL| %.2e; loss %.6e (ours %s); grad_norm %.6e "
            "(ours %s); lr %.6e (ours %s)" % (step, len(rs), float((adv - ours_adv).abs().max()), loss,
                                             m.get("loss"), norm, m.get("grad_norm"), lr, m.get("learning_rate")))
    return {k: v.detach() for k, v in P.items()}, used, P0


# --------------------------------------------------------------------------
# comparison and files
# --------------------------------------------------------------------------

def fp32_ulp(w):
    """The spacing of float32 numbers at |w| (elementwise; normal numbers)."""
    _, e = np.frexp(np.abs(w.numpy()).astype(np.float32))
    return torch.from_numpy(np.ldexp(1.0, e.astype(np.int64) - 24))


def compare(P0, ours, ref, steps, log):
    """Per tensor figures of d_ours against d_ref (d: final - initial weights).
    max: max|d_ours - d_ref| / max|d_ref|; norm: ||d_ours - d_ref|| / ||d_ref||;
    beyond: max of (|d_ours - d_ref| - steps * ulp32(w)) / max|d_ref|, what is left
    after the float32 rounding of the stored weights themselves (half an ulp a step,
    and AdamW's own fp32 arithmetic): a norm weight near 1 moved by 1e-3 cannot be
    right to better than 6e-5 relative in fp32, whatever the arithmetic.
    Returns (all tensors' norm figure, the worst by beyond: (name, max, norm, beyond))."""
    worst = ("", 0.0, 0.0, 0.0)
    num = den = 0.0
    for k in ref:
        if k not in ours:
            raise RefError("the run's model.safetensors lacks %s" % k)
        d_ref, d_ours = ref[k] - P0[k], ours[k] - P0[k]
        diff = (d_ours - d_ref).abs()
        mx = max(float(d_ref.abs().max()), 1e-300)
        floor = steps * torch.max(fp32_ulp(ref[k]), fp32_ulp(P0[k]))
        fig = (float(diff.max()) / mx, float(diff.norm()) / max(float(d_ref.norm()), 1e-300),
               float((diff - floor).clamp(min=0).max()) / mx)
        num, den = num + float(diff.norm()) ** 2, den + float(d_ref.norm()) ** 2
        log("  %-48s max %.3e  norm %.3e  beyond fp32 %.3e  (max |d_ref| %.3e)" % ((k,) + fig + (mx,)))
        if fig[2] >= worst[3]:
            worst = (k,) + fig
    total = math.sqrt(num / max(den, 1e-300))
    log("all tensors: ||d_ours - d_ref|| / ||d_ref|| = %.3e" % total)
    return total, worst


def write_expected(path, ref, used):
    """The reference's final weights (F64) and the completions it was computed from (I64, -1 padded)."""
    L = max([len(c) for _, c in used] + [1])
    ids = torch.full((len(used), L), -1, dtype=torch.int64)
    for i, (_, c) in enumerate(used):
        ids[i, :len(c)] = torch.tensor(c, dtype=torch.int64)
    steps = torch.tensor([s for s, _ in used], dtype=torch.int64)
    items = [("completion_ids", ids), ("completion_steps", steps)]
    items += [("weight." + k, ref[k].to(F64)) for k in sorted(ref)]
    mm.write_safetensors(path, items)


def run_and_compare(model_dir, run_dir, bounds, write, log, expected=None):
    """bounds: (on the worst tensor's max figure beyond fp32 rounding, on the norm figure of all).
    expected: a --write file of a run with the same options but another micro-batch split;
    when this run drew the same completions its reference is that file's (the reference
    is the whole batch's, whatever the split), else it is computed."""
    if expected and read_expected(expected)[1] == [(r["step"], [int(t) for t in r["completion_ids"]])
                                                    for r in read_completions(run_dir)]:
        ref, used = read_expected(expected)
        P0 = load_weights(os.path.join(model_dir, "model.safetensors"))
        log("the same completions as %s: its reference weights" % expected)
    else:
        ref, used, P0 = reference_run(model_dir, run_dir, log)
    ours = load_weights(os.path.join(run_dir, "model.safetensors"))
    total, (name, mx, nrm, beyond) = compare(P0, ours, ref, len({s for s, _ in used}), log)
    ok = beyond <= bounds[0] and total <= bounds[1]
    log("worst: %s max %.3e norm %.3e beyond fp32 %.3e; all tensors' norm %.3e (bounds %.1e beyond fp32, "
        "%.1e norm): %s" % (name, mx, nrm, beyond, total, bounds[0], bounds[1], "ok" if ok else "OVER"))
    if write:
        write_expected(write, ref, used)
    return ok


# --------------------------------------------------------------------------
# the committed fixture (tests/fixtures/trl_step/)
# --------------------------------------------------------------------------

FIXTURE_PROMPTS = ["ab", "hello", "xyz", "lol"]
FIXTURE_OPTIONS = """\
reward_funcs: [length:4]
num_generations: 4
per_device_train_batch_size: 16
gradient_accumulation_steps: 1
max_completion_length: 8
max_steps: 2
learning_rate: 1.0e-2
adam_epsilon: 1.0e-2
weight_decay: 0.1
max_grad_norm: 10.0
temperature: 0.7
beta: 0.04
mask_truncated_completions: true
log_completions: true
seed: 7
logging_steps: 1
"""


def grpo_train(grpo, model_dir, options, data, out, extra=()):
    cmd = [grpo, "train", "--config", options, "--model", model_dir, "--dataset", data, "--output_dir", out]
    cmd += list(extra)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise RefError("%s failed (exit %d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-500:]))


def make_fixture(grpo, log):
    """grpo init at the qwen2 test shape (vocab 300, the byte tokenizer), EOS made likely
    after some tokens (its embedding row a multiple of another's: the tied head then
    scores EOS high after them, so completions both end and get truncated), the
    prompts, the options, the expected weights of an fp32 run."""
    model = os.path.join(FIXTURE, "model")
    shutil.rmtree(FIXTURE, ignore_errors=True)
    os.makedirs(FIXTURE)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_json(os.path.join(ROOT, "tests", "fixtures", "qwen2", "config.json"))
        cfg.update(vocab_size=300, eos_token_id=258)
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        subprocess.run([grpo, "init", "--config", os.path.join(tmp, "config.json"), "--tokenizer",
                        os.path.join(ROOT, "assets", "byte-tokenizer"), "--seed", "1", "--output_dir", model],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    raw = mm.read_safetensors(os.path.join(model, "model.safetensors"))
    W = {k: torch.from_numpy(np.array(v)) for k, v in raw.items()}
    W["model.embed_tokens.weight"][258] = 40.0 * W["model.embed_tokens.weight"][ord("l")]
    mm.write_safetensors(os.path.join(model, "model.safetensors"), [(k, W[k]) for k, _, _ in mm.param_specs(cfg)])
    with open(os.path.join(FIXTURE, "data.jsonl"), "w") as f:
        for p in FIXTURE_PROMPTS:
            f.write(json.dumps({"prompt": p}) + "\n")
    with open(os.path.join(FIXTURE, "run.yaml"), "w") as f:
        f.write(FIXTURE_OPTIONS)
    for bf16 in ("false", "true"):
        with tempfile.TemporaryDirectory() as tmp:
            grpo_train(grpo, model, os.path.join(FIXTURE, "run.yaml"), os.path.join(FIXTURE, "data.jsonl"),
                       tmp, ["--bf16", bf16])
            name = "expected.safetensors" if bf16 == "false" else "expected_bf16.safetensors"
            run_and_compare(model, tmp, (math.inf, math.inf), os.path.join(FIXTURE, name), log)


def read_expected(path):
    """(weights {name: f64}, [(step, ids)]) from a --write file."""
    raw = mm.read_safetensors(path)
    ids = [[int(t) for t in row if t >= 0] for row in np.array(raw["completion_ids"])]
    steps = [int(s) for s in np.array(raw["completion_steps"])]
    W = {k[len("weight."):]: torch.from_numpy(np.array(v, dtype=np.float64)) for k, v in raw.items()
         if k.startswith("weight.")}
    return W, list(zip(steps, ids))


def check_fixture(grpo, log):
    """Reruns the committed fixture and compares with its expected files: the same
    completions, and the reference's weights within 1e-12 relative to the update
    (not byte-equal: torch's float64 sums may be ordered differently elsewhere)."""
    model, ok = os.path.join(FIXTURE, "model"), True
    for bf16, name in (("false", "expected.safetensors"), ("true", "expected_bf16.safetensors")):
        if not os.path.exists(os.path.join(FIXTURE, name)):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            grpo_train(grpo, model, os.path.join(FIXTURE, "run.yaml"), os.path.join(FIXTURE, "data.jsonl"),
                       tmp, ["--bf16", bf16])
            ref, used, P0 = reference_run(model, tmp, log)
        W, ids = read_expected(os.path.join(FIXTURE, name))
        if ids != used:
            log("%s: the completions differ from the run's (the sampler changed): --make_fixture" % name)
            ok = False
            continue
        _, (_, max_rel, _, _) = compare(P0, W, ref, 0, lambda s: None)
        log("%s: the same %d completions; reference weights max rel %.2e (bound 1e-12)" % (name, len(ids), max_rel))
        ok = ok and max_rel <= 1e-12
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="the run's initial model directory")
    ap.add_argument("--run", help="the grpo train output_dir")
    ap.add_argument("--bound", type=float, default=1e-5,
                    help="largest max|d_ours - d_ref| / max|d_ref| beyond fp32 rounding accepted, per tensor")
    ap.add_argument("--norm_bound", type=float, default=1e-5,
                    help="largest ||d_ours - d_ref|| / ||d_ref|| accepted over all tensors")
    ap.add_argument("--write", help="save the reference's weights and completion ids here (safetensors)")
    ap.add_argument("--expected", help="a --write file of the same run with another micro-batch split: "
                    "used as this run's reference when the completions are the same")
    ap.add_argument("--check", action="store_true", help="rerun the committed fixture and compare")
    ap.add_argument("--make_fixture", action="store_true", help="write tests/fixtures/trl_step/")
    ap.add_argument("--grpo", default=os.path.join(ROOT, "build", "grpo"),
                    help="the grpo binary (--check, --make_fixture)")
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))

    def log(s):
        print(s, flush=True)
    try:
        if a.make_fixture:
            make_fixture(a.grpo, log)
            return 0
        if a.check:
            return 0 if check_fixture(a.grpo, log) else 1
        if not a.model or not a.run:
            ap.error("--model and --run are needed (or --check / --make_fixture)")
        return 0 if run_and_compare(a.model, a.run, (a.bound, a.norm_bound), a.write, log, a.expected) else 1
    except RefError as e:
        print("trl_step_reference.py: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
