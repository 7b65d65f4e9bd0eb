"""GROQ's ``math::`` functions: sums, averages and extremes of an array of numbers.

:data:`MATH` maps each name to its implementation; :mod:`kinflow.groq.functions`
registers them (this module imports nothing of it). Each charges the budget the
array's length and checks the deadline as it walks it; a non-number (other than null)
makes the result null.
"""

from __future__ import annotations

import math
from typing import Any

from kinflow.groq.budget import chunked
from kinflow.groq.scope import Compiled, Scope
from kinflow.groq.values import is_array, is_number, num


def _numbers(v: Any, s: Scope) -> list[float] | None:
    if not is_array(v):
        return None
    if s.ctx.budget is not None:
        s.ctx.budget.charge(len(v))
    out = []
    for part in chunked(list(v), s.ctx.budget):
        for x in part:
            if x is None:
                continue
            if not is_number(x):
                return None
            out.append(x)
    return out


def _sum(args: list[Compiled], s: Scope) -> Any:
    xs = _numbers(args[0](s), s)
    if xs is None:
        return None
    return num(math.fsum(xs)) if any(isinstance(x, float) for x in xs) else num(sum(xs))


def _avg(args: list[Compiled], s: Scope) -> Any:
    xs = _numbers(args[0](s), s)
    if not xs:
        return None
    return num(math.fsum(xs) / len(xs))


def _min(args: list[Compiled], s: Scope) -> Any:
    xs = _numbers(args[0](s), s)
    return min(xs) if xs else None


def _max(args: list[Compiled], s: Scope) -> Any:
    xs = _numbers(args[0](s), s)
    return max(xs) if xs else None


#: name -> implementation (each takes one argument)
MATH = {"sum": _sum, "avg": _avg, "min": _min, "max": _max}
