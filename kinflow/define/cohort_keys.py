"""Deploy rules of a spawn's admission and settlement keys.

The model (``models.SpawnBlock``) checks each key's type and range; what
needs several keys at once, and the small language of ``aggregate``, lives
here, so deploy and ``updateCohort`` refuse the same shapes:

* ``concurrencyKey`` and ``maxActivePerKey`` come together (both or neither);
* ``onTimeout`` needs ``childTimeoutSeconds``, ``onComplete`` needs ``completeWhen``;
* ``retry.maxBackoffSeconds`` is at least ``retry.backoffSeconds``;
* an ``aggregate`` entry is ``sum``, ``min``, ``max`` or ``avg`` over a row
  path (``outputs.wordCount``, ``attempt``), or ``count`` with an optional
  GROQ condition over the row (``count(outputs.ms > 5000)``, ``count()``).

GROQ texts (``priority``, ``concurrencyKey``, ``completeWhen``, a ``count``
condition) are checked for syntax and for the variables they read by the
caller, with the sites in ``sites``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from kinflow.define import expressions, sites
from kinflow.define.models import SpawnBlock

AggregateFunction = Literal["sum", "count", "min", "max", "avg"]
FUNCTIONS: tuple[AggregateFunction, ...] = ("sum", "count", "min", "max", "avg")
_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*$", re.DOTALL)
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class AggregateSpec:
    """One parsed ``aggregate`` entry: a function over a row path, or a counted condition."""

    name: str
    function: AggregateFunction
    path: tuple[str, ...] = ()  # for sum/min/max/avg: keys below the row view
    condition: str | None = None  # for count: GROQ over the row view, None counts every row


def parse_aggregate(name: str, text: str) -> AggregateSpec:
    """The entry ``name: text`` parsed; ``ValueError`` with a message for the author."""
    if not _NAME.match(name):
        raise ValueError(f"aggregate name {name!r} is not a plain name")
    match = _CALL.match(text)
    function = match.group(1) if match else None
    if match is None or function not in FUNCTIONS:
        raise ValueError(f"aggregate {name!r} must be one of sum, count, min, max, avg "
                         "around its argument, e.g. sum(outputs.wordCount)")
    inner = match.group(2).strip()
    if function == "count":
        return AggregateSpec(name, "count", condition=inner or None)
    if not _PATH.match(inner):
        raise ValueError(f"aggregate {name!r}: {function} takes a row path such as "
                         "outputs.wordCount or attempt")
    return AggregateSpec(name, function, path=tuple(inner.split(".")))


def aggregate_specs(spawn: SpawnBlock) -> list[AggregateSpec]:
    """The spawn's aggregates parsed (deploy has refused any that does not parse)."""
    return [parse_aggregate(name, text) for name, text in (spawn.aggregate or {}).items()]


def cohort_key_problems(spawn: SpawnBlock) -> list[tuple[str, str]]:
    """``(path below the spawn block, message)`` for each problem of the admission and
    settlement keys that no single key's type can see."""
    problems: list[tuple[str, str]] = []
    if (spawn.concurrencyKey is None) != (spawn.maxActivePerKey is None):
        where = "maxActivePerKey" if spawn.maxActivePerKey is None else "concurrencyKey"
        problems.append((where, "concurrencyKey and maxActivePerKey come together"))
    if spawn.onTimeout is not None and spawn.childTimeoutSeconds is None:
        problems.append(("onTimeout", "onTimeout needs childTimeoutSeconds"))
    if spawn.onComplete is not None and spawn.completeWhen is None:
        problems.append(("onComplete", "onComplete needs completeWhen"))
    retry = spawn.retry
    if (retry is not None and retry.maxBackoffSeconds is not None
            and retry.maxBackoffSeconds < retry.backoffSeconds):
        problems.append(("retry.maxBackoffSeconds",
                         "maxBackoffSeconds must be at least backoffSeconds"))
    if retry is not None and retry.on is not None and not retry.on:
        problems.append(("retry.on", "retry.on names at least one outcome"))
    for name, text in (spawn.aggregate or {}).items():
        try:
            spec = parse_aggregate(name, text)
        except ValueError as exc:
            problems.append((f"aggregate.{name}", str(exc)))
            continue
        if spec.condition is not None:
            problems.extend((f"aggregate.{name}", message)
                            for message in row_condition_problems(spec.condition))
    return problems


def row_condition_problems(text: str) -> list[str]:
    """A ``count`` condition reads the row view only: it must parse and read no variable."""
    problem = expressions.syntax_problem(text)
    if problem is not None:
        return [f"GROQ syntax error: {problem.message}"]
    return [f"${name} is not bound here: the condition reads the row itself"
            for name in sorted(expressions.read_variables(text))]


def cohort_expressions(spawn: SpawnBlock) -> list[tuple[str, str, sites.Site]]:
    """``(key, GROQ text, site)`` of each admission or settlement expression the spawn has."""
    found = [(key, getattr(spawn, key), sites.SPAWN_ROW) for key in ("priority", "concurrencyKey")]
    found.append(("completeWhen", spawn.completeWhen, sites.COMPLETE_WHEN))
    return [(key, text, site) for key, text, site in found if text is not None]
