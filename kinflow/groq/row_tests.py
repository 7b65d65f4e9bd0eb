"""Filter conditions that read only the object's own fields, as plain tests over a dict.

A filter keeps an element when its condition is exactly ``true``. For the
commonest conditions (``activity == "x" && current && status in ["a", "b"]``
over ``$subworkflows``) that is a conjunction of tests on the element's own
fields against constants, so a dict element can be tested directly: no scope
per element, no three-valued ``&&``, no array literal built per element. A
conjunction is ``true`` exactly when every part is ``true``, so each part
only has to say whether it is ``true``. Anything else (``^``, parameters,
functions, ``||``, other operators or constants) is left to the general
evaluator, and so are elements that are not objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kinflow.groq import nodes as n

RowTest = Callable[[dict[str, Any]], bool]


def row_test(cond: n.Node) -> RowTest | None:
    """``cond`` as a test of one object's fields, or ``None`` if it is not that simple."""
    parts: list[RowTest] = []
    if not _collect(cond, parts):
        return None
    if len(parts) == 1:
        return parts[0]
    return lambda v: all(part(v) for part in parts)


def _collect(node: n.Node, parts: list[RowTest]) -> bool:
    if isinstance(node, n.And):
        return _collect(node.left, parts) and _collect(node.right, parts)
    part = _part(node)
    if part is None:
        return False
    parts.append(part)
    return True


def _own_field(node: n.Node) -> str | None:
    if isinstance(node, n.Attr) and (node.base is None or isinstance(node.base, n.This)):
        return node.name
    return None


def _part(node: n.Node) -> RowTest | None:
    bare = _own_field(node)
    if bare is not None:  # a bare field is true only when it holds true
        return lambda v: v.get(bare) is True
    if not isinstance(node, n.OpCall):
        return None
    name = _own_field(node.left)
    if name is None:
        return None
    right = node.right
    if node.op == "==" and isinstance(right, n.Value):
        c = right.value
        if type(c) is str:  # only an equal string equals a string
            return lambda v: type(x := v.get(name)) is str and x == c
        if type(c) is bool:
            return lambda v: v.get(name) is c
        return None
    if node.op == "in" and isinstance(right, n.ArrayNode) and all(
            not e.splat and isinstance(e.value, n.Value) and type(e.value.value) is str
            for e in right.elements):
        members = frozenset(e.value.value for e in right.elements  # type: ignore[attr-defined]
                            )
        return lambda v: type(x := v.get(name)) is str and x in members
    return None
