"""The GROQ syntax tree: small frozen dataclasses, one per construct.

Owns the node vocabulary shared by the parser, the compiler and push-down. Chains
of traversals are already resolved into explicit ``MapNode``/``FlatMap`` nodes whose
inner expression is written against ``This``, so later stages never
have to reason about traversal shapes again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Node:
    """Base class of every syntax-tree node."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Everything(Node):
    pass


@dataclass(frozen=True, slots=True)
class This(Node):
    pass


@dataclass(frozen=True, slots=True)
class Parent(Node):
    n: int


@dataclass(frozen=True, slots=True)
class Param(Node):
    name: str
    pos: int = 0


@dataclass(frozen=True, slots=True)
class Value(Node):
    value: Any


@dataclass(frozen=True, slots=True)
class Attr(Node):
    """``base.name``; ``base`` None means ``@`` (a bare identifier)."""

    base: Node | None
    name: str


@dataclass(frozen=True, slots=True)
class Element(Node):
    base: Node
    index: int


@dataclass(frozen=True, slots=True)
class Slice(Node):
    base: Node
    start: int
    end: int
    inclusive: bool


@dataclass(frozen=True, slots=True)
class Filter(Node):
    base: Node
    cond: Node


@dataclass(frozen=True, slots=True)
class ArrayCoerce(Node):
    base: Node


@dataclass(frozen=True, slots=True)
class Projection(Node):
    base: Node
    obj: ObjectNode


@dataclass(frozen=True, slots=True)
class Deref(Node):
    base: Node


@dataclass(frozen=True, slots=True)
class MapNode(Node):
    """Evaluates ``expr`` with each element of ``base`` as ``@`` (no new ``^`` level)."""

    base: Node
    expr: Node


@dataclass(frozen=True, slots=True)
class FlatMap(Node):
    """Like ``MapNode`` but concatenates array results; non-arrays are kept (as the suite wants)."""

    base: Node
    expr: Node


@dataclass(frozen=True, slots=True)
class Group(Node):
    base: Node


@dataclass(frozen=True, slots=True)
class And(Node):
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Or(Node):
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Not(Node):
    base: Node


@dataclass(frozen=True, slots=True)
class Neg(Node):
    base: Node


@dataclass(frozen=True, slots=True)
class Pos(Node):
    base: Node


@dataclass(frozen=True, slots=True)
class OpCall(Node):
    """Binary operators: comparisons, ``in``, ``match`` and arithmetic."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class InRange(Node):
    base: Node
    left: Node
    right: Node
    inclusive: bool


@dataclass(frozen=True, slots=True)
class Range(Node):
    """``a..b`` / ``a...b``; only legal after ``in`` and inside ``[...]``."""

    left: Node
    right: Node
    inclusive: bool
    pos: int = 0


@dataclass(frozen=True, slots=True)
class Pair(Node):
    """``a => b``; only legal in ``select()`` and as a conditional object entry."""

    left: Node
    right: Node
    pos: int = 0


@dataclass(frozen=True, slots=True)
class Asc(Node):
    base: Node
    pos: int = 0


@dataclass(frozen=True, slots=True)
class Desc(Node):
    base: Node
    pos: int = 0


@dataclass(frozen=True, slots=True)
class FuncCall(Node):
    namespace: str
    name: str
    args: tuple[Node, ...]
    pos: int = 0


@dataclass(frozen=True, slots=True)
class PipeCall(Node):
    """``base | order(...)`` or ``base | score(...)``."""

    base: Node
    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Select(Node):
    alternatives: tuple[tuple[Node, Node], ...]
    fallback: Node | None


@dataclass(frozen=True, slots=True)
class ArrayElement:
    value: Node
    splat: bool


@dataclass(frozen=True, slots=True)
class ArrayNode(Node):
    elements: tuple[ArrayElement, ...]


@dataclass(frozen=True, slots=True)
class ObjAttr:
    key: str
    value: Node


@dataclass(frozen=True, slots=True)
class ObjSplat:
    value: Node


@dataclass(frozen=True, slots=True)
class ObjCond:
    cond: Node
    value: Node


@dataclass(frozen=True, slots=True)
class ObjectNode(Node):
    entries: tuple[ObjAttr | ObjSplat | ObjCond, ...]


def children(node: Node) -> list[Node]:
    """Direct sub-nodes, for generic walks (free parameters, validation, push-down)."""
    out: list[Node] = []
    if isinstance(node, ObjectNode):
        for e in node.entries:
            if isinstance(e, ObjCond):
                out.append(e.cond)
            out.append(e.value)
        return out
    if isinstance(node, ArrayNode):
        return [e.value for e in node.elements]
    if isinstance(node, Select):
        for c, v in node.alternatives:
            out += [c, v]
        if node.fallback is not None:
            out.append(node.fallback)
        return out
    if isinstance(node, (FuncCall, PipeCall)):
        if isinstance(node, PipeCall):
            out.append(node.base)
        out.extend(node.args)
        return out
    for name in getattr(node, "__slots__", ()):
        v = getattr(node, name)
        if isinstance(v, Node):
            out.append(v)
    return out


def walk(node: Node) -> list[Node]:
    """Every node of the tree, pre-order."""
    out = []
    stack = [node]
    while stack:
        cur = stack.pop()
        out.append(cur)
        stack.extend(reversed(children(cur)))
    return out
