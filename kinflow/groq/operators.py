"""GROQ's binary operators on evaluated values.

Owns arithmetic with IEEE-double semantics (non-finite results become null, ``%``
keeps the dividend's sign), concatenation and merging for ``+``, datetime arithmetic,
the comparisons and ``in``. Each operator is a plain function of two values so the
compiler can call it without dispatch overhead; the ones whose work grows with their
operands (``+``, ``in``, ``match``) also have a form that charges a budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kinflow.groq.budget import ENTRY_BYTES, SLOT_BYTES, STRING_BYTES, Budget, chunked
from kinflow.groq.matching import match_values, wildcard_cost
from kinflow.groq.values import DateTime, Path, compare, equal, is_array, is_number, is_object, num


def op_add(a: Any, b: Any) -> Any:
    ta = type(a)
    if ta is str:
        return a + b if type(b) is str else None
    if is_number(a):
        if is_number(b):
            return num(a + b)
        if isinstance(b, DateTime):
            return b.plus_seconds(a)
        return None
    if isinstance(a, DateTime):
        return a.plus_seconds(b) if is_number(b) else None
    if is_array(a):
        return [*a, *b] if is_array(b) else None
    if is_object(a):
        return {**a, **b} if is_object(b) else None
    return None


def op_sub(a: Any, b: Any) -> Any:
    if is_number(a):
        return num(a - b) if is_number(b) else None
    if isinstance(a, DateTime):
        if is_number(b):
            return a.plus_seconds(-b)
        if isinstance(b, DateTime):
            return num((a.dt - b.dt).total_seconds())
    return None


def op_mul(a: Any, b: Any) -> Any:
    if is_number(a) and is_number(b):
        return num(a * b)
    return None


def op_div(a: Any, b: Any) -> Any:
    if is_number(a) and is_number(b):
        if b == 0:
            return None
        return num(a / b)
    return None


def op_mod(a: Any, b: Any) -> Any:
    if is_number(a) and is_number(b):
        if b == 0:
            return None
        if type(a) is int and type(b) is int:
            r = abs(a) % abs(b)
            return -r if a < 0 else r
        return num(math.fmod(a, b))
    return None


def op_pow(a: Any, b: Any) -> Any:
    if is_number(a) and is_number(b):
        try:
            if type(a) is int and type(b) is int and b >= 0:
                if abs(a) > 1 and b > 1100:
                    return None
                return num(a**b)
            r = float(a) ** float(b)
        except (OverflowError, ZeroDivisionError):
            return None
        if isinstance(r, complex):
            return None
        return num(r)
    return None


def op_eq(a: Any, b: Any) -> bool:
    return equal(a, b)


def op_ne(a: Any, b: Any) -> bool:
    return not equal(a, b)


def op_lt(a: Any, b: Any) -> bool | None:
    c = compare(a, b)
    return None if c is None else c < 0


def op_le(a: Any, b: Any) -> bool | None:
    c = compare(a, b)
    return None if c is None else c <= 0


def op_gt(a: Any, b: Any) -> bool | None:
    c = compare(a, b)
    return None if c is None else c > 0


def op_ge(a: Any, b: Any) -> bool | None:
    c = compare(a, b)
    return None if c is None else c >= 0


def op_in(a: Any, b: Any) -> bool | None:
    if is_array(b):
        for item in b:
            if equal(a, item):
                return True
        return False
    if isinstance(b, Path):
        if isinstance(a, str):
            return b.matches(a)
        if isinstance(a, Path):
            return b.matches(a.pattern)
        return None
    return None


def op_match(a: Any, b: Any) -> bool:
    return match_values(a, b)


def in_range(v: Any, lo: Any, hi: Any, inclusive: bool) -> bool | None:
    c1 = compare(v, lo)
    c2 = compare(v, hi)
    if c1 is None or c2 is None:
        return None
    return c1 >= 0 and (c2 <= 0 if inclusive else c2 < 0)


def add_under(a: Any, b: Any, budget: Budget) -> Any:
    """``+``, charging the budget the size of the string, array or object it builds."""
    if type(a) is str and type(b) is str:
        budget.build(len(a) + len(b) + STRING_BYTES)
    elif is_array(a) and is_array(b):
        budget.build(SLOT_BYTES * (len(a) + len(b)))
    elif is_object(a) and is_object(b):
        budget.build(ENTRY_BYTES * (len(a) + len(b)))
    return op_add(a, b)


def in_under(a: Any, b: Any, budget: Budget) -> bool | None:
    """``in``, charging the comparisons it makes and checking the budget as it goes."""
    if is_array(b):
        budget.charge(len(b))
        items = b if type(b) is list else list(b)
        for part in chunked(items, budget):
            for item in part:
                if equal(a, item):
                    return True
        return False
    if isinstance(b, Path):
        text = a if isinstance(a, str) else a.pattern if isinstance(a, Path) else None
        if text is not None:
            budget.charge(wildcard_cost(len(text), b.pattern.count("*")))
    return op_in(a, b)


def match_under(a: Any, b: Any, budget: Budget) -> bool:
    return match_values(a, b, budget)


#: the operators whose work depends on their operands' size, in their budgeted form
BUDGETED: dict[str, Callable[[Any, Any, Budget], Any]] = {
    "+": add_under,
    "in": in_under,
    "match": match_under,
}

BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": op_add,
    "-": op_sub,
    "*": op_mul,
    "/": op_div,
    "%": op_mod,
    "**": op_pow,
    "==": op_eq,
    "!=": op_ne,
    "<": op_lt,
    "<=": op_le,
    ">": op_gt,
    ">=": op_ge,
    "in": op_in,
    "match": op_match,
}
