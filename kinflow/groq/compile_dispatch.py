"""The compiler's dispatch: node type to node compiler, and memoising scope-free sub-queries.

Each ``compile_*`` family module registers its compilers with :func:`on` when imported;
:mod:`kinflow.groq.compiler` imports every family, so call :func:`compile_node` through
that module. Dispatch happens once per node at compile time, never per element.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.scope import Compiled, Scope

NodeCompiler = Callable[[Any], Compiled]

COMPILERS: dict[type, NodeCompiler] = {}

_MEMO_TYPES = (n.Filter, n.MapNode, n.FlatMap, n.PipeCall)
_MISSING = object()


def compile_node(node: n.Node) -> Compiled:
    fn = COMPILERS[type(node)](node)
    if isinstance(node, _MEMO_TYPES) and _reads_dataset(node) and _scope_free(node, False):
        return _memoised(fn)
    return fn


def on(cls: type) -> Callable[[NodeCompiler], NodeCompiler]:
    """Registers the decorated function as the compiler of ``cls`` nodes."""

    def deco(fn: NodeCompiler) -> NodeCompiler:
        COMPILERS[cls] = fn
        return fn

    return deco


def _memoised(fn: Compiled) -> Compiled:
    """A sub-query that ignores its scope runs once per evaluation, not once per row."""
    key = object()

    def memo(s: Scope) -> Any:
        cache = s.ctx.memo
        v = cache.get(key, _MISSING)
        if v is _MISSING:
            v = fn(s)
            cache[key] = v
        return v

    return memo


def _reads_dataset(node: n.Node) -> bool:
    return any(isinstance(x, n.Everything) for x in n.walk(node))


def _scope_free(node: n.Node, inner: bool) -> bool:
    """True when ``node`` never reads the scope it is evaluated in (``@``, ``^``, implicit @).

    ``inner`` is set below constructs that open their own scope; ``^`` anywhere is
    treated as a read (conservative).
    """
    if isinstance(node, n.Parent):
        return False
    if isinstance(node, (n.This, n.Attr)) and (node.base is None if isinstance(node, n.Attr)
                                               else True):
        return inner
    if isinstance(node, n.FuncCall) and node.name == "references" and not inner:
        return False
    if isinstance(node, n.Filter):
        return _scope_free(node.base, inner) and _scope_free(node.cond, True)
    if isinstance(node, (n.MapNode, n.FlatMap)):
        return _scope_free(node.base, inner) and _scope_free(node.expr, True)
    if isinstance(node, n.Projection):
        return _scope_free(node.base, inner) and _scope_free(node.obj, True)
    if isinstance(node, n.PipeCall):
        return _scope_free(node.base, inner) and all(_scope_free(a, True) for a in node.args)
    return all(_scope_free(c, inner) for c in n.children(node))
