#!/usr/bin/env python3
"""Writes the demo's data (examples/demo/): the project's own short texts and sums.

  sft.jsonl        prompt/completion pairs for `grpo sft`: "Tell me about X.\\n" ->
                   one to four clauses about X (10 to 100 characters), and "a+b=" -> "c"
  prompts.jsonl    prompts for the GRPO demo (the length reward; no answers needed)
  math_train.jsonl / math_test.jsonl   {"prompt": "a+b=", "answer": "c"} for the
                   arithmetic example, disjoint pairs

Deterministic (fixed seed), standard library only:  python3 tools/make_demo_data.py
"""
import json
import os
import random

SUBJECTS = ["the cat", "the dog", "a small bird", "the old man", "my sister", "the river", "the teacher",
            "a young fox", "the baker", "the little boat", "the farmer", "a tall tree", "the moon", "the city",
            "my brother", "the garden", "a red kite", "the library", "the train", "the snow"]
VERBS = ["sleeps", "sings", "waits", "runs", "shines", "moves", "rests", "smiles", "grows", "listens",
         "walks", "shakes", "glows", "turns", "hums"]
PLACES = ["by the door", "in the rain", "near the hill", "under the bridge", "at noon", "all day long",
          "in the quiet morning", "beside the old stone wall", "when the bells ring", "after the long winter",
          "on the warm mat", "at the edge of the forest"]
EXTRAS = ["and then it is calm", "while the wind blows", "because it is happy", "and nobody minds",
          "as the sun goes down", "and the day is done"]


def sentence(rng, subject):
    parts = [subject.capitalize(), rng.choice(VERBS)]
    n = rng.choice([0, 1, 1, 2, 2, 3])
    if n >= 1:
        parts.append(rng.choice(PLACES))
    if n >= 2:
        parts.append(rng.choice(EXTRAS))
    if n >= 3:
        parts.append(rng.choice(PLACES))
    return " ".join(parts) + "."


def main():
    rng = random.Random(20251122)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "demo")
    os.makedirs(out, exist_ok=True)
    pairs = [(a, b) for a in range(0, 50) for b in range(0, 50)]
    rng.shuffle(pairs)
    test_pairs, train_pairs = pairs[:200], pairs[200:]
    with open(os.path.join(out, "sft.jsonl"), "w") as f:
        rows = []
        for _ in range(3000):
            s = rng.choice(SUBJECTS)
            rows.append({"prompt": "Tell me about %s.\n" % s, "completion": sentence(rng, s)})
        for a, b in train_pairs[:1500]:
            rows.append({"prompt": "%d+%d=" % (a, b), "completion": str(a + b)})
        rng.shuffle(rows)
        for r in rows:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(out, "prompts.jsonl"), "w") as f:
        for s in SUBJECTS:
            f.write(json.dumps({"prompt": "Tell me about %s.\n" % s}) + "\n")
    for name, ps in (("math_train.jsonl", train_pairs), ("math_test.jsonl", test_pairs)):
        with open(os.path.join(out, name), "w") as f:
            for a, b in ps:
                f.write(json.dumps({"prompt": "%d+%d=" % (a, b), "answer": str(a + b)}) + "\n")


if __name__ == "__main__":
    main()
