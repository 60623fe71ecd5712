"""Plain-Python oracles of the formal-language tasks (tasks/formal.py), one example at a time:
shared by the task tests and the length-generalisation tests."""
from __future__ import annotations

import ast


# --- the oracles: plain Python, one example at a time -------------------------------------------
def parity_oracle(bits: list[int]) -> int:
    odd = False
    for b in bits:
        assert b in (0, 1)
        if b == 1:
            odd = not odd
    return int(odd)


def even_pairs_oracle(symbols: list[int]) -> int:
    text = "".join("ab"[c] for c in symbols)
    pairs = sum(1 for i in range(len(text) - 1) if text[i:i + 2] in ("ab", "ba"))
    return int(pairs % 2 == 0)


def _ast_value(node: ast.AST) -> int:
    """Exact integer value of a parsed + - * expression (no eval; Python's grammar decides the
    precedence and associativity)."""
    if isinstance(node, ast.Expression):
        return _ast_value(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    assert isinstance(node, ast.BinOp), ast.dump(node)
    a, b = _ast_value(node.left), _ast_value(node.right)
    if isinstance(node.op, ast.Add):
        return a + b
    if isinstance(node.op, ast.Sub):
        return a - b
    assert isinstance(node.op, ast.Mult), ast.dump(node)
    return a * b


def expression_text(tokens: list[int], modulus: int = 5) -> str:
    assert len(tokens) % 2 == 1
    assert all(t < modulus for t in tokens[0::2]) and all(modulus <= t < modulus + 3 for t in tokens[1::2])
    return " ".join(str(t) if i % 2 == 0 else "+-*"[t - modulus] for i, t in enumerate(tokens))


def modular_oracle(tokens: list[int], modulus: int = 5) -> int:
    return _ast_value(ast.parse(expression_text(tokens, modulus), mode="eval")) % modulus


def reverse_oracle(bits: list[int]) -> list[int]:
    return bits[::-1]


def duplicate_oracle(bits: list[int]) -> list[int]:
    return bits + bits


POP, PUSH0, PUSH1, END = 2, 3, 4, 2


def stack_oracle(tokens: list[int]) -> list[int]:
    """The final stack top to bottom, then END; checks the input's form on the way."""
    i = 0
    stack: list[int] = []
    while i < len(tokens) and tokens[i] in (0, 1):  # the initial stack, bottom first
        stack.append(tokens[i])
        i += 1
    assert i >= 1 and (i < len(tokens) or len(tokens) == 1), tokens  # 1 <= s <= k - 1 (s = 1 when k = 1)
    for t in tokens[i:]:
        assert t in (POP, PUSH0, PUSH1), tokens
        if t == POP:
            if stack:
                stack.pop()
        else:
            stack.append(t - PUSH0)
    return stack[::-1] + [END]


CLASS_ORACLES = {"parity": parity_oracle, "even-pairs": even_pairs_oracle, "modular-arithmetic": modular_oracle}
SEQ_ORACLES = {"reverse-string": (reverse_oracle, 2, 3), "duplicate-string": (duplicate_oracle, 2, 3),
               "stack-manipulation": (stack_oracle, 5, 6)}  # oracle, SEP, BLANK
OUTPUT_LENGTH = {"reverse-string": lambda k: k, "duplicate-string": lambda k: 2 * k,
                 "stack-manipulation": lambda k: k + 1}


def input_length(name: str, b) -> int:
    """k of a batch: its length (classification), or the first target's position - 1."""
    return b.x.shape[1] if name in CLASS_ORACLES else int(b.mask.any(0).nonzero()[0]) - 1


def check_against_oracle(name: str, b, k: int) -> None:
    """Every example of batch b (input length k) against the oracle, one at a time."""
    if name in CLASS_ORACLES:
        assert b.x.shape[1] == k and b.y.shape == (len(b),) and b.mask is None
        for x, y in zip(b.x.tolist(), b.y.tolist()):
            assert CLASS_ORACLES[name](x) == y, (name, x, y)
        return
    oracle, sep, blank = SEQ_ORACLES[name]
    M = OUTPUT_LENGTH[name](k)
    assert b.x.shape[1] == k + 1 + M and b.mask is not None
    for x, y, mask in zip(b.x.tolist(), b.y.tolist(), b.mask.tolist()):
        inp = x[:k]
        if name != "stack-manipulation":
            assert all(t in (0, 1) for t in inp)
        assert x[k:] == [sep] + [blank] * M
        want = oracle(inp)
        assert mask == [False] * (k + 1) + [True] * len(want) + [False] * (M - len(want)), (name, inp)
        assert [t for t, m in zip(y, mask) if m] == want, (name, inp)
