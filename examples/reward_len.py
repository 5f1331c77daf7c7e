#!/usr/bin/env python3
"""A reward process for grpo.c (cmd:python3 examples/reward_len.py [TARGET]).

It speaks the JSON-lines protocol of docs/reward-protocol.md: one request per
line on stdin ({"prompts": [...], "completions": [...], "completion_ids": [...],
every dataset column as a list, "trainer_state": {...}}), one reply per line on
stdout ({"rewards": [...]}), flushed. Logs go to stderr, never stdout.

The reward is TRL's documentation example reward_len: -|TARGET - len(completion)|,
len in characters (code points), TARGET 20 by default. Standard library only.
"""
import json
import sys


def completion_text(c):
    # conversational datasets send [{"role": "assistant", "content": ...}]
    if isinstance(c, list):
        return c[-1]["content"] if c else ""
    return c


TARGET = 20


def reward_len(completions, **kwargs):
    # kwargs: prompts, completion_ids, trainer_state and every dataset column
    return [-abs(TARGET - len(completion_text(c))) for c in completions]


def main():
    global TARGET
    if len(sys.argv) > 1:
        TARGET = int(sys.argv[1])
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        rewards = reward_len(**request)
        sys.stdout.write(json.dumps({"rewards": rewards}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
