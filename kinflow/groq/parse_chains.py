"""Static composition of a traversal chain into ``MapNode``/``FlatMap``.

The postfix rules collect a chain as steps (``.a``, ``[0]``, ``[cond]``, ``[1..2]``,
``[]``, ``{...}``, ``->``); this module turns them into one tree, deciding where the
chain maps over an array and where it flattens. Pure: no tokens, no errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kinflow.groq import nodes as n

Step = tuple[Any, ...]
Tail = tuple[Callable[[n.Node], n.Node], str, str]  # builder, input shape, output shape

_ARRAY_STEPS = frozenset({"filter", "slice", "arr"})
# Each step's shape in and out: "A" works on an array, "B" on one value.
_SHAPES = {"attr": ("B", "B"), "deref": ("B", "B"), "elem": ("A", "B"), "filter": ("A", "A"),
           "slice": ("A", "A"), "arr": ("A", "A"), "proj": ("B", "B")}


def build_chain(base: n.Node, steps: list[Step], implicit: bool) -> n.Node:
    """``base`` followed by ``steps``; ``implicit`` when ``base`` is an array already."""
    if implicit:
        steps = [("arr",), *steps]
    tail: Tail | None = None
    for step in reversed(steps):
        tail = _prepend(step, tail)
    return tail[0](base) if tail is not None else base


def _make_step(step: Step, b: n.Node) -> n.Node:
    k = step[0]
    if k == "attr":
        return n.Attr(b, step[1])
    if k == "elem":
        return n.Element(b, step[1])
    if k == "slice":
        return n.Slice(b, step[1], step[2], step[3])
    if k == "filter":
        return n.Filter(b, step[1])
    if k == "arr":
        if isinstance(b, (n.Everything, n.ArrayNode, n.ArrayCoerce)):
            return b
        return n.ArrayCoerce(b)
    if k == "proj":
        return n.Projection(b, step[1])
    d = n.Deref(b)
    return n.Attr(d, step[1]) if step[1] else d


def _prepend(step: Step, tail: Tail | None) -> Tail:
    kind = step[0]

    def mk(b: n.Node) -> n.Node:
        return _make_step(step, b)

    if tail is None:
        s_in, s_out = _SHAPES[kind]
        return mk, s_in, s_out
    t_fn, t_in, t_out = tail
    if kind in _ARRAY_STEPS:
        if t_in == "A":
            return (lambda b: t_fn(mk(b))), "A", t_out
        if t_out == "B":
            return (lambda b: n.MapNode(mk(b), t_fn(n.This()))), "A", "A"
        return (lambda b: n.FlatMap(mk(b), t_fn(n.This()))), "A", "A"
    if kind == "elem":
        return (lambda b: t_fn(mk(b))), "A", t_out
    if kind == "proj" and t_in == "A":
        obj = step[1]
        return (lambda b: t_fn(n.MapNode(b, n.Projection(n.This(), obj)))), "A", t_out
    return (lambda b: t_fn(mk(b))), "B", t_out
