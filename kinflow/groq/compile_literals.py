"""Compilers for the tree's leaves and its constructors.

Leaves: constants, parameters, ``*`` (the dataset), ``@`` and ``^`` (the scope chain)
and parentheses. Constructors: array literals with ``...`` splats and object literals
with splats and ``cond => {...}`` entries; the common all-plain shapes get closures
without the per-entry branching. A splat charges the budget the size it copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.budget import ENTRY_BYTES, SLOT_BYTES
from kinflow.groq.compile_dispatch import compile_node, on
from kinflow.groq.scope import Compiled, Scope
from kinflow.groq.values import as_list

# --------------------------------------------------------------------------- leaves


@on(n.Everything)
def _everything(node: n.Everything) -> Compiled:
    return lambda s: s.ctx.dataset


@on(n.This)
def _this(node: n.This) -> Compiled:
    return lambda s: s.value


@on(n.Parent)
def _parent(node: n.Parent) -> Compiled:
    levels = node.n

    def parent(s: Scope) -> Any:
        cur: Scope | None = s
        for _ in range(levels):
            cur = cur.parent if cur is not None else None
        return cur.value if cur is not None else None

    return parent


@on(n.Param)
def _param(node: n.Param) -> Compiled:
    name = node.name
    return lambda s: s.ctx.params.get(name)


@on(n.Value)
def _value(node: n.Value) -> Compiled:
    v = node.value
    return lambda s: v


@on(n.Group)
def _group(node: n.Group) -> Compiled:
    return compile_node(node.base)


# --------------------------------------------------------------------------- constructors


@on(n.ArrayNode)
def _array(node: n.ArrayNode) -> Compiled:
    elems = [(compile_node(e.value), e.splat) for e in node.elements]
    if not any(splat for _, splat in elems):
        fns = [f for f, _ in elems]
        return lambda s: [f(s) for f in fns]

    def array(s: Scope) -> Any:
        out: list[Any] = []
        budget = s.ctx.budget
        for f, splat in elems:
            v = f(s)
            if splat:
                items = as_list(v)
                if items is not None:
                    if budget is not None:
                        budget.build(SLOT_BYTES * len(items))
                    out.extend(items)  # splatting a non-array adds nothing
            else:
                out.append(v)
        return out

    return array


@on(n.ObjectNode)
def _object(node: n.ObjectNode) -> Compiled:
    entries: list[tuple[int, Any, Compiled, Compiled | None]] = []
    for e in node.entries:
        if isinstance(e, n.ObjAttr):
            entries.append((0, e.key, compile_node(e.value), None))
        elif isinstance(e, n.ObjSplat):
            entries.append((1, None, compile_node(e.value), None))
        else:
            entries.append((2, None, compile_node(e.value), compile_node(e.cond)))
    if all(k == 0 for k, *_ in entries):
        plain = [(key, f) for _, key, f, _ in entries]
        return lambda s: {key: f(s) for key, f in plain}

    def obj(s: Scope) -> Any:
        out: dict[str, Any] = {}
        for k, key, f, cond in entries:
            if k == 0:
                out[key] = f(s)
                continue
            if k == 2 and cond is not None and cond(s) is not True:
                continue
            v = f(s)
            if type(v) is dict or isinstance(v, Mapping):
                if s.ctx.budget is not None:
                    s.ctx.budget.build(ENTRY_BYTES * len(v))
                out.update(v)
        return out

    return obj
