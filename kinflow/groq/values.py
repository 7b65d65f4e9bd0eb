"""GROQ's value model on plain Python objects: kinds, equality, ordering, number text.

Owns the rules that Python gets wrong by default (bool is not a number, integral
doubles, JavaScript number formatting, strict datetimes) and the two vendor value
classes, :class:`DateTime` and :class:`Path`. Everything here is pure and fast enough
to sit in the evaluator's inner loops.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

MAX_SAFE = 2**53


class DateTime:
    """A UTC instant with microsecond storage, printed at millisecond precision."""

    __slots__ = ("dt",)

    def __init__(self, dt: datetime) -> None:
        self.dt = dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)

    def __repr__(self) -> str:
        return f"DateTime({self.text()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DateTime) and other.dt == self.dt

    def __hash__(self) -> int:
        return hash(self.dt)

    def text(self) -> str:
        ms = self.dt.microsecond // 1000
        base = self.dt.strftime("%Y-%m-%dT%H:%M:%S")
        if self.dt.year < 1000:
            base = f"{self.dt.year:04d}" + base[base.index("-"):]
        return f"{base}.{ms:03d}Z" if ms else f"{base}Z"

    def plus_seconds(self, seconds: float) -> DateTime | None:
        try:
            return DateTime(self.dt + timedelta(seconds=seconds))
        except (OverflowError, ValueError):
            return None


class Path:
    """The vendor path value: a dot-separated glob (``*`` one segment, ``**`` any run)."""

    __slots__ = ("pattern",)

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def __repr__(self) -> str:
        return f"Path({self.pattern!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Path) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def matches(self, text: str) -> bool:
        return _glob_regex(self.pattern).fullmatch(text) is not None


_GLOB_CACHE: dict[str, re.Pattern[str]] = {}


def _glob_regex(pattern: str) -> re.Pattern[str]:
    rx = _GLOB_CACHE.get(pattern)
    if rx is None:
        out = []
        i = 0
        while i < len(pattern):
            if pattern.startswith("**", i):
                out.append(".*")
                i += 2
            elif pattern[i] == "*":
                out.append("[^.]*")
                i += 1
            else:
                out.append(re.escape(pattern[i]))
                i += 1
        rx = re.compile("".join(out), re.S)
        if len(_GLOB_CACHE) < 4096 and len(pattern) <= 1024:  # callers choose patterns
            _GLOB_CACHE[pattern] = rx
    return rx


# --------------------------------------------------------------------------- kinds

_KIND_BY_TYPE: dict[type, str] = {
    type(None): "null",
    bool: "boolean",
    int: "number",
    float: "number",
    str: "string",
    list: "array",
    tuple: "array",
    dict: "object",
    DateTime: "datetime",
    Path: "path",
}


def kind(v: Any) -> str:
    """GROQ type name of a value; anything unrecognised counts as null."""
    k = _KIND_BY_TYPE.get(type(v))
    if k is not None:
        return k
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, Mapping):
        return "object"
    if isinstance(v, (list, tuple)):
        return "array"
    if isinstance(v, datetime):
        return "datetime"
    return "null"


def is_number(v: Any) -> bool:
    t = type(v)
    return t is int or t is float or (t is not bool and isinstance(v, (int, float)))


def is_array(v: Any) -> bool:
    t = type(v)
    return t is list or t is tuple


def is_object(v: Any) -> bool:
    return type(v) is dict or isinstance(v, Mapping)


def as_list(v: Any) -> list[Any] | None:
    """An array as a list (a tuple is copied), anything else None."""
    t = type(v)
    if t is list:
        return v
    if t is tuple:
        return list(v)
    return None


def get_field(v: Any, name: str) -> Any:
    """Attribute ``name`` of an object, null for anything else."""
    if type(v) is dict:
        return v.get(name)
    if isinstance(v, Mapping):
        return v.get(name)
    return None


def num(x: float) -> float | None:
    """Normalise an arithmetic result: non-finite becomes null, big ints become doubles."""
    if type(x) is int:
        return x if -MAX_SAFE <= x <= MAX_SAFE else float(x)
    if math.isinf(x) or math.isnan(x):
        return None
    return x


# --------------------------------------------------------------------------- equality / order


def equal(a: Any, b: Any) -> bool:
    """GROQ ``==``: only nulls and same-kind scalars can be equal; never null itself."""
    ta = type(a)
    if ta is str:
        return type(b) is str and a == b
    if a is None:
        return b is None
    if ta is bool:
        return type(b) is bool and a is b
    if ta is int or ta is float:
        tb = type(b)
        if tb is int or tb is float:
            if ta is int and tb is int and (a > MAX_SAFE or a < -MAX_SAFE or b > MAX_SAFE
                                            or b < -MAX_SAFE):
                return float(a) == float(b)
            return bool(a == b)
        return False
    if ta is DateTime:
        return type(b) is DateTime and a.dt == b.dt
    ka = kind(a)
    if ka in ("array", "object", "path"):
        return False
    kb = kind(b)
    if ka != kb:
        return False
    if ka == "null":
        return True
    if ka == "datetime":
        return to_datetime_value(a) == to_datetime_value(b)
    return bool(a == b)


def to_datetime_value(v: Any) -> DateTime | None:
    if isinstance(v, DateTime):
        return v
    if isinstance(v, datetime):
        return DateTime(v)
    return None


def compare(a: Any, b: Any) -> int | None:
    """GROQ's partial order: -1/0/1 for two numbers, strings, booleans or datetimes; else None."""
    ta = type(a)
    tb = type(b)
    if ta is str and tb is str:
        return -1 if a < b else (1 if a > b else 0)
    ka = kind(a)
    if ka != kind(b) or ka not in ("number", "string", "boolean", "datetime"):
        return None
    if ka == "datetime":
        a = to_datetime_value(a).dt  # type: ignore[union-attr]
        b = to_datetime_value(b).dt  # type: ignore[union-attr]
    elif ka == "number" and (ta is int or tb is int):
        a, b = float(a), float(b)
    return -1 if a < b else (1 if a > b else 0)


_TOTAL_RANK = {"datetime": 0, "number": 1, "string": 2, "boolean": 3}


def total_compare(a: Any, b: Any) -> int:
    """The total order ``order()`` uses: datetimes < numbers < strings < booleans < rest."""
    ra = _TOTAL_RANK.get(kind(a), 4)
    rb = _TOTAL_RANK.get(kind(b), 4)
    if ra != rb:
        return -1 if ra < rb else 1
    if ra == 4:
        return 0
    c = compare(a, b)
    return c if c is not None else 0


# --------------------------------------------------------------------------- text


def format_number(x: float) -> str:
    """Number to text the way JavaScript's ``String(n)`` writes it."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        if -MAX_SAFE <= x <= MAX_SAFE:
            return str(x)
        x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    tup = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(str(d) for d in tup.digits)
    exp = int(tup.exponent)
    k = len(digits)
    n = k + exp
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mant = digits[0] + ("." + digits[1:] if k > 1 else "")
        body = f"{mant}e{'+' if e > 0 else '-'}{abs(e)}"
    return sign + body


_DT_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})"
)


def parse_datetime(text: str) -> DateTime | None:
    """Strict RFC 3339 parsing; anything malformed or out of range gives None."""
    m = _DT_RE.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    frac = m.group(7) or ""
    micro = int((frac + "000000")[:6]) if frac else 0
    tz = m.group(8)
    try:
        dt = datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
    except ValueError:
        return None
    if tz != "Z":
        oh, om = int(tz[1:3]), int(tz[4:6])
        if oh > 23 or om > 59:
            return None
        delta = timedelta(hours=oh, minutes=om)
        try:
            dt = dt - delta if tz[0] == "+" else dt + delta
        except OverflowError:
            return None
    return DateTime(dt)


def to_plain(v: Any) -> Any:
    """Result value as plain JSON-ready Python (datetimes and paths become text)."""
    t = type(v)
    if t is str or t is bool or v is None or t is int:
        return v
    if t is float:
        if math.isnan(v) or math.isinf(v):
            return None
        if v.is_integer() and -MAX_SAFE <= v <= MAX_SAFE:
            return int(v)
        return v
    if t is list or t is tuple:
        out = None
        for i, item in enumerate(v):
            p = to_plain(item)
            if out is None and (p is not item or t is tuple):
                out = list(v[:i])
            if out is not None:
                out.append(p)
        return v if out is None else out
    if t is dict:
        changed: dict[str, Any] | None = None
        for key, item in v.items():
            p = to_plain(item)
            if p is not item and changed is None:
                changed = {}
            if changed is not None:
                changed[key] = p
        if changed is None:
            return v
        return {k: changed.get(k, item) if k in changed else item for k, item in v.items()}
    if t is DateTime:
        return v.text()
    if t is Path:
        return v.pattern
    if isinstance(v, Mapping):
        return {str(k): to_plain(x) for k, x in v.items()}
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return to_plain(float(v))
    if isinstance(v, str):
        return str(v)
    if isinstance(v, datetime):
        return DateTime(v).text()
    return None
