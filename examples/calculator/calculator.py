#!/usr/bin/env python3
"""The calculator tool of examples/calculator, as a tool process (docs/tool-protocol.md):
one JSON request per line, {"name": "calculator", "arguments": {"expression": "..."}},
one reply line, {"content": "..."} or {"error": "..."}. The expression is integers
joined by + - * (spaces allowed), evaluated left to right with * first; nothing
else is read, and nothing is ever passed to eval."""
import json
import re
import sys

TOKEN = re.compile(r"\s*(\d+|[-+*])")


def calculate(expression):
    if not isinstance(expression, str) or len(expression) > 200:
        raise ValueError("expression must be a string of at most 200 characters")
    tokens, pos = [], 0
    while pos < len(expression.rstrip()):
        m = TOKEN.match(expression, pos)
        if not m:
            raise ValueError("only digits and + - * are allowed")
        tokens.append(m.group(1))
        pos = m.end()
    if len(tokens) % 2 == 0 or any(t.isdigit() != (i % 2 == 0) for i, t in enumerate(tokens)):
        raise ValueError("expected numbers joined by + - *")
    terms, sign, product = [], 1, int(tokens[0])  # sums of products: * binds tighter
    for op, num in zip(tokens[1::2], tokens[2::2]):
        if op == "*":
            product *= int(num)
        else:
            terms.append(sign * product)
            sign, product = (1 if op == "+" else -1), int(num)
    terms.append(sign * product)
    return str(sum(terms))


for line in sys.stdin:
    request = json.loads(line)
    try:
        if request.get("name") != "calculator":
            raise ValueError("unknown tool %r" % request.get("name"))
        reply = {"content": calculate(request["arguments"].get("expression"))}
    except (ValueError, KeyError, AttributeError) as e:
        reply = {"error": str(e)}
    print(json.dumps(reply), flush=True)
