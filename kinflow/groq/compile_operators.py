"""Compilers for operators: logic (``&&``, ``||``, ``!``), signs, binary ops, ``in`` ranges.

The operators themselves live in :mod:`kinflow.groq.operators`; this module wires
them to their operands and short-circuits the three-valued logic. ``x == <constant>``
against a string, null or boolean skips the generic equality dispatch: it is the
commonest condition in hot loops.
"""

from __future__ import annotations

from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.compile_dispatch import compile_node, on
from kinflow.groq.operators import BINARY, BUDGETED, in_range
from kinflow.groq.scope import Compiled, Scope
from kinflow.groq.values import is_number, num


@on(n.And)
def _and(node: n.And) -> Compiled:
    left = compile_node(node.left)
    right = compile_node(node.right)

    def and_(s: Scope) -> Any:
        a = left(s)
        if a is False:
            return False
        b = right(s)
        if b is False:
            return False
        return True if (a is True and b is True) else None

    return and_


@on(n.Or)
def _or(node: n.Or) -> Compiled:
    left = compile_node(node.left)
    right = compile_node(node.right)

    def or_(s: Scope) -> Any:
        a = left(s)
        if a is True:
            return True
        b = right(s)
        if b is True:
            return True
        return False if (a is False and b is False) else None

    return or_


@on(n.Not)
def _not(node: n.Not) -> Compiled:
    base = compile_node(node.base)

    def not_(s: Scope) -> Any:
        v = base(s)
        return (v is False) if type(v) is bool else None

    return not_


@on(n.Neg)
def _neg(node: n.Neg) -> Compiled:
    base = compile_node(node.base)

    def neg(s: Scope) -> Any:
        v = base(s)
        return num(-v) if is_number(v) else None

    return neg


@on(n.Pos)
def _pos(node: n.Pos) -> Compiled:
    base = compile_node(node.base)

    def pos(s: Scope) -> Any:
        v = base(s)
        return v if is_number(v) else None

    return pos


@on(n.OpCall)
def _opcall(node: n.OpCall) -> Compiled:
    left = compile_node(node.left)
    if node.op in ("==", "!=") and isinstance(node.right, n.Value):
        fast = _const_equality(left, node.right.value, node.op == "==")
        if fast is not None:
            return fast
    if node.op == "in":
        fast = _in_constant_strings(left, node.right)
        if fast is not None:
            return fast
    right = compile_node(node.right)
    fn = BINARY[node.op]
    under = BUDGETED.get(node.op)
    if under is None:
        return lambda s: fn(left(s), right(s))

    def budgeted(s: Scope) -> Any:
        budget = s.ctx.budget
        if budget is None:
            return fn(left(s), right(s))
        a = left(s)
        return under(a, right(s), budget)

    return budgeted


def _in_constant_strings(left: Compiled, right: n.Node) -> Compiled | None:
    """``x in ["a", "b"]``: a set lookup instead of building the array and comparing
    element by element for every row a filter tests (a string equals only an equal
    string; anything else is not in an array of strings)."""
    if not isinstance(right, n.ArrayNode) or not all(
            not e.splat and isinstance(e.value, n.Value) and type(e.value.value) is str
            for e in right.elements):
        return None
    members = frozenset(e.value.value for e in right.elements)  # type: ignore[attr-defined]
    return lambda s: type(v := left(s)) is str and v in members


def _const_equality(left: Compiled, c: Any, positive: bool) -> Compiled | None:
    """``x == "text"`` and friends without the generic equality dispatch."""
    if type(c) is str:
        if positive:
            return lambda s: left(s) == c  # only an equal str compares equal to a str
        return lambda s: left(s) != c
    if c is None:
        if positive:
            return lambda s: left(s) is None
        return lambda s: left(s) is not None
    if type(c) is bool:
        if positive:
            return lambda s: left(s) is c
        return lambda s: left(s) is not c
    return None


@on(n.InRange)
def _inrange(node: n.InRange) -> Compiled:
    base = compile_node(node.base)
    lo = compile_node(node.left)
    hi = compile_node(node.right)
    inclusive = node.inclusive
    return lambda s: in_range(base(s), lo(s), hi(s), inclusive)
