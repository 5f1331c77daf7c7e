"""The reward of examples/calculator, a TRL reward function (reward_funcs:
examples/calculator/reward.py:final_answer): 1.0 when the model's final answer is
exactly the answer column's number, else 0.0.

The completion a reward sees is the whole trajectory, the tool's replies included
(TRL's completion_ids decoded), so "the last number" (exact_match) would credit a
model that stops right after the tool's reply and writes nothing: the reply's
number would count as its answer. Here only the text after the last
</tool_response> (and the assistant header the template writes there) is read."""
import re


def final_text(completion):
    if isinstance(completion, list):  # conversational: [{"role": "assistant", "content": ...}]
        completion = completion[-1]["content"] if completion else ""
    text = completion.replace("<|im_end|>", "").replace("<|im_start|>", "")  # decoded with or without them
    if "</tool_response>" in text:  # the reply, then the template's "assistant" header, then the answer
        text = text.rsplit("</tool_response>", 1)[1].lstrip()
        text = text[len("assistant"):] if text.startswith("assistant") else ""
    return text.strip()


def final_answer(completions, answer, **kwargs):
    return [1.0 if final_text(c) == str(a) else 0.0 for c, a in zip(completions, answer)]
