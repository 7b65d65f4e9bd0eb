"""GROQ's ``math::`` functions: sums, averages and extremes of an array of numbers.

Registered in :data:`kinflow.groq.functions.FUNCTIONS` when imported (the functions
module imports this one). Each charges the budget the array's length and checks the
deadline as it walks it; a non-number (other than null) makes the result null.
"""

from __future__ import annotations

import math
from typing import Any

from kinflow.groq.budget import chunked
from kinflow.groq.functions import _charge, _register
from kinflow.groq.scope import Compiled, Scope
from kinflow.groq.values import is_array, is_number, num


def _numbers(v: Any, s: Scope) -> list[float] | None:
    if not is_array(v):
        return None
    _charge(s, len(v))
    out = []
    for part in chunked(list(v), s.ctx.budget):
        for x in part:
            if x is None:
                continue
            if not is_number(x):
                return None
            out.append(x)
    return out


@_register("math", "sum", 1)
def _sum(args: list[Compiled], s: Scope) -> Any:
    xs = _numbers(args[0](s), s)
    if xs is None:
        return None
    return num(math.fsum(xs)) if any(isinstance(x, float) for x in xs) else num(sum(xs))


@_register("math", "avg", 1)
def _avg(args: list[Compiled], s: Scope) -> Any:
    xs = _numbers(args[0](s), s)
    if not xs:
        return None
    return num(math.fsum(xs) / len(xs))


@_register("math", "min", 1)
def _min(args: list[Compiled], s: Scope) -> Any:
    xs = _numbers(args[0](s), s)
    return min(xs) if xs else None


@_register("math", "max", 1)
def _max(args: list[Compiled], s: Scope) -> Any:
    xs = _numbers(args[0](s), s)
    return max(xs) if xs else None
