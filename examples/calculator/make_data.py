#!/usr/bin/env python3
"""Writes examples/calculator's data sets, seeded (the same files every time): sums of
two 6-digit numbers (100000..499999, so every sum has 6 digits too), far beyond
what the demo model can add itself. Every number has the same length so that a
call copies the prompt's digits from the same distance each time: the small
model learns that copy in a few hundred SFT steps.
  calc_train.jsonl  GRPO prompts: {"prompt": [user message], "answer": "..."}
  calc_test.jsonl   held-out prompts, the same columns (no pair in both sets)
  sft_tools.jsonl   SFT transcripts in TRL's conversational prompt-completion form:
                    the assistant calls the calculator, reads the tool message and
                    answers with the number; "tools" holds the calculator's schema
  sft_direct.jsonl  the same prompts answered directly, without the tool (the baseline)
Usage: make_data.py OUT_DIR."""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
N_TRAIN, N_TEST, N_SFT = 1000, 100, 400


def problem(rng):
    a, b = rng.randrange(100000, 500000), rng.randrange(100000, 500000)
    return "%d + %d" % (a, b), str(a + b)


def main(out):
    rng = random.Random(37)
    seen, problems = set(), []
    while len(problems) < N_TRAIN + N_TEST + N_SFT:
        expression, answer = problem(rng)
        if expression not in seen:
            seen.add(expression)
            problems.append((expression, answer))
    tools = json.load(open(os.path.join(HERE, "tools.json")))
    user = lambda e: [{"role": "user", "content": "What is %s?" % e}]

    def write(name, rows):
        with open(os.path.join(out, name), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    train, test, sft = problems[:N_TRAIN], problems[N_TRAIN:N_TRAIN + N_TEST], problems[N_TRAIN + N_TEST:]
    write("calc_train.jsonl", [{"prompt": user(e), "answer": a} for e, a in train])
    write("calc_test.jsonl", [{"prompt": user(e), "answer": a} for e, a in test])
    call = lambda e: {"type": "function", "function": {"name": "calculator", "arguments": {"expression": e}}}
    write("sft_tools.jsonl", [
        {"prompt": user(e),
         "completion": [{"role": "assistant", "content": "", "tool_calls": [call(e)]},
                        {"role": "tool", "name": "calculator", "content": a},
                        {"role": "assistant", "content": a}],
         "tools": tools} for e, a in sft])
    write("sft_direct.jsonl", [{"prompt": user(e), "completion": [{"role": "assistant", "content": a}]}
                               for e, a in sft])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_data.py OUT_DIR")
    os.makedirs(sys.argv[1], exist_ok=True)
    main(sys.argv[1])
