"""The function registry and the implementations of GROQ's built-in functions.

Owns every ``namespace::name`` the parser accepts, with its arity, and the code
that runs it. Implementations receive their arguments as compiled closures, so
functions such as ``coalesce``, ``select`` and ``references`` decide themselves what
to evaluate. Pipe functions (``order``, ``score``) live in :mod:`kinflow.groq.compile_calls`.
A function whose work grows with its arguments charges the evaluation's budget before
doing it (steps for loops and comparisons, bytes for what it builds) and checks the
deadline inside its loops.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from kinflow.groq.budget import SLOT_BYTES, STRING_BYTES, Budget, chunked
from kinflow.groq.functions_math import MATH
from kinflow.groq.scope import Compiled, Scope
from kinflow.groq.values import (
    DateTime,
    Path,
    equal,
    format_number,
    is_array,
    is_number,
    is_object,
    kind,
    num,
    parse_datetime,
)

Impl = Callable[[list[Compiled], Scope], Any]


@dataclass(frozen=True, slots=True)
class FuncSpec:
    min_args: int
    max_args: int  # -1: no upper bound
    impl: Impl


FUNCTIONS: dict[tuple[str, str], FuncSpec] = {}
NAMESPACES = frozenset({"global", "array", "string", "math", "dateTime", "pt", "geo", "diff",
                        "delta", "sanity", "releases", "documents", "text", "media", "user"})
PIPE_FUNCTIONS = frozenset({"order", "score"})


def _register(ns: str, name: str, min_args: int, max_args: int | None = None
              ) -> Callable[[Impl], Impl]:
    def deco(fn: Impl) -> Impl:
        FUNCTIONS[(ns, name)] = FuncSpec(min_args, min_args if max_args is None else max_args,
                                         fn)
        return fn

    return deco


def _charge(s: Scope, steps: int) -> None:
    if s.ctx.budget is not None:
        s.ctx.budget.charge(steps)


def _build(s: Scope, size: int) -> None:
    if s.ctx.budget is not None:
        s.ctx.budget.build(size)


# --------------------------------------------------------------------------- global


@_register("global", "coalesce", 0, -1)
def _coalesce(args: list[Compiled], s: Scope) -> Any:
    for a in args:
        v = a(s)
        if v is not None:
            return v
    return None


@_register("global", "count", 1)
def _count(args: list[Compiled], s: Scope) -> Any:
    v = args[0](s)
    return len(v) if is_array(v) else None


@_register("global", "defined", 1)
def _defined(args: list[Compiled], s: Scope) -> Any:
    return kind(args[0](s)) != "null"


@_register("global", "length", 1)
def _length(args: list[Compiled], s: Scope) -> Any:
    v = args[0](s)
    if isinstance(v, str) or is_array(v):
        return len(v)
    return None


def _lower(args: list[Compiled], s: Scope) -> Any:
    v = args[0](s)
    if not isinstance(v, str):
        return None
    _build(s, len(v) + STRING_BYTES)
    return v.lower()


def _upper(args: list[Compiled], s: Scope) -> Any:
    v = args[0](s)
    if not isinstance(v, str):
        return None
    _build(s, len(v) + STRING_BYTES)
    return v.upper()


for _ns in ("global", "string"):
    FUNCTIONS[(_ns, "lower")] = FuncSpec(1, 1, _lower)
    FUNCTIONS[(_ns, "upper")] = FuncSpec(1, 1, _upper)


def to_text(v: Any) -> str | None:
    """``string()`` semantics: text of a string, number, boolean or datetime."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if is_number(v):
        return format_number(v)
    if isinstance(v, DateTime):
        return v.text()
    return None


@_register("global", "string", 1)
def _string(args: list[Compiled], s: Scope) -> Any:
    return to_text(args[0](s))


@_register("global", "round", 1, 2)
def _round(args: list[Compiled], s: Scope) -> Any:
    v = args[0](s)
    if not is_number(v):
        return None
    prec = 0
    if len(args) > 1:
        p = args[1](s)
        if not is_number(p) or p < 0 or (isinstance(p, float) and not p.is_integer()):
            return None
        prec = int(p)
    if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):
        return None
    if prec == 0:
        r = math.floor(abs(v) + 0.5)
        return num(-r if v < 0 else r)
    try:
        d = Decimal(v).quantize(Decimal(1).scaleb(-prec), rounding=ROUND_HALF_UP)
    except InvalidOperation:
        return num(float(v))
    return num(float(d))


@_register("global", "references", 1, -1)
def _references(args: list[Compiled], s: Scope) -> Any:
    ids: set[str] = set()
    for a in args:
        v = a(s)
        if isinstance(v, str):
            ids.add(v)
        elif is_array(v):
            ids.update(x for x in v if isinstance(x, str))
    if not ids:
        return False
    return _has_ref(s.value, ids, s.ctx.budget)


def _has_ref(v: Any, ids: set[str], budget: Budget | None) -> bool:
    if is_array(v):
        if budget is not None:
            budget.charge(len(v))
        return any(_has_ref(x, ids, budget) for x in v)
    if is_object(v):
        ref = v.get("_ref")
        if isinstance(ref, str) and ref in ids:
            return True
        if budget is not None:
            budget.charge(len(v))
        return any(_has_ref(x, ids, budget) for x in v.values())
    return False


@_register("global", "dateTime", 1)
def _datetime(args: list[Compiled], s: Scope) -> Any:
    v = args[0](s)
    if isinstance(v, DateTime):
        return v
    if isinstance(v, str):
        return parse_datetime(v)
    return None


@_register("global", "now", 0)
def _now(args: list[Compiled], s: Scope) -> Any:
    dt = s.ctx.now().dt
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


@_register("dateTime", "now", 0)
def _dt_now(args: list[Compiled], s: Scope) -> Any:
    return s.ctx.now()


@_register("global", "boost", 2)
def _boost(args: list[Compiled], s: Scope) -> Any:
    return args[0](s)


@_register("global", "identity", 0)
def _identity(args: list[Compiled], s: Scope) -> Any:
    return s.ctx.identity if s.ctx.identity is not None else "me"


@_register("global", "path", 1)
def _path(args: list[Compiled], s: Scope) -> Any:
    v = args[0](s)
    return Path(v) if isinstance(v, str) else None


# --------------------------------------------------------------------------- array::


@_register("array", "join", 2)
def _join(args: list[Compiled], s: Scope) -> Any:
    arr = args[0](s)
    sep = args[1](s)
    if not is_array(arr) or not isinstance(sep, str):
        return None
    budget = s.ctx.budget
    if budget is not None:
        budget.charge(len(arr))
    parts = []
    size = 0
    for part in chunked(list(arr), budget):
        for x in part:
            t = to_text(x)
            if t is None:
                return None
            parts.append(t)
            size += len(t) + len(sep)
    _build(s, size + STRING_BYTES)
    return sep.join(parts)


@_register("array", "compact", 1)
def _compact(args: list[Compiled], s: Scope) -> Any:
    arr = args[0](s)
    if not is_array(arr):
        return None
    _charge(s, len(arr))
    return [x for part in chunked(list(arr), s.ctx.budget) for x in part
            if kind(x) != "null"]


@_register("array", "unique", 1)
def _unique(args: list[Compiled], s: Scope) -> Any:
    arr = args[0](s)
    if not is_array(arr):
        return None
    out: list[Any] = []
    seen: set[tuple[str, Any]] = set()
    _charge(s, len(arr))
    for part in chunked(list(arr), s.ctx.budget):
        for x in part:
            k = kind(x)
            if k in ("array", "object", "path"):
                out.append(x)
                continue
            key = (k, float(x) if k == "number" else x)
            if key in seen:
                continue
            seen.add(key)
            out.append(x)
    return out


@_register("array", "intersects", 2)
def _intersects(args: list[Compiled], s: Scope) -> Any:
    a = args[0](s)
    b = args[1](s)
    if not is_array(a) or not is_array(b):
        return None
    budget = s.ctx.budget
    if budget is None:
        return any(equal(x, y) for x in a for y in b)
    budget.charge(len(a) * len(b))  # every pair may be compared
    for x in a:
        budget.check()
        if any(equal(x, y) for y in b):
            return True
    return False


# --------------------------------------------------------------------------- string::


@_register("string", "split", 2)
def _split(args: list[Compiled], s: Scope) -> Any:
    text = args[0](s)
    sep = args[1](s)
    if not isinstance(text, str) or not isinstance(sep, str):
        return None
    if text == "":
        return []
    budget = s.ctx.budget
    if budget is not None:
        budget.charge(len(text))
        parts = len(text) if sep == "" else text.count(sep) + 1
        budget.build(len(text) + parts * (SLOT_BYTES + STRING_BYTES))
    if sep == "":
        return list(text)
    return text.split(sep)


@_register("string", "startsWith", 2)
def _starts_with(args: list[Compiled], s: Scope) -> Any:
    text = args[0](s)
    prefix = args[1](s)
    if not isinstance(text, str) or not isinstance(prefix, str):
        return None
    return text.startswith(prefix)


def call_spec(ns: str, name: str) -> FuncSpec | None:
    return FUNCTIONS.get((ns, name))


__all__ = ["FUNCTIONS", "NAMESPACES", "PIPE_FUNCTIONS", "FuncSpec", "Mapping", "to_text"]


# --------------------------------------------------------------------------- pt::


def _block_text(block: Any) -> str | None:
    if not is_object(block):
        return None
    kids = block.get("children")
    if not is_array(kids):
        return None
    return "".join(str(k.get("text")) for k in kids
                   if is_object(k) and isinstance(k.get("text"), str))


@_register("pt", "text", 1)
def _pt_text(args: list[Compiled], s: Scope) -> Any:
    """Plain text of Portable Text: span texts per block, blocks joined by a blank line."""
    v = args[0](s)
    blocks = v if is_array(v) else [v] if is_object(v) else None
    if blocks is None:
        return None
    budget = s.ctx.budget
    texts: list[str] = []
    for part in chunked(list(blocks), budget):
        for b in part:
            if budget is not None:
                kids = b.get("children") if is_object(b) else None
                budget.charge(1 + (len(kids) if isinstance(kids, (list, tuple)) else 0))
            t = _block_text(b)
            if t is not None:
                texts.append(t)
    _build(s, sum(len(t) + 2 for t in texts) + STRING_BYTES)
    return "\n\n".join(texts)


for _name, _impl in MATH.items():  # math:: lives in a module of its own (size)
    FUNCTIONS[("math", _name)] = FuncSpec(1, 1, _impl)
