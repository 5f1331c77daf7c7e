#!/usr/bin/python3
"""Float64 PyTorch reference for src/grpo (advantages, policy loss) and src/optim (AdamW).

Writes tests/fixtures/grpo_loss/reference.safetensors from synthetic logged data:
3 groups of G=4 completions with varied lengths (two truncated), rewards from
2 reward functions (one None), per-token logp / old / ref / entropy (values
drawn in float32, so the C side reads them exactly), then

  adv.<mode>.{advantages,rewards,stats}   TRL's advantages for 4 (aggregation, scale) modes
  case<k>.config / .loss / .grad          loss and d loss / d logp by torch autograd in float64,
                                          written from TRL GRPOTrainer._compute_loss on padded
                                          [B, T] tensors (one micro-batch, GA = 1)
  adamw.*                                 4 steps of torch.optim.AdamW (two param groups: decay
                                          and no decay) + clip_grad_norm_ + linear warmup LR

Usage (Debian's torch lives in /usr/bin/python3):
    /usr/bin/python3 tests/grpo/make_loss_reference.py            # (re)write the fixture
    /usr/bin/python3 tests/grpo/make_loss_reference.py --check    # regenerate, byte-compare
"""

import argparse
import filecmp
import math
import os
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from make_model_reference import write_safetensors  # noqa: E402

torch.set_num_threads(1)
D = torch.float64
G = 4
LENGTHS = [3, 7, 1, 10, 5, 2, 8, 4, 6, 10, 9, 3]   # completion tokens per sequence
TRUNCATED = [0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0]   # no EOS (length == max_completion_length)
MAX_LEN = 10
LOSS_TYPES = ["dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"]   # C enum order
NAN = float("nan")


# ---------------------------------------------------------------- TRL helpers (re-written)

def nanstd(x, dim=None, keepdim=False):
    """TRL's nanstd: nanmean of squared deviations, times count / (count - 1). The count is made
    float64 here: int64 / int64 in torch gives the default dtype (float32), a rounding that TRL's
    float32 arithmetic does not notice but a float64 reference would."""
    if dim is None:
        var = torch.nanmean((x - torch.nanmean(x)) ** 2)
        count = torch.sum(~torch.isnan(x)).to(D)
    else:
        var = torch.nanmean((x - torch.nanmean(x, dim=dim, keepdim=True)) ** 2, dim=dim, keepdim=keepdim)
        count = torch.sum(~torch.isnan(x), dim=dim, keepdim=keepdim).to(D)
    return torch.sqrt(var * (count / (count - 1)))


def advantages(rpf, weights, agg, scale):
    """rpf [n, F] (NaN = None) -> advantages, rewards, stats; _generate_and_score_completions."""
    F = rpf.shape[1]
    if agg == "sum_then_normalize":
        rewards = (rpf * weights.unsqueeze(0)).nansum(dim=1)
        mean_g = rewards.view(-1, G).mean(dim=1).repeat_interleave(G)
        if scale in ("group", "none"):
            std = rewards.view(-1, G).std(dim=1).repeat_interleave(G)
        else:
            std = rewards.std().expand_as(rewards)
        adv = rewards - mean_g
        if scale != "none":
            adv = adv / (std + 1e-4)
    else:
        grouped = rpf.view(-1, G, F)
        mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
        std_k = nanstd(grouped, dim=1, keepdim=True)
        reward_k = ((grouped - mean_k) / (std_k + 1e-4)).view(-1, F)
        rewards = (reward_k * weights.unsqueeze(0)).nansum(dim=1)
        std = rewards.std().expand_as(rewards)
        adv = (rewards - rewards.mean()) / (std + 1e-4)
    is_std_zero = torch.isclose(std, torch.zeros_like(std))
    plain = rpf.nansum(dim=1)
    stats = [plain.mean().item(), plain.std().item(), is_std_zero.to(D).mean().item()]
    for f in range(F):
        stats += [torch.nanmean(rpf[:, f]).item(), nanstd(rpf[:, f]).item()]
    return adv, rewards, torch.tensor(stats, dtype=D)


def high_entropy_mask(ent, mask, threshold):
    vals = ent[mask.bool()]
    if vals.numel() == 0:
        return torch.zeros_like(ent, dtype=torch.bool)
    thr = torch.quantile(vals, threshold)
    return ((ent * mask) >= thr) & mask.bool()


def gamma_weights(A, log_ratio, mask, c):
    """TRL's get_gamma_weights (no vLLM correction): phi(w) = exp(lam + k log w - lam w) per sequence,
    w = exp(sum of the clamped token log-ratios), k and lam by the sign of A; detached."""
    with torch.no_grad():
        s = (torch.clamp(log_ratio, -20.0, 20.0) * mask).sum(-1, keepdim=True)
        log_w = torch.clamp(s, math.log(1e-8), 20.0)
        nonneg = A >= 0
        k = torch.where(nonneg, torch.full_like(A, c["vespo"][0]), torch.full_like(A, c["vespo"][2]))
        lam = torch.where(nonneg, torch.full_like(A, c["vespo"][1]), torch.full_like(A, c["vespo"][3])).clamp(min=1e-4)
        return torch.exp(lam + k * log_w - lam * torch.exp(log_w)).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)


def trl_loss(c, logp, old, ref, ent, adv, cmask, trunc):
    """GRPOTrainer._compute_loss on one micro-batch with gradient_accumulation_steps = 1 and
    num_items_in_batch = the loss mask's tokens, truncated completions zeroed (TRL >= 1.9:
    huggingface/trl#6439; 1.0-1.8 counted them before the masking)."""
    mask = cmask * (1 - trunc).unsqueeze(1) if c["mask_truncated"] else cmask
    num_items = mask.sum().clamp(min=1.0)
    emask = high_entropy_mask(ent, mask, 1 - c["q"]) if c["q"] < 1.0 else None
    old = logp.detach() if old is None else old
    log_ratio = logp - old
    if c["level"] == "token":
        liw = log_ratio
    else:
        liw = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    coef_1 = torch.exp(liw)
    if c["beta"] != 0.0:
        kl = torch.exp(ref - logp) - (ref - logp) - 1
    A = adv.unsqueeze(1)
    lt = c["loss_type"]
    if lt == "cispo":
        ptl = -torch.clamp(coef_1, max=c["eps_high"]).detach() * A * logp
    elif lt == "sapo":
        temps = torch.where(A > 0, torch.full_like(A, c["sapo_pos"]), torch.full_like(A, c["sapo_neg"]))
        ptl = -torch.sigmoid(temps * (coef_1 - 1)) * 4 / temps * A
    elif lt == "vespo":
        ptl = -gamma_weights(A, log_ratio, mask, c) * A * logp
    else:
        coef_2 = torch.clamp(coef_1, 1 - c["eps_low"], 1 + c["eps_high"])
        if c["delta"] > 0:
            coef_1 = torch.clamp(coef_1, max=c["delta"])
        ptl = -torch.min(coef_1 * A, coef_2 * A)
    if emask is not None:
        ptl = ptl * emask
    if c["beta"] != 0.0:
        ptl = ptl + c["beta"] * kl
    if lt in ("grpo", "sapo"):
        loss = ((ptl * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif lt == "bnpo":
        loss = (ptl * mask).sum() / mask.sum().clamp(min=1.0)
    elif lt == "dr_grpo":
        loss = (ptl * mask).sum() / (ptl.size(0) * MAX_LEN)
    elif lt in ("dapo", "cispo", "vespo"):
        loss = (ptl * mask).sum() / num_items
    elif lt == "luspo":
        loss = (ptl * mask).sum(-1).mean()
    else:
        raise ValueError(lt)
    if c["ent_coef"] != 0.0:
        # the entropy bonus: the kept tokens' mean entropy (over num_items for the token-normalised
        # types, over this micro-batch's kept tokens / gradient_accumulation_steps = 1 otherwise)
        eff = mask if emask is None else mask * emask
        if lt in ("dapo", "cispo", "vespo"):
            bonus = (ent * eff).sum() / num_items
        else:
            bonus = (ent * eff).sum() / eff.sum().clamp(min=1.0)
        loss = loss - c["ent_coef"] * bonus
    return loss


# ---------------------------------------------------------------- data

def build():
    g = torch.Generator().manual_seed(1234)
    S, T = len(LENGTHS), sum(LENGTHS)
    B, L = S, max(LENGTHS)

    def f32(t):
        return t.to(torch.float32).to(D)

    logp = f32(-torch.rand(T, generator=g, dtype=D) * 3.0 - 0.05)
    old = f32(logp + torch.randn(T, generator=g, dtype=D) * 0.3)
    ref = f32(logp + torch.randn(T, generator=g, dtype=D) * 0.5)
    ent = f32(torch.rand(T, generator=g, dtype=D) * 4.0)
    # rewards: function 0 everywhere, function 1 None for completions 5 and 9; group 1 (seqs
    # 4..7) has equal weighted sums so its std is 0 (frac_reward_zero_std)
    r0 = f32(torch.randn(S, generator=g, dtype=D))
    r1 = f32(torch.rand(S, generator=g, dtype=D))
    r0[4:8] = 0.5
    r1[4:8] = 0.25
    r1[5] = NAN
    r0[5] = 1.0           # 1.0 + nansum(NaN) == 0.5 + 2 * 0.25: group 1 has zero std
    r1[9] = NAN
    weights = torch.tensor([1.0, 2.0], dtype=D)
    rpf = torch.stack([r0, r1], dim=1)            # [n, F]

    out = []
    offsets = [0]
    for n in LENGTHS:
        offsets.append(offsets[-1] + n)
    out.append(("offsets", torch.tensor(offsets, dtype=torch.int64)))
    out.append(("truncated", torch.tensor(TRUNCATED, dtype=torch.int64)))
    out.append(("max_completion_length", torch.tensor([MAX_LEN], dtype=torch.int64)))
    out.append(("logp", logp))
    out.append(("old_logp", old))
    out.append(("ref_logp", ref))
    out.append(("entropy", ent))
    out.append(("rewards_per_func", rpf.t().contiguous()))   # [F, n] as the C API
    out.append(("reward_weights", weights))

    modes = [("sum_then_normalize", "group"), ("sum_then_normalize", "batch"),
             ("sum_then_normalize", "none"), ("normalize_then_sum", "group")]
    adv_group = None
    for k, (agg, scale) in enumerate(modes):
        a, r, st = advantages(rpf, weights, agg, scale)
        out += [(f"adv{k}.advantages", a), (f"adv{k}.rewards", r), (f"adv{k}.stats", st)]
        if k == 0:
            adv_group = a

    # padded [B, L] views of the token data
    def pad(v):
        p = torch.zeros(B, L, dtype=D)
        for i in range(S):
            p[i, :LENGTHS[i]] = v[offsets[i]:offsets[i + 1]]
        return p

    cmask = pad(torch.ones(T, dtype=D))
    trunc = torch.tensor(TRUNCATED, dtype=D)
    P_old, P_ref, P_ent = pad(old), pad(ref), pad(ent)

    cases = []
    for lt in LOSS_TYPES:
        for beta in (0.0, 0.04):
            for has_old in (0, 1):
                for level in ("token", "sequence"):
                    cases.append(dict(loss_type=lt, beta=beta, old=has_old, level=level))
    # option cases: two-sided clipping, truncation masking, high-entropy mask
    cases.append(dict(loss_type="dapo", beta=0.04, old=1, level="token", delta=1.25, mask_truncated=1))
    cases.append(dict(loss_type="grpo", beta=0.0, old=1, level="sequence", delta=1.25, mask_truncated=1))
    cases.append(dict(loss_type="luspo", beta=0.04, old=1, level="sequence", mask_truncated=1))
    cases.append(dict(loss_type="dapo", beta=0.04, old=1, level="token", q=0.5))
    cases.append(dict(loss_type="grpo", beta=0.0, old=1, level="sequence", q=0.3, mask_truncated=1))
    cases.append(dict(loss_type="cispo", beta=0.0, old=1, level="token", mask_truncated=1, q=0.8))
    # SAPO's temperatures (sapo_temperature_pos/neg) away from TRL's defaults 1.0/1.05
    cases.append(dict(loss_type="sapo", beta=0.0, old=1, level="token", sapo_pos=0.5, sapo_neg=2.0))
    cases.append(dict(loss_type="sapo", beta=0.04, old=1, level="sequence", sapo_pos=3.0, sapo_neg=0.25, mask_truncated=1))
    # VESPO's gamma weights away from TRL's defaults (2, 3, 3, 2), with masks
    cases.append(dict(loss_type="vespo", beta=0.04, old=1, level="token", vespo=(0.5, 1.5, 4.0, 0.5), mask_truncated=1))
    cases.append(dict(loss_type="vespo", beta=0.0, old=1, level="token", vespo=(1.0, 0.0, 2.0, 8.0), q=0.5))
    # the entropy bonus (entropy_coef): token-normalised, per-sequence, with the high-entropy mask
    cases.append(dict(loss_type="dapo", beta=0.04, old=1, level="token", ent_coef=0.01, mask_truncated=1))
    cases.append(dict(loss_type="grpo", beta=0.0, old=1, level="sequence", ent_coef=0.05))
    cases.append(dict(loss_type="bnpo", beta=0.0, old=1, level="token", ent_coef=-0.02, q=0.5))
    cases.append(dict(loss_type="vespo", beta=0.0, old=1, level="token", ent_coef=0.1, q=0.8, mask_truncated=1))
    for c in cases:
        c.setdefault("ent_coef", 0.0)
        c.setdefault("vespo", (2.0, 3.0, 3.0, 2.0))
        c.setdefault("sapo_pos", 1.0)
        c.setdefault("sapo_neg", 1.05)
        c.setdefault("delta", 0.0)
        c.setdefault("mask_truncated", 0)
        c.setdefault("q", 1.0)
        c["eps_low"] = 0.2
        c["eps_high"] = 1.1 if c["loss_type"] == "cispo" else 0.28

    for k, c in enumerate(cases):
        lp = pad(logp).requires_grad_(True)
        en = P_ent.clone().requires_grad_(True)
        loss = trl_loss(c, lp, P_old if c["old"] else None, P_ref, en, adv_group, cmask, trunc)
        loss.backward()
        grad = torch.cat([lp.grad[i, :LENGTHS[i]] for i in range(S)])
        dent = torch.cat([(en.grad if en.grad is not None else torch.zeros_like(en))[i, :LENGTHS[i]] for i in range(S)])
        cfg = [LOSS_TYPES.index(c["loss_type"]), 0 if c["level"] == "token" else 1, c["old"], c["beta"],
               c["eps_low"], c["eps_high"], c["delta"], c["q"], c["mask_truncated"], MAX_LEN, c["sapo_pos"], c["sapo_neg"],
               *c["vespo"], c["ent_coef"]]
        out += [(f"case{k}.config", torch.tensor(cfg, dtype=D)),
                (f"case{k}.loss", loss.detach().reshape(1)), (f"case{k}.grad", grad),
                (f"case{k}.dent", dent)]
    out.append(("n_cases", torch.tensor([len(cases)], dtype=torch.int64)))

    out += adamw_reference()
    return out


def adamw_reference():
    """4 optimizer steps of torch.optim.AdamW(lr=1e-3, betas (0.9, 0.999), eps 1e-8, wd 0.1 on
    the decay group, 0 on the other) with clip_grad_norm_(1.0) and transformers' linear schedule
    (warmup ceil(0.25 * 10) = 3 of max_steps 10) applied per step as LambdaLR does."""
    g = torch.Generator().manual_seed(99)
    N, STEPS = 37, 4
    p0 = (torch.randn(N, generator=g, dtype=D)).to(torch.float32).to(D)
    decay = torch.tensor([1 if (i % 5) else 0 for i in range(N)], dtype=torch.int64)
    grads = torch.randn(STEPS, N, generator=g, dtype=D)
    grads[1] *= 0.05     # step 1 below max_norm: not clipped
    grads[3, 7] = 3.0    # a large element
    grads = grads.to(torch.float32).to(D)   # exact fp32 values for the C side
    # the two parameter groups of transformers' Trainer (decay / no decay) as two leaf tensors
    idx_d = torch.nonzero(decay).flatten()
    idx_n = torch.nonzero(1 - decay).flatten()
    pd = p0[idx_d].clone().requires_grad_(True)
    pn = p0[idx_n].clone().requires_grad_(True)
    opt = torch.optim.AdamW([{"params": [pd], "weight_decay": 0.1}, {"params": [pn], "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    warmup, total = math.ceil(0.25 * 10), 10

    def lam(s):
        if s < warmup:
            return s / max(1, warmup)
        return max(0.0, (total - s) / max(1, total - warmup))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)
    norms, lrs, params = [], [], []
    for s in range(STEPS):
        pd.grad = grads[s][idx_d].clone()
        pn.grad = grads[s][idx_n].clone()
        norms.append(torch.nn.utils.clip_grad_norm_([pd, pn], 1.0).item())
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        full = torch.zeros(N, dtype=D)
        full[idx_d] = pd.detach()
        full[idx_n] = pn.detach()
        params.append(full)
    return [("adamw.param0", p0), ("adamw.decay", decay), ("adamw.grads", grads),
            ("adamw.norms", torch.tensor(norms, dtype=D)), ("adamw.lrs", torch.tensor(lrs, dtype=D)),
            ("adamw.params", torch.stack(params))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "grpo_loss"))
    ap.add_argument("--check", action="store_true", help="regenerate into a temp dir and byte-compare")
    args = ap.parse_args()
    items = build()
    if args.check:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "reference.safetensors")
            write_safetensors(path, items)
            want = os.path.join(args.out, "reference.safetensors")
            if not filecmp.cmp(path, want, shallow=False):
                print(f"MISMATCH: {want} differs from a regeneration", file=sys.stderr)
                return 1
        print("grpo_loss fixture: identical to a regeneration")
        return 0
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "reference.safetensors"), items)
    print("wrote", os.path.join(args.out, "reference.safetensors"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
