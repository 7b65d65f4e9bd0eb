"""Compilers for calls: registry functions, ``select()``, and the pipes ``order()`` and ``score()``.

Function bodies live in :mod:`kinflow.groq.functions`; a call compiles its arguments
and hands them over unevaluated, so each function decides what to evaluate. The pipes
are here because they open a scope per element: ``order()`` sorts by GROQ's total
order (stable, ``desc`` per key), ``score()`` computes relevance and
sorts by it. Both charge the budget with the array's length before the pass and the
comparisons of the sort before sorting.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cmp_to_key
from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.budget import ENTRY_BYTES, SLOT_BYTES, chunked
from kinflow.groq.compile_dispatch import compile_node, on
from kinflow.groq.functions import FUNCTIONS
from kinflow.groq.matching import match_score
from kinflow.groq.scope import Compiled, Scope
from kinflow.groq.values import as_list, is_number, total_compare


@on(n.FuncCall)
def _funccall(node: n.FuncCall) -> Compiled:
    spec = FUNCTIONS[(node.namespace, node.name)]
    args = [compile_node(a) for a in node.args]
    impl = spec.impl
    return lambda s: impl(args, s)


@on(n.Select)
def _select(node: n.Select) -> Compiled:
    alts = [(compile_node(c), compile_node(v)) for c, v in node.alternatives]
    fallback = compile_node(node.fallback) if node.fallback is not None else None

    def select(s: Scope) -> Any:
        for cond, val in alts:
            if cond(s) is True:
                return val(s)
        return fallback(s) if fallback is not None else None

    return select


@on(n.PipeCall)
def _pipecall(node: n.PipeCall) -> Compiled:
    base = compile_node(node.base)
    if node.name == "order":
        return _order(base, node.args)
    return _score(base, node.args)


def _order(base: Compiled, args: tuple[n.Node, ...]) -> Compiled:
    keys: list[Compiled] = []
    desc: list[bool] = []
    for a in args:
        if isinstance(a, (n.Asc, n.Desc)):
            keys.append(compile_node(a.base))
            desc.append(isinstance(a, n.Desc))
        else:
            keys.append(compile_node(a))
            desc.append(False)
    pairs = list(zip(keys, desc, strict=True))

    def cmp(x: tuple[list[Any], Any], y: tuple[list[Any], Any]) -> int:
        for i, (_k, d) in enumerate(pairs):
            c = total_compare(x[0][i], y[0][i])
            if c:
                return -c if d else c
        return 0

    def order(s: Scope) -> Any:
        items = as_list(base(s))
        if items is None:
            return None
        parent = s.pass_over(items)
        ctx = s.ctx
        keyed = []
        for part in chunked(items, ctx.budget):
            for item in part:
                sc = Scope(item, parent, ctx)
                keyed.append(([k(sc) for k in keys], item))
        if ctx.budget is not None:  # the comparisons a sort makes, before it makes them
            ctx.budget.charge(len(keyed) * max(1, len(keyed).bit_length()) * len(pairs))
            ctx.budget.build(SLOT_BYTES * len(keyed))
        keyed.sort(key=cmp_to_key(cmp))
        return [item for _, item in keyed]

    return order


def _score_of(node: n.Node) -> Compiled:
    """Relevance of one score() argument for the element in scope."""
    if isinstance(node, n.Group):
        return _score_of(node.base)
    if isinstance(node, n.And):
        a, b = _score_of(node.left), _score_of(node.right)

        def and_score(s: Scope) -> float:
            x, y = a(s), b(s)
            return x + y if x > 0 and y > 0 else 0.0

        return and_score
    if isinstance(node, n.Or):
        a, b = _score_of(node.left), _score_of(node.right)
        return lambda s: a(s) + b(s)
    if isinstance(node, n.OpCall) and node.op == "match":
        left, right = compile_node(node.left), compile_node(node.right)
        return lambda s: match_score(left(s), right(s), s.ctx.budget)
    if isinstance(node, n.FuncCall) and node.namespace == "global" and node.name == "boost":
        inner = _score_of(node.args[0])
        amount = compile_node(node.args[1])

        def boost(s: Scope) -> float:
            x = inner(s)
            if x <= 0:
                return 0.0
            b = amount(s)
            return x + b if is_number(b) else x

        return boost
    plain = compile_node(node)
    return lambda s: 1.0 if plain(s) is True else 0.0


def _score(base: Compiled, args: tuple[n.Node, ...]) -> Compiled:
    scorers = [_score_of(a) for a in args]

    def score(s: Scope) -> Any:
        items = as_list(base(s))
        if items is None:
            return None
        parent = s.pass_over(items)
        ctx = s.ctx
        budget = ctx.budget
        scored: list[tuple[float, Any]] = []
        for part in chunked(items, budget):
            for item in part:
                if type(item) is not dict and not isinstance(item, Mapping):
                    scored.append((0.0, item))  # the spec keeps non-objects, unscored
                    continue
                sc = Scope(item, parent, ctx)
                total = sum(f(sc) for f in scorers)
                prev = item.get("_score")
                if is_number(prev):
                    total += prev
                if budget is not None:
                    budget.build(ENTRY_BYTES * (len(item) + 1))
                scored.append((total, {**item, "_score": total}))
        if budget is not None:
            budget.charge(len(scored) * max(1, len(scored).bit_length()))
        scored.sort(key=lambda p: -p[0])
        return [item for _, item in scored]

    return score
