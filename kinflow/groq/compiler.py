"""Compiles a syntax tree into nested Python closures, one per node.

Owns evaluation semantics: traversals, three-valued logic, null propagation,
``order()`` and ``score()``. Compiling once and calling closures avoids a dispatch on
node type per element, which is what makes conditions cheap in hot loops over
thousands of rows. Operators and functions are looked up here, implemented elsewhere.
Every pass over an array charges the context's budget (when there is one) with the
array's length before it starts: one check per pass, not per element.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cmp_to_key
from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.functions import FUNCTIONS
from kinflow.groq.matching import match_score
from kinflow.groq.operators import BINARY, in_range
from kinflow.groq.scope import Compiled, Scope
from kinflow.groq.values import is_number, num, total_compare

_COMPILERS: dict[type, Callable[[Any], Compiled]] = {}


_MEMO_TYPES = (n.Filter, n.MapNode, n.FlatMap, n.PipeCall)
_MISSING = object()


def compile_node(node: n.Node) -> Compiled:
    fn = _COMPILERS[type(node)](node)
    if isinstance(node, _MEMO_TYPES) and _reads_dataset(node) and _scope_free(node, False):
        return _memoised(fn)
    return fn


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


def _on(cls: type) -> Callable[[Callable[[Any], Compiled]], Callable[[Any], Compiled]]:
    def deco(fn: Callable[[Any], Compiled]) -> Callable[[Any], Compiled]:
        _COMPILERS[cls] = fn
        return fn

    return deco


def _as_list(v: Any) -> list[Any] | None:
    t = type(v)
    if t is list:
        return v
    if t is tuple:
        return list(v)
    return None


def _get(v: Any, name: str) -> Any:
    if type(v) is dict:
        return v.get(name)
    if isinstance(v, Mapping):
        return v.get(name)
    return None


# --------------------------------------------------------------------------- leaves


@_on(n.Everything)
def _everything(node: n.Everything) -> Compiled:
    return lambda s: s.ctx.dataset


@_on(n.This)
def _this(node: n.This) -> Compiled:
    return lambda s: s.value


@_on(n.Parent)
def _parent(node: n.Parent) -> Compiled:
    levels = node.n

    def parent(s: Scope) -> Any:
        cur: Scope | None = s
        for _ in range(levels):
            cur = cur.parent if cur is not None else None
        return cur.value if cur is not None else None

    return parent


@_on(n.Param)
def _param(node: n.Param) -> Compiled:
    name = node.name
    return lambda s: s.ctx.params.get(name)


@_on(n.Value)
def _value(node: n.Value) -> Compiled:
    v = node.value
    return lambda s: v


@_on(n.Group)
def _group(node: n.Group) -> Compiled:
    return compile_node(node.base)


# --------------------------------------------------------------------------- traversals


@_on(n.Attr)
def _attr(node: n.Attr) -> Compiled:
    name = node.name
    if node.base is None or isinstance(node.base, n.This):

        def attr_this(s: Scope) -> Any:
            v = s.value
            if type(v) is dict:
                return v.get(name)
            return _get(v, name)

        return attr_this
    base = compile_node(node.base)

    def attr(s: Scope) -> Any:
        v = base(s)
        if type(v) is dict:
            return v.get(name)
        return _get(v, name)

    return attr


@_on(n.Element)
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


@_on(n.Slice)
def _slice(node: n.Slice) -> Compiled:
    base = compile_node(node.base)
    lo, hi, inclusive = node.start, node.end, node.inclusive

    def slice_(s: Scope) -> Any:
        v = _as_list(base(s))
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


@_on(n.Filter)
def _filter(node: n.Filter) -> Compiled:
    base = compile_node(node.base)
    cond = compile_node(node.cond)

    def filter_(s: Scope) -> Any:
        v = base(s)
        items = _as_list(v)
        if items is None:
            return v  # the spec returns a non-array base unchanged
        parent = s.parent if s.hidden else s
        ctx = s.ctx
        if ctx.budget is not None:
            ctx.budget.charge(len(items))
        return [item for item in items if cond(Scope(item, parent, ctx)) is True]

    return filter_


@_on(n.ArrayCoerce)
def _array_coerce(node: n.ArrayCoerce) -> Compiled:
    base = compile_node(node.base)
    return lambda s: _as_list(base(s))


@_on(n.Projection)
def _projection(node: n.Projection) -> Compiled:
    base = compile_node(node.base)
    obj = compile_node(node.obj)

    def projection(s: Scope) -> Any:
        v = base(s)
        if type(v) is not dict and not isinstance(v, Mapping):
            return None
        return obj(Scope(v, s.parent if s.hidden else s, s.ctx))

    return projection


@_on(n.Deref)
def _deref(node: n.Deref) -> Compiled:
    base = compile_node(node.base)

    def deref(s: Scope) -> Any:
        v = base(s)
        ref = _get(v, "_ref")
        if type(ref) is not str:
            return None
        return s.ctx.deref(ref)

    return deref


@_on(n.MapNode)
def _map(node: n.MapNode) -> Compiled:
    base = compile_node(node.base)
    expr = compile_node(node.expr)

    def map_(s: Scope) -> Any:
        items = _as_list(base(s))
        if items is None:
            return None
        parent = s.parent if s.hidden else s
        ctx = s.ctx
        if ctx.budget is not None:
            ctx.budget.charge(len(items))
        return [expr(Scope(item, parent, ctx, True)) for item in items]

    return map_


@_on(n.FlatMap)
def _flatmap(node: n.FlatMap) -> Compiled:
    base = compile_node(node.base)
    expr = compile_node(node.expr)

    def flatmap(s: Scope) -> Any:
        items = _as_list(base(s))
        if items is None:
            return None
        parent = s.parent if s.hidden else s
        ctx = s.ctx
        if ctx.budget is not None:
            ctx.budget.charge(len(items))
        out: list[Any] = []
        for item in items:
            v = expr(Scope(item, parent, ctx, True))
            if type(v) is list or type(v) is tuple:
                out.extend(v)
            else:
                out.append(v)  # the suite keeps non-array results (groq-js), not the spec
        return out

    return flatmap


# --------------------------------------------------------------------------- logic


@_on(n.And)
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


@_on(n.Or)
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


@_on(n.Not)
def _not(node: n.Not) -> Compiled:
    base = compile_node(node.base)

    def not_(s: Scope) -> Any:
        v = base(s)
        return (v is False) if type(v) is bool else None

    return not_


@_on(n.Neg)
def _neg(node: n.Neg) -> Compiled:
    base = compile_node(node.base)

    def neg(s: Scope) -> Any:
        v = base(s)
        return num(-v) if is_number(v) else None

    return neg


@_on(n.Pos)
def _pos(node: n.Pos) -> Compiled:
    base = compile_node(node.base)

    def pos(s: Scope) -> Any:
        v = base(s)
        return v if is_number(v) else None

    return pos


@_on(n.OpCall)
def _opcall(node: n.OpCall) -> Compiled:
    left = compile_node(node.left)
    if node.op in ("==", "!=") and isinstance(node.right, n.Value):
        fast = _const_equality(left, node.right.value, node.op == "==")
        if fast is not None:
            return fast
    right = compile_node(node.right)
    fn = BINARY[node.op]
    return lambda s: fn(left(s), right(s))


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


@_on(n.InRange)
def _inrange(node: n.InRange) -> Compiled:
    base = compile_node(node.base)
    lo = compile_node(node.left)
    hi = compile_node(node.right)
    inclusive = node.inclusive
    return lambda s: in_range(base(s), lo(s), hi(s), inclusive)


# --------------------------------------------------------------------------- calls


@_on(n.FuncCall)
def _funccall(node: n.FuncCall) -> Compiled:
    spec = FUNCTIONS[(node.namespace, node.name)]
    args = [compile_node(a) for a in node.args]
    impl = spec.impl
    return lambda s: impl(args, s)


@_on(n.Select)
def _select(node: n.Select) -> Compiled:
    alts = [(compile_node(c), compile_node(v)) for c, v in node.alternatives]
    fallback = compile_node(node.fallback) if node.fallback is not None else None

    def select(s: Scope) -> Any:
        for cond, val in alts:
            if cond(s) is True:
                return val(s)
        return fallback(s) if fallback is not None else None

    return select


@_on(n.PipeCall)
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
        items = _as_list(base(s))
        if items is None:
            return None
        parent = s.parent if s.hidden else s
        ctx = s.ctx
        if ctx.budget is not None:
            ctx.budget.charge(len(items))
        keyed = []
        for item in items:
            sc = Scope(item, parent, ctx)
            keyed.append(([k(sc) for k in keys], item))
        keyed.sort(key=cmp_to_key(cmp))
        return [item for _, item in keyed]

    return order


def _score_of(node: n.Node) -> Compiled:
    """Relevance of one score() argument for the element in scope (groq.md §5.7)."""
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
        return lambda s: match_score(left(s), right(s))
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
        items = _as_list(base(s))
        if items is None:
            return None
        parent = s.parent if s.hidden else s
        ctx = s.ctx
        if ctx.budget is not None:
            ctx.budget.charge(len(items))
        scored: list[tuple[float, Any]] = []
        for item in items:
            if type(item) is not dict and not isinstance(item, Mapping):
                scored.append((0.0, item))  # the spec keeps non-objects, unscored
                continue
            sc = Scope(item, parent, ctx)
            total = sum(f(sc) for f in scorers)
            prev = item.get("_score")
            if is_number(prev):
                total += prev
            scored.append((total, {**item, "_score": total}))
        scored.sort(key=lambda p: -p[0])
        return [item for _, item in scored]

    return score


# --------------------------------------------------------------------------- literals


@_on(n.ArrayNode)
def _array(node: n.ArrayNode) -> Compiled:
    elems = [(compile_node(e.value), e.splat) for e in node.elements]
    if not any(splat for _, splat in elems):
        fns = [f for f, _ in elems]
        return lambda s: [f(s) for f in fns]

    def array(s: Scope) -> Any:
        out: list[Any] = []
        for f, splat in elems:
            v = f(s)
            if splat:
                items = _as_list(v)
                if items is not None:
                    out.extend(items)  # splatting a non-array adds nothing
            else:
                out.append(v)
        return out

    return array


@_on(n.ObjectNode)
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
                out.update(v)
        return out

    return obj


def _context_only(node: n.Node) -> Compiled:
    raise AssertionError(f"{type(node).__name__} must not survive validation")


for _cls in (n.Range, n.Pair, n.Asc, n.Desc):
    _COMPILERS[_cls] = _context_only
