#!/usr/bin/env bash
# `grpo plot`: a hand-written metrics.jsonl (with an event line, a line without
# "step", a null gap and a blank line) drawn as SVG; the SVG is well-formed XML
# with one line path per metric whose point count equals the metric's data lines,
# a ±std band where NAME_std exists, titles, axis and tick labels; the default
# and --metrics panels; -o/--output forms; a run with evaluations (eval lines share
# the training lines' steps) drawn as one unbroken path per series, training and
# eval, and counted apart; every error path (exit 1 for bad input, 2 for usage)
# leaves no SVG behind.
set -u
. "$ROOT/tests/cli/lib.sh"

M="$TMP/metrics.jsonl"
cat > "$M" <<'EOF'
{"step": 1, "reward": 0.1, "reward_std": 0.30, "completions/mean_length": 40, "loss": 0.02, "kl": null}
{"step": 2, "reward": 0.25, "reward_std": 0.28, "completions/mean_length": 38.5, "loss": -0.01, "kl": null}
{"step": 3, "event": "nonfinite", "loss": null, "grad_norm": null}
{"note": "not a step's metrics"}

{"step": 3, "reward": null, "reward_std": null, "completions/mean_length": 35, "loss": 0.005, "kl": 0.001}
{"step": 4, "reward": 0.5, "reward_std": 0.2, "completions/mean_length": 31, "loss": 0.0, "kl": 0.002}
{"step": 5, "reward": 0.62, "reward_std": 0.15, "completions/mean_length": 30.25, "loss": 0.01, "kl": 0.004}
{"step": 6, "reward": 0.7, "reward_std": 0.1, "completions/mean_length": 28, "loss": 0.003, "kl": 0.003}
EOF

# check_svg FILE NAME:POINTS:BAND... — parse and check one SVG
check_svg() {
    python3 - "$@" <<'PY'
import re, sys
import xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
path, want = sys.argv[1], [w.rsplit(":", 2) for w in sys.argv[2:]]
root = ET.parse(path).getroot()
assert root.tag == NS + "svg", root.tag
assert int(root.get("width")) >= 800 and int(root.get("height")) >= 500
lines = [p for p in root.iter(NS + "path") if p.get("class") == "line"]
assert [p.get("data-metric") for p in lines] == [w[0] for w in want], [p.get("data-metric") for p in lines]
panels = [g for g in root.iter(NS + "g") if g.get("class") == "panel"]
assert len(panels) == len(want)
texts = ["".join(t.itertext()) for t in root.iter(NS + "text")]
for (name, points, band), p, g in zip(want, lines, panels):
    pts = re.findall(r"[ML](-?[\d.]+),(-?[\d.]+)", p.get("d"))
    assert len(pts) == int(points), (name, len(pts), points)
    assert p.get("d").count("M") == (2 if name == "reward" else 1), p.get("d")   # the null gap
    bands = [q for q in g.iter(NS + "path") if q.get("class") == "band"]
    assert (len(bands) > 0) == (band == "band"), (name, len(bands))
    gt = ["".join(t.itertext()) for t in g.iter(NS + "text")]
    assert any(t.startswith(name) for t in gt if t), ("title", name)
    assert gt.count("step") == 1, "x axis label"
    assert name in gt, "y axis label"
    assert sum(1 for t in gt if re.fullmatch(r"-?\d+(\.\d+)?", t)) >= 4, ("tick labels", gt)
    xs = [float(x) for x, _ in pts]
    assert xs == sorted(xs) and len(set(xs)) == len(xs), "x grows with the step"
PY
}

"$GRPO" plot "$M" -o "$TMP/a.svg" 2>"$TMP/a.err" || fail "plot (defaults): $(cat "$TMP/a.err")"
check_svg "$TMP/a.svg" reward:5:band completions/mean_length:6:- || fail "default SVG"
grep -q "reward_std" "$TMP/a.svg" || fail "the band is not named in the title"
ls "$TMP" | grep -q '\.tmp' && fail "a temporary file was left behind"

"$GRPO" plot --metrics loss,reward_std,kl --output "$TMP/b.svg" "$M" 2>/dev/null || fail "plot --metrics"
python3 - "$TMP/b.svg" <<'PY' || fail "--metrics SVG"
import re, sys, xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
lines = [p for p in root.iter(NS + "path") if p.get("class") == "line"]
assert [p.get("data-metric") for p in lines] == ["loss", "reward_std", "kl"]
n = [len(re.findall(r"[ML]-?[\d.]+,-?[\d.]+", p.get("d"))) for p in lines]
assert n == [6, 5, 4], n
assert not [p for p in root.iter(NS + "path") if p.get("class") == "band"], "no band without a _std"
PY
"$GRPO" plot "$M" --output="$TMP/c.svg" --metrics=reward 2>/dev/null || fail "--output= form"
check_svg "$TMP/c.svg" reward:5:band || fail "--metrics=reward SVG"

# a run with evaluations, as grpo train writes it: an eval line after the training
# line of the same step, holding eval_* keys and the epoch. Each series is one unbroken
# path (one M, an L per further point), the eval series too; eval_reward is a
# default panel; the header and the message count training lines and evaluations;
# the closing line (train_runtime, ..., as transformers logs the end of training) is
# neither, and draws nothing
E="$TMP/eval.jsonl"
cat > "$E" <<'EOF'
{"step": 2, "loss": 0.1, "reward": 0.1, "reward_std": 0.3, "completions/mean_length": 6, "epoch": 0.4}
{"step": 2, "eval_reward": 0.0125, "eval_reward_std": 0.1, "eval_rewards/fmt/mean": 0.0125, "eval_completions/mean_length": 5, "epoch": 0.4}
{"step": 4, "loss": 0.2, "reward": 0.3, "reward_std": 0.2, "completions/mean_length": 5, "epoch": 0.8}
{"step": 4, "eval_reward": 0.05, "eval_reward_std": 0.2, "eval_rewards/fmt/mean": 0.05, "eval_completions/mean_length": 4, "epoch": 0.8}
{"step": 5, "loss": 0.3, "reward": 0.4, "reward_std": 0.1, "completions/mean_length": 4, "epoch": 1}
{"step": 5, "eval_reward": 0.125, "eval_reward_std": 0.3, "eval_rewards/fmt/mean": 0.125, "eval_completions/mean_length": 3, "epoch": 1}
{"step": 5, "train_runtime": 12.5, "train_samples_per_second": 3.2, "train_steps_per_second": 0.4, "total_flos": 0, "train_loss": 0.2, "epoch": 1}
EOF
"$GRPO" plot "$E" -o "$TMP/ev.svg" 2>"$TMP/ev.err" || fail "plot of a run with eval: $(cat "$TMP/ev.err")"
grep -q "3 logged steps, 3 evaluations" "$TMP/ev.err" || fail "the count of a run with eval: $(cat "$TMP/ev.err")"
"$GRPO" plot "$E" -o "$TMP/ev2.svg" --metrics loss,reward,completions/mean_length,eval_reward,eval_completions/mean_length \
    2>/dev/null || fail "plot --metrics of a run with eval"
# check_unbroken SVG NAME... — the line paths are NAMES, each M L L over 3 distinct growing steps
check_unbroken() {
    python3 - "$@" <<'PY'
import re, sys, xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
lines = [p for p in root.iter(NS + "path") if p.get("class") == "line"]
names = [p.get("data-metric") for p in lines]
assert names == sys.argv[2:], names
for p in lines:
    cmds = re.findall(r"([A-Za-z])-?[\d.]+,-?[\d.]+", p.get("d"))
    assert cmds == ["M", "L", "L"], (p.get("data-metric"), p.get("d"))
    xs = [float(x) for x in re.findall(r"[ML](-?[\d.]+),", p.get("d"))]
    assert xs == sorted(xs) and len(set(xs)) == 3, (p.get("data-metric"), xs)
for g in root.iter(NS + "g"):
    if g.get("class") == "panel" and g.get("data-metric") in ("reward", "eval_reward"):
        bands = [q for q in g.iter(NS + "path") if q.get("class") == "band"]
        assert len(bands) == 1 and bands[0].get("d").count("M") == 1, (g.get("data-metric"), len(bands))
texts = ["".join(t.itertext()) for t in root.iter(NS + "text")]
assert any("3 logged steps, 3 evaluations" in t for t in texts), texts[:3]
PY
}
check_unbroken "$TMP/ev.svg" reward eval_reward completions/mean_length || fail "default SVG of a run with eval"
check_unbroken "$TMP/ev2.svg" loss reward completions/mean_length eval_reward eval_completions/mean_length \
    || fail "--metrics SVG of a run with eval"

# a single data line: the axes still have a range
printf '{"step": 7, "reward": 1.0, "completions/mean_length": 3}\n' > "$TMP/one.jsonl"
"$GRPO" plot "$TMP/one.jsonl" -o "$TMP/one.svg" 2>/dev/null || fail "one data line"
python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$TMP/one.svg" || fail "one-line SVG"
grep -q 'class="point"' "$TMP/one.svg" || fail "a lone point has no marker"

# bad input: exit 1, one line, no SVG written
expect_error 1 "missing.jsonl: cannot open" "$GRPO" plot "$TMP/missing.jsonl" -o "$TMP/e.svg"
printf '{"step": 1, "reward": 1}\n{"step": 2, "reward": 1}\n{"step": 3, oops}\n' > "$TMP/bad.jsonl"
expect_error 1 "bad.jsonl:3: not valid JSON" "$GRPO" plot "$TMP/bad.jsonl" -o "$TMP/e.svg"
printf '[1, 2]\n' > "$TMP/arr.jsonl"
expect_error 1 "arr.jsonl:1: expected a JSON object" "$GRPO" plot "$TMP/arr.jsonl" -o "$TMP/e.svg"
expect_error 1 "no metric 'nope'; the file has: reward, reward_std, completions/mean_length, loss, kl" \
    "$GRPO" plot "$M" -o "$TMP/e.svg" --metrics reward,nope
printf '{"step": 1, "event": "nonfinite"}\n{"note": 1}\n\n' > "$TMP/nodata.jsonl"
expect_error 1 "nodata.jsonl: no data lines" "$GRPO" plot "$TMP/nodata.jsonl" -o "$TMP/e.svg"
: > "$TMP/empty.jsonl"
expect_error 1 "empty.jsonl: no data lines" "$GRPO" plot "$TMP/empty.jsonl" -o "$TMP/e.svg"
printf '{"step": 1, "loss": 0.5}\n' > "$TMP/noreward.jsonl"
expect_error 1 "no metric 'reward'; the file has: loss" "$GRPO" plot "$TMP/noreward.jsonl" -o "$TMP/e.svg"
printf '{"step": 1, "reward": 1}\n{"step": 2, "reward": "high"}\n' > "$TMP/str.jsonl"
expect_error 1 "str.jsonl:2: 'reward' must be a number or null" "$GRPO" plot "$TMP/str.jsonl" -o "$TMP/e.svg"
printf '{"step": "one", "reward": 1}\n' > "$TMP/step.jsonl"
expect_error 1 "step.jsonl:1: 'step' must be a number" "$GRPO" plot "$TMP/step.jsonl" -o "$TMP/e.svg"
expect_error 1 "cannot create" "$GRPO" plot "$M" -o "$TMP/no/such/dir/e.svg"
[ -e "$TMP/e.svg" ] && fail "an SVG was written despite an error"

# usage: exit 2
expect_error 2 "required" "$GRPO" plot -o "$TMP/e.svg"
# without -o: METRICS.svg beside the metrics file
"$GRPO" plot "$M" 2>"$TMP/d.err" && [ -s "$TMP/metrics.svg" ] && grep -qF "wrote $TMP/metrics.svg" "$TMP/d.err" \
    || fail "default output beside the metrics file: $(cat "$TMP/d.err")"
cmp -s "$TMP/metrics.svg" "$TMP/a.svg" || fail "the default output differs from -o's"
# a run directory (the output_dir a TRL user names): its metrics.jsonl, metrics.svg beside it
mkdir -p "$TMP/run" "$TMP/norun" && cp "$M" "$TMP/run/metrics.jsonl"
"$GRPO" plot "$TMP/run" 2>"$TMP/r.err" && grep -qF "wrote $TMP/run/metrics.svg" "$TMP/r.err" \
    && cmp -s "$TMP/run/metrics.svg" "$TMP/a.svg" || fail "plot of a run directory: $(cat "$TMP/r.err")"
expect_error 1 "norun/metrics.jsonl: cannot open" "$GRPO" plot "$TMP/norun"
expect_error 2 "unexpected argument" "$GRPO" plot "$M" "$M" -o "$TMP/e.svg"
expect_error 2 "unknown option" "$GRPO" plot "$M" -o "$TMP/e.svg" --colour red
expect_error 2 "empty name" "$GRPO" plot "$M" -o "$TMP/e.svg" --metrics reward,,loss
"$GRPO" plot --help | grep -q -- "--metrics" || fail "--help lacks --metrics"
finish
