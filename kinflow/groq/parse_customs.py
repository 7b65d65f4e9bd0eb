"""Custom functions (``fn ns::name($p) = ...;``): the checks on a body and their expansion.

A declared function is a macro: every call is replaced by the body with the argument
in place of the parameter, before validation and compilation, so nothing downstream
knows custom functions exist. Recursion, a body that is not a projection of its
parameter, and ``^`` climbing out of the body are refused here. Also owns
:func:`rewrite`, the generic tree rewrite the expansion uses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.errors import GroqSyntaxError
from kinflow.groq.functions import FUNCTIONS
from kinflow.groq.parse_cursor import Custom

Key = tuple[str, str]


def check_custom_body(query: str, param: str, body: n.Node, pos: int) -> None:
    """Refuses a body that does not use ``param`` once, as the base of a projection."""
    uses = [x for x in n.walk(body) if isinstance(x, n.Param) and x.name == param]
    if len(uses) != 1:
        raise GroqSyntaxError("a custom function must use its parameter exactly once",
                              query, pos)
    ok = False
    if isinstance(body, n.Projection):
        b = body.base
        ok = b == n.Param(param, b.pos) if isinstance(b, n.Param) else (
            isinstance(b, n.Deref) and isinstance(b.base, n.Param))
    elif isinstance(body, n.MapNode) and isinstance(body.base, n.ArrayCoerce) and \
            isinstance(body.base.base, n.Param) and isinstance(body.expr, n.Projection):
        inner = body.expr.base
        ok = isinstance(inner, n.This) or (isinstance(inner, n.Deref)
                                           and isinstance(inner.base, n.This))
    if not ok:
        raise GroqSyntaxError("a custom function body must be a projection of its parameter",
                              query, pos)
    if _parent_escapes(body, 0):
        raise GroqSyntaxError("'^' may not reach outside a custom function", query, pos)


def has_custom_calls(root: n.Node) -> bool:
    return any(isinstance(x, n.FuncCall) and (x.namespace, x.name) not in FUNCTIONS
               for x in n.walk(root))


def expand_customs(query: str, customs: Mapping[Key, Custom], node: n.Node,
                   active: tuple[Key, ...] = ()) -> n.Node:
    """``node`` with every call of a declared function replaced by its body."""

    def fn(x: n.Node) -> n.Node | None:
        if not isinstance(x, n.FuncCall):
            return None
        key = (x.namespace, x.name)
        if key in FUNCTIONS and key not in customs:
            return None
        decl = customs.get(key)
        if decl is None:
            raise GroqSyntaxError(f"unknown function {x.namespace}::{x.name}", query, x.pos)
        if len(x.args) != 1:
            raise GroqSyntaxError(f"{x.namespace}::{x.name} takes exactly one argument",
                                  query, x.pos)
        if key in active:
            raise GroqSyntaxError("custom functions may not recurse", query, x.pos)
        param, body, _ = decl
        arg = expand_customs(query, customs, x.args[0], active)
        expanded = rewrite(body, lambda y: arg if isinstance(y, n.Param)
                           and y.name == param else None)
        return expand_customs(query, customs, expanded, (*active, key))

    return rewrite(node, fn)


def _parent_escapes(node: n.Node, depth: int) -> bool:
    """True when some ``^`` climbs above the scopes the custom-function body opens itself."""
    if isinstance(node, n.Parent):
        return node.n > depth - 1
    if isinstance(node, n.Filter):
        return _parent_escapes(node.base, depth) or _parent_escapes(node.cond, depth + 1)
    if isinstance(node, n.Projection):
        return _parent_escapes(node.base, depth) or _parent_escapes(node.obj, depth + 1)
    if isinstance(node, n.PipeCall):
        return _parent_escapes(node.base, depth) or any(
            _parent_escapes(a, depth + 1) for a in node.args)
    return any(_parent_escapes(c, depth) for c in n.children(node))


def rewrite(node: n.Node, fn: Callable[[n.Node], n.Node | None]) -> n.Node:
    """Bottom-up-safe tree rewrite: ``fn`` replaces a node, or returns None to recurse."""
    got = fn(node)
    if got is not None:
        return got
    if isinstance(node, n.ObjectNode):
        entries: list[n.ObjAttr | n.ObjSplat | n.ObjCond] = []
        for e in node.entries:
            if isinstance(e, n.ObjAttr):
                entries.append(n.ObjAttr(e.key, rewrite(e.value, fn)))
            elif isinstance(e, n.ObjSplat):
                entries.append(n.ObjSplat(rewrite(e.value, fn)))
            else:
                entries.append(n.ObjCond(rewrite(e.cond, fn), rewrite(e.value, fn)))
        return n.ObjectNode(tuple(entries))
    if isinstance(node, n.ArrayNode):
        return n.ArrayNode(tuple(n.ArrayElement(rewrite(e.value, fn), e.splat)
                                 for e in node.elements))
    if isinstance(node, n.Select):
        return n.Select(
            tuple((rewrite(c, fn), rewrite(v, fn)) for c, v in node.alternatives),
            rewrite(node.fallback, fn) if node.fallback is not None else None)
    if isinstance(node, (n.FuncCall, n.PipeCall)):
        args = tuple(rewrite(a, fn) for a in node.args)
        if isinstance(node, n.PipeCall):
            return n.PipeCall(rewrite(node.base, fn), node.name, args)
        return dataclasses.replace(node, args=args)
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        v = getattr(node, f.name)
        if isinstance(v, n.Node):
            nv = rewrite(v, fn)
            if nv is not v:
                changes[f.name] = nv
    return dataclasses.replace(node, **changes) if changes else node  # type: ignore[type-var]
