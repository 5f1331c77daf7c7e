#!/usr/bin/env python3
"""Builds `grpo score` input from a reference fixture and checks the output.

  score_fixture.py make FIXTURE_DIR > in.jsonl      (prompt = first 2 real tokens)
  score_fixture.py check FIXTURE_DIR out.jsonl      (exit 1 on mismatch)

Expected log-probabilities come from the float64 logits in reference.safetensors
(tools/make_model_reference.py): log_softmax(logits[t])[ids[t+1]]. Standard library only.
"""
import json
import math
import struct
import sys


def read_safetensors(path, strict=False):
    """{name: (shape, values)} of the F64, I64 and F32 tensors; strict: any other dtype
    stops the program with one line (else it is passed over). Also trl_step_compare.py's."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    fmt = {"F64": "d", "I64": "q", "F32": "f"}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] not in fmt:
            if strict:
                sys.exit("%s: %s: expected F32, F64 or I64, got %s" % (path, name, t["dtype"]))
            continue
        b, e = t["data_offsets"]
        count = (e - b) // struct.calcsize(fmt[t["dtype"]])
        out[name] = (t["shape"], struct.unpack("<%d%s" % (count, fmt[t["dtype"]]), data[b:e]))
    return out


def sequences(fixture):
    ref = read_safetensors(fixture + "/reference.safetensors")
    (B, T), ids = ref["input_ids"]
    _, mask = ref["attention_mask"]
    _, logits = ref["logits"]
    V = ref["logits"][0][2]
    for b in range(B):
        real = [t for t in range(T) if mask[b * T + t]]
        toks = [ids[b * T + t] for t in real]
        expect = []
        for j in range(2, len(real)):
            row = logits[(b * T + real[j - 1]) * V:(b * T + real[j - 1] + 1) * V]
            mx = max(row)
            lse = mx + math.log(sum(math.exp(z - mx) for z in row))
            expect.append(row[toks[j]] - lse)
        yield toks[:2], toks[2:], expect


def main():
    mode, fixture = sys.argv[1], sys.argv[2]
    if mode == "make":
        for p, c, _ in sequences(fixture):
            print(json.dumps({"prompt_ids": p, "completion_ids": c}))
        return 0
    got = [json.loads(line)["logprobs"] for line in open(sys.argv[3])]
    want = [e for _, _, e in sequences(fixture)]
    if len(got) != len(want):
        print("expected %d lines, got %d" % (len(want), len(got)))
        return 1
    worst = max(abs(g - w) / (1e-5 + 1e-5 * abs(w)) for gl, wl in zip(got, want) for g, w in zip(gl, wl))
    if any(len(g) != len(w) for g, w in zip(got, want)) or worst > 1:
        print("mismatch: worst error is %.3g x the tolerance" % worst)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
