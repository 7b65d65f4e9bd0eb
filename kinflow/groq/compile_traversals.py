"""Compilers for traversals: attributes, elements, slices, filters, projections, derefs, maps.

Owns null propagation through chains (a step on the wrong kind of value gives null;
a filter hands a non-array back unchanged) and the scopes each step opens: filters and
projections open one ``^`` can climb out of, ``MapNode``/``FlatMap`` open hidden ones
that add no ``^`` level. Every pass over an array charges the context's budget (when
there is one) with the array's length before it starts, and a long array is walked in
chunks with the deadline and the cancel flag checked between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.budget import SLOT_BYTES, chunked
from kinflow.groq.compile_dispatch import compile_node, on
from kinflow.groq.row_tests import row_test
from kinflow.groq.scope import Compiled, Scope
from kinflow.groq.values import as_list, get_field


@on(n.Attr)
def _attr(node: n.Attr) -> Compiled:
    name = node.name
    if node.base is None or isinstance(node.base, n.This):

        def attr_this(s: Scope) -> Any:
            v = s.value
            if type(v) is dict:
                return v.get(name)
            return get_field(v, name)

        return attr_this
    base = compile_node(node.base)

    def attr(s: Scope) -> Any:
        v = base(s)
        if type(v) is dict:
            return v.get(name)
        return get_field(v, name)

    return attr


@on(n.Element)
def _element(node: n.Element) -> Compiled:
    base = compile_node(node.base)
    idx = node.index

    def element(s: Scope) -> Any:
        v = base(s)
        if type(v) is not list and type(v) is not tuple:
            return None
        i = idx + len(v) if idx < 0 else idx
        return v[i] if 0 <= i < len(v) else None

    return element


@on(n.Slice)
def _slice(node: n.Slice) -> Compiled:
    base = compile_node(node.base)
    lo, hi, inclusive = node.start, node.end, node.inclusive

    def slice_(s: Scope) -> Any:
        v = as_list(base(s))
        if v is None:
            return None
        size = len(v)
        a = lo + size if lo < 0 else lo
        b = hi + size if hi < 0 else hi
        if inclusive:
            b += 1
        a = min(max(a, 0), size)
        b = min(max(b, 0), size)
        return v[a:b] if a < b else []

    return slice_


@on(n.Filter)
def _filter(node: n.Filter) -> Compiled:
    base = compile_node(node.base)
    cond = compile_node(node.cond)
    test = row_test(node.cond)  # tests on an object's own fields need no scope (row_tests)

    def filter_(s: Scope) -> Any:
        v = base(s)
        items = as_list(v)
        if items is None:
            return v  # the spec returns a non-array base unchanged
        parent = s.pass_over(items)
        ctx = s.ctx
        out: list[Any] = []
        for part in chunked(items, ctx.budget):
            if test is not None:
                out += [item for item in part if (test(item) if type(item) is dict
                                                  else cond(Scope(item, parent, ctx)) is True)]
            else:
                out += [item for item in part if cond(Scope(item, parent, ctx)) is True]
        return out

    return filter_


@on(n.ArrayCoerce)
def _array_coerce(node: n.ArrayCoerce) -> Compiled:
    base = compile_node(node.base)
    return lambda s: as_list(base(s))


@on(n.Projection)
def _projection(node: n.Projection) -> Compiled:
    base = compile_node(node.base)
    obj = compile_node(node.obj)

    def projection(s: Scope) -> Any:
        v = base(s)
        if type(v) is not dict and not isinstance(v, Mapping):
            return None
        return obj(Scope(v, s.parent if s.hidden else s, s.ctx))

    return projection


@on(n.Deref)
def _deref(node: n.Deref) -> Compiled:
    base = compile_node(node.base)

    def deref(s: Scope) -> Any:
        v = base(s)
        ref = get_field(v, "_ref")
        if type(ref) is not str:
            return None
        return s.ctx.deref(ref)

    return deref


@on(n.MapNode)
def _map(node: n.MapNode) -> Compiled:
    base = compile_node(node.base)
    expr = compile_node(node.expr)

    def map_(s: Scope) -> Any:
        items = as_list(base(s))
        if items is None:
            return None
        parent = s.pass_over(items)
        ctx = s.ctx
        if ctx.budget is None:
            return [expr(Scope(item, parent, ctx, True)) for item in items]
        ctx.budget.build(SLOT_BYTES * len(items))
        out: list[Any] = []
        for part in chunked(items, ctx.budget):
            out += [expr(Scope(item, parent, ctx, True)) for item in part]
        return out

    return map_


@on(n.FlatMap)
def _flatmap(node: n.FlatMap) -> Compiled:
    base = compile_node(node.base)
    expr = compile_node(node.expr)

    def flatmap(s: Scope) -> Any:
        items = as_list(base(s))
        if items is None:
            return None
        parent = s.pass_over(items)
        ctx = s.ctx
        budget = ctx.budget
        out: list[Any] = []
        for part in chunked(items, budget):
            for item in part:
                v = expr(Scope(item, parent, ctx, True))
                if type(v) is list or type(v) is tuple:
                    if budget is not None:
                        budget.build(SLOT_BYTES * len(v))
                    out.extend(v)
                else:
                    out.append(v)  # the suite keeps non-array results (groq-js), not the spec
        return out

    return flatmap
